//! Eviction by importance (lesson 9): which tokens a bounded cache keeps, chosen per layer and per KV
//! head, on the trained model, every step a real decode through the paged cache.
//!
//! Every policy has the same **budget K: tokens kept per KV head per layer**. It counts the tokens a
//! step attends to, the one it reads included: after the step's append and before its attention, while
//! more than K would be kept, one token is evicted (lesson 8's window counts the same way).
//!
//! - **full**: no eviction;
//! - **window**: the most recent K;
//! - **sinks**: the first 4 and the most recent K − 4 (lesson 8's StreamingLLM policy);
//! - **h2o**: the most recent R (default K/2) and the heavy hitters: a token's score is the sum, over
//!   every earlier query, of the mass its KV head's query group put on it (with the keep set then in
//!   force); the one evicted has the lowest score outside the recent R, the older on ties;
//! - **snapkv**: nothing until the end of the prompt; then the last w prompt queries vote (their group
//!   mass on each earlier prompt token, summed), the votes are average-pooled along the key axis
//!   (kernel k, zero padding k/2, as `F.avg_pool1d` with `count_include_pad`), and the top K − w tokens
//!   are kept with the window of w. Decoding then goes on without eviction. The reference code selects
//!   per query head; selecting per KV head over its group's summed votes is this project's adaptation to
//!   GQA;
//! - **random**: a uniformly random token outside the most recent R, seeded (the floor).
//!
//! The bytes are fed one decode step each (a prompt's rows are the same causal rows a prefill computes;
//! SnapKV's observation window is the prompt's last w steps). Attention runs through the backend's
//! `score_decode`, which returns each KV head's group mass per token and reads the engine's validity mask
//! per (layer, KV head, slot): keep sets differ per KV head, so eviction leaves holes inside blocks, and
//! a block goes back to the pool only when no layer and no KV head keeps any of its tokens.

use web_time::Instant;

use ndarray::Array3;

use crate::cache::{KvDtype, PagedShape, RequestId};
use crate::compute::ops::score_decode::{ScoreDecodeInput, reference};
use crate::compute::{Backend, CheckReport, Tolerance, check};
use crate::kv::KvEngine;
use crate::math::Rng;
use crate::model::{Model, TokenId};

mod table;
pub use table::{BUDGETS, NEEDLE_AT, NEEDLE_LEN, QualityCell, QualityTable, REPEAT_AT, recall_hits, recall_text};

/// Which tokens stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum EvictPolicy {
    /// Every token.
    Full,
    /// The most recent K.
    Window,
    /// The first 4 and the most recent K − 4.
    Sinks,
    /// Heavy hitters by accumulated attention, plus the most recent R.
    H2o,
    /// Chosen once at the end of the prompt by the observation window's pooled votes.
    SnapKv,
    /// A random token outside the most recent R.
    Random,
}

impl EvictPolicy {
    /// All six, in the lesson's order.
    pub const ALL: [EvictPolicy; 6] = [
        Self::Full,
        Self::Window,
        Self::Sinks,
        Self::H2o,
        Self::SnapKv,
        Self::Random,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Window => "window",
            Self::Sinks => "sinks",
            Self::H2o => "h2o",
            Self::SnapKv => "snapkv",
            Self::Random => "random",
        }
    }

    /// The policy of a command-line name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Sinks the sinks policy keeps (lesson 8's S).
pub const SINKS: usize = 4;

/// An eviction run's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct EvictConfig {
    /// The policy.
    pub policy: EvictPolicy,
    /// K: tokens kept per KV head per layer, the one a step reads included.
    pub budget: usize,
    /// R: the recent tokens H2O and random never evict (`None`: K/2).
    pub recent: Option<usize>,
    /// w: SnapKV's observation window (`None`: min(32, K/2)).
    pub obs_window: Option<usize>,
    /// k: SnapKV's pooling kernel (odd).
    pub pool_kernel: usize,
    /// The random policy's seed.
    pub seed: u64,
    /// Tokens per block of the paged cache.
    pub block_size: usize,
}

impl EvictConfig {
    /// `policy` at budget `budget` with the defaults (R = K/2, w = min(32, K/2), k = 5, seed 0, B = 16).
    pub fn new(policy: EvictPolicy, budget: usize) -> Self {
        Self {
            policy,
            budget,
            recent: None,
            obs_window: None,
            pool_kernel: 5,
            seed: 0,
            block_size: 16,
        }
    }

