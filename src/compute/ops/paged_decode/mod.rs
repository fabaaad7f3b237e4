//! `Backend::paged_decode`: one query token per request, reading K/V (of the pools' dtype) through the block tables
//! (vLLM's PagedAttention). The input, the block-table layout the kernels read, validation, suite cases
//! the "paged equals contiguous" check and the probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::{PagedKvCache, PagedShape, PoolRef, RequestId, kv_bytes_per_token};
use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

/// A paged cache's block tables laid out for the decode kernels: `[R, max_blocks]` i32 padded with
/// −1, and the context lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeTables {
    /// `[R, max_blocks]` physical block ids.
    pub tables: Vec<i32>,
    /// Columns of `tables`.
    pub max_blocks: usize,
    /// Tokens of each request.
    pub context_lens: Vec<i32>,
}

impl DecodeTables {
    /// The tables of `reqs`, in that order.
    pub fn new(cache: &PagedKvCache, reqs: &[RequestId]) -> Self {
        let (tables, max_blocks, context_lens) = cache.block_table_matrix(reqs);
        Self {
            tables,
            max_blocks,
            context_lens,
        }
    }

    /// A decode problem over `cache` with queries `q` (`[R, n_heads, hd]`).
    pub fn input<'a>(&'a self, cache: &'a PagedKvCache, q: &'a [f32], n_heads: usize) -> PagedDecodeInput<'a> {
        PagedDecodeInput {
            q,
            n_heads,
            shape: cache.shape(),
            k_pool: cache.k_pool.view(),
            v_pool: cache.v_pool.view(),
            block_tables: &self.tables,
            max_blocks: self.max_blocks,
            context_lens: &self.context_lens,
        }
    }
}

/// Inputs of paged decode attention: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct PagedDecodeInput<'a> {
    /// Queries `[R, H, hd]`.
    pub q: &'a [f32],
    /// Query heads H.
    pub n_heads: usize,
    /// Pool shape (num_blocks, block_size, KVH, hd).
    pub shape: PagedShape,
    /// K pool `[num_blocks, KVH, block_size, hd]`.
    pub k_pool: PoolRef<'a>,
    /// V pool, same shape.
    pub v_pool: PoolRef<'a>,
    /// `[R, max_blocks]` physical block ids, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request `[R]`.
    pub context_lens: &'a [i32],
}

impl PagedDecodeInput<'_> {
    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }

    /// Token columns of a per-token map over the block tables (the score and streaming decodes'
    /// weights): `max_blocks · block_size`.
    pub fn columns(&self) -> usize {
        self.max_blocks * self.shape.block_size
    }

    /// The longest context (what sets the split-context kernels' partition count).
    pub fn max_context(&self) -> usize {
        self.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize
    }

    /// K and V bytes one decode step reads (every token of every request, f16).
    pub fn kv_bytes(&self) -> usize {
        let tokens: usize = self.context_lens.iter().map(|&l| l.max(0) as usize).sum();
        tokens
            * kv_bytes_per_token(
                1,
                self.shape.kv_heads as u64,
                self.shape.head_dim as u64,
                self.shape.dtype,
            ) as usize
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        let r = self.requests();
        if s.kv_heads == 0 || self.n_heads == 0 || !self.n_heads.is_multiple_of(s.kv_heads) {
            return Err(invalid(format!(
                "kv-heads ({}) must divide heads ({})",
                s.kv_heads, self.n_heads
            )));
        }
        if s.head_dim == 0 || s.head_dim > MAX_HEAD_DIM || s.block_size == 0 || s.num_blocks == 0 {
            return Err(invalid(format!(
                "head_dim must be 1..={MAX_HEAD_DIM}; block_size and num_blocks must be positive"
            )));
        }
        if self.q.len() != r * self.n_heads * s.head_dim {
            return Err(invalid(format!(
                "q has {} values, expected R·H·hd = {}",
                self.q.len(),
                r * self.n_heads * s.head_dim
            )));
        }
        crate::compute::check_pools(s, [self.k_pool, self.v_pool])?;
        check_block_tables(
            self.block_tables,
            self.max_blocks,
            self.context_lens,
            s.block_size,
            s.num_blocks,
        )
    }
}

/// The checks every decode through block tables shares (paged, score, streaming and MLA decode): the
/// tables are `[R, max_blocks]` with `max_blocks ≥ 1`, no length is negative, and every block a request's
/// length needs is in the table and is a block of the pool.
pub(crate) fn check_block_tables(
    block_tables: &[i32],
    max_blocks: usize,
    context_lens: &[i32],
    block_size: usize,
    num_blocks: usize,
) -> Result<(), BackendError> {
    if block_tables.len() != context_lens.len() * max_blocks || max_blocks == 0 {
        return Err(invalid("block_tables must be [R, max_blocks] with max_blocks >= 1"));
    }
    for (i, &len) in context_lens.iter().enumerate() {
        let len = usize::try_from(len).map_err(|_| invalid(format!("context_lens[{i}] is negative")))?;
        let need = len.div_ceil(block_size);
        if need > max_blocks {
            return Err(invalid(format!(
                "request {i}: {len} tokens need {need} blocks, the table has {max_blocks}"
            )));
        }
        for (j, &b) in block_tables[i * max_blocks..][..need].iter().enumerate() {
            if b < 0 || b as usize >= num_blocks {
                return Err(invalid(format!(
                    "block_tables[{i}][{j}] = {b} is not a block of the pool (0..{num_blocks})"
                )));
            }
        }
    }
    Ok(())
}

impl OpInput for PagedDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.requests() == 0
    }
}

pub use suite::{TWIN_TOLERANCE, decode_and_check, paged_equals_contiguous, probe, scattered_cache, suite};
