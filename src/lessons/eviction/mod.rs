//! Lesson 9, which tokens to keep (kind `eviction`): the trained model reads a 256-byte window of the
//! held-out text (a 128-byte prompt, then 128 bytes decoded), one decode step per byte through the paged
//! cache, under six policies with one budget, **tokens kept per KV head per layer**: full, window,
//! sinks + window, H2O, SnapKV and random ([`crate::drivers::evict`]). Attention runs through the backend's
//! `score_decode`, which returns the weights the policies score by. Everything the views draw is measured
//! here, on the active backend; the quality table over the whole held-out file and the recall trials
//! (stored, [`stored`]) is drawn labelled as stored.

#[cfg(feature = "native")]
pub mod cli;
pub mod export;
mod numbers;
pub mod stored;

use super::{LessonKind, Output, Params, get};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::drivers::evict::{EvictConfig, EvictOptions, EvictPolicy, EvictRun, SINKS};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::model::{HELDOUT, shared};

crate::views! {
    /// The views of lesson 9.
    pub enum View {
        /// One head's attention weights over the text at the timeline's step, and how concentrated each
        /// head's attention is.
        Attention = "attention",
        /// H2O's accumulated score per token, with the kept set and the line that separates it.
        Scores = "scores",
        /// The keep sets of every (layer, KV head) along the text at the timeline's step.
        Keep = "keep",
        /// SnapKV's observation-window votes, pooled, and the tokens chosen once at the prompt's end.
        Snapkv = "snapkv",
        /// The cache's growth under each policy.
        Growth = "growth",
        /// Holes in the paged blocks: dead slots per block and the dead fraction per policy.
        Holes = "holes",
        /// Bits per byte and recall against the budget for all six policies (stored table).
        Quality = "quality",
        /// The same table on SmolLM2-135M (stored).
        QualityReal = "quality-real",
        /// The kernels that ran, and the bytes the score output adds.
        Kernel = "kernel",
    }
}

/// Lesson 9.
pub struct Eviction;

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "evict_steps",
    "evict_leaving_share",
    "diverge_step",
    "diverge_bytes",
    "rows",
    "budget",
    "recent",
    "heavy",
    "obs_window",
    "pool_kernel",
    "prompt",
    "decoded",
    "text_from",
    "top10_max",
    "top10_max_head",
    "top10_min",
    "top10_min_head",
    "last_eviction",
    "last_eviction_zh",
    "snap_selection",
    "snap_selection_zh",
    "snap_grown",
    "bpb_full",
    "bpb_window",
    "bpb_sinks",
    "bpb_h2o",
    "bpb_snapkv",
    "bpb_random",
    "dead_h2o",
    "dead_window",
    "dead_random",
    "dead_snapkv",
    "score_bytes",
    "read_bytes",
    "score_share",
    "stored_windows",
    "stored_trials",
    "stored_recall_full",
    "stored_bpb_full",
    "stored_best",
    "stored_best_bpb",
    "stored_h2o_small",
    "stored_window_small",
    "copy_verdict",
    "copy_verdict_zh",
    "copy_consequence",
    "copy_consequence_zh",
    "h2o_verdict",
    "h2o_verdict_zh",
    "stored_random_small",
    "stored_best_zh",
    "h2o_comment",
    "h2o_comment_zh",
    "stored_real_windows",
    "stored_real_window_tokens",
    "stored_real_trials",
    "stored_real_k",
    "stored_real_k_max",
    "stored_real_bpb_full",
    "stored_real_window_k",
    "stored_real_sinks_k",
    "stored_real_h2o_k",
    "stored_real_snapkv_k",
    "stored_real_random_k",
    "stored_real_h2o_verdict",
    "stored_real_h2o_verdict_zh",
    "stored_real_recall_full",
    "stored_real_recall_best",
    "stored_real_recall_best_policy",
    "stored_real_recall_best_policy_zh",
    "stored_real_recall_verdict",
    "stored_real_recall_verdict_zh",
];

/// Bytes of the held-out text a window takes, and its prompt.
pub const TEXT: usize = 256;
/// The prompt of a window (SnapKV compresses after it).
pub const PROMPT: usize = 128;
/// A simulated GPU runs its threads one after another on the CPU: it reads this many bytes at most (half prompt).
pub const SIM_BYTES: usize = 96;

