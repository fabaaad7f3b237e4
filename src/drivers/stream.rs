//! A streaming decode (lesson 8, StreamingLLM): a long text fed byte by byte through the model, far past
//! its 256-byte training context, with the cache bounded by a policy.
//!
//! - **dense**: every byte stays;
//! - **window**: the most recent W bytes (the byte being read included);
//! - **sinks + window**: the first S bytes pinned, plus the most recent W;
//! - **recompute**: no cache; each step runs the model afresh on the last W bytes at positions 0…W−1
//!   (the quality reference StreamingLLM compares against, O(W²) per byte).
//!
//! The three cached policies go through a [`KvEngine`] (the paged cache): a policy's keep set frees the
//! blocks whose bytes have all left the window (back on the free list; the sink blocks are never
//! freed) and masks the window's edge inside the oldest kept block, so the cache stores between W and
//! W + B − 1 window bytes while the model sees exactly W. The pool holds exactly the bound
//! ⌈S/B⌉ + ⌈(W + B − 1)/B⌉ blocks: a policy that needed one more would fail with out-of-blocks.
//!
//! Keys are cached **before** RoPE and turned on read by the backend's `stream_decode` kernel, each at
//! the position the scheme gives it: with [`Positions::Cache`] the kept bytes in text order take 0, 1,
//! 2, … (StreamingLLM's choice: the distances stay inside what the model was trained on), with
//! [`Positions::Text`] each byte keeps its own. A kernel that turns keys on read makes the first scheme
//! read-only: a key turned when it was written could be moved too, since rotations compose (turning it
//! again by p′ − p takes it from p to p′), but every window key would then be turned and written back with
//! the `rope` op at every byte.

use web_time::Instant;

use ndarray::Array3;

use crate::cache::{KvDtype, PagedShape, RequestId};
use crate::compute::ops::rope::cos_sin_table;
use crate::compute::ops::stream_decode::{StreamDecodeInput, reference};
use crate::compute::{Backend, CheckReport, Tolerance, check};
use crate::kv::{EvictionPolicy, KvEngine};
use crate::model::{Model, TokenId};

/// Which bytes the cache keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum StreamPolicy {
    /// Every byte.
    Dense,
    /// The most recent W.
    Window,
    /// The first S and the most recent W (StreamingLLM).
    Sinks,
    /// No cache: the last W bytes recomputed from scratch each step.
    Recompute,
}

impl StreamPolicy {
    /// All four, in the lesson's order.
    pub const ALL: [StreamPolicy; 4] = [Self::Dense, Self::Window, Self::Sinks, Self::Recompute];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Dense => "dense",
            Self::Window => "window",
            Self::Sinks => "sinks",
            Self::Recompute => "recompute",
        }
    }

    /// The policy of a command-line name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Which position a kept byte's key is turned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Positions {
    /// Its rank among the bytes this step attends to (sinks first): StreamingLLM's scheme.
    Cache,
    /// Its position in the text.
    Text,
}

impl Positions {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cache => "cache",
            Self::Text => "text",
        }
    }

    /// The scheme of a command-line name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Cache, Self::Text].into_iter().find(|p| p.name() == s)
    }
}

/// A streaming run's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct StreamConfig {
    /// The policy.
    pub policy: StreamPolicy,
    /// The position scheme (the recompute policy always uses 0…W−1).
    pub positions: Positions,
    /// W: recent bytes a step attends to, the byte it reads included (≥ 1).
    pub window: usize,
    /// S: bytes from the start that stay (sinks + window); also the bytes whose attention mass is
    /// measured under every policy.
    pub sinks: usize,
    /// Tokens per block of the paged cache.
    pub block_size: usize,
}

impl StreamConfig {
    /// The most blocks the policy may hold: ⌈S/B⌉ + ⌈(W + B − 1)/B⌉ for sinks + window (S = 0 for a
    /// window), every block of the stream for dense; none for recompute. No policy holds more than the
    /// stream's own ⌈N/B⌉ blocks (a byte's block is its text position over B), so a window or sink
    /// count past the stream sizes the pool from the stream, not from the count.
    pub fn block_bound(&self, stream: usize) -> usize {
        let b = self.block_size.max(1);
        let all = stream.div_ceil(b);
        match self.policy {
            StreamPolicy::Dense => all,
            StreamPolicy::Window => self.window.saturating_add(b - 1).div_ceil(b).min(all),
            StreamPolicy::Sinks => (self.sinks.div_ceil(b) + self.window.saturating_add(b - 1).div_ceil(b)).min(all),
            StreamPolicy::Recompute => 0,
        }
    }

