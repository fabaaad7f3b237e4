//! `kvscope export speculative|serving|attention|paged-decode|logits|model-attention|streaming|eviction|eviction-table|quant|fp8-table|quant-table|schedule|prefix-schedule`: the tensors of one computation as `.npy` files plus
//! `manifest.json`, checked against the f64 reference; or a paged-cache lesson's scheduler replay as
//! `schedule.json`, or a prefix-caching lesson's replay as `prefix-schedule.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use kvscope::compute::BackendKind;
use kvscope::lessons::Output;
use kvscope::lessons::attention_layer::AttnOut;
use kvscope::lessons::export::{self, PagedDecodeParams};
use kvscope::lessons::paged_cache::PagedOut;
use kvscope::lessons::prefix_cache::PrefixOut;
use kvscope::math::{AttnShape, Mask, Rng};

use super::backend;

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
    /// The tiny trained model's next-byte logits on a prompt: tokens.npy `[T]`, logits.npy `[T, 256]`
    /// and the architecture constants in manifest.json.
    Logits {
        #[arg(long)]
        prompt: String,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// The tiny trained model's attention on a prompt: probs_layer{L}.npy `[H, T, T]` for every layer, the
    /// tokens, and each head's measured pattern label in manifest.json.
    ModelAttention {
        #[arg(long)]
        prompt: String,
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
        speculative: super::serving::SpecArg,
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
        policy: super::serving::ServePolicy,
        /// Tokens one step may schedule (vLLM's max_num_batched_tokens).
        #[arg(long, default_value_t = 32)]
        budget: usize,
        /// The most prefill tokens one request gets in a step (vLLM's long_prefill_token_threshold; 0: no cap).
        #[arg(long, default_value_t = 0)]
        chunk: usize,
        /// Requests as arrival_step:prompt_bytes:generated_bytes (prompts are pieces of the held-out text);
        /// default: 0:24:40 0:16:40 2:32:40 6:192:8.
        #[arg(long, num_args = 1.., value_parser = super::serving::parse_request)]
        requests: Vec<(usize, usize, usize)>,
        /// Blocks in the pool.
        #[arg(long, default_value_t = 128)]
        blocks: usize,
        /// Tokens per block.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
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
        /// Bytes of the held-out file to stream (default: all of it, 16384).
        #[arg(long)]
        bytes: Option<usize>,
        /// A model file instead of the embedded one (`scripts/train-tiny-model.py --start-byte 2` writes
        /// lesson 8's variant; a model trained with a start byte reads it first).
        #[arg(long)]
        model: Option<PathBuf>,
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
        /// Read the held-out file's first 256 bytes instead: a 128-byte prompt, then 128 bytes decoded.
        #[arg(long)]
        heldout: bool,
        /// Bytes of `--prompt` that are the prompt (SnapKV compresses after them; default: all but the
        /// last quarter).
        #[arg(long)]
        prompt_len: Option<usize>,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// Lesson 9's quality table: every eviction policy at budgets 16, 32, 64 and 128 tokens per KV head
    /// per layer, bits per byte over the held-out windows (128-byte prompt, 128 bytes scored), the
    /// recall of a repeated 12-byte needle, the dead-slot fractions and the concentration of attention,
    /// as `eviction.json` (the lesson's stored copy is `assets/measurements/eviction.json`).
    EvictionTable {
        /// Held-out 256-byte windows (at most 64).
        #[arg(long, default_value_t = 64)]
        windows: usize,
        /// Recall trials.
        #[arg(long, default_value_t = 100)]
        trials: usize,
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
        /// The text to read (its bytes; at most the model's context of 256). Default: the held-out file's
        /// first 256 bytes.
        #[arg(long, conflicts_with_all = ["requests", "context_lens", "max_context"])]
        prompt: Option<String>,
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
    /// Lesson 10's quality table: held-out bits per byte with the cache in each format (every 256-byte
    /// window decoded byte by byte from an empty cache), as `quant.json` (the lesson's stored copy is
    /// `assets/measurements/quant.json`).
    QuantTable {
        /// Held-out 256-byte windows (at most 64).
        #[arg(long, default_value_t = 64)]
        windows: usize,
        /// KIVI's group size G.
        #[arg(long, default_value_t = 32)]
        group: usize,
        /// KIVI's residual R.
        #[arg(long, default_value_t = 32)]
        residual: usize,
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
        #[arg(long = "set", value_parser = super::parse_set)]
        set: Vec<super::SetArg>,
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
        #[arg(long = "set", value_parser = super::parse_set)]
        set: Vec<super::SetArg>,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
}

/// Compute lesson `lesson` with the `set` sliders on backend `kind` and write its replay, which
/// `replay` reads from the output (or names the kind of lesson it needs), as `out/file`.
fn write_replay(
    lesson: &str,
    set: Vec<super::SetArg>,
    kind: BackendKind,
    out: &Path,
    lessons: Option<&Path>,
    file: &str,
    replay: impl Fn(&dyn Output) -> Result<(serde_json::Value, String), &'static str>,
) -> Result<()> {
    let all = super::load_lessons(lessons)?;
    let Some(l) = all.iter().find(|l| l.id() == lesson) else {
        let ids: Vec<&str> = all.iter().map(|l| l.id()).collect();
        bail!("no lesson `{lesson}` (lessons: {})", ids.join(", "));
    };
    let set = super::check_sets(&[l], &set)?;
    let mut params = kvscope::lessons::Params::new();
    kvscope::lessons::apply_set(l, &mut params, &set).map_err(|e| anyhow::anyhow!(e))?;
    let b = backend(kind)?;
    let computed = kvscope::lessons::compute(l, &params, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
    let (json, what) = match replay(computed.as_ref()) {
        Ok(r) => r,
        Err(needed) => bail!("lesson `{lesson}` is of kind `{}`, not {needed}", l.kind.name()),
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    outln!("wrote {} ({what})", path.display());
    Ok(())
}

/// The arrays and manifest entries of the tiny model on `prompt`.
type ModelArrays = (Vec<export::NamedArray>, serde_json::Map<String, serde_json::Value>);

/// `export logits` / `export model-attention`: run `arrays` on backend `kind` and write them as `kind_name`.
fn model_export(
    kind: BackendKind,
    prompt: &str,
    out: &Path,
    kind_name: &str,
    arrays: fn(&dyn kvscope::compute::Backend, &[u8]) -> Result<ModelArrays>,
) -> Result<()> {
    let b = backend(kind)?;
    let (arrays, extra) = arrays(b.as_ref(), prompt.as_bytes())?;
    let params = serde_json::json!({ "prompt": prompt });
    export::write_export_with(out, kind_name, params, 0, b.as_ref(), &[], &arrays, extra)?;
    outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
    Ok(())
}

fn parse_policy(s: &str) -> Result<kvscope::drivers::stream::StreamPolicy, String> {
    kvscope::drivers::stream::StreamPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: dense, window, sinks or recompute"))
}

fn parse_evict_policy(s: &str) -> Result<kvscope::drivers::evict::EvictPolicy, String> {
    kvscope::drivers::evict::EvictPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: full, window, sinks, h2o, snapkv or random"))
}

fn parse_positions(s: &str) -> Result<kvscope::drivers::stream::Positions, String> {
    kvscope::drivers::stream::Positions::parse(s)
        .ok_or_else(|| format!("`{s}` is not a position scheme: cache or text"))
}

/// Run `kvscope export …`.
pub fn run(cmd: ExportCmd, lessons: Option<PathBuf>) -> Result<()> {
    match cmd {
        ExportCmd::Schedule {
            lesson,
            set,
            backend: kind,
            out,
        } => write_replay(&lesson, set, kind, &out, lessons.as_deref(), "schedule.json", |o| {
            o.downcast_ref::<PagedOut>()
                .map(|r| (r.schedule(), format!("{} steps", r.frames.len())))
                .ok_or("a paged-cache lesson")
        })?,
        ExportCmd::PrefixSchedule {
            lesson,
            set,
            backend: kind,
            out,
        } => write_replay(
            &lesson,
            set,
            kind,
            &out,
            lessons.as_deref(),
            "prefix-schedule.json",
            |o| {
                o.downcast_ref::<PrefixOut>()
                    .map(|r| (r.schedule(), format!("{} events", r.frames.len())))
                    .ok_or("a prefix-caching lesson")
            },
        )?,
        ExportCmd::Quant {
            format,
            group,
            residual,
            prompt,
            requests,
            context_lens,
            max_context,
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
            backend: kind,
            out,
        } => {
            use kvscope::cache::CacheFormat;
            let fmt = CacheFormat::parse(&format, group, residual).ok_or_else(|| {
                let known: Vec<String> = CacheFormat::all(group, residual)
                    .iter()
                    .map(CacheFormat::name)
                    .collect();
                anyhow::anyhow!("unknown format `{format}` (known: {})", known.join(", "))
            })?;
            if requests.is_some() || context_lens.is_some() || max_context.is_some() {
                let lens = match (context_lens, max_context) {
                    (Some(l), _) => {
                        if requests.is_some_and(|r| r != l.len()) {
                            bail!(
                                "--context-lens has {} values but --requests is {}",
                                l.len(),
                                requests.unwrap_or(0)
                            );
                        }
                        l
                    }
                    (None, Some(n)) if n >= 1 => {
                        let mut rng = Rng::stream(seed, 3);
                        (0..requests.unwrap_or(2)).map(|_| 1 + rng.below(n)).collect()
                    }
                    _ => bail!("shape mode needs --context-lens or --max-context N (N >= 1)"),
                };
                let sp = kvscope::lessons::quant::export::QuantShapes {
                    lens: lens.clone(),
                    block_size,
                    num_blocks,
                    heads,
                    kv_heads,
                    head_dim,
                    seed,
                };
                let b = backend(kind)?;
                let (arrays, extra) = kvscope::lessons::quant::export::quant_shapes(b.as_ref(), fmt, &sp)?;
                let chk = extra["quant"]["check"].clone();
                let params = serde_json::json!({
                    "format": format, "group": group, "residual": residual, "context_lens": lens,
                    "block_size": block_size, "num_blocks": num_blocks, "heads": heads, "kv_heads": kv_heads,
                    "head_dim": head_dim, "seed": seed,
                });
                export::write_export_with(&out, "quant", params, seed, b.as_ref(), &[], &arrays, extra)?;
                outln!(
                    "{format}: {} requests ({lens:?} tokens); decode against the f64 reference: max abs error {}; wrote {}",
                    lens.len(),
                    chk["max_abs_err"],
                    out.display()
                );
                return Ok(());
            }
            let (text, source) = match prompt {
                Some(p) => (p.into_bytes(), "--prompt".to_string()),
                None => (
                    kvscope::model::HELDOUT[..256].to_vec(),
                    "the first 256 bytes of assets/models/kvscope-tiny.heldout.txt".to_string(),
                ),
            };
            let b = backend(kind)?;
            let (arrays, extra) = kvscope::lessons::quant::export::quant(b.as_ref(), fmt, &text, &source)?;
            let q = extra["quant"].clone();
            let params =
                serde_json::json!({"format": format, "group": group, "residual": residual, "bytes": text.len()});
            export::write_export_with(&out, "quant", params, 0, b.as_ref(), &[], &arrays, extra)?;
            outln!(
                "{format}: {:.4} bits per byte over {} bytes; attention output error (RMS over RMS) {}; wrote {}",
                q["bits_per_byte"].as_f64().unwrap_or(f64::NAN),
                text.len(),
                q["out_rel_rms_per_layer"],
                out.display()
            );
        }
        ExportCmd::Fp8Table { format, out } => {
            use kvscope::cache::dtype::quant::{E4M3, E5M2};
            let f = match format.as_str() {
                "e4m3" => E4M3,
                "e5m2" => E5M2,
                other => bail!("unknown FP8 format `{other}` (known: e4m3, e5m2)"),
            };
            let arrays = kvscope::lessons::quant::export::fp8_table(f);
            let mut extra = serde_json::Map::new();
            extra.insert(
                "fp8".into(),
                serde_json::json!({
                    "format": f.name, "exponent_bits": f.ebits, "mantissa_bits": f.mbits, "bias": f.bias,
                    "max": f.max(), "max_code": f.max_code, "nan_code": kvscope::cache::dtype::quant::FP8_NAN,
                    "infinities": f.ieee,
                    "codes": "codes[b] = the code chosen for the f16 value with bit pattern b, scale 1: round to nearest, ties to even (subnormals included), finite values beyond +-max and +-Inf saturate to +-max, NaN -> nan_code",
                    "values": "values[c] = the value of code c (NaN where c is a NaN code; +-Inf for E5M2's 0x7C/0xFC)",
                }),
            );
            export::write_export_with(
                &out,
                "fp8-table",
                serde_json::json!({"format": format}),
                0,
                &kvscope::compute::CpuBackend,
                &[],
                &arrays,
                extra,
            )?;
            outln!("{}: 65536 codes and 256 values; wrote {}", f.name, out.display());
        }
        ExportCmd::QuantTable {
            windows,
            group,
            residual,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let m = kvscope::model::shared()?;
            let t0 = std::time::Instant::now();
            let mut table = m
                .quant_table(b.as_ref(), windows, group, residual)
                .map_err(|e| anyhow::anyhow!(e))?;
            // The decode speed per 8-bit format against f16, in one run (kvscope bench's p3-* lines).
            let (pools, groups) = kvscope::cache::CacheFormat::decode_bench(group, residual);
            let groups: Vec<(&str, kvscope::cache::GroupFormat)> =
                groups.iter().map(|(n, g)| (n.as_str(), *g)).collect();
            let lines = kvscope::lessons::quant::bench::p3_quant(b.as_ref(), 8, 8192, &pools, &groups, 9)?;
            table.bench = Some(kvscope::drivers::quant::QuantBench {
                backend: b.kind().name().to_string(),
                machine: b.device(),
                requests: 8,
                context: 8192,
                lines: lines
                    .iter()
                    .map(|l| kvscope::drivers::quant::QuantBenchLine {
                        format: l.format.clone(),
                        tokens_per_s: l.tokens_per_s,
                        bytes_read: l.bytes_read,
                        speedup: l.speedup,
                    })
                    .collect(),
            });
            std::fs::create_dir_all(&out)?;
            let path = out.join("quant.json");
            std::fs::write(&path, serde_json::to_string_pretty(&table)? + "\n")?;
            outln!("{:<16} {:>8} {:>10} {:>7}", "format", "bits/B", "out err", "kernel");
            for c in &table.cells {
                outln!(
                    "{:<16} {:>8.4} {:>10.5} {:>7}",
                    c.format,
                    c.bits_per_byte,
                    c.out_rel_rms,
                    c.kernel
                );
            }
            outln!(
                "{} windows on {}, {:.0} s; wrote {}",
                table.windows,
                table.backend,
                t0.elapsed().as_secs_f64(),
                path.display()
            );
        }
        ExportCmd::EvictionTable {
            windows,
            trials,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let m = kvscope::model::shared()?;
            let t0 = std::time::Instant::now();
            let table = m
                .eviction_table(b.as_ref(), windows, trials)
                .map_err(|e| anyhow::anyhow!(e))?;
            std::fs::create_dir_all(&out)?;
            let path = out.join("eviction.json");
            std::fs::write(&path, serde_json::to_string_pretty(&table)? + "\n")?;
            outln!(
                "{:<8} {:>4} {:>8} {:>7} {:>6}",
                "policy",
                "K",
                "bits/B",
                "recall",
                "dead"
            );
            for c in &table.cells {
                outln!(
                    "{:<8} {:>4} {:>8.4} {:>7.3} {:>6.3}",
                    c.policy,
                    c.budget,
                    c.bits_per_byte,
                    c.recall,
                    c.dead_fraction
                );
            }
            outln!(
                "{} windows, {} trials on {}, {:.0} s; wrote {}",
                table.windows,
                table.trials,
                table.backend,
                t0.elapsed().as_secs_f64(),
                path.display()
            );
        }
        ExportCmd::Eviction {
            policy,
            budget,
            recent,
            obs_window,
            pool_kernel,
            seed,
            block_size,
            prompt,
            heldout,
            prompt_len,
            backend: kind,
            out,
        } => {
            let cfg = kvscope::drivers::evict::EvictConfig {
                policy,
                budget,
                recent,
                obs_window,
                pool_kernel,
                seed,
                block_size,
            };
            let (text, source, plen) = match prompt {
                Some(p) if !heldout => {
                    let t = p.into_bytes();
                    let plen = prompt_len.unwrap_or(t.len() - t.len() / 4);
                    (t, "--prompt".to_string(), plen)
                }
                _ => (
                    kvscope::model::HELDOUT[..256].to_vec(),
                    "the first 256 bytes of assets/models/kvscope-tiny.heldout.txt".to_string(),
                    prompt_len.unwrap_or(128),
                ),
            };
            let b = backend(kind)?;
            let (arrays, extra) = kvscope::lessons::eviction::export::eviction(b.as_ref(), cfg, &text, plen, &source)?;
            let params = serde_json::json!({
                "policy": policy.name(), "budget": budget, "recent": cfg.recent_tokens(),
                "obs_window": cfg.window_tokens(), "pool_kernel": pool_kernel, "seed": seed,
                "block_size": block_size, "prompt_length": plen, "bytes": text.len(),
            });
            let e = extra["eviction"].clone();
            export::write_export_with(&out, "eviction", params, 0, b.as_ref(), &[], &arrays, extra)?;
            outln!(
                "{} at K = {budget} tokens per KV head per layer: {:.4} bits per byte after the {plen}-byte prompt, \
                 dead fraction {:.3}; wrote {}",
                policy.name(),
                e["bits_per_byte_after_prompt"].as_f64().unwrap_or(f64::NAN),
                e["dead_fraction"].as_f64().unwrap_or(f64::NAN),
                out.display()
            );
        }
        ExportCmd::Speculative {
            speculative,
            k,
            prompt,
            tokens,
            temperature,
            seed,
            block_size,
            backend: kind,
            out,
        } => {
            use kvscope::drivers::spec::{Drafter, SpecConfig};
            let b = backend(kind)?;
            let model = kvscope::model::shared().map_err(|e| anyhow::anyhow!("{e}"))?;
            let (text, source) = match prompt {
                Some(p) => (p.into_bytes(), "--prompt"),
                None => (
                    kvscope::model::HELDOUT[..128].to_vec(),
                    "the first 128 bytes of assets/models/kvscope-tiny.heldout.txt",
                ),
            };
            let cfg = |drafter| SpecConfig {
                drafter,
                k,
                temperature,
                seed,
                block_size,
            };
            let run = model
                .speculative(&text, tokens, &cfg(super::serving::drafter(speculative)?), b.as_ref())
                .map_err(|e| anyhow::anyhow!(e))?;
            let plain = model
                .speculative(&text, tokens, &cfg(Drafter::None), b.as_ref())
                .map_err(|e| anyhow::anyhow!(e))?;
            let mut json = super::serving::spec_report(&run, &plain, temperature <= 0.0);
            json["params"] = serde_json::json!({
                "k": k, "tokens": tokens, "temperature": temperature, "seed": seed, "block_size": block_size,
                "backend": kind.name(), "device": b.device(), "prompt": String::from_utf8_lossy(&text),
                "prompt_bytes": text, "prompt_source": source,
            });
            std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
            let path = out.join("speculative.json");
            std::fs::write(&path, serde_json::to_string_pretty(&json)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
            super::serving::print_spec(&json);
            outln!("wrote {}", path.display());
        }
        ExportCmd::Serving {
            policy,
            budget,
            chunk,
            requests,
            blocks,
            block_size,
            backend: kind,
            out,
        } => {
            let requests = if requests.is_empty() {
                kvscope::drivers::serve::DEFAULT_SCENARIO.to_vec()
            } else {
                requests
            };
            super::serving::export(super::serving::ServingArgs {
                policy,
                budget,
                chunk,
                requests: &requests,
                blocks,
                block_size,
                backend: kind,
                out: &out,
            })?;
        }
        ExportCmd::Streaming {
            policy,
            positions,
            window,
            sinks,
            block_size,
            bytes,
            model,
            backend: kind,
            out,
        } => {
            let cfg = kvscope::drivers::stream::StreamConfig {
                policy,
                positions,
                window,
                sinks,
                block_size,
            };
            let b = backend(kind)?;
            let bytes = bytes.unwrap_or(kvscope::model::HELDOUT.len());
            let (arrays, extra) =
                kvscope::lessons::streaming::export::streaming(b.as_ref(), cfg, bytes, model.as_deref())?;
            let params = serde_json::json!({
                "policy": policy.name(), "positions": positions.name(), "window": window, "sinks": sinks,
                "block_size": block_size, "bytes": bytes,
            });
            let s = extra["streaming"].clone();
            export::write_export_with(&out, "streaming", params, 0, b.as_ref(), &[], &arrays, extra)?;
            outln!(
                "{} ({} positions), W = {window}, S = {sinks}, B = {block_size}: {:.4} bits per byte over {} bytes, \
                 at most {} blocks in use, {:.1} s; wrote {}",
                policy.name(),
                positions.name(),
                s["bits_per_byte"].as_f64().unwrap_or(f64::NAN),
                s["bytes"],
                s["max_blocks_in_use"],
                s["seconds"].as_f64().unwrap_or(0.0),
                out.display()
            );
        }
        ExportCmd::Logits {
            prompt,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "logits", export::model_logits)?,
        ExportCmd::ModelAttention {
            prompt,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "model-attention", export::model_attention)?,
        ExportCmd::Attention {
            seq,
            d_model,
            heads,
            kv_heads,
            mask,
            seed,
            kernel,
            block_q,
            block_k,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let shape = AttnShape {
                seq,
                d_model,
                n_heads: heads,
                n_kv_heads: kv_heads,
            };
            let layer = AttnOut::compute(shape, mask, seed, false, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
            let (mut arrays, mut checks) = (layer.arrays(), layer.verify());
            let mut params = serde_json::json!({"seq": seq, "d_model": d_model, "heads": heads, "kv_heads": kv_heads,
                "head_dim": d_model / heads, "mask": mask.to_string(), "seed": seed});
            let mut extra = serde_json::Map::new();
            if kernel == Kernel::Flash {
                let (a, c, io) = export::flash_arrays(
                    b.as_ref(),
                    &layer.qkv.q,
                    &layer.qkv.k,
                    &layer.qkv.v,
                    mask,
                    block_q,
                    block_k,
                )?;
                arrays.push(a);
                checks.push(c);
                params["kernel"] = "flash".into();
                params["block_q"] = block_q.into();
                params["block_k"] = block_k.into();
                extra.insert("io".into(), io);
            }
            export::write_export_with(&out, "attention", params, seed, b.as_ref(), &checks, &arrays, extra)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
        ExportCmd::PagedDecode {
            requests,
            context_lens,
            max_context,
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let lens = match (context_lens, max_context) {
                (Some(l), _) => {
                    if l.len() != requests {
                        bail!("--context-lens has {} values but --requests is {requests}", l.len());
                    }
                    l
                }
                (None, Some(n)) if n >= 1 => {
                    let mut rng = Rng::stream(seed, 3);
                    (0..requests).map(|_| 1 + rng.below(n)).collect()
                }
                (None, Some(_)) => bail!("--max-context must be at least 1"),
                (None, None) => bail!("give --context-lens a,b,... or --max-context N"),
            };
            let p = PagedDecodeParams {
                context_lens: lens,
                block_size,
                num_blocks,
                heads,
                kv_heads,
                head_dim,
            };
            let (arrays, checks) = export::paged_decode_arrays(b.as_ref(), &p, seed)?;
            let mut params = serde_json::to_value(&p)?;
            params["requests"] = requests.into();
            params["seed"] = seed.into();
            export::write_export(&out, "paged-decode", params, seed, b.as_ref(), &checks, &arrays)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
    }
    Ok(())
}
