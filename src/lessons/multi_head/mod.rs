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
        &[
            "seq", "d_model", "heads", "kv_heads", "model", "prompt", "layer", "seed",
        ]
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
            "model_units",
            "model_units_zh",
            "model_name",
            "model_name_zh",
            "unit",
            "units",
            "unit_zh",
            "model_labelled",
            "model_layer_sinks",
            "model_all_sinks",
            "model_all_heads",
            "model_about",
            "model_about_zh",
            "tiny_all_sinks",
            "tiny_all_heads",
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
            "layer" => super::attention_matrix::model_slider_values(id, p),
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
        if let Some(m) = out
            .and_then(|o| o.downcast_ref::<AttnOut>())
            .and_then(|a| a.model.as_ref())
        {
            v.extend(super::model_words(m.model));
            v.extend([
                ("model_layer", m.layer.to_string()),
                ("model_layers", m.layers.to_string()),
                ("model_n_heads", m.n_heads.to_string()),
                ("model_n_kv_heads", m.n_kv_heads.to_string()),
                ("model_tokens", m.tokens.len().to_string()),
                (
                    "model_units",
                    match m.model {
                        crate::model::ModelName::Tiny => "bytes (one token each)",
                        crate::model::ModelName::Smollm2 => "tokens",
                    }
                    .to_string(),
                ),
                (
                    "model_units_zh",
                    match m.model {
                        crate::model::ModelName::Tiny => "字节（每个字节一个 token）",
                        crate::model::ModelName::Smollm2 => "个 token",
                    }
                    .to_string(),
                ),
                ("model_labelled", m.labels.iter().flatten().count().to_string()),
                (
                    "model_layer_sinks",
                    m.labels
                        .iter()
                        .flatten()
                        .filter(|l| l.pattern == crate::model::heads::Pattern::FirstToken)
                        .count()
                        .to_string(),
                ),
                ("model_all_sinks", m.census.sinks.to_string()),
                ("model_all_heads", m.census.heads.to_string()),
                (
                    "model_about",
                    match m.model {
                        crate::model::ModelName::Tiny => {
                            "kvscope's tiny Llama-style model, trained here on English fortunes and Tang and Song poems, byte by byte"
                        }
                        crate::model::ModelName::Smollm2 => {
                            "SmolLM2-135M-Instruct, pretrained and instruction-tuned by Hugging Face, read here from its 4-bit file"
                        }
                    }
                    .to_string(),
                ),
                (
                    "model_about_zh",
                    match m.model {
                        crate::model::ModelName::Tiny => "kvscope 的小型 Llama 风格模型，在这里按字节用英文 fortune 与唐诗宋词训练而成",
                        crate::model::ModelName::Smollm2 => "SmolLM2-135M-Instruct，由 Hugging Face 预训练并做指令微调，这里从它的 4 位文件读入",
                    }
                    .to_string(),
                ),
                ("label_share_pct", format!("{}%", crate::model::heads::THRESHOLDS.0)),
                ("label_argmax_pct", format!("{}%", crate::model::heads::THRESHOLDS.1)),
                ("label_max_offset", crate::model::heads::MAX_OFFSET.to_string()),
            ]);
            if let Some(t) = m.tiny_census {
                v.push(("tiny_all_sinks", t.sinks.to_string()));
                v.push(("tiny_all_heads", t.heads.to_string()));
            }
        }
        v
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if views.contains(&"model_heads") || views.contains(&"lines") {
            ["seq", "d_model", "heads", "kv_heads", "seed"]
                .map(|id| (id, super::TRAINED_FIXES))
                .to_vec()
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
        // The file offers the tiny model and SmolLM2 (`min = 1`); random weights would have no heads.
        let choice = crate::model::choice::Choice::from_value(get(p, "model", 1));
        let mut heads = crate::compute::profile::span("trained model's heads", || {
            ModelHeads::compute(choice.trained_model()?, prompt, layer, backend)
        })?;
        if choice == crate::model::choice::Choice::Smollm2 {
            let tiny = crate::model::shared().map_err(|e| e.to_string())?;
            let ids = tiny.tokenizer.encode(&heads.prompt)?;
            let pre = crate::model::memo::prefill_ids(tiny, &ids, backend)?;
            heads.tiny_census = Some(crate::lessons::attention_layer::heads::HeadCensus::of(&pre.probs));
        }
        out.model = Some(heads);
        Ok(Box::new(out))
    }
}
