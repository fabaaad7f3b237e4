//! Lesson 1, the attention matrix (kind `attention`): X → Q, K, V; QKᵀ/√d_k; softmax; P·V. One head,
//! no mask, computed by the backend's three attention kernels.


use super::attention_layer::AttnOut;
use super::{LessonKind, Output, Params, get};
use crate::compute::{Backend, Kernel};
use crate::lessons::{Lesson, Schema};
use crate::math::{AttnShape, Mask};

crate::views! {
    /// The views of lesson 1.
    pub enum View {
        /// X, the token embeddings.
        X = "x",
        /// W_Q, W_K, W_V.
        Weights = "weights",
        /// Q = X·W_Q.
        Q = "q",
        /// K = X·W_K.
        K = "k",
        /// V = X·W_V.
        V = "v",
        /// The scores.
        Scores = "scores",
        /// One row's softmax, as bars.
        Softmax = "softmax",
        /// The probabilities.
        Probs = "probs",
        /// P, V and P·V.
        Pv = "pv",
        /// The output.
        Out = "out",
        /// Which trained head and text the layer is (or how to switch the model on).
        Trained = "trained",
        /// The trained head's attention as lines from one query to the keys (BertViz's view).
        Lines = "lines",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// The ops behind lessons 1–3, in the order a student meets them.
pub const ATTENTION_OPS: &[Kernel] = &[Kernel::AttentionScores, Kernel::Softmax, Kernel::AttentionPv, Kernel::AttentionFused];

/// The shape of lessons 1–3's layer from their sliders (`heads`/`kv_heads` only in lesson 3).
pub fn layer_shape(p: &Params, heads: i64, kv_heads: i64) -> AttnShape {
    AttnShape {
        seq: get(p, "seq", 8).max(1) as usize,
        d_model: get(p, "d_model", 16).max(1) as usize,
        n_heads: heads.max(1) as usize,
        n_kv_heads: kv_heads.max(1) as usize,
    }
}

/// Lessons 1–2's "weights: trained model" switch: with it on, the text, layer and query head to show.
pub fn trained_choice(p: &Params) -> Option<(i64, usize, usize)> {
    (get(p, "weights", 0) != 0).then(|| {
        (
            get(p, "prompt", 0),
            get(p, "layer", 0).max(0) as usize,
            get(p, "head", 0).max(0) as usize,
        )
    })
}

/// Lesson 1.
pub struct AttentionMatrix;

impl Schema for AttentionMatrix {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["seq", "d_model", "scale_on", "seed", "weights", "prompt", "layer", "head"]
    }
}

impl LessonKind for AttentionMatrix {
    fn ops(&self) -> &'static [Kernel] {
        ATTENTION_OPS
    }

    fn idle_params(&self, p: &Params, _views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if super::get(p, "weights", 0) != 0 {
            ["seq", "d_model", "seed"].map(|id| (id, super::TRAINED_FIXES)).to_vec()
        } else {
            Vec::new()
        }
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let seed = get(p, "seed", 0).max(0) as u64;
        let scaled = get(p, "scale_on", 1) != 0;
        if let Some((text, layer, head)) = trained_choice(p) {
            // The model is causal: its heads never see the future, so neither does this view of one.
            return Ok(Box::new(AttnOut::trained(
                text,
                layer,
                head,
                Mask::Causal,
                false,
                scaled,
                backend,
            )?));
        }
        let shape = layer_shape(p, 1, 1);
        Ok(Box::new(AttnOut::compute_scaled(shape, Mask::None, seed, false, scaled, backend)?))
    }
}
