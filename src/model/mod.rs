//! A real, tiny, trained language model: Llama-style, decoder-only, byte-level (issue #16).
//!
//! How it works: `scripts/train-tiny-model.py` trains the model on a Debian package's text and writes
//! `assets/models/kvscope-tiny.safetensors`; [`Model::load`] reads it with the `safetensors` crate and
//! validates every name, shape and dtype against the configuration in the file's metadata. The forward
//! pass is written out here in f32 (RMSNorm, RoPE in the "rotate half" layout, GQA attention, SwiGLU,
//! tied embeddings), and attention goes through the backend's attention op with the causal mask, so the
//! same kernels that lessons 1–3 teach run the model. [`decode`] generates token by token through the
//! static and the paged KV cache with the backends' append and paged-decode kernels.

pub mod decode;
pub mod heads;
pub mod texts;

use std::collections::HashMap;
use std::path::Path;

use ndarray::{Array2, Array3, Axis, s};

use crate::compute::{AttnInput, Backend};
use crate::math::{Mask, matmul};

/// Texts the lessons run the model on: English and Chinese, some seen in training and some not.
pub const PROMPTS: [&str; 4] = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "To be, or not to be, that is the question.",
    "床前明月光，疑是地上霜。举头望明月，",
    "A cache is a place where things are kept for later.",
];

/// A byte as the views name it: the character when it is printable ASCII or a space, `'\n'` for a
/// newline, else its hex value (a Chinese character is three such bytes).
pub fn byte_label(b: u8) -> String {
    match b {
        b' ' => "' '".to_string(),
        b'\n' => "'\\n'".to_string(),
        b if b.is_ascii_graphic() => format!("'{}'", b as char),
        b => format!("0x{b:02x}"),
    }
}

/// Bytes as text: whole UTF-8 characters as they are, any other byte (a character not yet complete: a
/// Chinese one takes three bytes) as `[e6]`, never U+FFFD.
pub fn bytes_as_text(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        for x in chunk.invalid() {
            out.push_str(&format!("[{x:02x}]"));
        }
    }
    out
}

/// Short labels for the bytes of a text, one per byte, for heatmap ticks: a character that starts at
/// this byte (`‿` for a space, `↵` for a newline), `·` for the following bytes of a multi-byte
/// character, and the hex value of a byte that is not part of valid UTF-8 or is a control byte.
pub fn tick_labels(tokens: &[u8]) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let b = tokens[i];
        let width = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 0,
        };
        let ch = (width > 0 && i + width <= tokens.len())
            .then(|| std::str::from_utf8(&tokens[i..i + width]).ok())
            .flatten()
            .and_then(|s| s.chars().next());
        match ch {
            Some(' ') => out.push("‿".to_string()),
            Some('\n') => out.push("↵".to_string()),
            Some(c) if !c.is_control() => out.push(c.to_string()),
            _ => {
                out.push(format!("{b:02x}"));
                i += 1;
                continue;
            }
        }
        out.extend(std::iter::repeat_n("·".to_string(), width - 1));
        i += width;
    }
    out
}

/// The start of the held-out split the committed model was evaluated on (never trained on), as the
/// training script wrote it: documents separated by blank lines, English and Chinese.
pub const HELDOUT: &[u8] = include_bytes!("../../assets/models/kvscope-tiny.heldout.txt");

/// The held-out documents (the file's last one may be cut short; a character cut at the file's end is
/// dropped), without empty ones.
pub fn heldout_documents() -> Vec<&'static str> {
    let text = match std::str::from_utf8(HELDOUT) {
        Ok(t) => t,
        // The file is the first N bytes of the split: it may end inside a character.
        Err(e) => std::str::from_utf8(&HELDOUT[..e.valid_up_to()]).unwrap_or_default(),
    };
    text.split("\n\n").map(str::trim).filter(|d| !d.is_empty()).collect()
}

/// The committed model, parsed once per process.
pub fn shared() -> Result<&'static Model, ModelError> {
    static MODEL: std::sync::OnceLock<Result<Model, ModelError>> = std::sync::OnceLock::new();
    MODEL.get_or_init(Model::embedded).as_ref().map_err(Clone::clone)
}

