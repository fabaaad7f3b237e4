//! Lesson 9's stored quality table: every policy at every budget over held-out windows, and the recall
//! trials (a needle of one-letter tokens, repeated later).

use super::{EvictConfig, EvictOptions, EvictPolicy, EvictRun};
use crate::compute::Backend;
use crate::math::Rng;
use crate::model::{Model, TokenId};

/// The budgets the lesson measures (tokens kept per KV head per layer).
pub const BUDGETS: [usize; 4] = [16, 32, 64, 128];

/// One policy at one budget, measured over the held-out windows and the recall trials.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QualityCell {
    /// The policy's name.
    pub policy: String,
    /// K (for full: the budget column it is repeated under; full keeps everything).
    pub budget: usize,
    /// Bits per byte of the 128 decoded bytes of every window, together.
    pub bits_per_byte: f64,
    /// Dead slots over slots of allocated blocks, over every step of every window.
    pub dead_fraction: f64,
    /// Top-1 accuracy on bytes 2–12 of the repeated needle, over the trials.
    pub recall: f64,
}

/// What `kvscope export eviction-table` measures (stored in `assets/measurements/eviction.json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QualityTable {
    /// The model that ran (`tiny` for tables stored before it was recorded).
    #[serde(default = "crate::drivers::tiny_name")]
    pub model: String,
    /// The text the windows and the recall filler were cut from.
    #[serde(default)]
    pub text: String,
    /// Held-out windows of 256 tokens (128 prompt + 128 decoded).
    pub windows: usize,
    /// Recall trials.
    pub trials: usize,
    /// The backend that ran.
    pub backend: String,
    /// Every (policy, budget).
    pub cells: Vec<QualityCell>,
    /// `[layer, query head]`: the share of attention mass on the top 10% of the attended tokens under
    /// full, the mean over every step attending to at least 10 tokens of every window.
    pub top10_share: Vec<f64>,
    /// Layers and query heads of `top10_share`.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
}

/// Where the recall test puts the needle and its repeat, and how long it is.
pub const NEEDLE_AT: usize = 16;
/// The repeat's offset.
pub const REPEAT_AT: usize = 200;
/// Needle bytes.
pub const NEEDLE_LEN: usize = 12;

/// Recall trial `i` (seeded) in `held`, a model's held-out tokens: filler from a seeded offset, 12
/// random one-letter tokens (a–z) at offset 16, repeated at offset 200 (the text ends after the repeat).
/// The tiny model's letters are bytes; SmolLM2's are its single-letter tokens, a sequence its own
/// tokenizer would merge, so the repeat can only be predicted by copying it.
pub fn recall_text(held: &[u32], letters: &[u32; 26], seed: u64, i: usize) -> Vec<u32> {
    let mut rng = Rng::stream(seed, 0x2EC0 + i as u64);
    let n = REPEAT_AT + NEEDLE_LEN;
    let o = rng.below(held.len() - n);
    let mut t = held[o..o + n].to_vec();
    let needle: Vec<u32> = (0..NEEDLE_LEN).map(|_| letters[rng.below(26)]).collect();
    t[NEEDLE_AT..NEEDLE_AT + NEEDLE_LEN].copy_from_slice(&needle);
    t[REPEAT_AT..].copy_from_slice(&needle);
    t
}

/// The recall score of a run on a [`recall_text`]: top-1 hits on tokens 2–12 of the repeat (predicted by
/// the steps that read tokens 1–11 of it).
pub fn recall_hits<T: TokenId>(run: &EvictRun<T>) -> usize {
    run.top1[REPEAT_AT..REPEAT_AT + NEEDLE_LEN - 1]
        .iter()
        .filter(|&&h| h)
        .count()
}

impl Model {
    /// The lesson's quality table: every policy at every budget over the first `windows` 256-token
    /// windows of the model's held-out text (a 128-token prompt, then 128 tokens scored; bits per byte of
    /// the scored tokens' bytes), and `trials` recall trials (the prompt is everything before the repeat).
    pub fn eviction_table(&self, backend: &dyn Backend, windows: usize, trials: usize) -> Result<QualityTable, String> {
        let (held, text_source) = self.heldout_tokens(usize::MAX)?;
        let windows = windows.min(held.len() / 256);
        let mut letters = [0u32; 26];
        for (l, id) in (b'a'..=b'z').zip(letters.iter_mut()) {
            *id = self
                .tokenizer
                .letter_id(l)
                .ok_or_else(|| format!("the vocabulary has no token for the letter {}", char::from(l)))?;
        }
        let (l_n, h) = (self.config.n_layers, self.config.n_heads);
        let mut top10 = vec![0f64; l_n * h];
        let mut cells = Vec::new();
        let mut full_cell: Option<QualityCell> = None;
        for policy in EvictPolicy::ALL {
            for k in BUDGETS {
                if let (EvictPolicy::Full, Some(c)) = (policy, &full_cell) {
                    cells.push(QualityCell { budget: k, ..c.clone() });
                    continue;
                }
                let (mut nll, mut scored, mut dead, mut alloc) = (0f64, 0usize, 0u64, 0u64);
                for wi in 0..windows {
                    let text = &held[wi * 256..(wi + 1) * 256];
                    let mut cfg = EvictConfig::new(policy, k);
                    cfg.seed = wi as u64;
                    let r = self.evict_run(text, 128, cfg, backend, EvictOptions::default())?;
                    nll += r.nll[127..].iter().map(|&x| f64::from(x)).sum::<f64>();
                    scored += self.tokenizer.byte_count(&text[128..]);
                    dead += r.dead_slots.iter().map(|&x| u64::from(x)).sum::<u64>();
                    alloc += r.allocated_slots.iter().map(|&x| u64::from(x)).sum::<u64>();
                    if policy == EvictPolicy::Full {
                        for (a, b) in top10.iter_mut().zip(&r.top10_share) {
                            *a += b / windows as f64;
                        }
                    }
                }
                let mut hits = 0usize;
                for i in 0..trials {
                    let text = recall_text(&held, &letters, 0, i);
                    let mut cfg = EvictConfig::new(policy, k);
                    cfg.seed = i as u64;
                    let r = self.evict_run(&text, REPEAT_AT, cfg, backend, EvictOptions::default())?;
                    hits += recall_hits(&r);
                }
                let cell = QualityCell {
                    policy: policy.name().to_string(),
                    budget: k,
                    bits_per_byte: nll / (std::f64::consts::LN_2 * scored.max(1) as f64),
                    dead_fraction: dead as f64 / alloc.max(1) as f64,
                    recall: hits as f64 / (trials * (NEEDLE_LEN - 1)).max(1) as f64,
                };
                if policy == EvictPolicy::Full {
                    full_cell = Some(cell.clone());
                }
                cells.push(cell);
            }
        }
        Ok(QualityTable {
            model: self.name.id().to_string(),
            text: text_source,
            windows,
            trials,
            backend: backend.kind().name().to_string(),
            cells,
            top10_share: top10,
            layers: l_n,
            heads: h,
        })
    }
}
