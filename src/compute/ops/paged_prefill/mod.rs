//! `Backend::paged_prefill`: the queries of a chunk of C new tokens per request attend the request's
//! paged cache through its block table, causally within the chunk (chunked prefill, and the verification
//! pass of speculative decoding). Request r's chunk holds the tokens at positions
//! `[ctx_r − C_r, ctx_r)`, already appended, so its j-th query attends tokens `[0, ctx_r − C_r + j]`.
//! Ragged chunks of several requests go in one launch: `q` is `[Q, H, hd]` with the chunks one after
//! another, Q = Σ C_r.
//!
//! The kernels (`paged_prefill_f16` in `kernels/paged_attention.cu` and `.wgsl`) run the paged decode's
//! body once per query row, so a chunk of one token computes exactly what `paged_decode` computes (tested
//! bit for bit on every backend), and the CPU backend runs its decode over the rows.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::{KvDtype, PagedShape, PoolRef};
use crate::compute::{BackendError, Limits, OpInput, PagedDecodeInput, invalid};

/// One chunk per request over a paged f16 cache.
#[derive(Debug, Clone, Copy)]
pub struct PagedPrefillInput<'a> {
    /// Queries `[Q, H, hd]`: request 0's chunk, then request 1's, …
    pub q: &'a [f32],
    /// Query heads H.
    pub n_heads: usize,
    /// Pool shape.
    pub shape: PagedShape,
    /// K pool `[num_blocks, KVH, block_size, hd]` (f16).
    pub k_pool: PoolRef<'a>,
    /// V pool, same shape.
    pub v_pool: PoolRef<'a>,
    /// `[R, max_blocks]` physical block ids, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request in the cache, the chunk included `[R]`.
    pub context_lens: &'a [i32],
    /// Tokens of each request's chunk `[R]` (0: the request has no chunk in this launch).
    pub query_lens: &'a [i32],
}

/// The query rows of a prefill: each row's request and the tokens it attends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    /// Request of each row `[Q]`.
    pub req: Vec<i32>,
    /// Tokens row i attends: `ctx_r − C_r + j + 1` for the chunk's j-th token `[Q]`.
    pub ctx: Vec<i32>,
}

impl PagedPrefillInput<'_> {
    /// Requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }
    /// Query rows Q.
    pub fn rows(&self) -> usize {
        self.query_lens.iter().map(|&c| c.max(0) as usize).sum()
    }
    /// Each row's request and causal context.
    pub fn row_map(&self) -> Rows {
        let mut rows = Rows {
            req: Vec::with_capacity(self.rows()),
            ctx: Vec::with_capacity(self.rows()),
        };
        for (r, (&ctx, &c)) in self.context_lens.iter().zip(self.query_lens).enumerate() {
            for j in 0..c.max(0) {
                rows.req.push(r as i32);
                rows.ctx.push(ctx - c + j + 1);
            }
        }
        rows
    }
    /// The longest context a row attends.
    pub fn max_context(&self) -> usize {
        self.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize
    }
    /// The decode problem of the same rows: one "request" per query row, with its request's table row
    /// repeated and its causal context as the length. The CPU backend runs it; validation checks it.
    pub fn as_decode<'b>(&'b self, rows: &'b Rows, tables: &'b mut Vec<i32>) -> PagedDecodeInput<'b> {
        tables.clear();
        for &r in &rows.req {
            let r = r as usize;
            tables.extend_from_slice(&self.block_tables[r * self.max_blocks..(r + 1) * self.max_blocks]);
        }
        PagedDecodeInput {
            q: self.q,
            n_heads: self.n_heads,
            shape: self.shape,
            k_pool: self.k_pool,
            v_pool: self.v_pool,
            block_tables: tables,
            max_blocks: self.max_blocks,
            context_lens: &rows.ctx,
        }
    }
}

impl OpInput for &PagedPrefillInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        let r = self.requests();
        if self.shape.dtype != KvDtype::F16 {
            return Err(invalid(format!(
                "paged_prefill reads f16 pools, not {}",
                self.shape.dtype
            )));
        }
        if self.query_lens.len() != r || self.block_tables.len() != r * self.max_blocks {
            return Err(invalid(format!(
                "{r} requests take query_lens [{r}] and block_tables [{r}, {}]",
                self.max_blocks
            )));
        }
        for (i, (&ctx, &c)) in self.context_lens.iter().zip(self.query_lens).enumerate() {
            if c < 0 || c > ctx {
                return Err(invalid(format!(
                    "request {i}: a chunk of {c} tokens must be in its {ctx} cached tokens"
                )));
            }
        }
        let rows = self.row_map();
        let mut tables = Vec::new();
        // The rows as decode requests: shapes, the pools, every live token's block inside the pool, and
        // q = [Q, H, hd].
        self.as_decode(&rows, &mut tables).validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.rows() == 0 || self.n_heads == 0
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};

pub use reference::reference;