    /// Whether text byte `i` is kept for the step that reads byte `t` (i ≤ t).
    pub fn keeps(&self, i: usize, t: usize) -> bool {
        match self.policy {
            StreamPolicy::Dense => true,
            StreamPolicy::Window | StreamPolicy::Recompute => i + self.window > t,
            StreamPolicy::Sinks => i < self.sinks || i + self.window > t,
        }
    }
}

/// What a streaming run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRun<T = u8> {
    /// The settings.
    pub config: StreamConfig,
    /// The tokens read (bytes for the tiny model).
    pub tokens: Vec<T>,
    /// `nll[i]`: the natural-log loss of predicting byte i + 1 after reading byte i (`len − 1`).
    pub nll: Vec<f32>,
    /// Per step: blocks of the pool in use after the step's append and frees.
    pub blocks_in_use: Vec<u32>,
    /// Per step: tokens the cache stores (in its live blocks, masked ones included).
    pub stored: Vec<u32>,
    /// Per step: tokens the step attends to (the byte it reads included).
    pub attended: Vec<u32>,
    /// Per step: the largest position the step's query and keys are turned to.
    pub max_position: Vec<u32>,
    /// `[layer, query head, step]`: the attention mass the head puts on text bytes 0…S−1 (0 where they
    /// are not kept).
    pub sink_mass: Vec<f32>,
    /// Layers and query heads of `sink_mass`.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Blocks in the pool (the bound the policy is held to).
    pub pool_blocks: usize,
    /// The steps in `tables_at`: the step and its block table as (logical block, physical block) pairs,
    /// the live blocks in logical order (for the views).
    pub tables: Vec<(usize, Vec<(usize, u32)>)>,
    /// Seconds the run took on the backend.
    pub seconds: f64,
    /// With [`Model::stream_verified`]: the kernel's output and weights checked against the f64 reference
    /// on the same cache (the worst step's report, or the first that failed); `None` otherwise and for
    /// the recompute policy (its attention is the prefill's, checked by lessons 1–3).
    pub check: Option<CheckReport>,
    /// Kernel steps checked.
    pub checked_steps: usize,
}

impl<T> StreamRun<T> {
    /// Bits per byte: the sum of `nll` over ln 2 times its length.
    pub fn bits_per_byte(&self) -> f64 {
        let s: f64 = self.nll.iter().map(|&x| f64::from(x)).sum();
        s / (std::f64::consts::LN_2 * self.nll.len().max(1) as f64)
    }

    /// Bits per byte of the predictions made in steps `range` (clamped to the run).
    pub fn bits_per_byte_in(&self, range: std::ops::Range<usize>) -> f64 {
        let r = range.start.min(self.nll.len())..range.end.min(self.nll.len());
        let n = r.len().max(1) as f64;
        self.nll[r].iter().map(|&x| f64::from(x)).sum::<f64>() / (std::f64::consts::LN_2 * n)
    }

    /// The sink mass of `layer`, `head` at `step`.
    pub fn sink_mass_at(&self, layer: usize, head: usize, step: usize) -> f32 {
        let n = self.tokens.len();
        self.sink_mass
            .get((layer * self.heads + head) * n + step)
            .copied()
            .unwrap_or(0.0)
    }

    /// The mean sink mass of `layer`, `head` over steps `range` (clamped to the run).
    pub fn mean_sink_mass(&self, layer: usize, head: usize, range: std::ops::Range<usize>) -> f64 {
        let r = range.start.min(self.tokens.len())..range.end.min(self.tokens.len());
        let n = r.len().max(1) as f64;
        r.map(|s| f64::from(self.sink_mass_at(layer, head, s))).sum::<f64>() / n
    }
}

/// The keep set of the cached policies, asked before each step's append: for a request now `len` bytes
/// long, the bytes the step that reads byte `len` keeps.
struct Keep(StreamConfig);

impl EvictionPolicy for Keep {
    fn name(&self) -> &'static str {
        match self.0.policy {
            StreamPolicy::Window => "sliding window",
            _ => "attention sinks + window",
        }
    }

    fn keep(&mut self, _req: RequestId, len: usize) -> Option<Vec<bool>> {
        Some((0..len).map(|i| self.0.keeps(i, len)).collect())
    }
}

const REQ: RequestId = 0;

fn ln_softmax_at(logits: &[f32], target: usize) -> f32 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f64 = logits.iter().map(|&v| f64::from(v - m).exp()).sum();
    (f64::from(m) + z.ln() - f64::from(logits[target])) as f32
}