/// The committed weights, embedded so the app and the tests need no file.
pub const EMBEDDED: &[u8] = include_bytes!("../../assets/models/kvscope-tiny.safetensors");
/// Where they live in the repository.
pub const EMBEDDED_PATH: &str = "assets/models/kvscope-tiny.safetensors";

/// Why a model file could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read.
    #[error("{path}: cannot read: {msg}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        msg: String,
    },
    /// Not a safetensors file, or a truncated one.
    #[error("{path}: not a valid safetensors file: {msg}")]
    Format {
        /// The file.
        path: String,
        /// What the parser said.
        msg: String,
    },
    /// The metadata lacks a configuration value or has a bad one.
    #[error("{path}: metadata `{key}`: {msg}")]
    Config {
        /// The file.
        path: String,
        /// The metadata key.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// A tensor is missing, has the wrong shape or dtype, or is not expected.
    #[error("{path}: tensor `{name}`: {msg}")]
    Tensor {
        /// The file.
        path: String,
        /// The tensor.
        name: String,
        /// What is wrong.
        msg: String,
    },
}

/// The architecture constants (from the file's metadata).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Config {
    /// Vocabulary (256 bytes).
    pub vocab: usize,
    /// Model width.
    pub d_model: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (GQA when fewer than query heads).
    pub n_kv_heads: usize,
    /// Per-head width.
    pub head_dim: usize,
    /// SwiGLU hidden width.
    pub ffn_hidden: usize,
    /// Longest sequence it was trained on.
    pub context: usize,
    /// RoPE base θ.
    pub rope_base: f64,
    /// RMSNorm ε (added in f32, as PyTorch adds it to an f32 tensor).
    pub norm_eps: f64,
}

/// One transformer block's weights, stored as `[in, out]` so that `x · W` applies them.
#[derive(Debug, Clone)]
pub struct Block {
    /// RMSNorm weight before attention.
    pub attention_norm: Vec<f32>,
    /// `[d, H·hd]`.
    pub wq: Array2<f32>,
    /// `[d, KVH·hd]`.
    pub wk: Array2<f32>,
    /// `[d, KVH·hd]`.
    pub wv: Array2<f32>,
    /// `[H·hd, d]`.
    pub wo: Array2<f32>,
    /// RMSNorm weight before the MLP.
    pub ffn_norm: Vec<f32>,
    /// Gate `[d, hidden]`.
    pub w1: Array2<f32>,
    /// Up `[d, hidden]`.
    pub w3: Array2<f32>,
    /// Down `[hidden, d]`.
    pub w2: Array2<f32>,
}

/// The model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Architecture.
    pub config: Config,
    /// Token embeddings `[vocab, d]` (tied: also the output projection).
    pub embed: Array2<f32>,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// Final RMSNorm weight.
    pub norm: Vec<f32>,
    /// Parameters in the file.
    pub parameters: usize,
    /// RoPE cos/sin tables `[context, hd/2]`.
    rope: (Array2<f32>, Array2<f32>),
}

/// What a prefill computes: logits `[T, vocab]`, and per layer the attention probabilities `[H, T, T]`.
#[derive(Debug, Clone)]
pub struct Prefill {
    /// Next-byte logits at every position.
    pub logits: Array2<f32>,
    /// Attention probabilities per layer.
    pub probs: Vec<Array3<f32>>,
    /// K and V per layer (`[KVH, T, hd]` each, RoPE applied to K), what a cache would hold.
    pub kv: Vec<(Array3<f32>, Array3<f32>)>,
    /// Q per layer (`[H, T, hd]`, RoPE applied).
    pub q: Vec<Array3<f32>>,
    /// Each layer's attention input, RMSNorm(x) `[T, d_model]`: what W_Q, W_K and W_V multiply.
    pub attn_in: Vec<Array2<f32>>,
}

fn meta<'a>(m: &'a HashMap<String, String>, path: &str, key: &str) -> Result<&'a str, ModelError> {
    m.get(key).map(String::as_str).ok_or_else(|| ModelError::Config {
        path: path.into(),
        key: key.into(),
        msg: "missing".into(),
    })
}

fn parse<T: std::str::FromStr>(m: &HashMap<String, String>, path: &str, key: &str) -> Result<T, ModelError> {
    let v = meta(m, path, key)?;
    v.parse().map_err(|_| ModelError::Config {
        path: path.into(),
        key: key.into(),
        msg: format!("`{v}` is not a valid value"),
    })
}

