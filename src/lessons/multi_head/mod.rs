//! Lesson 3, multi-head attention with GQA and MQA (kind `multihead`): H query heads over KVH key/value
//! heads (KVH divides H), every head's probabilities, the concatenation and W_O, and the KV-cache
//! bytes the choice of KVH saves, for this setting and for real models' configurations.


use super::attention_layer::AttnOut;
use super::attention_layer::heads::ModelHeads;
use super::attention_matrix::{ATTENTION_OPS, layer_shape};
use super::{LessonKind, Output, Params, divisors, get};
use crate::compute::{Backend, Kernel};
use crate::lessons::{Lesson, Schema};
use crate::math::Mask;

crate::views! {
    /// The views of lesson 3.
    pub enum View {
        /// d_model split into heads, and Q of every head side by side.
        HeadSplit = "head_split",
        /// Every head's probabilities.
        HeadsGrid = "heads_grid",
        /// The heads' outputs concatenated.
        Concat = "concat",
        /// Y = concat · W_O.
        Y = "y",
        /// Which query heads share which K/V head (MHA, GQA, MQA), with the bytes per token.
        KvGroups = "kv_groups",
        /// KV-cache bytes per token for MHA, this setting and MQA.
        KvBytes = "kv_bytes",
        /// KV-cache bytes of real models, from their configurations.
        ModelTable = "model_table",
        /// The trained model's heads in one layer, on one text, with measured labels.
        ModelHeads = "model_heads",
        /// Every trained head's attention from the last token, as lines in the heads' colours.
        Lines = "lines",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 3.
pub struct MultiHead;

impl Schema for MultiHead {
    fn name(&self) -> &'static str {
        "multihead"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["seq", "d_model", "heads", "kv_heads", "prompt", "layer", "seed"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        &[
            "table_head_dims",
            "gqa_model",
            "gqa_heads",
            "gqa_kv_heads",
            "model_layer",
            "model_layers",
            "model_n_heads",
            "model_n_kv_heads",
            "model_tokens",
            "model_labelled",
            "label_share_pct",
            "label_argmax_pct",
            "label_max_offset",
        ]
    }
}

impl LessonKind for MultiHead {
    fn ops(&self) -> &'static [Kernel] {
        ATTENTION_OPS
    }

    fn allowed_values(&self, id: &str, p: &Params) -> Option<Vec<i64>> {
        match id {
            "heads" => Some(divisors(get(p, "d_model", 32))),
            "kv_heads" => Some(divisors(get(p, "heads", 1))),
            _ => None,
        }
    }

    /// From the lesson's model table: the head sizes it holds, and its first GQA model.
    fn values(&self, lesson: &Lesson, out: Option<&dyn Output>) -> Vec<(&'static str, String)> {
        let m = &lesson.file.models;
        let mut dims: Vec<u32> = m.iter().map(|m| m.head_dim).collect();
        dims.sort_unstable();
        dims.dedup();
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        let mut v = vec![("table_head_dims", dims.join(", "))];
        if let Some(g) = m.iter().find(|m| m.kv_heads > 1 && m.kv_heads < m.heads) {
            v.extend([
                ("gqa_model", g.name.clone()),
                ("gqa_heads", g.heads.to_string()),
                ("gqa_kv_heads", g.kv_heads.to_string()),
            ]);
        }
        if let Some(m) = out.and_then(|o| o.downcast_ref::<AttnOut>()).and_then(|a| a.model.as_ref()) {
            v.extend([
                ("model_layer", m.layer.to_string()),
                ("model_layers", m.layers.to_string()),
                ("model_n_heads", m.n_heads.to_string()),
                ("model_n_kv_heads", m.n_kv_heads.to_string()),
                ("model_tokens", m.tokens.len().to_string()),
                ("model_labelled", m.labels.iter().flatten().count().to_string()),
                ("label_share_pct", format!("{}%", crate::model::heads::THRESHOLDS.0)),
                ("label_argmax_pct", format!("{}%", crate::model::heads::THRESHOLDS.1)),
                ("label_max_offset", crate::model::heads::MAX_OFFSET.to_string()),
            ]);
        }
        v
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if views.contains(&"model_heads") || views.contains(&"lines") {
            ["seq", "d_model", "heads", "kv_heads", "seed"].map(|id| (id, super::TRAINED_FIXES)).to_vec()
        } else {
            Vec::new()
        }
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let heads = get(p, "heads", 4);
        let shape = layer_shape(p, heads, get(p, "kv_heads", heads));
        let seed = get(p, "seed", 0).max(0) as u64;
        let mut out = AttnOut::compute(shape, Mask::Causal, seed, false, backend)?;
        let (prompt, layer) = (get(p, "prompt", 0), get(p, "layer", 0).max(0) as usize);
        out.model = Some(ModelHeads::compute(prompt, layer, backend)?);
        Ok(Box::new(out))
    }
}