impl Model {
    /// Stream `text` byte by byte under `cfg` on `backend`. `tables_at` lists the steps whose block
    /// table the run keeps (for the views).
    pub fn stream<T: TokenId>(
        &self,
        text: &[T],
        cfg: StreamConfig,
        backend: &dyn Backend,
        tables_at: &[usize],
    ) -> Result<StreamRun<T>, String> {
        self.stream_verified(text, cfg, backend, tables_at, 0)
    }

    /// [`Model::stream`], with every `every`-th step's kernel launches (every layer) checked against the
    /// f64 reference on the same inputs (0: none).
    pub fn stream_verified<T: TokenId>(
        &self,
        text: &[T],
        cfg: StreamConfig,
        backend: &dyn Backend,
        tables_at: &[usize],
        every: usize,
    ) -> Result<StreamRun<T>, String> {
        let c = self.config;
        let n = text.len();
        if n < 2 {
            return Err("a stream needs at least two bytes (one to read, one to predict)".into());
        }
        if cfg.window == 0 || cfg.block_size == 0 {
            return Err("the window and the block size must be at least 1".into());
        }
        if cfg.policy == StreamPolicy::Recompute && cfg.window > c.context {
            return Err(format!(
                "recomputing a window of {} bytes needs a prefill longer than the model's context of {}",
                cfg.window, c.context
            ));
        }
        let (h, l_n) = (c.n_heads, c.n_layers);
        let mut run = StreamRun {
            config: cfg,
            tokens: text.to_vec(),
            nll: Vec::with_capacity(n - 1),
            blocks_in_use: Vec::with_capacity(n),
            stored: Vec::with_capacity(n),
            attended: Vec::with_capacity(n),
            max_position: Vec::with_capacity(n),
            sink_mass: vec![0.0; l_n * h * n],
            layers: l_n,
            heads: h,
            pool_blocks: cfg.block_bound(n),
            tables: Vec::new(),
            seconds: 0.0,
            check: None,
            checked_steps: 0,
        };
        let t0 = Instant::now();
        if cfg.policy == StreamPolicy::Recompute {
            self.stream_recompute(text, cfg, backend, &mut run)?;
        } else {
            self.stream_cached(text, cfg, backend, tables_at, every, &mut run)?;
        }
        run.seconds = t0.elapsed().as_secs_f64();
        Ok(run)
    }

    fn stream_recompute<T: TokenId>(
        &self,
        text: &[T],
        cfg: StreamConfig,
        backend: &dyn Backend,
        run: &mut StreamRun<T>,
    ) -> Result<(), String> {
        let (n, h) = (text.len(), self.config.n_heads);
        for t in 0..n {
            let start = (t + 1).saturating_sub(cfg.window);
            let pre = self.prefill(&text[start..=t], backend, false)?;
            let last = t - start;
            if t + 1 < n {
                run.nll.push(ln_softmax_at(
                    pre.logits.row(last).as_slice().unwrap_or_default(),
                    text[t + 1].index(),
                ));
            }
            run.blocks_in_use.push(0);
            run.stored.push(0);
            run.attended.push((last + 1) as u32);
            run.max_position.push(last as u32);
            for (l, probs) in pre.probs.iter().enumerate() {
                for head in 0..h {
                    let mass: f32 = (start..cfg.sinks.min(t + 1))
                        .map(|i| probs[[head, last, i - start]])
                        .sum();
                    run.sink_mass[(l * h + head) * n + t] = mass;
                }
            }
        }
        Ok(())
    }

