//! `Backend::stream_decode`: decode attention for a bounded, streaming cache (StreamingLLM). One query
//! token per request reads f16 K/V through the block tables like `paged_decode`, but the keys are stored
//! **before** RoPE and turned on read, each at a position the caller chooses (`key_pos`), and a token
//! whose position is negative is masked (the token-level edge of a sliding window inside a kept block).
//! The query is turned to `q_pos`. It also returns each head's attention weights, which the lesson
//! measures (the mass on the attention sinks). The input, its validation, its suite cases and its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::KvDtype;
use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, PagedDecodeInput, invalid};

/// Inputs of a streaming decode step: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct StreamDecodeInput<'a> {
    /// The queries, pools and block tables as a plain paged decode takes them (one decode input,
    /// checked once), here with queries and keys **not** rotated, f16 pools, and `context_lens`
    /// counting each request's live tokens, masked ones included. Its fields read through this input.
    pub paged: PagedDecodeInput<'a>,
    /// Each query's position `[R]` (a row of `cos_sin`).
    pub q_pos: &'a [i32],
    /// `[R, max_blocks · block_size]`: the position each live token's key is turned to, −1 for a
    /// masked token (entries past a request's length are not read).
    pub key_pos: &'a [i32],
    /// The angle table `[P, head_dim]` (`ops::rope::cos_sin_table`).
    pub cos_sin: &'a [f32],
}

impl<'a> std::ops::Deref for StreamDecodeInput<'a> {
    type Target = PagedDecodeInput<'a>;
    fn deref(&self) -> &PagedDecodeInput<'a> {
        &self.paged
    }
}

/// What a streaming decode step returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamDecodeOut {
    /// The attention output `[R, H, hd]`.
    pub out: Vec<f32>,
    /// Each head's weight on each live token `[R, H, max_blocks · block_size]` (0 for masked tokens
    /// and past the request's length).
    pub probs: Vec<f32>,
}

impl StreamDecodeInput<'_> {
    /// Positions the angle table holds.
    pub fn table_positions(&self) -> usize {
        self.cos_sin.len() / self.shape.head_dim.max(1)
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        let r = self.requests();
        if s.dtype != KvDtype::F16 {
            return Err(invalid(format!(
                "stream_decode reads f16 pools; these hold {}",
                s.dtype
            )));
        }
        let hd = s.head_dim;
        if hd < 2 || !hd.is_multiple_of(2) || hd > MAX_HEAD_DIM {
            return Err(invalid(format!(
                "head_dim must be even in 2..={MAX_HEAD_DIM} (RoPE turns pairs)"
            )));
        }
        // Heads, q, pools, tables and every block a request's length needs: the plain decode's checks.
        self.paged.validate()?;
        if self.q_pos.len() != r {
            return Err(invalid(format!(
                "q_pos has {} entries for {r} requests",
                self.q_pos.len()
            )));
        }
        let cols = self.columns();
        if self.key_pos.len() != r * cols {
            return Err(invalid(format!(
                "key_pos has {} entries, expected R·max_blocks·block_size = {}",
                self.key_pos.len(),
                r * cols
            )));
        }
        if self.cos_sin.is_empty() || !self.cos_sin.len().is_multiple_of(hd) {
            return Err(invalid(format!(
                "the cos/sin table has {} values: it must be [positions, head_dim = {hd}]",
                self.cos_sin.len()
            )));
        }
        let p = self.table_positions();
        for (i, &len) in self.context_lens.iter().enumerate() {
            // (Not negative: the plain decode's checks refused that.)
            let len = len as usize;
            if let Some((t, &kp)) = self.key_pos[i * cols..][..len]
                .iter()
                .enumerate()
                .find(|(_, kp)| **kp >= p as i32)
            {
                return Err(invalid(format!(
                    "request {i}: token {t} is turned to position {kp}, past the table's {p} positions"
                )));
            }
            let qp = self.q_pos[i];
            if qp < 0 || qp as usize >= p {
                return Err(invalid(format!(
                    "request {i}: the query is at position {qp}, outside the table's {p} positions"
                )));
            }
        }
        Ok(())
    }
}

impl OpInput for StreamDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.requests() == 0
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
