//! Lesson 11's memory calculator: how many KV bytes a model needs per token and per request, what its
//! weights take, and how many requests of a context fit in a GPU's memory, computed from the config's
//! actual fields (`head_dim` where the config gives it, MLA's latent, GQA's KV heads, sliding-window and
//! hybrid layers), with the common wrong formulas beside the right one.
//!
//! Configs are Hugging Face `config.json` files: the bundled ones ([`configs`], copied from the
//! published files, sources in `assets/configs/SOURCES.md`) or a user's own ([`ModelSpec::from_hf`]).

pub mod configs;

use serde::Serialize;
use serde_json::Value;

use crate::cache::CacheFormat;
use crate::cache::KvDtype;

/// How a layer attends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Attention {
    /// K and V per KV head (MHA, GQA, MQA).
    Standard,
    /// Multi-head latent attention: one cached row of `kv_lora_rank + qk_rope_head_dim` values per token.
    Mla {
        /// d_c.
        kv_lora_rank: usize,
        /// d_r.
        qk_rope_head_dim: usize,
        /// Per-head no-RoPE query/key width.
        qk_nope_head_dim: usize,
        /// Per-head value width.
        v_head_dim: usize,
        /// The query's low-rank width (none: a full query projection).
        q_lora_rank: Option<usize>,
    },
}

/// The feed-forward blocks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Ffn {
    /// Gated (SwiGLU/GeGLU): three matrices of hidden × intermediate.
    Gated {
        /// Intermediate width.
        intermediate: usize,
    },
    /// Plain two-matrix MLP (GPT, Falcon).
    Plain {
        /// Intermediate width.
        intermediate: usize,
    },
    /// Mixture of experts after `dense_layers` gated layers (DeepSeek-V3).
    Moe {
        /// Leading dense layers.
        dense_layers: usize,
        /// Their intermediate width.
        intermediate: usize,
        /// Each expert's intermediate width.
        moe_intermediate: usize,
        /// Routed experts.
        routed: usize,
        /// Shared experts.
        shared: usize,
    },
}

/// What the calculator reads from a config.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSpec {
    /// Display name.
    pub name: String,
    /// Where the config's values come from.
    pub source: String,
    /// `model_type` (empty when the config has none).
    pub model_type: String,
    /// Decoder layers.
    pub layers: usize,
    /// d_model.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads (1 for MQA, = heads for MHA).
    pub kv_heads: usize,
    /// Head dimension: the config's `head_dim` when it has one, else hidden / heads.
    pub head_dim: usize,
    /// Whether `head_dim` came from the config (not the quotient).
    pub head_dim_explicit: bool,
    /// Vocabulary.
    pub vocab: usize,
    /// Input and output embeddings shared.
    pub tied_embeddings: bool,
    /// The config's `torch_dtype` (empty when absent).
    pub torch_dtype: String,
    /// How layers attend.
    pub attention: Attention,
    /// Each layer's sliding window (None: full attention).
    pub windows: Vec<Option<usize>>,
    /// The feed-forward blocks.
    pub ffn: Ffn,
    /// Multi-token-prediction layers (DeepSeek-V3's `num_nextn_predict_layers`), reported apart.
    pub mtp_layers: usize,
}

fn uint(v: &Value, key: &str) -> Option<usize> {
    v.get(key).and_then(Value::as_u64).map(|x| x as usize)
}

