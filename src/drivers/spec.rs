//! Speculative decoding of the trained model (lesson 12): a proposer drafts k bytes, the target verifies
//! them and the byte after them in **one** `paged_prefill` pass over its paged cache (a chunk of k + 1
//! tokens: the last emitted byte, then the drafts), the longest agreeing prefix is accepted together with
//! the target's own next byte, and the rejected drafts' slots are cut from the cache with
//! [`KvEngine::truncate`], which frees a block that empties.
//!
//! Two proposers: prompt lookup ([`Drafter::Ngram`], vLLM's `ngram` method: the longest suffix of n bytes,
//! n from `max_n` down to `min_n`, that occurred before, and the bytes that followed its earliest
//! occurrence) and a small draft model ([`Drafter::Model`], with its own paged cache).
//!
//! Acceptance follows Leviathan et al. 2023 / Chen et al. 2023: draft byte d with draft probability
//! q(d) is kept with probability min(1, p(d) / q(d)), and on a rejection the byte is drawn from
//! norm(max(0, p − q)), so every emitted byte is distributed as the target's p ([`verify`]). At
//! temperature 0 both p and q are one-hot and this is "keep while the target's argmax agrees": the output
//! is the target's greedy output, byte for byte, for every k.

use ndarray::Axis;

use super::serve::Chunk;
use crate::cache::{KvDtype, PagedShape, RequestId};
use crate::compute::Backend;
use crate::kv::KvEngine;
use crate::math::Rng;
use crate::model::{Model, TokenId};

/// Who drafts.
#[derive(Debug, Clone, Copy)]
pub enum Drafter<'a> {
    /// No draft: plain decode, one target pass per byte (the baseline, through the same code).
    None,
    /// Prompt lookup: the bytes that followed the earliest earlier occurrence of the longest suffix of
    /// `max_n` down to `min_n` bytes.
    Ngram {
        /// Shortest suffix tried.
        min_n: usize,
        /// Longest suffix tried.
        max_n: usize,
    },
    /// A small model's greedy (or sampled, with temperature) continuation.
    Model(&'a Model),
}

impl Drafter<'_> {
    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            Drafter::None => "none (plain decode)",
            Drafter::Ngram { .. } => "n-gram (prompt lookup)",
            Drafter::Model(_) => "draft model",
        }
    }
}

/// Prompt lookup: the (up to) `k` bytes that followed the earliest earlier occurrence of the longest
/// suffix of `seq` of `max_n` down to `min_n` bytes (empty when none occurred), as vLLM's
/// `NgramProposer` finds them.
pub fn ngram_propose<T: PartialEq + Copy>(seq: &[T], k: usize, min_n: usize, max_n: usize) -> Vec<T> {
    let len = seq.len();
    for n in (min_n.max(1)..=max_n).rev() {
        if n >= len {
            continue;
        }
        let pattern = &seq[len - n..];
        // An occurrence that ends before the last byte, so at least one byte follows it.
        if let Some(s) = (0..len - n).find(|&s| &seq[s..s + n] == pattern) {
            let from = s + n;
            return seq[from..(from + k).min(len)].to_vec();
        }
    }
    Vec::new()
}

/// The softmax of `logits / temperature` in f64; one-hot at the argmax (ties broken as
/// [`crate::model::decode::Sampler::pick`] breaks them) at temperature 0.
pub fn distribution(logits: &[f32], temperature: f32) -> Vec<f64> {
    let mut p = vec![0.0; logits.len()];
    if temperature <= 0.0 {
        let arg = crate::model::decode::Sampler::greedy().pick(logits) as usize;
        if let Some(x) = p.get_mut(arg) {
            *x = 1.0;
        }
        return p;
    }
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for (pi, &l) in p.iter_mut().zip(logits) {
        *pi = (f64::from(l - m) / f64::from(temperature)).exp();
    }
    let s: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= s);
    p
}

/// Draw from a distribution (its weights need not sum to 1).
pub fn draw(p: &[f64], rng: &mut Rng) -> u8 {
    draw_id(p, rng)
}

/// [`draw`] for any token type.
pub fn draw_id<T: TokenId>(p: &[f64], rng: &mut Rng) -> T {
    let total: f64 = p.iter().sum();
    let mut u = rng.uniform() * total;
    let mut last = 0;
    for (i, &w) in p.iter().enumerate() {
        if w > 0.0 {
            last = i;
            if u < w {
                return T::from_index(i);
            }
            u -= w;
        }
    }
    T::from_index(last)
}

