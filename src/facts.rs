//! Published facts the lessons quote, in one cited data file (`assets/facts.toml`, embedded): device
//! figures (shared memory, SMs, L2, bandwidth, FLOP/s, each naming its variant), papers' figures, vLLM
//! defaults and model configurations, each with its source. None of them is measured by kvscope.
//!
//! Narration quotes a fact as `{fact_<id>}`: [`crate::lessons::fill`] fills it with the value wrapped
//! in [`QUOTE`] marks, which the narration renderer draws in the quoted style (and lists the fact's
//! source under the narration); views quote them with [`Fact::shown`] and draw them the same way. The
//! lesson loader rejects a `{fact_…}` or a model name that is not here, with file, line and column.

use std::sync::OnceLock;

use serde::Deserialize;

/// Marks a quoted value in filled narration: `^^228 KiB^^` is drawn in the quoted style.
pub const QUOTE: &str = "^^";

/// The placeholder prefix of a quoted fact: `{fact_hopper_smem_per_sm}`.
pub const PLACEHOLDER_PREFIX: &str = "fact_";

/// The embedded facts file.
pub const FILE: &str = include_str!("../assets/facts.toml");

/// Where the facts file lives, for messages.
pub const PATH: &str = "assets/facts.toml";

/// A text in English and Chinese.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Bilingual {
    /// English.
    pub en: String,
    /// Chinese.
    pub zh: String,
}

/// One published fact.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// Its id (narration writes `{fact_<id>}`).
    pub id: String,
    /// The value as printed ("228", "3.35", "SHA-256").
    pub value: String,
    /// The value in Chinese text, where the English one has words ("2 万亿" for "2 trillion").
    #[serde(default)]
    pub value_zh: Option<String>,
    /// Its unit ("KiB", "TB/s"; empty when none).
    pub unit: String,
    /// Its unit in Chinese text, where the English one is a word ("个 token" for "tokens"); symbols
    /// such as KiB have none and print as they are.
    #[serde(default)]
    pub unit_zh: Option<String>,
    /// What it is, with the variant (H100 SXM or PCIe, dense or sparse).
    pub what: Bilingual,
    /// The document or paper, and the section.
    pub source: String,
}

impl Fact {
    /// Value and unit, as quoted in English ("228 KiB").
    pub fn shown(&self) -> String {
        self.shown_in(false)
    }

    /// Value and unit as quoted in English, or in Chinese when `zh` ("4 个初始 token"; "228 KiB").
    pub fn shown_in(&self, zh: bool) -> String {
        let unit = match &self.unit_zh {
            Some(u) if zh => u,
            _ => &self.unit,
        };
        let value = match &self.value_zh {
            Some(v) if zh => v,
            _ => &self.value,
        };
        if unit.is_empty() || unit == "%" {
            format!("{value}{unit}")
        } else {
            format!("{value} {unit}")
        }
    }

    /// The value as a number (facts used in arithmetic, such as SMs × shared memory per SM).
    pub fn number(&self) -> f64 {
        self.value.replace(',', "").parse().unwrap_or(f64::NAN)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Facts {
    fact: Vec<Fact>,
    model: Vec<ModelConfig>,
}

fn facts() -> &'static Facts {
    static F: OnceLock<Facts> = OnceLock::new();
    // The file is embedded and checked by this module's tests, so a failure here is a build defect.
    F.get_or_init(|| toml::from_str(FILE).unwrap_or_else(|e| panic!("{PATH}: {e}")))
}

/// Every fact, in file order.
pub fn all() -> &'static [Fact] {
    &facts().fact
}

/// Every model configuration, in file order.
pub fn models() -> &'static [ModelConfig] {
    &facts().model
}

/// The fact `id`, if there is one.
pub fn get(id: &str) -> Option<&'static Fact> {
    all().iter().find(|f| f.id == id)
}

/// The fact `id`; for ids written in code (a test checks each one exists).
pub fn fact(id: &str) -> &'static Fact {
    get(id).unwrap_or_else(|| panic!("no fact `{id}` in {PATH}"))
}

/// The model configuration called `name`, if there is one.
pub fn model(name: &str) -> Option<&'static ModelConfig> {
    models().iter().find(|m| m.name == name)
}

/// The fact a `{fact_<id>}` placeholder names, if `placeholder` is one.
pub fn of_placeholder(placeholder: &str) -> Option<Result<&'static Fact, &str>> {
    let id = placeholder.strip_prefix(PLACEHOLDER_PREFIX)?;
    Some(get(id).ok_or(id))
}

/// `value` wrapped in quote marks, for the narration renderer.
pub fn quoted(value: &str) -> String {
    format!("{QUOTE}{value}{QUOTE}")
}

/// A model's configuration, from its published config, for computed KV-cache sizes.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Model name.
    pub name: String,
    /// Transformer layers.
    pub layers: u32,
    /// Query heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Values per head.
    pub head_dim: u32,
    /// Bytes per weight (2 for fp16/bf16).
    pub dtype_bytes: u32,
    /// The KV cache's dtype (f16 when the file does not say).
    #[serde(default)]
    pub kv_dtype: crate::cache::KvDtype,
    /// Total parameters, from the model card (for the bytes of weights a decode step reads).
    #[serde(default)]
    pub parameters: Option<u64>,
    /// Where the configuration is published.
    pub source: String,
}

impl ModelConfig {
    /// K and V bytes one token occupies across all layers: 2 · layers · kv_heads · a row of head_dim
    /// values of the KV dtype.
    pub fn kv_bytes_per_token(&self) -> u64 {
        crate::cache::kv_bytes_per_token(
            self.layers as u64,
            self.kv_heads as u64,
            self.head_dim as u64,
            self.kv_dtype,
        )
    }

    /// Bytes of all weights at `dtype_bytes` each, when the parameter count is given.
    pub fn weight_bytes(&self) -> Option<u64> {
        self.parameters.map(|p| p * self.dtype_bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file parses; ids and names are unique; every entry has a value, a source and both texts.
    #[test]
    fn the_facts_file_is_complete() {
        let mut ids: Vec<&str> = all().iter().map(|f| f.id.as_str()).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate fact ids");
        for f in all() {
            assert!(!f.value.is_empty() && !f.source.trim().is_empty(), "{f:?}");
            assert!(!f.what.en.is_empty() && !f.what.zh.is_empty(), "{f:?}");
            assert!(
                f.id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{f:?}"
            );
        }
        for m in models() {
            assert!(!m.source.trim().is_empty(), "{m:?}");
            assert!(
                m.heads % m.kv_heads == 0,
                "{}: heads must be a multiple of KV heads",
                m.name
            );
        }
        assert!(!fact("hopper_smem_per_sm").number().is_nan());
        assert_eq!(fact("hopper_smem_per_sm").shown(), "228 KiB");
        assert_eq!(of_placeholder("fact_nope"), Some(Err("nope")));
        assert_eq!(of_placeholder("big_t"), None);
    }
}