impl ModelSpec {
    /// Read a Hugging Face `config.json` (a nested `text_config`, as Gemma 3's, is read in its place;
    /// `_defaults_not_in_published_config` supplies values the published file leaves to transformers'
    /// defaults).
    pub fn from_hf(name: &str, json: &Value) -> Result<Self, String> {
        let top = json;
        let mut c = top.get("text_config").cloned().unwrap_or_else(|| top.clone());
        if let (Some(obj), Some(Value::Object(d))) = (c.as_object_mut(), top.get("_defaults_not_in_published_config")) {
            for (k, v) in d {
                obj.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let need = |key: &str| uint(&c, key).ok_or_else(|| format!("{name}: the config has no `{key}`"));
        let model_type = c
            .get("model_type")
            .or_else(|| top.get("model_type"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let layers = need("num_hidden_layers")?;
        let hidden = need("hidden_size")?;
        let heads = need("num_attention_heads")?;
        if layers == 0 || hidden == 0 || heads == 0 {
            return Err(format!("{name}: layers, hidden_size and heads must be positive"));
        }
        let falcon_mqa = c.get("multi_query").and_then(Value::as_bool) == Some(true)
            && c.get("new_decoder_architecture").and_then(Value::as_bool) != Some(true);
        let kv_heads = if falcon_mqa {
            1
        } else {
            uint(&c, "num_key_value_heads")
                .or_else(|| uint(&c, "num_kv_heads"))
                .or_else(|| uint(&c, "n_head_kv"))
                .unwrap_or(heads)
        };
        let head_dim_explicit = uint(&c, "head_dim").is_some();
        let head_dim = uint(&c, "head_dim").unwrap_or(hidden / heads);
        let vocab = uint(&c, "vocab_size").or_else(|| uint(top, "vocab_size")).unwrap_or(0);
        let tied = c
            .get("tie_word_embeddings")
            .or_else(|| top.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(matches!(
                model_type.as_str(),
                "gemma" | "gemma2" | "gemma3" | "gemma3_text" | "falcon"
            ));
        let torch_dtype = c
            .get("torch_dtype")
            .or_else(|| top.get("torch_dtype"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let attention = match uint(&c, "kv_lora_rank") {
            Some(r) => Attention::Mla {
                kv_lora_rank: r,
                qk_rope_head_dim: need("qk_rope_head_dim")?,
                qk_nope_head_dim: need("qk_nope_head_dim")?,
                v_head_dim: need("v_head_dim")?,
                q_lora_rank: uint(&c, "q_lora_rank"),
            },
            None => Attention::Standard,
        };
        // Which layers attend within a window: `layer_types` when the config lists them, else the rule
        // of its model type (as transformers' configuration classes derive it).
        let window = uint(&c, "sliding_window");
        let windows: Vec<Option<usize>> = if let Some(types) = c.get("layer_types").and_then(Value::as_array) {
            types
                .iter()
                .map(|t| {
                    if t.as_str() == Some("sliding_attention") {
                        window
                    } else {
                        None
                    }
                })
                .collect()
        } else {
            (0..layers)
                .map(|i| match model_type.as_str() {
                    "mistral" => window,
                    // Qwen2/Qwen3: a window only where `use_sliding_window` is on, from layer
                    // `max_window_layers` up.
                    "qwen2" | "qwen3" | "qwen2_moe" | "qwen3_moe" => {
                        let on = c.get("use_sliding_window").and_then(Value::as_bool) == Some(true);
                        let from = uint(&c, "max_window_layers").unwrap_or(layers);
                        window.filter(|_| on && i >= from)
                    }
                    // Gemma 2: even layers local, odd global.
                    "gemma2" => window.filter(|_| (i + 1) % 2 != 0),
                    // Gemma 3: every `sliding_window_pattern`-th layer global, the rest local.
                    "gemma3" | "gemma3_text" => {
                        let p = uint(&c, "sliding_window_pattern").unwrap_or(6).max(1);
                        window.filter(|_| (i + 1) % p != 0)
                    }
                    _ => None,
                })
                .collect()
        };
        let intermediate = uint(&c, "intermediate_size").unwrap_or(4 * hidden);
        let ffn = match (uint(&c, "n_routed_experts"), uint(&c, "moe_intermediate_size")) {
            (Some(routed), Some(moe)) => Ffn::Moe {
                dense_layers: uint(&c, "first_k_dense_replace").unwrap_or(0),
                intermediate,
                moe_intermediate: moe,
                routed,
                shared: uint(&c, "n_shared_experts").unwrap_or(0),
            },
            _ if matches!(model_type.as_str(), "" | "falcon" | "gpt2" | "gpt_neox") => Ffn::Plain { intermediate },
            _ => Ffn::Gated { intermediate },
        };
        let source = top
            .get("_source")
            .and_then(Value::as_str)
            .unwrap_or("a user's config.json")
            .to_string();
        Ok(Self {
            name: name.to_string(),
            source,
            model_type,
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            head_dim_explicit,
            vocab,
            tied_embeddings: tied,
            torch_dtype,
            attention,
            windows,
            ffn,
            mtp_layers: uint(&c, "num_nextn_predict_layers").unwrap_or(0),
        })
    }

    /// Values one token caches in one layer: `2 · KV heads · head_dim`, or MLA's `d_c + d_r`.
    pub fn values_per_token_layer(&self) -> usize {
        match self.attention {
            Attention::Standard => 2 * self.kv_heads * self.head_dim,
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => kv_lora_rank + qk_rope_head_dim,
        }
    }

    /// Bytes one token takes in one layer in `fmt` at a context of `ctx` tokens stored in that layer
    /// (scales and KIVI's residual amortised over them).
    pub fn bytes_per_token_layer(&self, fmt: &Format, ctx: usize) -> f64 {
        match self.attention {
            Attention::Standard => fmt.cache.bytes_per_token(self.kv_heads, self.head_dim, ctx),
            // One tensor of d_c + d_r values (the format's K half).
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => fmt.cache.bytes_per_token(1, kv_lora_rank + qk_rope_head_dim, ctx) / 2.0,
        }
    }

    /// Tokens layer `l` stores of a request of `n` tokens: min(n, window).
    pub fn stored(&self, l: usize, n: usize) -> usize {
        self.windows.get(l).copied().flatten().map_or(n, |w| w.min(n))
    }

    /// Parameters, counted from the config: (main model, multi-token-prediction layers).
    pub fn parameters(&self) -> (u64, u64) {
        let (h, hd) = (self.hidden as u64, self.head_dim as u64);
        let (q, kv) = (self.heads as u64, self.kv_heads as u64);
        let norms = match self.model_type.as_str() {
            "gemma2" | "gemma3" | "gemma3_text" => 4 * h,
            "falcon" => 2 * h, // one LayerNorm (weight and bias) before the parallel attention and MLP
            "" => 4 * h,       // GPT: two LayerNorms with biases
            _ => 2 * h,
        };
        let qk_norm = if matches!(
            self.model_type.as_str(),
            "qwen3" | "qwen3_moe" | "gemma3" | "gemma3_text"
        ) {
            2 * hd
        } else {
            0
        };
        let attn = match self.attention {
            Attention::Standard => {
                let bias = match self.model_type.as_str() {
                    "qwen2" => q * hd + 2 * kv * hd,
                    "" => 3 * q * hd + h,
                    _ => 0,
                };
                h * q * hd + 2 * h * kv * hd + q * hd * h + bias + qk_norm
            }
            Attention::Mla {
                kv_lora_rank: dc,
                qk_rope_head_dim: dr,
                qk_nope_head_dim: dn,
                v_head_dim: dv,
                q_lora_rank,
            } => {
                let (dc, dr, dn, dv) = (dc as u64, dr as u64, dn as u64, dv as u64);
                let qp = match q_lora_rank {
                    Some(r) => h * r as u64 + r as u64 + r as u64 * q * (dn + dr),
                    None => h * q * (dn + dr),
                };
                qp + h * (dc + dr) + dc + dc * q * (dn + dv) + q * dv * h
            }
        };
        let gated = |i: u64| 3 * h * i;
        let ffn_layer = |l: usize| -> u64 {
            match self.ffn {
                Ffn::Gated { intermediate } => gated(intermediate as u64),
                Ffn::Plain { intermediate } => {
                    let i = intermediate as u64;
                    2 * h * i + if self.model_type.is_empty() { i + h } else { 0 }
                }
                Ffn::Moe {
                    dense_layers,
                    intermediate,
                    moe_intermediate,
                    routed,
                    shared,
                } => {
                    if l < dense_layers {
                        gated(intermediate as u64)
                    } else {
                        (routed + shared) as u64 * gated(moe_intermediate as u64) + h * routed as u64
                    }
                }
            }
        };
        let layers: u64 = (0..self.layers).map(|l| attn + ffn_layer(l) + norms).sum();
        let embed = self.vocab as u64 * h;
        let head = if self.tied_embeddings { 0 } else { embed };
        let final_norm = if self.model_type.is_empty() { 2 * h } else { h };
        // An MTP module: one more decoder layer (of the last layer's kind), two norms and the 2h → h
        // projection; it shares the embedding and the output head.
        let mtp = self.mtp_layers as u64 * (attn + ffn_layer(self.layers) + norms + 2 * h + 2 * h * h + h);
        (embed + head + layers + final_norm, mtp)
    }
}

/// A KV format the calculator counts: a cache format of lesson 10, or bf16 (f16's bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Format {
    /// Its name as given.
    pub name: String,
    /// The bytes it counts.
    pub cache: CacheFormat,
}

impl Format {
    /// The formats `--dtype` takes.
    pub fn all() -> Vec<Format> {
        let mut v = vec![Format {
            name: "bf16".into(),
            cache: CacheFormat::Pool {
                dtype: KvDtype::F16,
                calibrated: true,
            },
        }];
        // Every format of the one list (`cache::formats`), FP8 only as calibrated: the calculator counts
        // bytes, and a scale of 1.0 stores the same bytes.
        for f in CacheFormat::all(32, 32) {
            if f.uncalibrated() {
                continue;
            }
            v.push(Format {
                name: f.name(),
                cache: f,
            });
        }
        v
    }

    /// The format called `name`.
    pub fn parse(name: &str) -> Result<Format, String> {
        Self::all().into_iter().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<String> = Self::all().into_iter().map(|f| f.name).collect();
            format!("unknown KV format `{name}` (known: {})", known.join(", "))
        })
    }
}

/// Bytes per weight for `--weights-dtype` (and the config's `torch_dtype`).
pub fn weight_bytes(dtype: &str) -> Result<f64, String> {
    Ok(match dtype {
        "f32" | "float32" => 4.0,
        "f16" | "float16" | "bf16" | "bfloat16" => 2.0,
        "fp8" | "int8" => 1.0,
        "int4" => 0.5,
        other => {
            return Err(format!(
                "unknown weights dtype `{other}` (known: f32, bf16, f16, fp8, int8, int4)"
            ));
        }
    })
}

/// A GPU memory size: `80GB` (10⁹), `80GiB` (2³⁰), or a preset with its source.
pub fn gpu_memory(s: &str) -> Result<(u64, String), String> {
    let t = s.trim().to_ascii_lowercase();
    match t.as_str() {
        "h100" => {
            return Ok((
                80_000_000_000,
                "H100 SXM: 80 GB HBM3 (NVIDIA H100 Tensor Core GPU datasheet, 'GPU memory')".into(),
            ));
        }
        "h200" => {
            return Ok((
                141_000_000_000,
                "H200 SXM: 141 GB HBM3e (NVIDIA H200 Tensor Core GPU datasheet, 'GPU memory')".into(),
            ));
        }
        _ => {}
    }
    let (num, unit) = t.split_at(t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len()));
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size: write 80GB, 80GiB, h100 or h200"))?;
    let mult = match unit.trim() {
        "gb" => 1e9,
        "gib" => 1024f64.powi(3),
        "mb" => 1e6,
        "mib" => 1024f64.powi(2),
        _ => return Err(format!("`{s}` needs a unit: GB or GiB (or h100, h200)")),
    };
    if !(x.is_finite() && x > 0.0) {
        return Err(format!("`{s}` is not a positive size"));
    }
    Ok(((x * mult) as u64, format!("{s} as given")))
}

/// One layer group's share of a request: layers with the same window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerGroup {
    /// The window (None: full attention).
    pub window: Option<usize>,
    /// Layers in the group.
    pub layers: usize,
    /// Tokens each layer stores of one request (min(context, window)).
    pub tokens_stored: usize,
    /// Bytes of one block: block_size tokens of every layer in the group.
    pub block_bytes: f64,
    /// Blocks one request takes in the group.
    pub blocks_per_request: usize,
}

/// The calculator's answer for one model (every field's unit is in its name).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The model.
    pub model: String,
    /// Its config's source.
    pub source: String,
    /// The KV format.
    pub kv_format: String,
    /// Values one token caches per layer.
    pub values_per_token_per_layer: usize,
    /// Bytes one token caches in one (full-attention) layer at the context.
    pub kv_bytes_per_token_per_layer: f64,
    /// Bytes one token caches across all layers, no window applied.
    pub kv_bytes_per_token: f64,
    /// Context (tokens per request).
    pub context_tokens: usize,
    /// Requests in the batch.
    pub batch: usize,
    /// KV bytes of one request at the context (windows applied).
    pub kv_bytes_per_request: f64,
    /// KV bytes of the batch.
    pub kv_bytes_batch: f64,
    /// Parameters of the main model.
    pub parameters: u64,
    /// Parameters of the multi-token-prediction layers (not in `parameters`).
    pub mtp_parameters: u64,
    /// The weights' dtype and bytes per parameter.
    pub weights_dtype: String,
    /// Bytes of the weights (main model).
    pub weights_bytes: f64,
    /// GPU memory, bytes, and where the figure comes from.
    pub gpu_memory_bytes: u64,
    /// Source of the GPU memory figure.
    pub gpu_memory_source: String,
    /// Bytes left for the KV cache after the weights (no other reserve).
    pub kv_budget_bytes: f64,
    /// Requests of the context that fit in the budget.
    pub requests_fit: u64,
    /// Tokens of such requests that fit (requests_fit × context, plus what a partial request holds).
    pub tokens_fit: u64,
    /// Tokens per block.
    pub block_size: usize,
    /// The layer groups (one per window size).
    pub groups: Vec<LayerGroup>,
    /// Blocks one request takes, every group.
    pub blocks_per_request: usize,
    /// What the common wrong formulas give for the batch's KV, bytes, each with what it assumes.
    pub wrong: Vec<Wrong>,
}

/// A wrong formula's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wrong {
    /// The shortcut.
    pub formula: String,
    /// The shortcut, in Chinese (lesson 11's view).
    pub formula_zh: String,
    /// KV bytes of one request at the context by it.
    pub kv_bytes_per_request: f64,
    /// Its answer over the right one.
    pub ratio: f64,
}