/// Verify drafts `d` (drawn from `q[i]`) against the target's `p[i]` (`p` has one more row: the byte
/// after the last draft). Returns how many drafts are accepted and the byte that follows them (the
/// resampled byte at the first rejection, or the bonus byte from the last row). At temperature 0 (one-hot
/// p and q) no random number is drawn.
pub fn verify<T: TokenId>(d: &[T], q: &[Vec<f64>], p: &[Vec<f64>], rng: &mut Rng) -> (usize, T) {
    for (i, &di) in d.iter().enumerate() {
        let (pd, qd) = (p[i][di.index()], q[i][di.index()]);
        let keep = if pd >= qd {
            true
        } else if pd == 0.0 {
            false
        } else {
            rng.uniform() < pd / qd
        };
        if !keep {
            let residual: Vec<f64> = p[i].iter().zip(&q[i]).map(|(a, b)| (a - b).max(0.0)).collect();
            return (i, draw_id(&residual, rng));
        }
    }
    (d.len(), draw_id(&p[d.len()], rng))
}

/// How a speculative run is set up.
#[derive(Debug, Clone, Copy)]
pub struct SpecConfig<'a> {
    /// Who drafts.
    pub drafter: Drafter<'a>,
    /// Bytes drafted per step (at most; prompt lookup may find fewer).
    pub k: usize,
    /// 0: greedy; otherwise p and q are softmaxes at this temperature.
    pub temperature: f32,
    /// The sampling seed.
    pub seed: u64,
    /// Tokens per block of both paged caches.
    pub block_size: usize,
}

/// One verification pass.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpecStep<T = u8> {
    /// Position of the pass's first token (the last emitted byte).
    pub pos: usize,
    /// The drafted bytes.
    pub proposed: Vec<T>,
    /// How many of them were accepted.
    pub accepted: usize,
    /// The bytes this pass emitted (the accepted drafts, then the target's own byte).
    pub emitted: Vec<T>,
    /// Target blocks in use during the pass (the verified slots reserved).
    pub target_blocks: usize,
    /// Target blocks freed by cutting the rejected drafts.
    pub freed: Vec<u32>,
    /// Draft-model passes spent proposing (0 for prompt lookup).
    pub draft_passes: usize,
    /// Seconds spent proposing.
    pub draft_seconds: f64,
    /// Seconds spent verifying (the target pass).
    pub verify_seconds: f64,
}

/// What a speculative run did and measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpecRun<T = u8> {
    /// The proposer's name.
    pub drafter: &'static str,
    /// k.
    pub k: usize,
    /// The generated bytes.
    pub output: Vec<T>,
    /// Each verification pass.
    pub steps: Vec<SpecStep<T>>,
    /// Seconds of the target's prefill (and the draft model's).
    pub prefill_seconds: f64,
    /// Drafts accepted at position i (0-based), over all passes.
    pub accepted_at: Vec<usize>,
    /// Drafts proposed at position i that were reached (every earlier draft accepted).
    pub reached_at: Vec<usize>,
    /// The target's most blocks in use, and its bytes per block (every layer, K and V).
    pub target_peak_blocks: usize,
    /// Bytes of one target block.
    pub target_block_bytes: usize,
    /// The blocks plain decode of the same bytes needs at the end.
    pub plain_blocks: usize,
    /// The draft model's most blocks in use (0 without one), and its bytes per block.
    pub draft_peak_blocks: usize,
    /// Bytes of one draft block.
    pub draft_block_bytes: usize,
    /// The draft model's weights in bytes (f32, as shipped).
    pub draft_weight_bytes: usize,
}