impl Model {
    /// The committed model.
    pub fn embedded() -> Result<Model, ModelError> {
        Model::from_bytes(EMBEDDED, EMBEDDED_PATH)
    }

    /// Load a model file.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Io {
            path: shown.clone(),
            msg: e.to_string(),
        })?;
        Model::from_bytes(&bytes, &shown)
    }

    /// Parse and validate the bytes of a safetensors file; `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Model, ModelError> {
        let format = |msg: String| ModelError::Format { path: path.into(), msg };
        let (_, md) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| format(e.to_string()))?;
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| format(e.to_string()))?;
        let empty = HashMap::new();
        let m = md.metadata().as_ref().unwrap_or(&empty);
        let layout = meta(m, path, "rope_layout")?;
        if layout != "rotate_half" {
            return Err(ModelError::Config {
                path: path.into(),
                key: "rope_layout".into(),
                msg: format!("`{layout}`: only rotate_half is implemented"),
            });
        }
        if meta(m, path, "tied_embeddings")? != "True" {
            return Err(ModelError::Config {
                path: path.into(),
                key: "tied_embeddings".into(),
                msg: "only tied embeddings are implemented".into(),
            });
        }
        let c = Config {
            vocab: parse(m, path, "vocab")?,
            d_model: parse(m, path, "d_model")?,
            n_layers: parse(m, path, "n_layers")?,
            n_heads: parse(m, path, "n_heads")?,
            n_kv_heads: parse(m, path, "n_kv_heads")?,
            head_dim: parse(m, path, "head_dim")?,
            ffn_hidden: parse(m, path, "ffn_hidden")?,
            context: parse(m, path, "context")?,
            rope_base: parse(m, path, "rope_base")?,
            norm_eps: parse(m, path, "norm_eps")?,
        };
        let bad = |key: &str, msg: &str| ModelError::Config {
            path: path.into(),
            key: key.into(),
            msg: msg.into(),
        };
        if c.vocab != 256 {
            return Err(bad("vocab", "the tokenizer is byte-level: vocab must be 256"));
        }
        if c.n_heads == 0 || c.n_kv_heads == 0 || !c.n_heads.is_multiple_of(c.n_kv_heads) {
            return Err(bad("n_kv_heads", "KV heads must divide query heads"));
        }
        if c.head_dim == 0 || !c.head_dim.is_multiple_of(2) || c.head_dim > crate::compute::MAX_HEAD_DIM {
            return Err(bad("head_dim", "head_dim must be even and at most the kernels' limit"));
        }
        if c.d_model == 0 || c.n_layers == 0 || c.ffn_hidden == 0 || c.context == 0 {
            return Err(bad("d_model", "every size must be positive"));
        }
        let mut used = 0usize;
        let mut parameters = 0usize;
        let mut get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ModelError> {
            let terr = |msg: String| ModelError::Tensor {
                path: path.into(),
                name: name.into(),
                msg,
            };
            let t = st.tensor(name).map_err(|_| terr("missing".into()))?;
            if t.dtype() != safetensors::Dtype::F32 {
                return Err(terr(format!("dtype {:?}, expected F32", t.dtype())));
            }
            if t.shape() != shape {
                return Err(terr(format!("shape {:?}, expected {shape:?}", t.shape())));
            }
            used += 1;
            parameters += t.shape().iter().product::<usize>();
            Ok(bytemuck::pod_collect_to_vec::<u8, f32>(t.data()))
        };
        // PyTorch stores Linear weights as [out, in]; kvscope multiplies x · W with W as [in, out].
        let mut linear = |name: &str, out: usize, inp: usize| -> Result<Array2<f32>, ModelError> {
            let w = get(name, &[out, inp])?;
            Ok(Array2::from_shape_vec((out, inp), w)
                .expect("shape checked")
                .reversed_axes()
                .as_standard_layout()
                .to_owned())
        };
        let (d, hd) = (c.d_model, c.head_dim);
        let mut blocks = Vec::new();
        for i in 0..c.n_layers {
            let p = format!("layers.{i}.");
            blocks.push(Block {
                attention_norm: Vec::new(),
                wq: linear(&format!("{p}attention.wq.weight"), c.n_heads * hd, d)?,
                wk: linear(&format!("{p}attention.wk.weight"), c.n_kv_heads * hd, d)?,
                wv: linear(&format!("{p}attention.wv.weight"), c.n_kv_heads * hd, d)?,
                wo: linear(&format!("{p}attention.wo.weight"), d, c.n_heads * hd)?,
                ffn_norm: Vec::new(),
                w1: linear(&format!("{p}feed_forward.w1.weight"), c.ffn_hidden, d)?,
                w3: linear(&format!("{p}feed_forward.w3.weight"), c.ffn_hidden, d)?,
                w2: linear(&format!("{p}feed_forward.w2.weight"), d, c.ffn_hidden)?,
            });
        }
        for (i, b) in blocks.iter_mut().enumerate() {
            b.attention_norm = get(&format!("layers.{i}.attention_norm.weight"), &[d])?;
            b.ffn_norm = get(&format!("layers.{i}.ffn_norm.weight"), &[d])?;
        }
        let embed =
            Array2::from_shape_vec((c.vocab, d), get("tok_embeddings.weight", &[c.vocab, d])?).expect("shape checked");
        let norm = get("norm.weight", &[d])?;
        if used != st.names().len() {
            let expected: std::collections::BTreeSet<String> = std::iter::once("tok_embeddings.weight".to_string())
                .chain(std::iter::once("norm.weight".to_string()))
                .chain((0..c.n_layers).flat_map(|i| {
                    [
                        "attention_norm",
                        "attention.wq",
                        "attention.wk",
                        "attention.wv",
                        "attention.wo",
                        "ffn_norm",
                        "feed_forward.w1",
                        "feed_forward.w3",
                        "feed_forward.w2",
                    ]
                    .map(|n| format!("layers.{i}.{n}.weight"))
                }))
                .collect();
            let extra = st.names().into_iter().find(|n| !expected.contains(*n)).unwrap_or("?");
            return Err(ModelError::Tensor {
                path: path.into(),
                name: extra.into(),
                msg: "not part of the architecture in the metadata".into(),
            });
        }
        let rope = rope_tables(c.context, hd, c.rope_base);
        Ok(Model {
            config: c,
            embed,
            blocks,
            norm,
            parameters,
            rope,
        })
    }

    /// RMSNorm of each row of `x` with weight `w`: `x / √(mean(x²) + ε) · w`.
    pub fn rms_norm(&self, x: &Array2<f32>, w: &[f32]) -> Array2<f32> {
        let eps = self.config.norm_eps as f32;
        let mut out = x.clone();
        for mut row in out.rows_mut() {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
            let inv = 1.0 / (ms + eps).sqrt();
            row.iter_mut().zip(w).for_each(|(v, g)| *v = *v * inv * g);
        }
        out
    }

    /// `[T, n·hd]` rows at positions `pos0..` → `[n, T, hd]` with RoPE applied ("rotate half": dimension
    /// `i < hd/2` pairs with `i + hd/2`, rotated by angle `pos · θ^(−2i/hd)`).
    pub fn heads_with_rope(&self, a: &Array2<f32>, n: usize, pos0: usize, rope: bool) -> Array3<f32> {
        let (t, hd) = (a.nrows(), self.config.head_dim);
        let half = hd / 2;
        let (cos, sin) = &self.rope;
        let mut out = Array3::<f32>::zeros((n, t, hd));
        for h in 0..n {
            for i in 0..t {
                let x = a.slice(s![i, h * hd..(h + 1) * hd]);
                let p = pos0 + i;
                for d in 0..hd {
                    out[[h, i, d]] = if !rope {
                        x[d]
                    } else if d < half {
                        x[d] * cos[[p, d]] - x[d + half] * sin[[p, d]]
                    } else {
                        x[d] * cos[[p, d - half]] + x[d - half] * sin[[p, d - half]]
                    };
                }
            }
        }
        out
    }

    /// Embeddings of `tokens`, `[T, d]`.
    pub fn embed_tokens(&self, tokens: &[u8]) -> Array2<f32> {
        let d = self.config.d_model;
        let mut x = Array2::<f32>::zeros((tokens.len(), d));
        for (i, &t) in tokens.iter().enumerate() {
            x.row_mut(i).assign(&self.embed.row(t as usize));
        }
        x
    }

    /// The SwiGLU MLP with its residual: `x + W2(silu(W1 h) ⊙ W3 h)`, `h = RMSNorm(x)`.
    pub fn mlp(&self, b: &Block, x: &Array2<f32>) -> Array2<f32> {
        let h = self.rms_norm(x, &b.ffn_norm);
        let mut g = matmul(h.view(), b.w1.view());
        let u = matmul(h.view(), b.w3.view());
        g.zip_mut_with(&u, |a, &up| *a = *a / (1.0 + (-*a).exp()) * up);
        x + &matmul(g.view(), b.w2.view())
    }

    /// Logits `[T, vocab]` of the final hidden states `x`.
    pub fn logits(&self, x: &Array2<f32>) -> Array2<f32> {
        let h = self.rms_norm(x, &self.norm);
        matmul(h.view(), self.embed.t())
    }

    /// Project one block's attention input `x` (positions `pos0..`): Q `[H,T,hd]`, K and V `[KVH,T,hd]`,
    /// RoPE applied to Q and K.
    pub fn qkv(&self, b: &Block, x: &Array2<f32>, pos0: usize) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
        self.qkv_normed(b, &self.rms_norm(x, &b.attention_norm), pos0)
    }

    /// [`Model::qkv`] from the block's already normalised input `h` = RMSNorm(x).
    pub fn qkv_normed(&self, b: &Block, h: &Array2<f32>, pos0: usize) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
        let c = &self.config;
        let q = self.heads_with_rope(&matmul(h.view(), b.wq.view()), c.n_heads, pos0, true);
        let k = self.heads_with_rope(&matmul(h.view(), b.wk.view()), c.n_kv_heads, pos0, true);
        let v = self.heads_with_rope(&matmul(h.view(), b.wv.view()), c.n_kv_heads, pos0, false);
        (q, k, v)
    }

    /// `x + Wo · concat(heads)` for attention output `o` `[H, T, hd]`.
    pub fn attn_residual(&self, b: &Block, x: &Array2<f32>, o: &Array3<f32>) -> Array2<f32> {
        let (h, t, hd) = o.dim();
        let mut cat = Array2::<f32>::zeros((t, h * hd));
        for head in 0..h {
            cat.slice_mut(s![.., head * hd..(head + 1) * hd])
                .assign(&o.index_axis(Axis(0), head));
        }
        x + &matmul(cat.view(), b.wo.view())
    }

    /// The whole sequence at once, attention through `backend.attention` with the causal mask. With
    /// `round_kv`, K and V are rounded to f16 first, as a cache stores them.
    pub fn prefill(&self, tokens: &[u8], backend: &dyn Backend, round_kv: bool) -> Result<Prefill, String> {
        if tokens.is_empty() || tokens.len() > self.config.context {
            return Err(format!(
                "{} tokens: the model takes 1 to {} (its context)",
                tokens.len(),
                self.config.context
            ));
        }
        let mut x = self.embed_tokens(tokens);
        let mut probs = Vec::new();
        let mut kv = Vec::new();
        let mut qs = Vec::new();
        let mut inputs = Vec::new();
        for b in &self.blocks {
            let h = self.rms_norm(&x, &b.attention_norm);
            let (q, mut k, mut v) = self.qkv_normed(b, &h, 0);
            inputs.push(h);
            if round_kv {
                k.mapv_inplace(|a| half::f16::from_f32(a).to_f32());
                v.mapv_inplace(|a| half::f16::from_f32(a).to_f32());
            }
            let core = backend
                .attention(&AttnInput {
                    q: &q,
                    k: &k,
                    v: &v,
                    mask: Mask::Causal,
                })
                .map_err(|e| e.to_string())?;
            x = self.attn_residual(b, &x, &core.out);
            x = self.mlp(b, &x);
            probs.push(core.probs);
            kv.push((k, v));
            qs.push(q);
        }
        Ok(Prefill {
            logits: self.logits(&x),
            probs,
            kv,
            q: qs,
            attn_in: inputs,
        })
    }

    /// Bits per byte on `text`, the training script's way: non-overlapping windows of `context` inputs,
    /// window `s` predicting `text[s+1 .. s+context+1]`; every byte after the first is predicted once.
    /// Returns (bits per byte, bytes predicted).
    pub fn bits_per_byte(&self, text: &[u8], backend: &dyn Backend) -> Result<(f64, usize), String> {
        let ctx = self.config.context;
        let (mut nll, mut n) = (0f64, 0usize);
        let mut s = 0;
        while s + 1 < text.len() {
            let y = &text[s + 1..(s + ctx + 1).min(text.len())];
            let x = &text[s..s + y.len()];
            let out = self.prefill(x, backend, false)?;
            for (i, &target) in y.iter().enumerate() {
                let row: Vec<f64> = out.logits.row(i).iter().map(|&v| f64::from(v)).collect();
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                nll += lse - row[target as usize];
            }
            n += y.len();
            s += ctx;
        }
        Ok((nll / n.max(1) as f64 / std::f64::consts::LN_2, n))
    }
}

