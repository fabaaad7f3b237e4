//! Lesson 2, the causal mask (kind `causal`): one head with the causal mask, and the same layer
//! computed once more without it, for the mask toggle and the difference view.

use super::attention_layer::AttnOut;
use super::attention_matrix::{ATTENTION_OPS, model_slider_values, trained_choice, trained_layer};
use super::{LessonKind, Output, Params, get};
use crate::compute::{Backend, Kernel};
use crate::lessons::{Lesson, Schema};
use crate::math::{AttnShape, Mask};

crate::views! {
    /// The views of lesson 2.
    pub enum View {
        /// The mask itself (1 = may attend, 0 = future).
        Mask = "mask",
        /// The scores without the mask.
        Scores = "scores",
        /// The scores with the mask (−∞ hatched).
        MaskedScores = "masked_scores",
        /// The probabilities, masked or not as the `mask_on` slider says.
        Probs = "probs",
        /// P(mask on) − P(mask off).
        MaskDiff = "mask_diff",
        /// The last query row's softmax, as bars.
        LastRow = "last_row",
        /// Which trained head and text the layer is (or how to switch the model on).
        Trained = "trained",
        /// The trained head's attention from the step's query as lines (BertViz's view), with the
        /// mask on or off as the toggle says.
        Lines = "lines",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 2.
pub struct CausalMask;

/// The width of lesson 2's layer (lesson 1's default; the file has no slider for it).
const CAUSAL_D_MODEL: usize = 16;

impl Schema for CausalMask {
    fn name(&self) -> &'static str {
        "causal"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["seq", "mask_on", "seed", "model", "prompt", "layer", "head"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        // The layer's numbers its questions use, and the model's words.
        &[
            "seq",
            "cells",
            "masked",
            "first_self",
            "model_name",
            "model_name_zh",
            "unit",
            "units",
            "unit_zh",
        ]
    }
}

impl LessonKind for CausalMask {
    fn ops(&self) -> &'static [Kernel] {
        ATTENTION_OPS
    }

    fn allowed_values(&self, id: &str, p: &Params) -> Option<Vec<i64>> {
        model_slider_values(id, p)
    }

    fn values(&self, _lesson: &Lesson, out: Option<&dyn Output>) -> Vec<(&'static str, String)> {
        let mut v = out.map(|o| o.values()).unwrap_or_default();
        if let Some(a) = out.and_then(|o| o.downcast_ref::<AttnOut>()) {
            v.extend(a.layer_values(self.placeholders()));
        }
        if let Some(t) = out
            .and_then(|o| o.downcast_ref::<AttnOut>())
            .and_then(|a| a.trained.as_ref())
        {
            v.extend(super::model_words(t.model));
        }
        v
    }

    fn idle_params(&self, p: &Params, _views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if trained_choice(p).is_some() {
            ["seq", "seed"].map(|id| (id, super::TRAINED_FIXES)).to_vec()
        } else {
            Vec::new()
        }
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let seed = get(p, "seed", 0).max(0) as u64;
        if let Some(choice) = trained_choice(p) {
            return Ok(Box::new(trained_layer(choice, Mask::Causal, true, true, backend)?));
        }
        // Lesson 2 has no width slider: one head of lesson 1's default width (d_model 16).
        let shape = AttnShape {
            seq: get(p, "seq", 8).max(1) as usize,
            d_model: CAUSAL_D_MODEL,
            n_heads: 1,
            n_kv_heads: 1,
        };
        Ok(Box::new(AttnOut::compute(shape, Mask::Causal, seed, true, backend)?))
    }
}
