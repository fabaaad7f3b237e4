//! A real, tiny, trained language model: Llama-style, decoder-only, byte-level (issue #16).
//!
//! How it works: `scripts/train-tiny-model.py` trains the model on a Debian package's text and writes
//! `assets/models/kvscope-tiny.safetensors`; [`Model::load`] reads it with the `safetensors` crate and
//! validates every name, shape and dtype against the configuration in the file's metadata. The forward
//! pass is written out here in f32 (RMSNorm, RoPE in the "rotate half" layout, GQA attention, SwiGLU,
//! tied embeddings), and attention goes through the backend's attention op with the causal mask, so the
//! same kernels that lessons 1–3 teach run the model. [`decode`] generates token by token through the
//! static and the paged KV cache with the backends' append and paged-decode kernels.

pub mod choice;
pub mod decode;
mod forward;
pub mod gguf;
pub mod heads;
mod load;
pub mod memo;
pub mod smollm2;
pub mod speed;
pub mod texts;
pub mod tokens;

pub use tokens::{TokenId, Tokenizer};

use ndarray::{Array2, Array3};

/// Positions the model's RoPE tables hold: far past its trained context of 256 bytes, so that generation
/// and a streaming decode with text positions can go there and show what happens (issue #31).
pub const MAX_POSITIONS: usize = 32768;

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

/// 2,685 bytes of English prose written for kvscope in December 2026 (after SmolLM2's training data was
/// collected; the project's licence): the real model's held-out text (`scripts/smollm2/README.md`).
pub const HELDOUT_EN: &str = include_str!("../../assets/texts/heldout-en.txt");

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

/// Lesson 12's draft model (`scripts/train-tiny-model.py --draft`), parsed once per process.
pub fn draft() -> Result<&'static Model, ModelError> {
    static MODEL: std::sync::OnceLock<Result<Model, ModelError>> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| Model::from_bytes(DRAFT_EMBEDDED, DRAFT_PATH))
        .as_ref()
        .map_err(Clone::clone)
}

/// The draft model's weights (f32, under 1 MB), embedded.
pub const DRAFT_EMBEDDED: &[u8] = include_bytes!("../../assets/models/kvscope-draft.safetensors");
/// Where they live in the repository.
pub const DRAFT_PATH: &str = "assets/models/kvscope-draft.safetensors";

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
    /// A GGUF file (the real model) that is damaged, truncated, of another architecture or not the
    /// pinned file.
    #[error("{path}: {msg}")]
    Gguf {
        /// The file.
        path: String,
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
    /// The byte every training window began with, when the model was trained with one (metadata
    /// `start_byte`; lesson 8's attention-sink variant): a stream then begins with it.
    pub start_byte: Option<u8>,
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
    /// RoPE cos/sin tables `[MAX_POSITIONS, hd/2]`.
    rope: (Array2<f32>, Array2<f32>),
    /// Text to ids and back.
    pub tokenizer: Tokenizer,
    /// Which model this is.
    pub name: ModelName,
}

/// The models kvscope runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ModelName {
    /// The byte-level model trained here (0.8 M parameters), embedded; also any safetensors file in its
    /// format (the draft model of lesson 12).
    Tiny,
    /// SmolLM2-135M-Instruct from its GGUF file ([`smollm2`]).
    Smollm2,
}

impl ModelName {
    /// Its command-line name.
    pub fn id(self) -> &'static str {
        match self {
            ModelName::Tiny => "tiny",
            ModelName::Smollm2 => "smollm2",
        }
    }
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
