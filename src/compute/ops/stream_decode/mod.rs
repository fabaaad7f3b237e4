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

use crate::cache::{KvDtype, PagedShape, PoolRef};
use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

/// Inputs of a streaming decode step: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct StreamDecodeInput<'a> {
    /// Queries `[R, H, hd]`, not rotated.
    pub q: &'a [f32],
    /// Each query's position `[R]` (a row of `cos_sin`).
    pub q_pos: &'a [i32],
    /// Query heads H.
    pub n_heads: usize,
    /// Pool shape (f16 pools).
    pub shape: PagedShape,
    /// K pool `[num_blocks, KVH, block_size, hd]`, keys not rotated.
    pub k_pool: PoolRef<'a>,
    /// V pool, same shape.
    pub v_pool: PoolRef<'a>,
    /// `[R, max_blocks]` physical block ids, −1 padded: each request's live blocks in order.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Live tokens of each request `[R]` (masked ones included).
    pub context_lens: &'a [i32],
    /// `[R, max_blocks · block_size]`: the position each live token's key is turned to, −1 for a
    /// masked token (entries past a request's length are not read).
    pub key_pos: &'a [i32],
    /// The angle table `[P, head_dim]` (`ops::rope::cos_sin_table`).
    pub cos_sin: &'a [f32],
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
    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }

    /// Token columns of `key_pos` and `probs`: `max_blocks · block_size`.
    pub fn columns(&self) -> usize {
        self.max_blocks * self.shape.block_size
    }

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
        if s.kv_heads == 0 || self.n_heads == 0 || !self.n_heads.is_multiple_of(s.kv_heads) {
            return Err(invalid(format!(
                "kv-heads ({}) must divide heads ({})",
                s.kv_heads, self.n_heads
            )));
        }
        let hd = s.head_dim;
        if hd < 2 || !hd.is_multiple_of(2) || hd > MAX_HEAD_DIM || s.block_size == 0 || s.num_blocks == 0 {
            return Err(invalid(format!(
                "head_dim must be even in 2..={MAX_HEAD_DIM}; block_size and num_blocks must be positive"
            )));
        }
        if self.q.len() != r * self.n_heads * hd {
            return Err(invalid(format!(
                "q has {} values, expected R·H·hd = {}",
                self.q.len(),
                r * self.n_heads * hd
            )));
        }
        if self.q_pos.len() != r {
            return Err(invalid(format!(
                "q_pos has {} entries for {r} requests",
                self.q_pos.len()
            )));
        }
        crate::compute::check_pools(s, [self.k_pool, self.v_pool])?;
        if self.block_tables.len() != r * self.max_blocks || self.max_blocks == 0 {
            return Err(invalid("block_tables must be [R, max_blocks] with max_blocks >= 1"));
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
            let len = usize::try_from(len).map_err(|_| invalid(format!("context_lens[{i}] is negative")))?;
            let need = len.div_ceil(s.block_size);
            if need > self.max_blocks {
                return Err(invalid(format!(
                    "request {i}: {len} tokens need {need} blocks, the table has {}",
                    self.max_blocks
                )));
            }
            for (j, &b) in self.block_tables[i * self.max_blocks..][..need].iter().enumerate() {
                if b < 0 || b as usize >= s.num_blocks {
                    return Err(invalid(format!(
                        "block_tables[{i}][{j}] = {b} is not a block of the pool (0..{})",
                        s.num_blocks
                    )));
                }
            }
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