impl<T> SpecRun<T> {
    /// α_i: accepted at position i ÷ proposals that reached position i.
    pub fn alpha(&self) -> Vec<Option<f64>> {
        self.accepted_at
            .iter()
            .zip(&self.reached_at)
            .map(|(&a, &r)| (r > 0).then(|| a as f64 / r as f64))
            .collect()
    }
    /// Mean drafts accepted per verification pass.
    pub fn mean_accepted(&self) -> f64 {
        if self.steps.is_empty() {
            return 0.0;
        }
        self.steps.iter().map(|s| s.accepted).sum::<usize>() as f64 / self.steps.len() as f64
    }
    /// Target forward passes (prefill included) per generated byte: 1 for plain decode.
    pub fn passes_per_byte(&self) -> f64 {
        (1 + self.steps.len()) as f64 / self.output.len().max(1) as f64
    }
    /// Seconds in all.
    pub fn seconds(&self) -> f64 {
        self.prefill_seconds
            + self
                .steps
                .iter()
                .map(|s| s.draft_seconds + s.verify_seconds)
                .sum::<f64>()
    }
    /// Generated bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 { self.output.len() as f64 / s } else { 0.0 }
    }
    /// Peak KV bytes of the target plus the draft, and what plain decode needs: the memory speculation
    /// does not save.
    pub fn kv_bytes(&self) -> (usize, usize) {
        (
            self.target_peak_blocks * self.target_block_bytes + self.draft_peak_blocks * self.draft_block_bytes,
            self.plain_blocks * self.target_block_bytes,
        )
    }
}

/// One model's single-request paged cache.
struct Lane<'m> {
    model: &'m Model,
    engine: KvEngine,
}

const REQ: RequestId = 0;

impl<'m> Lane<'m> {
    fn new(model: &'m Model, block_size: usize, tokens: usize) -> Self {
        let c = model.config;
        let shape = PagedShape {
            num_blocks: tokens.div_ceil(block_size.max(1)) + 1,
            block_size: block_size.max(1),
            kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            dtype: KvDtype::F16,
        };
        Self {
            model,
            engine: KvEngine::new(shape, c.n_layers),
        }
    }
    fn len(&self) -> usize {
        self.engine.cache().len(REQ)
    }
    fn blocks(&self) -> usize {
        self.engine.cache().table(REQ).map_or(0, <[u32]>::len)
    }
    fn block_bytes(&self) -> usize {
        let s = self.engine.shape();
        // K and V, f16, every layer.
        2 * s.block_size * s.kv_heads * s.head_dim * 2 * self.engine.layers()
    }
    /// Append `tokens` at the end of the cache and run them: their logits `[tokens, vocab]`.
    fn run<T: TokenId>(&mut self, backend: &dyn Backend, tokens: &[T]) -> Result<ndarray::Array2<f32>, String> {
        let pos0 = self.len();
        self.engine
            .reserve(REQ, tokens.len())
            .map_err(|e| format!("the draft/verify cache ran out: {e}"))?;
        let mut out = self.model.serve_chunks(
            &mut self.engine,
            backend,
            &[Chunk {
                req: REQ,
                pos0,
                tokens: tokens.to_vec(),
            }],
        )?;
        out.pop().ok_or_else(|| "no logits".to_string())
    }
}

