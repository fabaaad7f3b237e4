//! What the trained model's heads show, as lessons 1–3 keep it: one layer on one text
//! ([`ModelHeads`], lesson 3) and one head of it ([`TrainedHead`], lessons 1–2 with trained weights),
//! each computed by the backend's attention kernels and checked against the f64 reference.

use crate::compute::{AttnInput, Backend, CheckReport, Tolerance, check, reference};
use crate::figure::HeatmapData;
use crate::lessons::heat_probs;
use crate::math::Mask;
use crate::model::heads::{Label, Profile, labels, profiles};
use crate::model::{shared, texts};
use ndarray::Array3;
use std::sync::Arc;

/// One layer of the trained model on one prompt.
pub struct ModelHeads {
    /// The text.
    pub prompt: String,
    /// Its bytes (the tokens).
    pub tokens: Vec<u8>,
    /// Their tick labels ([`crate::model::tick_labels`]).
    pub ticks: Arc<Vec<String>>,
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
    /// Each head's measurements: best offset, first token, local band (rows i ≥ 2).
    pub profiles: Vec<Option<Profile>>,
    /// The probabilities against the f64 reference.
    pub check: CheckReport,
}

impl ModelHeads {
    /// Run the model on text `prompt` (an id of [`texts`]) on `backend` and keep layer `layer`
    /// (clamped).
    pub fn compute(prompt: i64, layer: usize, backend: &dyn Backend) -> Result<ModelHeads, String> {
        let m = shared().map_err(|e| e.to_string())?;
        let text = texts::get(prompt);
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
            ticks: Arc::new(crate::model::tick_labels(&tokens)),
            prompt: text,
            labels: labels(&probs),
            profiles: profiles(&probs),
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

/// Which head of the trained model a lesson 1–2 layer is, on which text, and its measured label.
pub struct TrainedHead {
    /// The text.
    pub text: String,
    /// Its bytes (the tokens).
    pub tokens: Vec<u8>,
    /// The layer.
    pub layer: usize,
    /// Layers in the model.
    pub layers: usize,
    /// The query head.
    pub head: usize,
    /// Its KV head.
    pub kv_head: usize,
    /// Query heads in the layer.
    pub n_heads: usize,
    /// KV heads in the layer.
    pub n_kv_heads: usize,
    /// The text's tick labels (one per byte, [`crate::model::tick_labels`]).
    pub ticks: Arc<Vec<String>>,
    /// The head's label measured on the text (with the causal mask, as the model runs).
    pub label: Option<Label>,
    /// Its measurements: best offset, first token, local band (rows i ≥ 2).
    pub profile: Option<Profile>,
}
