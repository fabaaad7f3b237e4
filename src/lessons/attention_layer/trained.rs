//! The tiny trained model's attention in one layer, on one of [`crate::model::PROMPTS`]: every head's
//! probabilities as the backend's attention kernels computed them inside the model's forward pass,
//! checked against the f64 reference on the same Q, K and V, and each head's label measured on the text
//! (`model::heads`).

use std::sync::Arc;

use ndarray::Array3;

use crate::compute::{AttnInput, Backend, CheckReport, Tolerance, check, reference};
use crate::lessons::heat_probs;
use crate::math::Mask;
use crate::model::heads::{Label, labels, shares};
use crate::model::{PROMPTS, shared};
use crate::render::heatmap::HeatmapData;

/// One layer of the trained model on one prompt.
pub struct ModelHeads {
    /// The text.
    pub prompt: &'static str,
    /// Its bytes (the tokens).
    pub tokens: Vec<u8>,
    /// The layer shown.
    pub layer: usize,
    /// Layers in the model.
    pub layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// KV heads.
    pub n_kv_heads: usize,
    /// Probabilities `[H, T, T]`.
    pub probs: Array3<f32>,
    /// Their heatmaps, per head.
    pub maps: Vec<Arc<HeatmapData>>,
    /// Each head's measured label.
    pub labels: Vec<Option<Label>>,
    /// Each head's shares of weight on the previous token, the first token and itself (rows i ≥ 2).
    pub shares: Vec<Option<[f64; 3]>>,
    /// The probabilities against the f64 reference.
    pub check: CheckReport,
}

impl ModelHeads {
    /// Run the model on prompt `prompt` (an index into [`PROMPTS`], clamped) on `backend` and keep layer
    /// `layer` (clamped).
    pub fn compute(prompt: usize, layer: usize, backend: &dyn Backend) -> Result<ModelHeads, String> {
        let m = shared().map_err(|e| e.to_string())?;
        let text = PROMPTS[prompt.min(PROMPTS.len() - 1)];
        let tokens = text.as_bytes().to_vec();
        let layer = layer.min(m.config.n_layers - 1);
        let out = crate::model::memo::prefill(&tokens, backend)?;
        let probs = out.probs[layer].clone();
        let (k, v) = &out.kv[layer];
        let want = reference::attention(&AttnInput {
            q: &out.q[layer],
            k,
            v,
            mask: Mask::Causal,
        });
        let check = check(
            &format!("trained model layer {layer} probs"),
            probs.shape(),
            probs.as_slice().unwrap_or_default(),
            want.probs.as_slice().unwrap_or_default(),
            Tolerance::F32,
        );
        let maps = (0..m.config.n_heads)
            .map(|h| heat_probs(&probs, h, Mask::Causal))
            .collect();
        Ok(ModelHeads {
            prompt: text,
            labels: labels(&probs),
            shares: shares(&probs),
            tokens,
            layer,
            layers: m.config.n_layers,
            n_heads: m.config.n_heads,
            n_kv_heads: m.config.n_kv_heads,
            probs,
            maps,
            check,
        })
    }
}
