//! Lesson 1, the attention matrix (kind `attention`): X → Q, K, V; QKᵀ/√d_k; softmax; P·V. One head,
//! no mask, computed by the backend's three attention kernels.

use super::attention_layer::AttnOut;
use super::{LessonKind, Output, Params, get};
use crate::compute::{Backend, Kernel};
use crate::lessons::{Lesson, Schema};
use crate::math::{AttnShape, Mask};
use crate::model::choice::Choice;

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
pub const ATTENTION_OPS: &[Kernel] = &[
    Kernel::AttentionScores,
    Kernel::Softmax,
    Kernel::AttentionPv,
    Kernel::AttentionFused,
];

/// The shape of lessons 1–3's layer from their sliders (`heads`/`kv_heads` only in lesson 3).
pub fn layer_shape(p: &Params, heads: i64, kv_heads: i64) -> AttnShape {
    AttnShape {
        seq: get(p, "seq", 8).max(1) as usize,
        d_model: get(p, "d_model", 16).max(1) as usize,
        n_heads: heads.max(1) as usize,
        n_kv_heads: kv_heads.max(1) as usize,
    }
}

/// Lessons 1–2's model switch (`model`): with a trained model chosen, the model, the text, layer and
/// query head to show (`None`: random weights).
pub fn trained_choice(p: &Params) -> Option<(Choice, i64, usize, usize)> {
    let choice = Choice::from_value(get(p, "model", 0));
    (choice != Choice::Random).then(|| {
        (
            choice,
            get(p, "prompt", 0),
            get(p, "layer", 0).max(0) as usize,
            get(p, "head", 0).max(0) as usize,
        )
    })
}

/// Lessons 1–2's layer and head sliders offer the chosen model's layers and query heads.
pub fn model_slider_values(id: &str, p: &Params) -> Option<Vec<i64>> {
    let (layers, heads) = Choice::from_value(get(p, "model", 0)).shape()?;
    match id {
        "layer" => Some((0..layers as i64).collect()),
        "head" => Some((0..heads as i64).collect()),
        _ => None,
    }
}

/// Lessons 1–2 on a trained model: one head of `choice`'s model as a one-head layer.
pub fn trained_layer(
    (choice, text, layer, head): (Choice, i64, usize, usize),
    mask: Mask,
    unmasked: bool,
    scaled: bool,
    backend: &dyn Backend,
) -> Result<AttnOut, String> {
    let m = choice.model().ok_or("random weights have no model")??;
    AttnOut::trained(m, text, layer, head, mask, unmasked, scaled, backend)
}

/// Lesson 1's placeholders: those of the layer's ([`crate::lessons::attention_layer::LAYER_PLACEHOLDERS`])
/// that its questions use, then those of a trained model's head ([`trained_values`]).
pub const PLACEHOLDERS: &[&str] = &[
    "seq",
    "cells",
    "row_sum",
    "model_layers",
    "model_heads",
    "model_kv_heads",
    "model_all_heads",
    "model_tokens",
    "model_sinks",
    "model_previous",
    "model_offsets",
    "model_unlabelled",
    "label_share_pct",
    "label_argmax_pct",
    "last_row_top",
    "last_row_top_key",
    "last_row_top_pct",
];

/// Lessons 1–2's numbers about the trained model that ran, when one did.
pub fn trained_values(out: Option<&dyn Output>) -> Vec<(&'static str, String)> {
    let mut v = out.map(|o| o.values()).unwrap_or_default();
    let Some(t) = out
        .and_then(|o| o.downcast_ref::<AttnOut>())
        .and_then(|a| a.trained.as_ref())
    else {
        return v;
    };
    v.extend([
        ("model_layers", t.layers.to_string()),
        ("model_heads", t.n_heads.to_string()),
        ("model_kv_heads", t.n_kv_heads.to_string()),
        ("model_all_heads", t.census.heads.to_string()),
        ("model_tokens", t.tokens.len().to_string()),
        ("model_sinks", t.census.sinks.to_string()),
        ("model_previous", t.census.previous.to_string()),
        ("model_offsets", t.census.offsets.to_string()),
        ("model_unlabelled", t.census.unlabelled.to_string()),
        ("label_share_pct", format!("{}%", crate::model::heads::THRESHOLDS.0)),
        ("label_argmax_pct", format!("{}%", crate::model::heads::THRESHOLDS.1)),
    ]);
    v
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
        &["seq", "d_model", "scale_on", "seed", "model", "prompt", "layer", "head"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }
}

impl LessonKind for AttentionMatrix {
    fn ops(&self) -> &'static [Kernel] {
        ATTENTION_OPS
    }

    fn allowed_values(&self, id: &str, p: &Params) -> Option<Vec<i64>> {
        model_slider_values(id, p)
    }

    fn values(&self, _lesson: &Lesson, out: Option<&dyn Output>) -> Vec<(&'static str, String)> {
        let mut v = trained_values(out);
        if let Some(a) = out.and_then(|o| o.downcast_ref::<AttnOut>()) {
            v.extend(a.layer_values(PLACEHOLDERS));
        }
        v
    }

    fn idle_params(&self, p: &Params, _views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if trained_choice(p).is_some() {
            ["seq", "d_model", "seed"].map(|id| (id, super::TRAINED_FIXES)).to_vec()
        } else {
            Vec::new()
        }
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let seed = get(p, "seed", 0).max(0) as u64;
        let scaled = get(p, "scale_on", 1) != 0;
        if let Some(choice) = trained_choice(p) {
            // The model is causal: its heads never see the future, so neither does this view of one.
            return Ok(Box::new(trained_layer(choice, Mask::Causal, false, scaled, backend)?));
        }
        let shape = layer_shape(p, 1, 1);
        Ok(Box::new(AttnOut::compute_scaled(
            shape,
            Mask::None,
            seed,
            false,
            scaled,
            backend,
        )?))
    }
}