    /// R in force.
    pub fn recent_tokens(&self) -> usize {
        self.recent.unwrap_or(self.budget / 2).max(1)
    }

    /// w in force.
    pub fn window_tokens(&self) -> usize {
        self.obs_window.unwrap_or((self.budget / 2).min(32)).max(1)
    }

    /// Why these settings cannot run, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let k = self.budget;
        if k < 2 {
            return Err(format!(
                "the budget is {k}: a step attends to at least the token it reads and one more"
            ));
        }
        if self.block_size == 0 {
            return Err("the block size must be at least 1".into());
        }
        if self.policy == EvictPolicy::Sinks && k <= SINKS {
            return Err(format!(
                "sinks + window keeps {SINKS} sinks and needs a budget above {SINKS}; it is {k}"
            ));
        }
        let r = self.recent_tokens();
        if matches!(self.policy, EvictPolicy::H2o | EvictPolicy::Random) && r > k {
            return Err(format!("the recent tokens R = {r} must fit in the budget K = {k}"));
        }
        let w = self.window_tokens();
        if self.policy == EvictPolicy::SnapKv {
            if w >= k {
                return Err(format!(
                    "the observation window w = {w} must be below the budget K = {k}"
                ));
            }
            if self.pool_kernel.is_multiple_of(2) {
                return Err(format!("the pooling kernel must be odd (it is {})", self.pool_kernel));
            }
        }
        Ok(())
    }
}

/// What an eviction run measured. Per-step arrays are kept when the run records them.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictRun<T = u8> {
    /// The settings.
    pub config: EvictConfig,
    /// The bytes read.
    pub tokens: Vec<T>,
    /// The prompt length (SnapKV compresses when the step after it starts).
    pub prompt_len: usize,
    /// Layers and KV heads of the keep sets.
    pub layers: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Query heads.
    pub heads: usize,
    /// `nll[i]`: the natural-log loss of byte i + 1 after reading byte i.
    pub nll: Vec<f32>,
    /// `top1[i]`: whether the most likely next byte after reading byte i was byte i + 1.
    pub top1: Vec<bool>,
    /// Per step, per (layer, KV head): the text indices the step attends to, ascending (recorded runs).
    pub kept: Vec<Vec<Vec<u32>>>,
    /// Per step `[layer, KV head, T]`: the accumulated scores after the step (recorded runs).
    pub scores: Vec<Vec<f32>>,
    /// `[layer, KV head, T]`: the accumulated scores at the end.
    pub final_scores: Vec<f64>,
    /// With every step checked: the same sums of the f64 reference's group mass.
    pub reference_scores: Option<Vec<f64>>,
    /// Per step: the most tokens any (layer, KV head) attends to.
    pub attended: Vec<u32>,
    /// Per step: slots of allocated blocks that hold an evicted token, over all layers and KV heads.
    pub dead_slots: Vec<u32>,
    /// Per step: slots of the allocated blocks, over all layers and KV heads.
    pub allocated_slots: Vec<u32>,
    /// Per step: blocks in use.
    pub blocks_in_use: Vec<u32>,
    /// `[layer, query head]`: the mean, over the steps that attend to at least 10 tokens, of the share of
    /// the head's mass on its top 10% of tokens.
    pub top10_share: Vec<f64>,
    /// Per step `[layer, query head, T]`: each head's weights by text index (runs that record them).
    pub probs: Vec<Vec<f32>>,
    /// SnapKV: `[layer, KV head, prompt − w]` the pooled votes it selected by (empty otherwise).
    pub pooled_votes: Vec<f64>,
    /// Bytes the kernel writes beyond a plain decode's output, summed over the run: the group scores
    /// (R·KVH·T·4 per layer) and the per-head weights (R·H·T·4 per layer).
    pub score_bytes: u64,
    /// Bytes the decode reads, summed over the run: K and V of the attended tokens (f16) and the
    /// validity mask of every live column (4 bytes per KV head).
    pub read_bytes: u64,
    /// Per step: the logical blocks dropped so far (recorded runs).
    pub dropped: Vec<Vec<usize>>,
    /// Seconds the run took.
    pub seconds: f64,
    /// With checks: the worst kernel report (or the first that failed).
    pub check: Option<CheckReport>,
    /// Kernel steps checked.
    pub checked_steps: usize,
}

