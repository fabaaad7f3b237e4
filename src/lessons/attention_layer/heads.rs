//! What the trained model's heads show, as lessons 1–3 keep it: one layer on one text
//! ([`ModelHeads`], lesson 3) and one head of it ([`TrainedHead`], lessons 1–2 with trained weights),
//! each computed by the backend's attention kernels and checked against the f64 reference.

use crate::compute::{AttnInput, Backend, CheckReport, Tolerance, check, reference};
use crate::figure::HeatmapData;
use crate::lessons::heat_probs;
use crate::math::Mask;
use crate::model::heads::{Label, Profile, labels, profiles};
use crate::model::{Model, texts};
use ndarray::Array3;
use std::sync::Arc;

/// One layer of a trained model on one prompt.
pub struct ModelHeads {
    /// The model.
    pub model: crate::model::ModelName,
    /// The text.
    pub prompt: String,
    /// Its token ids (the tiny model's are its bytes).
    pub tokens: Vec<u32>,
    /// Each token as a hover names it (`'a'`, `' the'`).
    pub names: Vec<String>,
    /// Their tick labels ([`crate::model::tokens::Tokenizer::tick_labels`]).
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
    /// Every head of every layer on the text, by label.
    pub census: HeadCensus,
    /// The tiny model's census on the same text, when this is another model (to compare).
    pub tiny_census: Option<HeadCensus>,
}

impl ModelHeads {
    /// Run model `m` on text `prompt` (an id of [`texts`]) on `backend` and keep layer `layer`
    /// (clamped).
    pub fn compute(m: &Model, prompt: i64, layer: usize, backend: &dyn Backend) -> Result<ModelHeads, String> {
        let text = texts::get(prompt);
        let tokens = m.tokenizer.encode(&text)?;
        if tokens.is_empty() {
            return Err("the text has no tokens".into());
        }
        let layer = layer.min(m.config.n_layers - 1);
        let out = crate::model::memo::prefill_ids(m, &tokens, backend)?;
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
            ticks: Arc::new(m.tokenizer.tick_labels(&tokens)),
            names: tokens.iter().map(|&t| m.tokenizer.token_label(t)).collect(),
            model: m.name,
            prompt: text,
            labels: labels(&probs),
            profiles: profiles(&probs),
            tokens,
            layer,
            layers: m.config.n_layers,
            n_heads: m.config.n_heads,
            n_kv_heads: m.config.n_kv_heads,
            census: HeadCensus::of(&out.probs),
            tiny_census: None,
            probs,
            maps,
            check,
        })
    }
}

/// Every head of a model on one text, counted by its measured label (`model::heads`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadCensus {
    /// Heads in all layers.
    pub heads: usize,
    /// Labelled first-token sinks.
    pub sinks: usize,
    /// Labelled previous-token heads.
    pub previous: usize,
    /// Labelled with another offset (the current token, i−2, …).
    pub offsets: usize,
    /// With no label.
    pub unlabelled: usize,
}

impl HeadCensus {
    /// The census of every layer's probabilities `[H, T, T]`.
    pub fn of(probs: &[Array3<f32>]) -> HeadCensus {
        use crate::model::heads::Pattern;
        let mut c = HeadCensus::default();
        for l in probs.iter().flat_map(labels) {
            c.heads += 1;
            match l.map(|l| l.pattern) {
                Some(Pattern::FirstToken) => c.sinks += 1,
                Some(Pattern::Offset(1)) => c.previous += 1,
                Some(Pattern::Offset(_)) => c.offsets += 1,
                None => c.unlabelled += 1,
            }
        }
        c
    }
}

/// Which head of a trained model a lesson 1–2 layer is, on which text, and its measured label.
pub struct TrainedHead {
    /// The model.
    pub model: crate::model::ModelName,
    /// The text.
    pub text: String,
    /// Its token ids (the tiny model's are its bytes).
    pub tokens: Vec<u32>,
    /// Each token as a hover names it (`'a'`, `' the'`).
    pub names: Vec<String>,
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
    /// The text's tick labels (one per token, [`crate::model::tokens::Tokenizer::tick_labels`]).
    pub ticks: Arc<Vec<String>>,
    /// The head's label measured on the text (with the causal mask, as the model runs).
    pub label: Option<Label>,
    /// Its measurements: best offset, first token, local band (rows i ≥ 2).
    pub profile: Option<Profile>,
    /// Every head of the model on the text, by label.
    pub census: HeadCensus,
}