impl Model {
    /// Generate `generate` bytes after `prompt` speculatively (see the module docs); with
    /// [`Drafter::None`] it is plain decode through the same paged path.
    pub fn speculative<T: TokenId>(
        &self,
        prompt: &[T],
        generate: usize,
        cfg: &SpecConfig,
        backend: &dyn Backend,
    ) -> Result<SpecRun<T>, String> {
        if prompt.is_empty() {
            return Err("speculative decoding needs a prompt of at least one byte".into());
        }
        if cfg.k > 64 {
            return Err(format!("k = {} drafts per step; at most 64", cfg.k));
        }
        let total = prompt.len() + generate + cfg.k + 1;
        if total > crate::model::MAX_POSITIONS {
            return Err(format!("{total} positions: more than the RoPE tables hold"));
        }
        let mut rng = Rng::new(cfg.seed);
        let mut target = Lane::new(self, cfg.block_size, total);
        let mut draft = match cfg.drafter {
            Drafter::Model(m) => {
                if m.config.vocab != self.config.vocab {
                    return Err("the draft model's vocabulary differs from the target's".into());
                }
                Some(Lane::new(m, cfg.block_size, total))
            }
            _ => None,
        };
        let k = if matches!(cfg.drafter, Drafter::None) { 0 } else { cfg.k };
        let mut run = SpecRun {
            drafter: cfg.drafter.name(),
            k,
            output: Vec::new(),
            steps: Vec::new(),
            prefill_seconds: 0.0,
            accepted_at: vec![0; k],
            reached_at: vec![0; k],
            target_peak_blocks: 0,
            target_block_bytes: target.block_bytes(),
            plain_blocks: 0,
            draft_peak_blocks: 0,
            draft_block_bytes: draft.as_ref().map_or(0, Lane::block_bytes),
            draft_weight_bytes: match cfg.drafter {
                Drafter::Model(m) => m.parameters * 4,
                _ => 0,
            },
        };
        if generate == 0 {
            return Ok(run);
        }
        // Prefill: the target's first byte.
        let t0 = web_time::Instant::now();
        let logits = target.run(backend, prompt)?;
        let p = distribution(&super::serve::last_row(&logits), cfg.temperature);
        let mut seq = prompt.to_vec();
        seq.push(draw_id(&p, &mut rng));
        run.output.extend(seq.last().copied());
        run.prefill_seconds = t0.elapsed().as_secs_f64();
        run.target_peak_blocks = target.blocks();
        while run.output.len() < generate {
            // The last emitted byte is not in the target's cache yet; the pass computes it.
            let last = seq.len() - 1;
            let want = (generate - run.output.len()).saturating_sub(1).min(k);
            // 1. Propose.
            let t0 = web_time::Instant::now();
            let mut draft_passes = 0;
            let (proposed, q): (Vec<T>, Vec<Vec<f64>>) = match (&cfg.drafter, draft.as_mut()) {
                (Drafter::Ngram { min_n, max_n }, _) => {
                    let d = ngram_propose(&seq, want, *min_n, *max_n);
                    let q = d
                        .iter()
                        .map(|&b| {
                            let mut one = vec![0.0; self.config.vocab];
                            one[b.index()] = 1.0;
                            one
                        })
                        .collect();
                    (d, q)
                }
                (Drafter::Model(_), Some(lane)) if want > 0 => {
                    let (mut d, mut q) = (Vec::new(), Vec::new());
                    // Catch up on what was emitted since the draft last ran, then draft one byte a pass.
                    let mut feed = seq[lane.len()..].to_vec();
                    while d.len() < want {
                        let lg = lane.run(backend, &feed)?;
                        draft_passes += 1;
                        let qi = distribution(&lg.index_axis(Axis(0), lg.nrows() - 1).to_vec(), cfg.temperature);
                        let b = draw_id(&qi, &mut rng);
                        d.push(b);
                        q.push(qi);
                        feed = vec![b];
                    }
                    run.draft_peak_blocks = run.draft_peak_blocks.max(lane.blocks());
                    (d, q)
                }
                _ => (Vec::new(), Vec::new()),
            };
            let draft_seconds = t0.elapsed().as_secs_f64();
            // 2. Verify the last byte and the drafts in one pass.
            let t1 = web_time::Instant::now();
            let mut chunk = vec![seq[last]];
            chunk.extend_from_slice(&proposed);
            let logits = target.run(backend, &chunk)?;
            let target_blocks = target.blocks();
            let p: Vec<Vec<f64>> = logits
                .outer_iter()
                .map(|row| distribution(&row.to_vec(), cfg.temperature))
                .collect();
            let (accepted, next) = verify(&proposed, &q, &p, &mut rng);
            // 3. Keep the last byte and the accepted drafts in the cache; cut the rest.
            let freed = target
                .engine
                .truncate(REQ, last + 1 + accepted)
                .map_err(|e| e.to_string())?;
            let verify_seconds = t1.elapsed().as_secs_f64();
            if let Some(lane) = draft.as_mut() {
                let keep = lane.len().min(last + 1 + accepted);
                lane.engine.truncate(REQ, keep).map_err(|e| e.to_string())?;
            }
            for i in 0..proposed.len() {
                run.reached_at[i] += 1;
                if i < accepted {
                    run.accepted_at[i] += 1;
                } else {
                    break;
                }
            }
            let mut emitted = proposed[..accepted].to_vec();
            emitted.push(next);
            seq.extend_from_slice(&emitted);
            run.output.extend_from_slice(&emitted);
            run.target_peak_blocks = run.target_peak_blocks.max(target_blocks);
            run.steps.push(SpecStep {
                pos: last,
                proposed,
                accepted,
                emitted,
                target_blocks,
                freed,
                draft_passes,
                draft_seconds,
                verify_seconds,
            });
        }
        run.output.truncate(generate);
        run.plain_blocks = (prompt.len() + generate - 1).div_ceil(cfg.block_size.max(1));
        Ok(run)
    }
}