impl<T> EvictRun<T> {
    /// Bits per byte of the predictions made in steps `range` (clamped).
    pub fn bits_per_byte_in(&self, range: std::ops::Range<usize>) -> f64 {
        let r = range.start.min(self.nll.len())..range.end.min(self.nll.len());
        let n = r.len().max(1) as f64;
        self.nll[r].iter().map(|&x| f64::from(x)).sum::<f64>() / (std::f64::consts::LN_2 * n)
    }

    /// The dead fraction over the run: dead slots over slots of allocated blocks, summed over the steps.
    pub fn dead_fraction(&self) -> f64 {
        let d: u64 = self.dead_slots.iter().map(|&x| u64::from(x)).sum();
        let a: u64 = self.allocated_slots.iter().map(|&x| u64::from(x)).sum();
        d as f64 / a.max(1) as f64
    }

    /// Accumulated score of text index `i` for `layer`, `kv_head` at the end.
    pub fn final_score(&self, layer: usize, kv_head: usize, i: usize) -> f64 {
        let n = self.tokens.len();
        self.final_scores[(layer * self.kv_heads + kv_head) * n + i]
    }
}

/// Options of a run beyond its settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvictOptions {
    /// Keep the per-step keep sets and scores (exports and views).
    pub record: bool,
    /// Check every `every`-th step's kernel launches against the f64 reference (0: none; 1 also sums the
    /// reference's scores).
    pub every: usize,
    /// Keep each head's weights at every step.
    pub probs: bool,
}

const REQ: RequestId = 0;

fn ln_softmax_at(logits: &[f32], target: usize) -> (f32, bool) {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f64 = logits.iter().map(|&v| f64::from(v - m).exp()).sum();
    let best = logits
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |a, (i, &v)| if v > a.1 { (i, v) } else { a });
    (
        (f64::from(m) + z.ln() - f64::from(logits[target])) as f32,
        best.0 == target,
    )
}