/// What lesson 9 computed.
#[derive(Debug, Clone)]
pub struct EvictOut {
    /// One run per policy, in [`EvictPolicy::ALL`] order.
    pub runs: Vec<EvictRun>,
    /// The settings the budgeted runs share.
    pub config: EvictConfig,
    /// Which window of the held-out text.
    pub text_index: usize,
    /// The layer and KV head the views show, and the query head of the attention view.
    pub layer: usize,
    /// The KV head.
    pub kv_head: usize,
    /// The query head of the attention view.
    pub head: usize,
    /// The policy the holes view shows.
    pub policy: EvictPolicy,
    /// Bytes asked for, when a simulated backend read fewer.
    pub capped_from: Option<usize>,
    /// Each run's kernel checked against the f64 reference (every few steps).
    pub checks: Vec<CheckReport>,
    numbers: Vec<(&'static str, String)>,
}

impl EvictOut {
    /// The run of `policy`.
    pub fn run(&self, policy: EvictPolicy) -> &EvictRun {
        let i = EvictPolicy::ALL.iter().position(|&p| p == policy).unwrap_or(0);
        &self.runs[i]
    }

    /// Bytes read.
    pub fn len(&self) -> usize {
        self.runs[0].tokens.len()
    }

    /// Whether nothing was read (never: a run reads at least two bytes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The prompt length.
    pub fn prompt(&self) -> usize {
        self.runs[0].prompt_len
    }

    /// The row of (layer, KV head) in the keep sets.
    pub fn row(&self) -> usize {
        self.layer * self.runs[0].kv_heads + self.kv_head
    }

    /// The token H2O evicted for the shown (layer, KV head) at step `t`, if one left.
    pub fn evicted_at(&self, t: usize) -> Option<usize> {
        let r = self.run(EvictPolicy::H2o);
        let (before, now) = (r.kept.get(t.checked_sub(1)?)?, r.kept.get(t)?);
        let row = self.row();
        before[row].iter().find(|i| !now[row].contains(i)).map(|&i| i as usize)
    }

    /// The policy of the keep and holes views: the `policy` slider's, H2O in place of full attention
    /// (which evicts nothing).
    pub fn keep_policy(&self) -> EvictPolicy {
        if self.policy == EvictPolicy::Full {
            EvictPolicy::H2o
        } else {
            self.policy
        }
    }

    /// The byte each (layer, KV head) row of the keep view's policy evicted at step `t` (none where the
    /// row evicted nothing).
    pub fn row_evictions(&self, t: usize) -> Vec<Option<usize>> {
        let r = self.run(self.keep_policy());
        let (Some(before), Some(now)) = (t.checked_sub(1).and_then(|p| r.kept.get(p)), r.kept.get(t)) else {
            return Vec::new();
        };
        before
            .iter()
            .zip(now)
            .map(|(a, b)| a.iter().find(|i| !b.contains(i)).map(|&i| i as usize))
            .collect()
    }

    /// How the rows' evictions agree: the steps at which some row evicted a byte, and those at which
    /// every row evicted the same one, the byte leaving the recent window (step − R).
    pub fn eviction_agreement(&self) -> (usize, usize) {
        let recent = self.config.recent_tokens();
        let (mut steps, mut leaving) = (0, 0);
        for t in 1..self.len() {
            let ev = self.row_evictions(t);
            if ev.iter().all(Option::is_none) {
                continue;
            }
            steps += 1;
            if ev.iter().all(|e| *e == ev[0] && *e == t.checked_sub(recent)) {
                leaving += 1;
            }
        }
        (steps, leaving)
    }

    /// The step after the prompt at which the rows evicted the most different bytes (the latest of
    /// equals), and how many: the keep view then shows most of the text read.
    pub fn most_divergent(&self) -> Option<(usize, usize)> {
        (self.prompt().max(1)..self.len())
            .map(|t| {
                let mut ev: Vec<usize> = self.row_evictions(t).into_iter().flatten().collect();
                ev.sort_unstable();
                ev.dedup();
                (t, ev.len())
            })
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(t, n)| (n, t))
    }

