//! Lesson 11's memory calculator: how many KV bytes a model needs per token and per request, what its
//! weights take, and how many requests of a context fit in a GPU's memory, computed from the config's
//! actual fields (`head_dim` where the config gives it, MLA's latent, GQA's KV heads, sliding-window and
//! hybrid layers), with the common wrong formulas beside the right one.
//!
//! Configs are Hugging Face `config.json` files: the bundled ones ([`configs`], copied from the
//! published files, sources in `assets/configs/SOURCES.md`) or a user's own ([`ModelSpec::from_hf`]).

pub mod configs;
mod spec;

use serde::Serialize;

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
    /// The longest context the config allows (`max_position_embeddings`), when it says.
    pub max_context: Option<usize>,
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
    /// The fraction of GPU memory claimed (1: all).
    pub gpu_memory_utilization: f64,
    /// Bytes reserved besides the weights (activations, CUDA graphs), as given.
    pub reserve_bytes: f64,
    /// Bytes left for the KV cache: GPU memory × utilization − weights − reserve.
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
    /// The fraction of GPU memory the engine claims (1: all of it; vLLM's `gpu_memory_utilization`
    /// defaults to 0.9).
    pub utilization: f64,
    /// Bytes kept back besides the weights: the activation peak and CUDA-graph memory, which vLLM
    /// profiles before it sizes the pool and a calculator can only be told.
    pub reserve_bytes: f64,
}

/// The longest context `m` serves: its config's `max_position_embeddings`, and for Mistral-7B-v0.1 the
/// 8192 tokens it was trained on (its paper's Table 1, quoted as the fact `mistral_context_len`), which
/// is less than the 32768 its config allows. Points past it are hypothetical, and the views say so.
pub fn context_limit(m: &ModelSpec) -> Option<usize> {
    let trained = (m.name == "Mistral-7B-v0.1").then(|| crate::facts::fact("mistral_context_len").number() as usize);
    match (m.max_context, trained) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
    if !(q.utilization > 0.0 && q.utilization <= 1.0) {
        return Err(format!(
            "GPU memory utilization must be in (0, 1], not {}",
            q.utilization
        ));
    }
    if !(q.reserve_bytes >= 0.0 && q.reserve_bytes.is_finite()) {
        return Err(format!("the reserve must be 0 or more bytes, not {}", q.reserve_bytes));
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
    let budget = (q.gpu.0 as f64 * q.utilization - weights - q.reserve_bytes).max(0.0);
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
        gpu_memory_utilization: q.utilization,
        reserve_bytes: q.reserve_bytes,
        kv_budget_bytes: budget,
        requests_fit,
        tokens_fit: requests_fit * n as u64 + extra,
        block_size: q.block_size,
        groups,
        blocks_per_request,
        wrong,
    })
}
