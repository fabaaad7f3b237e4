//! `kvscope export`'s subcommands and their flags (the command-line interface the README and
//! `tests/cli.rs` give); `mod.rs` runs them.

use std::path::PathBuf;

use clap::Subcommand;
use kvscope::compute::BackendKind;
use kvscope::math::Mask;

use super::{parse_evict_policy, parse_policy, parse_positions};

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
    /// Speculative decoding of the trained model (lesson 12): speculative.json with each verification
    /// pass's proposals, accepted length and emitted bytes (enough to replay it), acceptance by position,
    /// passes per byte, bytes/s against plain decode, and the memory it does not save.
    Speculative {
        /// ngram (prompt lookup) | draft (the shipped draft model)
        #[arg(long, value_enum, default_value = "ngram")]
        speculative: crate::cli::serving::SpecArg,
        /// Bytes drafted per step.
        #[arg(long, default_value_t = 4)]
        k: usize,
        /// The prompt (default: the first 128 bytes of the held-out text).
        #[arg(long)]
        prompt: Option<String>,
        /// Bytes to generate.
        #[arg(long, default_value_t = 128)]
        tokens: usize,
        /// 0: greedy; otherwise rejection sampling at this temperature.
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Tokens per block of the paged caches.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// The trained model served under a token budget (lesson 12): serving.json with each step's schedule
    /// (prefill and decode tokens, who ran, its seconds) and each request's TTFT and inter-token
    /// latencies, in steps and in seconds on the backend. Outputs are greedy, and equal under every policy.
    Serving {
        /// whole (no chunking: a prompt must fit in one step's budget) | chunked
        #[arg(long, value_enum, default_value = "chunked")]
        policy: crate::cli::serving::ServePolicy,
        /// Tokens one step may schedule (vLLM's max_num_batched_tokens).
        #[arg(long, default_value_t = 32)]
        budget: usize,
        /// The most prefill tokens one request gets in a step (vLLM's long_prefill_token_threshold; 0: no cap).
        #[arg(long, default_value_t = 0)]
        chunk: usize,
        /// Requests as arrival_step:prompt_bytes:generated_bytes (prompts are pieces of the held-out text);
        /// default: 0:24:40 0:16:40 2:32:40 6:192:8.
        #[arg(long, num_args = 1.., value_parser = crate::cli::serving::parse_request)]
        requests: Vec<(usize, usize, usize)>,
        /// Blocks in the pool.
        #[arg(long, default_value_t = 128)]
        blocks: usize,
        /// Tokens per block.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// The tiny model streaming the held-out file byte by byte past its 256-byte context through a
    /// bounded paged cache (lesson 8): tokens.npy, nll.npy, blocks_in_use.npy, sink_mass.npy and a
    /// manifest that defines each and gives the bits per byte.
    Streaming {
        /// dense | window | sinks | recompute
        #[arg(long, value_parser = parse_policy)]
        policy: kvscope::drivers::stream::StreamPolicy,
        /// cache (positions by slot in the cache, StreamingLLM) | text (each byte keeps its own)
        #[arg(long, value_parser = parse_positions, default_value = "cache")]
        positions: kvscope::drivers::stream::Positions,
        /// W: recent bytes each step attends to, the byte it reads included.
        #[arg(long, default_value_t = 64)]
        window: usize,
        /// S: bytes from the start kept by the sinks policy; the sink mass is measured on them under every
        /// policy.
        #[arg(long, default_value_t = 4)]
        sinks: usize,
        /// Tokens per block of the paged cache.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        /// Tokens of the held-out text to stream (default: all of it; the tiny model's are the 16384 bytes of
        /// its held-out file, SmolLM2's the 577 tokens of assets/texts/heldout-en.txt).
        #[arg(long)]
        bytes: Option<usize>,
        /// --model-file takes a tiny-model variant too: `scripts/train-tiny-model.py --start-byte 2` writes
        /// lesson 8's (a model trained with a start byte reads it first).
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// Eviction by importance (lesson 9): the tiny model reads a text one decode step per byte while a
    /// policy keeps at most K tokens per KV head per layer: tokens.npy, kept.npy `[step, layer, kv_head,
    /// width]`, scores.npy `[step, layer, kv_head, T]`, nll.npy and a manifest that defines each.
    Eviction {
        /// full | window | sinks | h2o | snapkv | random
        #[arg(long, value_parser = parse_evict_policy)]
        policy: kvscope::drivers::evict::EvictPolicy,
        /// K: tokens kept per KV head per layer (the one a step reads included).
        #[arg(long)]
        budget: usize,
        /// R: recent tokens H2O and random never evict (default K/2).
        #[arg(long)]
        recent: Option<usize>,
        /// w: SnapKV's observation window (default min(32, K/2)).
        #[arg(long)]
        obs_window: Option<usize>,
        /// k: SnapKV's average-pooling kernel (odd).
        #[arg(long, default_value_t = 5)]
        pool_kernel: usize,
        /// The random policy's seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Tokens per block of the paged cache.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        /// The text to read (its bytes; at most the model's context of 256).
        #[arg(long, conflicts_with = "heldout", required_unless_present = "heldout")]
        prompt: Option<String>,
        /// Read the held-out text's first 256 tokens instead (the tiny model's file's bytes; SmolLM2's
        /// assets/texts/heldout-en.txt): a 128-token prompt, then 128 tokens decoded.
        #[arg(long)]
        heldout: bool,
        /// Tokens of `--prompt` that are the prompt (SnapKV compresses after them; default: all but the
        /// last quarter).
        #[arg(long)]
        prompt_len: Option<usize>,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// Lesson 9's quality table: every eviction policy at budgets 16, 32, 64 and 128 tokens per KV head
    /// per layer, bits per byte over the held-out windows (128-token prompt, 128 tokens scored), the
    /// recall of a repeated 12-letter needle, the dead-slot fractions and the concentration of attention,
    /// as `eviction.json` (the lesson's stored copy is `assets/measurements/eviction.json`).
    EvictionTable {
        /// Held-out 256-token windows (at most 64 for tiny; SmolLM2's held-out text holds 2).
        #[arg(long, default_value_t = 64)]
        windows: usize,
        /// Recall trials.
        #[arg(long, default_value_t = 100)]
        trials: usize,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// KV-cache quantisation (lesson 10): the tiny model reads a text byte by byte from an empty cache in
    /// one format: k.npy, v.npy (f32), k_codes.npy, v_codes.npy (uint8, unpacked), k_scales.npy,
    /// v_scales.npy (and k_zeros.npy, v_zeros.npy for KIVI), k_deq.npy, v_deq.npy, out.npy, nll.npy and a
    /// manifest that defines each.
    Quant {
        #[arg(long, help = kvscope::cache::CacheFormat::names().join(" | "))]
        format: String,
        /// KIVI's group size G.
        #[arg(long, default_value_t = 32)]
        group: usize,
        /// KIVI's residual R (a multiple of G).
        #[arg(long, default_value_t = 32)]
        residual: usize,
        /// The text to read (at most the model's context). Default: the held-out text's first 256 tokens
        /// (the tiny model's file's bytes; SmolLM2's assets/texts/heldout-en.txt).
        #[arg(long, conflicts_with_all = ["requests", "context_lens", "max_context"])]
        prompt: Option<String>,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        /// Shape mode (instead of the model): this many requests of seeded random K/V rows.
        #[arg(long)]
        requests: Option<usize>,
        /// Shape mode: comma-separated context length of each request.
        #[arg(long, value_delimiter = ',', conflicts_with = "max_context")]
        context_lens: Option<Vec<usize>>,
        /// Shape mode: draw each request's context length from 1..=N with the seed.
        #[arg(long)]
        max_context: Option<usize>,
        /// Shape mode: tokens per block (a pool format's, and INT8 per channel's group).
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        /// Shape mode: blocks of a pool format's pools.
        #[arg(long, default_value_t = 64)]
        num_blocks: usize,
        /// Shape mode: query heads.
        #[arg(long, default_value_t = 4)]
        heads: usize,
        /// Shape mode: KV heads.
        #[arg(long, default_value_t = 2)]
        kv_heads: usize,
        /// Shape mode: head dimension.
        #[arg(long, default_value_t = 16)]
        head_dim: usize,
        /// Shape mode: seed of the rows, queries and drawn lengths.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// Every FP8 code: codes.npy (65,536 uint8: the code the encoder chooses for each f16 bit pattern,
    /// scale 1) and values.npy (256 f32: each code's value).
    Fp8Table {
        /// e4m3 | e5m2
        #[arg(long)]
        format: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Lesson 10's quality table: held-out bits per byte with the cache in each format (every 256-token
    /// window decoded token by token from an empty cache), as `quant.json` (the lesson's stored copy is
    /// `assets/measurements/quant.json`).
    QuantTable {
        /// Held-out 256-token windows (at most 64 for tiny; SmolLM2's held-out text holds 2).
        #[arg(long, default_value_t = 64)]
        windows: usize,
        /// KIVI's group size G.
        #[arg(long, default_value_t = 32)]
        group: usize,
        /// KIVI's residual R.
        #[arg(long, default_value_t = 32)]
        residual: usize,
        #[command(flatten)]
        model: crate::cli::ModelArgs,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// A paged-cache lesson's scheduler replay as `schedule.json`: the pool, then per step who was
    /// admitted, decoded, preempted, recomputed and finished, who runs and waits, the free blocks and
    /// the block tables.
    Schedule {
        /// The lesson (a lesson of kind `paged`).
        #[arg(long, default_value = "paged-cache")]
        lesson: String,
        /// Slider values, id=value (repeatable).
        #[arg(long = "set", value_parser = crate::cli::parse_set)]
        set: Vec<crate::cli::SetArg>,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// A prefix-caching lesson's replay as `prefix-schedule.json`: per event the block tables, the
    /// reference counts, the block hashes, the hits and misses, the copy-on-write copies (src → dst),
    /// the free list and the evictor.
    PrefixSchedule {
        /// The lesson (a lesson of kind `prefix`).
        #[arg(long, default_value = "prefix-cache")]
        lesson: String,
        /// Slider values, id=value (repeatable).
        #[arg(long = "set", value_parser = crate::cli::parse_set)]
        set: Vec<crate::cli::SetArg>,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
}