    /// The last step at or before `t` where H2O evicted a token outside the recent set for the shown
    /// (layer, KV head).
    pub fn last_eviction(&self, t: usize) -> Option<usize> {
        (1..=t.min(self.len() - 1))
            .rev()
            .find(|&s| self.evicted_at(s).is_some())
    }
}

fn fmt_bpb(x: f64) -> String {
    format!("{x:.3}")
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

impl Schema for Eviction {
    fn name(&self) -> &'static str {
        "eviction"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &[
            "budget",
            "recent",
            "obs_window",
            "pool_kernel",
            "policy",
            "layer",
            "kv_head",
            "head",
            "text",
            "seed",
        ]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["last", "prompt_end", "eviction", "diverge"]
    }
}

impl LessonKind for Eviction {
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::EVICTION, &cli::EVICTION_TABLE]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::PagedAppend, Kernel::ScoreDecode]
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let m = shared().map_err(|e| e.to_string())?;
        let c = m.config;
        let budget = get(p, "budget", 32).max(2) as usize;
        // R and w at 0 take the defaults (K/2, min(32, K/2)); past the budget they are held inside it.
        let recent = match get(p, "recent", 0).max(0) as usize {
            0 => None,
            r => Some(r.min(budget)),
        };
        let obs_window = match get(p, "obs_window", 0).max(0) as usize {
            0 => None,
            w => Some(w.min(budget - 1)),
        };
        let mut pool_kernel = get(p, "pool_kernel", 5).max(1) as usize;
        if pool_kernel.is_multiple_of(2) {
            pool_kernel += 1;
        }
        let policy = EvictPolicy::ALL[(get(p, "policy", 3).max(0) as usize).min(EvictPolicy::ALL.len() - 1)];
        let layer = (get(p, "layer", 0).max(0) as usize).min(c.n_layers - 1);
        let kv_head = (get(p, "kv_head", 0).max(0) as usize).min(c.n_kv_heads - 1);
        let head = (get(p, "head", 0).max(0) as usize).min(c.n_heads - 1);
        let windows = HELDOUT.len() / TEXT;
        let text_index = (get(p, "text", 0).max(0) as usize).min(windows - 1);
        let seed = get(p, "seed", 0).max(0) as u64;
        let simulated = backend.kind().info().simulated;
        let n = if simulated { SIM_BYTES } else { TEXT };
        let prompt = if simulated { SIM_BYTES / 2 } else { PROMPT };
        let text = &HELDOUT[text_index * TEXT..][..n];
        let cfg = EvictConfig {
            policy,
            budget,
            recent,
            obs_window,
            pool_kernel,
            seed,
            block_size: 16,
        };
        // Each policy's run depends only on the settings that policy reads, the text and the backend: a
        // slider that one policy reads (the seed, R, w, k) recomputes that run alone, and the view switches
        // (policy, layer, heads) recompute nothing. A reused run reports the launches that computed it
        // again, for the kernel panel.
        type Key = (EvictConfig, usize, usize, String);
        type Memo = Vec<(Key, EvictRun, Vec<crate::compute::launch::Launch>)>;
        static MEMO: std::sync::Mutex<Memo> = std::sync::Mutex::new(Vec::new());
        let device = format!("{:?} {}", backend.kind(), backend.device());
        let (mut runs, mut checks) = (Vec::new(), Vec::new());
        for pol in EvictPolicy::ALL {
            let mut c = EvictConfig { policy: pol, ..cfg };
            if pol == EvictPolicy::Sinks && c.budget <= SINKS {
                c.budget = SINKS + 1;
            }
            let key = (relevant(c), text_index, n, device.clone());
            let cached = MEMO.lock().ok().and_then(|m| {
                m.iter()
                    .find(|(k, ..)| *k == key)
                    .map(|(_, r, l)| (r.clone(), l.clone()))
            });
            let run = match cached {
                Some((r, l)) => {
                    crate::compute::launch::report(l);
                    r
                }
                None => {
                    let opt = EvictOptions {
                        record: true,
                        every: 16,
                        probs: pol == EvictPolicy::Full,
                    };
                    let (r, launches) = crate::compute::launch::capture(|| m.evict_run(text, prompt, c, backend, opt));
                    let r = r?;
                    if let Ok(mut memo) = MEMO.lock() {
                        // A few settings per policy are enough to move sliders back and forth.
                        if memo.len() >= 24 {
                            memo.remove(0);
                        }
                        memo.push((key, r.clone(), launches));
                    }
                    r
                }
            };
            if let Some(ch) = &run.check {
                checks.push(ch.clone());
            }
            runs.push(run);
        }
        let mut out = EvictOut {
            runs,
            config: cfg,
            text_index,
            layer,
            kv_head,
            head,
            policy,
            capped_from: simulated.then_some(TEXT),
            checks,
            numbers: Vec::new(),
        };
        out.numbers = out.narration_numbers();
        Ok(Box::new(out))
    }
}