/// RoPE tables `[context, hd/2]`: angles `pos · θ^(−2i/hd)` in f64, cos and sin rounded to f32 (as the
/// training script computes them).
fn rope_tables(context: usize, hd: usize, base: f64) -> (Array2<f32>, Array2<f32>) {
    let half = hd / 2;
    let mut cos = Array2::<f32>::zeros((context, half));
    let mut sin = Array2::<f32>::zeros((context, half));
    for p in 0..context {
        for i in 0..half {
            let inv = 1.0 / base.powf((2 * i) as f64 / hd as f64);
            let a = p as f64 * inv;
            cos[[p, i]] = a.cos() as f32;
            sin[[p, i]] = a.sin() as f32;
        }
    }
    (cos, sin)
}

/// Results the lessons reuse while other sliders move: the kernels ran once for these exact inputs on
/// this backend, and the outputs are deterministic, so a lesson recomputing for an unrelated slider
/// (lesson 4's layers, lesson 3's heads) does not rerun the model (seconds on the CPU shim).
pub mod memo {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use super::decode::{CacheKind, Generation, Sampler};
    use super::{Prefill, shared};
    use crate::compute::Backend;
    use crate::compute::launch::{Launch, capture, report};

    const KEEP: usize = 8;

    /// A result, with the launches its computation reported (reported again when it is reused, so a
    /// lesson that reuses it still shows what ran).
    type Entry<T> = ((String, Vec<u8>, usize), (Arc<T>, Vec<Launch>));