/// SnapKV's selection for one (layer, KV head): `votes` over the prompt's tokens before the window,
/// average-pooled with kernel `k` (zero padding k/2, divided by k), the top `keep` by pooled vote (the
/// older on ties). Returns the pooled votes and the chosen indices, ascending.
pub fn snapkv_select(votes: &[f64], k: usize, keep: usize) -> (Vec<f64>, Vec<usize>) {
    let n = votes.len();
    let half = k / 2;
    let pooled: Vec<f64> = (0..n)
        .map(|i| {
            let lo = i.saturating_sub(half);
            let hi = (i + half).min(n.saturating_sub(1));
            votes[lo..=hi].iter().sum::<f64>() / k as f64
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| pooled[b].total_cmp(&pooled[a]).then(a.cmp(&b)));
    let mut chosen: Vec<usize> = order.into_iter().take(keep).collect();
    chosen.sort_unstable();
    (pooled, chosen)
}

impl Model {
    /// Feed `text` byte by byte under `cfg` (SnapKV compresses after the first `prompt_len` bytes) on
    /// `backend`.
    pub fn evict_run<T: TokenId>(
        &self,
        text: &[T],
        prompt_len: usize,
        cfg: EvictConfig,
        backend: &dyn Backend,
        opt: EvictOptions,
    ) -> Result<EvictRun<T>, String> {
        cfg.check()?;
        let c = self.config;
        let n = text.len();
        if n < 2 {
            return Err("a run needs at least two bytes (one to read, one to predict)".into());
        }
        if n > c.context {
            return Err(format!(
                "{n} bytes: the model's positions were trained up to its context of {}",
                c.context
            ));
        }
        if prompt_len == 0 || prompt_len > n {
            return Err(format!("the prompt length {prompt_len} must be in 1..={n}"));
        }
        let (l_n, kvh_n, h, hd, bs) = (c.n_layers, c.n_kv_heads, c.n_heads, c.head_dim, cfg.block_size);
        let g = h / kvh_n;
        let rows = l_n * kvh_n;
        let shape = PagedShape {
            num_blocks: n.div_ceil(bs).max(1),
            block_size: bs,
            kv_heads: kvh_n,
            head_dim: hd,
            dtype: KvDtype::F16,
        };
        let mut engine = KvEngine::new(shape, l_n);
        let mut keep: Vec<Vec<bool>> = vec![Vec::with_capacity(n); rows];
        let mut count = vec![0usize; rows];
        let mut acc = vec![0f64; rows * n];
        let mut ref_acc = (opt.every == 1).then(|| vec![0f64; rows * n]);
        let mut votes = vec![0f64; rows * n];
        let mut rng = Rng::stream(cfg.seed, 0xE71C);
        let (k_budget, r_recent, w) = (cfg.budget, cfg.recent_tokens(), cfg.window_tokens());
        let mut run = EvictRun {
            config: cfg,
            tokens: text.to_vec(),
            prompt_len,
            layers: l_n,
            kv_heads: kvh_n,
            heads: h,
            nll: Vec::with_capacity(n - 1),
            top1: Vec::with_capacity(n - 1),
            kept: Vec::new(),
            scores: Vec::new(),
            final_scores: Vec::new(),
            reference_scores: None,
            attended: Vec::with_capacity(n),
            dead_slots: Vec::with_capacity(n),
            allocated_slots: Vec::with_capacity(n),
            blocks_in_use: Vec::with_capacity(n),
            top10_share: vec![0.0; l_n * h],
            probs: Vec::new(),
            pooled_votes: Vec::new(),
            score_bytes: 0,
            dropped: Vec::new(),
            read_bytes: 0,
            seconds: 0.0,
            check: None,
            checked_steps: 0,
        };
        let mut top10_steps = 0usize;
        let t0 = Instant::now();
        for t in 0..n {
            let slot = engine
                .reserve(REQ, 1)
                .map_err(|e| format!("step {t}: the pool ran out: {e}"))?[0];
            // The step's append, then the policy, per (layer, KV head).
            for row in 0..rows {
                keep[row].push(true);
                count[row] += 1;
                let scores = &acc[row * n..][..n];
                match cfg.policy {
                    EvictPolicy::Full => {}
                    EvictPolicy::Window | EvictPolicy::Sinks => {
                        let sinks = if cfg.policy == EvictPolicy::Sinks { SINKS } else { 0 };
                        let win = k_budget - sinks;
                        if t >= win && t - win >= sinks && keep[row][t - win] {
                            keep[row][t - win] = false;
                            count[row] -= 1;
                        }
                    }
                    EvictPolicy::H2o | EvictPolicy::Random => {
                        while count[row] > k_budget {
                            let first_recent = (t + 1).saturating_sub(r_recent);
                            let out: Vec<usize> = (0..first_recent).filter(|&i| keep[row][i]).collect();
                            let victim = if cfg.policy == EvictPolicy::H2o {
                                out.iter()
                                    .copied()
                                    .min_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)))
                            } else {
                                (!out.is_empty()).then(|| out[rng.below(out.len())])
                            };
                            let v = victim.ok_or("no token outside the recent set to evict")?;
                            keep[row][v] = false;
                            count[row] -= 1;
                        }
                    }
                    EvictPolicy::SnapKv => {
                        if t == prompt_len && prompt_len > k_budget {
                            let prefix = prompt_len - w;
                            let (pooled, chosen) =
                                snapkv_select(&votes[row * n..][..prefix], cfg.pool_kernel, k_budget - w);
                            run.pooled_votes.extend(pooled);
                            for (i, k) in keep[row][..prefix].iter_mut().enumerate() {
                                *k = chosen.binary_search(&i).is_ok();
                            }
                            count[row] = keep[row].iter().filter(|&&k| k).count();
                        }
                    }
                }
            }
            engine
                .evict_heads(REQ, cfg.policy.name(), &keep)
                .map_err(|e| format!("step {t}: {e}"))?;
            engine.take_events();
            // The columns of the step's table: the live blocks' tokens, in order.
            let tables = engine.tables(&[REQ]);
            let cols = tables.max_blocks * bs;
            let dropped: std::collections::BTreeSet<usize> = engine.cache().dropped(REQ).collect();
            // (column, text index) of every live token, in table order.
            let mut live: Vec<(usize, usize)> = Vec::with_capacity(t + 1);
            let mut j = 0;
            for lb in (0..(t + 1).div_ceil(bs)).filter(|lb| !dropped.contains(lb)) {
                for (o, i) in (lb * bs..((lb + 1) * bs).min(t + 1)).enumerate() {
                    live.push((j * bs + o, i));
                }
                j += 1;
            }
            if opt.record {
                run.dropped.push(dropped.iter().copied().collect());
            }
            // Dead slots: tokens in live blocks that a (layer, KV head) evicted.
            let live_blocks = j;
            let dead: usize = keep.iter().map(|k| live.iter().filter(|&&(_, i)| !k[i]).count()).sum();
            run.dead_slots.push(dead as u32);
            run.allocated_slots.push((live_blocks * bs * rows) as u32);
            run.blocks_in_use
                .push((shape.num_blocks - engine.cache().allocator().num_free()) as u32);
            run.attended.push(count.iter().copied().max().unwrap_or(0) as u32);
            if opt.record {
                run.kept.push(
                    keep.iter()
                        .map(|k| (0..=t).filter(|&i| k[i]).map(|i| i as u32).collect())
                        .collect(),
                );
            }
            let mut probs_here = opt.probs.then(|| vec![0f32; l_n * h * n]);
            let mut x = self.embed_tokens(&text[t..=t]);
            let mut counted_top10 = false;
            for (l, b) in self.blocks.iter().enumerate() {
                let (q, k, v) = self.qkv(b, &x, t);
                let flat = |a: &Array3<f32>| a.iter().copied().collect::<Vec<f32>>();
                engine
                    .write(backend, l, &[slot], &flat(&k), &flat(&v))
                    .map_err(|e| e.to_string())?;
                let valid = engine.valid_mask(l);
                let paged = engine
                    .masked_input(l, &tables, q.as_slice().unwrap_or_default(), h)
                    .map_err(|e| e.to_string())?;
                let inp = ScoreDecodeInput { paged, valid: &valid };
                let got = backend
                    .score_decode(&inp)
                    .map_err(|e| format!("step {t}, layer {l}: {e}"))?;
                let attended: usize = (0..kvh_n).map(|kv| count[l * kvh_n + kv]).sum();
                run.read_bytes += (attended * hd * 2 * 2 + live.len() * kvh_n * 4) as u64;
                let (scores_b, weights_b) = inp.extra_bytes();
                run.score_bytes += (scores_b + weights_b) as u64;
                if opt.every > 0 && t % opt.every == 0 {
                    let (want_out, want_p, want_s) = reference::score_decode(&inp);
                    let label = format!("score_decode step {t} layer {l}");
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
                        check(
                            &format!("{label} scores"),
                            &[1, kvh_n, cols],
                            &got.scores,
                            &want_s,
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
                    if let Some(ra) = ref_acc.as_mut() {
                        for kv in 0..kvh_n {
                            for &(c, i) in &live {
                                ra[(l * kvh_n + kv) * n + i] += want_s[kv * cols + c];
                            }
                        }
                    }
                }
                for kv in 0..kvh_n {
                    let row = l * kvh_n + kv;
                    for &(c, i) in &live {
                        let s = f64::from(got.scores[kv * cols + c]);
                        acc[row * n + i] += s;
                        if cfg.policy == EvictPolicy::SnapKv && t < prompt_len && t + w >= prompt_len {
                            votes[row * n + i] += s;
                        }
                    }
                }
                // How concentrated each head's attention is: the share of its mass on its top 10%.
                if count[l * kvh_n..][..kvh_n].iter().all(|&m| m >= 10) {
                    counted_top10 = true;
                    for head in 0..h {
                        let m = count[l * kvh_n + head / g];
                        let mut p: Vec<f32> = got.probs[head * cols..][..cols].to_vec();
                        p.sort_by(|a, b| b.total_cmp(a));
                        let top = m.div_ceil(10);
                        run.top10_share[l * h + head] += p[..top].iter().map(|&x| f64::from(x)).sum::<f64>();
                    }
                }
                if let Some(ph) = probs_here.as_mut() {
                    for head in 0..h {
                        for &(c, i) in &live {
                            ph[(l * h + head) * n + i] = got.probs[head * cols + c];
                        }
                    }
                }
                let o = Array3::from_shape_vec((h, 1, hd), got.out).map_err(|e| e.to_string())?;
                x = self.attn_residual(b, &x, &o);
                x = self.mlp(b, &x);
            }
            if counted_top10 {
                top10_steps += 1;
            }
            if let Some(ph) = probs_here {
                run.probs.push(ph);
            }
            if opt.record {
                run.scores.push(acc.iter().map(|&x| x as f32).collect());
            }
            if t + 1 < n {
                let logits = self.logits(&x);
                let (nll, hit) = ln_softmax_at(logits.row(0).as_slice().unwrap_or_default(), text[t + 1].index());
                run.nll.push(nll);
                run.top1.push(hit);
            }
        }
        for s in &mut run.top10_share {
            *s /= top10_steps.max(1) as f64;
        }
        run.final_scores = acc;
        run.reference_scores = ref_acc;
        run.seconds = t0.elapsed().as_secs_f64();
        Ok(run)
    }
}
