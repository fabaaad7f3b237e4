//! `kvscope export`'s subcommands and their flags (the command-line interface the README and
//! `tests/cli.rs` give); `mod.rs` runs them.

use std::path::PathBuf;

use clap::Subcommand;
use kvscope::compute::BackendKind;
use kvscope::math::Mask;

/// Which attention kernels `export attention` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kernel {
    /// The three kernels (scores, softmax, P·V).
    Three,
    /// The three kernels and the tiled FlashAttention kernel.
    Flash,
}

#[derive(Subcommand)]
pub enum ExportCmd {
    /// One attention layer: x, weights, q, k, v, scores, probs, out, y; with `--kernel flash` also the
    /// tiled kernel's output (`flash_out`) and the global-memory traffic of both paths (`io`).
    Attention {
        #[arg(long, default_value_t = 8)]
        seq: usize,
        #[arg(long, default_value_t = 32)]
        d_model: usize,
        #[arg(long, default_value_t = 4)]
        heads: usize,
        #[arg(long, default_value_t = 4)]
        kv_heads: usize,
        /// none | causal | window:W | window:W,sinks:S
        #[arg(long, default_value = "causal")]
        mask: Mask,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// three: scores, softmax and P·V (S and P written); flash: also the tiled kernel, and the
        /// traffic of both in manifest.json's `io`.
        #[arg(long, value_enum, default_value = "three")]
        kernel: Kernel,
        /// Query rows per block of the flash kernel (Br).
        #[arg(long, default_value_t = 16)]
        block_q: usize,
        /// Keys per tile of the flash kernel (Bc).
        #[arg(long, default_value_t = 16)]
        block_k: usize,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// One paged decode step: q, K/V pools, block tables, context lengths and out.
    PagedDecode {
        #[arg(long, default_value_t = 2)]
        requests: usize,
        /// Comma-separated context length of each request.
        #[arg(long, value_delimiter = ',', conflicts_with = "max_context")]
        context_lens: Option<Vec<usize>>,
        /// Draw each request's context length from 1..=N with the seed.
        #[arg(long)]
        max_context: Option<usize>,
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        #[arg(long, default_value_t = 64)]
        num_blocks: usize,
        #[arg(long, default_value_t = 4)]
        heads: usize,
        #[arg(long, default_value_t = 2)]
        kv_heads: usize,
        #[arg(long, default_value_t = 16)]
        head_dim: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// A model's next-token logits on a prompt: tokens.npy `[T]`, logits.npy `[T, vocab]` and the
    /// architecture constants in manifest.json.
    Logits {
        #[arg(long)]
        prompt: String,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// A model's attention on a prompt: probs_layer{L}.npy `[H, T, T]` for every layer, the tokens, and
    /// each head's measured pattern label in manifest.json.
    ModelAttention {
        #[arg(long)]
        prompt: String,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
}
