//! `Backend::score_decode`: paged decode attention that also **returns the attention weights**, summed
//! over each KV head's query group (what H2O accumulates and SnapKV's observation window votes with),
//! and reads a **validity mask per (KV head, slot)**, so that token-level eviction can differ per KV head
//! and leave holes inside blocks. Keys are stored rotated (text positions), as for `paged_decode`. The
//! input, its validation, its suite cases and its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::KvDtype;
use crate::compute::{BackendError, Limits, OpInput, PagedDecodeInput, invalid};

/// Inputs of a score-returning decode step: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct ScoreDecodeInput<'a> {
    /// The queries, pools and block tables as a plain paged decode takes them (one decode input,
    /// checked once), here with queries and keys rotated, f16 pools, and `context_lens` counting
    /// evicted tokens too. Its fields read through this input.
    pub paged: PagedDecodeInput<'a>,
    /// `[num_blocks, KVH, block_size]`: 1 where the slot takes part in attention for that KV head, 0
    /// where it was evicted (the engine's validity mask of one layer).
    pub valid: &'a [i32],
}

impl<'a> std::ops::Deref for ScoreDecodeInput<'a> {
    type Target = PagedDecodeInput<'a>;
    fn deref(&self) -> &PagedDecodeInput<'a> {
        &self.paged
    }
}

/// What a score-returning decode step returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoreDecodeOut {
    /// The attention output `[R, H, hd]`.
    pub out: Vec<f32>,
    /// Each query head's weight on each token `[R, H, max_blocks · block_size]` (0 for evicted tokens
    /// and past the request's length).
    pub probs: Vec<f32>,
    /// Each KV head's group mass on each token `[R, KVH, max_blocks · block_size]`: the sum of its query
    /// heads' rows of `probs`.
    pub scores: Vec<f32>,
}

impl ScoreDecodeInput<'_> {
    /// Bytes the step writes beyond a plain decode's output: the group scores `R · KVH · T · 4`, and the
    /// per-head map `R · H · T · 4` this kernel also writes (its scratch, which the lesson reads).
    pub fn extra_bytes(&self) -> (usize, usize) {
        let t = self.columns() * 4 * self.requests();
        (t * self.shape.kv_heads, t * self.n_heads)
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        if s.dtype != KvDtype::F16 {
            return Err(invalid(format!("score_decode reads f16 pools; these hold {}", s.dtype)));
        }
        self.paged.validate()?;
        let n = s.num_blocks * s.kv_heads * s.block_size;
        if self.valid.len() != n {
            return Err(invalid(format!(
                "the validity mask has {} entries, expected num_blocks·KVH·block_size = {n}",
                self.valid.len()
            )));
        }
        Ok(())
    }
}

impl OpInput for ScoreDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.requests() == 0
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