/// The calculator's inputs besides the model.
#[derive(Debug, Clone)]
pub struct Query {
    /// KV format.
    pub format: Format,
    /// Weights dtype (None: the config's torch_dtype, else bf16).
    pub weights_dtype: Option<String>,
    /// Context per request.
    pub context: usize,
    /// Requests.
    pub batch: usize,
    /// GPU memory (bytes, source).
    pub gpu: (u64, String),
    /// Tokens per block.
    pub block_size: usize,
}

/// KV bytes of one request of `n` tokens of `m` in `fmt`.
pub fn request_bytes(m: &ModelSpec, fmt: &Format, n: usize) -> f64 {
    (0..m.layers)
        .map(|l| {
            let s = m.stored(l, n);
            m.bytes_per_token_layer(fmt, s) * s as f64
        })
        .sum()
}

/// Answer `q` for `m`.
pub fn calculate(m: &ModelSpec, q: &Query) -> Result<Report, String> {
    if q.context == 0 || q.batch == 0 || q.block_size == 0 {
        return Err("context, batch and block size must be at least 1".into());
    }
    let n = q.context;
    let per_layer = m.bytes_per_token_layer(&q.format, n);
    let per_request = request_bytes(m, &q.format, n);
    let (params, mtp) = m.parameters();
    let wname = q.weights_dtype.clone().unwrap_or_else(|| {
        if m.torch_dtype.is_empty() {
            "bf16".into()
        } else {
            m.torch_dtype.clone()
        }
    });
    let weights = params as f64 * weight_bytes(&wname)?;
    let budget = (q.gpu.0 as f64 - weights).max(0.0);
    let requests_fit = (budget / per_request).floor() as u64;
    // Tokens: whole requests, then what the rest holds of one more (its first tokens, every layer).
    let rest = budget - requests_fit as f64 * per_request;
    let mut extra = 0u64;
    {
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if request_bytes(m, &q.format, mid) <= rest {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        extra = extra.max(lo as u64);
    }
    let mut groups: Vec<LayerGroup> = Vec::new();
    for l in 0..m.layers {
        let w = m.windows.get(l).copied().flatten();
        let s = m.stored(l, n);
        let bytes = m.bytes_per_token_layer(&q.format, s) * q.block_size as f64;
        match groups.iter_mut().find(|g| g.window == w) {
            Some(g) => {
                g.layers += 1;
                g.block_bytes += bytes;
            }
            None => groups.push(LayerGroup {
                window: w,
                layers: 1,
                tokens_stored: s,
                block_bytes: bytes,
                blocks_per_request: s.div_ceil(q.block_size),
            }),
        }
    }
    let blocks_per_request = groups.iter().map(|g| g.blocks_per_request).sum();
    // The wrong formulas.
    let mut wrong = Vec::new();
    let mut push = |(formula, formula_zh): (String, String), bytes: f64| {
        if (bytes - per_request).abs() > 0.5 {
            wrong.push(Wrong {
                formula,
                formula_zh,
                kv_bytes_per_request: bytes,
                ratio: bytes / per_request,
            });
        }
    };
    if m.head_dim_explicit && m.attention == Attention::Standard && m.hidden / m.heads != m.head_dim {
        let w = ModelSpec {
            head_dim: m.hidden / m.heads,
            ..m.clone()
        };
        push(
            (
                format!(
                    "head_dim = hidden_size / heads = {} (the config says {})",
                    m.hidden / m.heads,
                    m.head_dim
                ),
                format!(
                    "head_dim = hidden_size / 头数 = {}（配置写的是 {}）",
                    m.hidden / m.heads,
                    m.head_dim
                ),
            ),
            request_bytes(&w, &q.format, n),
        );
    }
    if let Attention::Mla {
        qk_rope_head_dim,
        qk_nope_head_dim,
        ..
    } = m.attention
    {
        let w = ModelSpec {
            attention: Attention::Standard,
            head_dim: qk_nope_head_dim + qk_rope_head_dim,
            ..m.clone()
        };
        push(
            (
                format!(
                    "MLA counted as K and V: 2 · {} KV heads · head_dim {} (qk_nope + qk_rope)",
                    m.kv_heads,
                    qk_nope_head_dim + qk_rope_head_dim
                ),
                format!(
                    "把 MLA 当作 K 和 V 计算：2 · {} 个 KV 头 · head_dim {}（qk_nope + qk_rope）",
                    m.kv_heads,
                    qk_nope_head_dim + qk_rope_head_dim
                ),
            ),
            request_bytes(&w, &q.format, n),
        );
    }
    if m.attention == Attention::Standard && m.kv_heads != m.heads {
        let w = ModelSpec {
            kv_heads: m.heads,
            ..m.clone()
        };
        push(
            (
                format!("GQA ignored: {} KV heads (one per query head)", m.heads),
                format!("忽略 GQA：{} 个 KV 头（每个查询头一个）", m.heads),
            ),
            request_bytes(&w, &q.format, n),
        );
    }
    if m.windows.iter().any(Option::is_some) {
        let w = ModelSpec {
            windows: vec![None; m.layers],
            ..m.clone()
        };
        push(
            (
                "window ignored: every layer stores the whole context".into(),
                "忽略窗口：每一层都存储整个上下文".into(),
            ),
            request_bytes(&w, &q.format, n),
        );
    }
    Ok(Report {
        model: m.name.clone(),
        source: m.source.clone(),
        kv_format: q.format.name.to_string(),
        values_per_token_per_layer: m.values_per_token_layer(),
        kv_bytes_per_token_per_layer: per_layer,
        kv_bytes_per_token: per_layer * m.layers as f64,
        context_tokens: n,
        batch: q.batch,
        kv_bytes_per_request: per_request,
        kv_bytes_batch: per_request * q.batch as f64,
        parameters: params,
        mtp_parameters: mtp,
        weights_dtype: wname,
        weights_bytes: weights,
        gpu_memory_bytes: q.gpu.0,
        gpu_memory_source: q.gpu.1.clone(),
        kv_budget_bytes: budget,
        requests_fit,
        tokens_fit: requests_fit * n as u64 + extra,
        block_size: q.block_size,
        groups,
        blocks_per_request,
        wrong,
    })
}