/// The settings a policy's run reads (the others set to fixed values), so that runs can be shared.
fn relevant(c: EvictConfig) -> EvictConfig {
    let base = EvictConfig {
        policy: c.policy,
        budget: 0,
        recent: None,
        obs_window: None,
        pool_kernel: 0,
        seed: 0,
        block_size: c.block_size,
    };
    match c.policy {
        EvictPolicy::Full => base,
        EvictPolicy::Window | EvictPolicy::Sinks => EvictConfig {
            budget: c.budget,
            ..base
        },
        EvictPolicy::H2o => EvictConfig {
            budget: c.budget,
            recent: Some(c.recent_tokens()),
            ..base
        },
        EvictPolicy::SnapKv => EvictConfig {
            budget: c.budget,
            obs_window: Some(c.window_tokens()),
            pool_kernel: c.pool_kernel,
            ..base
        },
        EvictPolicy::Random => EvictConfig {
            budget: c.budget,
            recent: Some(c.recent_tokens()),
            seed: c.seed,
            ..base
        },
    }
}

impl Output for EvictOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.checks.iter().collect()
    }

    /// The kernel panel opens on this lesson's own kernel: the decode that materialises the scores H2O and SnapKV rank by (`score_decode`), not the append.
    fn main_op(&self) -> Option<Kernel> {
        Some(Kernel::ScoreDecode)
    }

    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // The sum of the group's weights per token, the scores H2O accumulates and SnapKV votes with, in
        // score_attention.cu and score_attention.wgsl alike.
        (op == Kernel::ScoreDecode).then_some("G + g) * T")
    }

    fn has_nan(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.nll.iter().any(|x| x.is_nan()) || r.final_scores.iter().any(|x| x.is_nan()))
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let n = self.len();
        let t = cursor.min(n - 1);
        let mut v = vec![NamedArray::new(
            "tokens",
            &[n],
            ArrayData::I32(self.runs[0].tokens.iter().map(|&b| i32::from(b)).collect()),
        )];
        for r in &self.runs {
            let tag = r.config.policy.name();
            let rows = r.layers * r.kv_heads;
            v.push(NamedArray::new(
                &format!("nll_{tag}"),
                &[n - 1],
                ArrayData::F32(r.nll.clone()),
            ));
            let mut kept = vec![0i32; rows * n];
            for (row, set) in r.kept[t].iter().enumerate() {
                for &i in set {
                    kept[row * n + i as usize] = 1;
                }
            }
            v.push(NamedArray::new(
                &format!("kept_at_step_{tag}"),
                &[r.layers, r.kv_heads, n],
                ArrayData::I32(kept),
            ));
            v.push(NamedArray::new(
                &format!("scores_at_step_{tag}"),
                &[r.layers, r.kv_heads, n],
                ArrayData::F32(r.scores[t].clone()),
            ));
        }
        (v, self.checks.clone())
    }

    fn frames(&self) -> usize {
        self.len()
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    fn point(&self, name: &str) -> Option<usize> {
        match name {
            "last" => Some(self.len() - 1),
            "prompt_end" => Some(self.prompt().min(self.len() - 1)),
            "eviction" => self.last_eviction(self.len() - 1).or(Some(self.len() - 1)),
            "diverge" => self.most_divergent().map(|d| d.0).or(Some(self.len() - 1)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled_at_the_defaults() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "eviction").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let out = l.kind.compute(l, &p, &crate::compute::CpuBackend).unwrap();
        let vals = out.values();
        for name in PLACEHOLDERS {
            assert!(vals.iter().any(|(n, _)| n == name), "{name} is not filled");
        }
        assert!(!out.has_nan());
        assert!(out.reports().iter().all(|r| r.passed()));
    }
}