    fn stream_cached<T: TokenId>(
        &self,
        text: &[T],
        cfg: StreamConfig,
        backend: &dyn Backend,
        tables_at: &[usize],
        every: usize,
        run: &mut StreamRun<T>,
    ) -> Result<(), String> {
        let c = self.config;
        let (n, h, hd) = (text.len(), c.n_heads, c.head_dim);
        let bs = cfg.block_size;
        let shape = PagedShape {
            num_blocks: run.pool_blocks.max(1),
            block_size: bs,
            kv_heads: c.n_kv_heads,
            head_dim: hd,
            dtype: KvDtype::F16,
        };
        let mut engine = KvEngine::new(shape, c.n_layers);
        let mut keep = Keep(cfg);
        // Positions a key or query may be turned to: the stream's length covers both schemes.
        let cos_sin = cos_sin_table(n.max(2), hd, c.rope_base);
        let err = |e: String| e;
        for t in 0..n {
            if cfg.policy != StreamPolicy::Dense && t > 0 {
                engine.evict(&mut keep, REQ).map_err(|e| err(e.to_string()))?;
            }
            let slot = engine
                .reserve(REQ, 1)
                .map_err(|e| format!("step {t}: the bounded pool ran out: {e}"))?[0];
            // The live tokens in table order, and the position each kept one is turned to (−1: masked).
            let tables = engine.tables(&[REQ]);
            let cols = tables.max_blocks * bs;
            let live_blocks: Vec<usize> = {
                let dropped: std::collections::BTreeSet<usize> = engine.cache().dropped(REQ).collect();
                (0..(t + 1).div_ceil(bs)).filter(|lb| !dropped.contains(lb)).collect()
            };
            let mut key_pos = vec![-1i32; cols];
            let mut text_pos = vec![usize::MAX; cols];
            let mut rank = 0i32;
            for (j, &lb) in live_blocks.iter().enumerate() {
                for i in lb * bs..((lb + 1) * bs).min(t + 1) {
                    let col = j * bs + i % bs;
                    text_pos[col] = i;
                    // The engine's validity mask (the policy's keep set, applied by `evict`) decides: the
                    // window's edge inside the oldest kept block, and the non-sink bytes of a sink block.
                    let slot = engine
                        .cache()
                        .slot(REQ, i)
                        .ok_or_else(|| format!("byte {i} has no slot"))?;
                    let kept = i == t || engine.is_valid(0, 0, slot);
                    debug_assert_eq!(kept, cfg.keeps(i, t), "step {t}, byte {i}");
                    if kept {
                        key_pos[col] = match cfg.positions {
                            Positions::Cache => rank,
                            Positions::Text => i as i32,
                        };
                        rank += 1;
                    }
                }
            }
            let q_pos = match cfg.positions {
                Positions::Cache => rank - 1,
                Positions::Text => t as i32,
            };
            run.attended.push(rank as u32);
            run.max_position.push(q_pos as u32);
            run.stored.push(engine.cache().live_len(REQ) as u32);
            run.blocks_in_use
                .push((shape.num_blocks - engine.cache().allocator().num_free()) as u32);
            if tables_at.contains(&t) {
                let phys = engine.cache().table(REQ).unwrap_or_default();
                run.tables
                    .push((t, live_blocks.iter().copied().zip(phys.iter().copied()).collect()));
            }
            // The engine records every event for the views that replay them; a stream of 16 KiB would
            // keep millions of them, so each step's are dropped.
            engine.take_events();
            let mut x = self.embed_tokens(&text[t..=t]);
            for (l, b) in self.blocks.iter().enumerate() {
                let hn = self.rms_norm(&x, &b.attention_norm);
                let (q, k, v) = self.qkv_unrotated(b, &hn);
                let flat = |a: &Array3<f32>| a.iter().copied().collect::<Vec<f32>>();
                engine
                    .write(backend, l, &[slot], &flat(&k), &flat(&v))
                    .map_err(|e| err(e.to_string()))?;
                let paged = engine
                    .masked_input(l, &tables, q.as_slice().unwrap_or_default(), h)
                    .map_err(|e| e.to_string())?;
                let inp = StreamDecodeInput {
                    paged,
                    q_pos: &[q_pos],
                    key_pos: &key_pos,
                    cos_sin: &cos_sin,
                };
                let got = backend
                    .stream_decode(&inp)
                    .map_err(|e| format!("step {t}, layer {l}: {e}"))?;
                if every > 0 && t % every == 0 {
                    let (want_out, want_p) = reference::stream_decode(&inp);
                    let label = format!("stream_decode step {t} layer {l}");
                    for r in [
                        check(
                            &format!("{label} out"),
                            &[1, h, hd],
                            &got.out,
                            &want_out,
                            Tolerance::F32,
                        ),
                        check(
                            &format!("{label} weights"),
                            &[1, h, cols],
                            &got.probs,
                            &want_p,
                            Tolerance::F32,
                        ),
                    ] {
                        let worse = run
                            .check
                            .as_ref()
                            .is_none_or(|w| w.passed() && (!r.passed() || r.max_abs > w.max_abs));
                        if worse {
                            run.check = Some(r);
                        }
                    }
                    if l == 0 {
                        run.checked_steps += 1;
                    }
                }
                for head in 0..h {
                    let p = &got.probs[head * cols..][..cols];
                    let mass: f32 = (0..cols).filter(|&j| text_pos[j] < cfg.sinks).map(|j| p[j]).sum();
                    run.sink_mass[(l * h + head) * n + t] = mass;
                }
                let o = Array3::from_shape_vec((h, 1, hd), got.out).map_err(|e| e.to_string())?;
                x = self.attn_residual(b, &x, &o);
                x = self.mlp(b, &x);
            }
            if t + 1 < n {
                let logits = self.logits(&x);
                run.nll.push(ln_softmax_at(
                    logits.row(0).as_slice().unwrap_or_default(),
                    text[t + 1].index(),
                ));
            }
        }
        Ok(())
    }
}