/// One verification pass, checked: `prompt` prefilled into a paged cache of `block_size`, then the chunk
/// `[first, drafts…]` run through the target with layer `layer`'s `paged_prefill` launch checked against
/// the f64 reference. Returns the check.
pub fn verify_pass_checked(
    model: &Model,
    backend: &dyn Backend,
    prompt: &[u8],
    chunk: &[u8],
    block_size: usize,
    layer: usize,
) -> Result<crate::compute::CheckReport, String> {
    let mut lane = Lane::new(model, block_size, prompt.len() + chunk.len());
    lane.run(backend, prompt)?;
    let pos0 = lane.len();
    lane.engine
        .reserve(REQ, chunk.len())
        .map_err(|e| format!("the verify cache ran out: {e}"))?;
    let (_, report) = model.serve_chunks_checked(
        &mut lane.engine,
        backend,
        &[Chunk {
            req: REQ,
            pos0,
            tokens: chunk.to_vec(),
        }],
        Some(layer),
    )?;
    report.ok_or_else(|| "no layer checked".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lookup_takes_the_longest_suffix_and_its_earliest_occurrence() {
        // "abc" occurs at 0 and 4; the suffix "abc" matches at 0 first: propose what followed it.
        assert_eq!(ngram_propose(b"abcXabcYabc", 3, 1, 3), b"Xab");
        // No 3- or 2-gram suffix occurred; the 1-gram "c" did, at 2.
        assert_eq!(ngram_propose(b"abcdzzc", 2, 1, 3), b"dz");
        // The proposal stops at the end of the sequence.
        assert_eq!(ngram_propose(b"abab", 5, 1, 3), b"ab");
        assert!(ngram_propose(b"abcd", 3, 1, 3).is_empty());
        assert!(ngram_propose(b"", 3, 1, 3).is_empty());
        assert!(ngram_propose(b"aaaa", 0, 1, 3).is_empty());
    }

    /// Rejection sampling keeps the target's distribution: the first emitted byte of a k = 1 pass, over
    /// many trials, passes a χ² test against p (6 outcomes, 5 degrees of freedom, critical value 20.52 at
    /// 0.001), for a draft model's q and for a one-hot (prompt lookup) q; the draft's own q fails the same
    /// test, so the test can fail.
    #[test]
    fn rejection_sampling_keeps_the_target_distribution() {
        let p = vec![0.30, 0.05, 0.25, 0.10, 0.20, 0.10];
        let q_model = vec![0.10, 0.40, 0.05, 0.25, 0.10, 0.10];
        let one_hot = vec![0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let n = 40_000;
        let chi2 = |counts: &[usize], want: &[f64]| -> f64 {
            counts
                .iter()
                .zip(want)
                .map(|(&c, &w)| {
                    let e = w * n as f64;
                    (c as f64 - e).powi(2) / e
                })
                .sum()
        };
        let bonus = vec![1.0 / 6.0; 6];
        for q in [&q_model, &one_hot] {
            let mut rng = Rng::new(7);
            let mut counts = [0usize; 6];
            for _ in 0..n {
                let d = draw(q, &mut rng);
                let (acc, next) = verify(&[d], std::slice::from_ref(q), &[p.clone(), bonus.clone()], &mut rng);
                let first = if acc == 1 { d } else { next };
                counts[first as usize] += 1;
            }
            let x = chi2(&counts, &p);
            assert!(x < 20.52, "χ² = {x:.2} for q = {q:?}: {counts:?}");
        }
        let mut rng = Rng::new(7);
        let mut counts = [0usize; 6];
        for _ in 0..n {
            counts[draw(&q_model, &mut rng) as usize] += 1;
        }
        assert!(chi2(&counts, &p) > 1000.0, "the draft's own samples must fail the test");
    }

    #[test]
    fn greedy_verification_is_the_argmax_rule() {
        let hot = |i: usize| {
            let mut v = vec![0.0; 4];
            v[i] = 1.0;
            v
        };
        let mut rng = Rng::new(0);
        let p = vec![hot(2), hot(1), hot(3)];
        assert_eq!(verify(&[2u8, 1], &[hot(2), hot(1)], &p, &mut rng), (2, 3));
        assert_eq!(verify(&[2u8, 0], &[hot(2), hot(0)], &p, &mut rng), (1, 1));
        assert_eq!(verify(&[0u8, 1], &[hot(0), hot(1)], &p, &mut rng), (0, 2));
        assert_eq!(distribution(&[0.5, 2.0, -1.0], 0.0), vec![0.0, 1.0, 0.0]);
    }
}