    fn key(backend: &dyn Backend, prompt: &[u8], n: usize) -> (String, Vec<u8>, usize) {
        (
            format!("{} {}", backend.kind().name(), backend.device()),
            prompt.to_vec(),
            n,
        )
    }

    fn get_or<T>(
        memo: &Mutex<VecDeque<Entry<T>>>,
        k: (String, Vec<u8>, usize),
        make: impl FnOnce() -> Result<T, String>,
    ) -> Result<Arc<T>, String> {
        if let Some((_, (v, launches))) = memo.lock().map_err(|e| e.to_string())?.iter().find(|(kk, _)| *kk == k) {
            report(launches.iter().copied());
            return Ok(v.clone());
        }
        let (made, launches) = capture(make);
        let v = Arc::new(made?);
        let mut m = memo.lock().map_err(|e| e.to_string())?;
        m.push_front((k, (v.clone(), launches)));
        m.truncate(KEEP);
        Ok(v)
    }

    /// The committed model's prefill of `prompt` on `backend`.
    pub fn prefill(prompt: &[u8], backend: &dyn Backend) -> Result<Arc<Prefill>, String> {
        static MEMO: Mutex<VecDeque<Entry<Prefill>>> = Mutex::new(VecDeque::new());
        get_or(&MEMO, key(backend, prompt, 0), || {
            shared().map_err(|e| e.to_string())?.prefill(prompt, backend, false)
        })
    }

    /// The committed model's greedy generation of `n` bytes after `prompt` through the static cache.
    pub fn generate_static(prompt: &[u8], n: usize, backend: &dyn Backend) -> Result<Arc<Generation>, String> {
        static MEMO: Mutex<VecDeque<Entry<Generation>>> = Mutex::new(VecDeque::new());
        get_or(&MEMO, key(backend, prompt, n), || {
            shared()
                .map_err(|e| e.to_string())?
                .generate(prompt, n, CacheKind::Static, &mut Sampler::greedy(), backend)
        })
    }
}
