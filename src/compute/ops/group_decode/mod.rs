//! `Backend::group_decode`: paged decode over a group-quantised cache (INT8 per channel, KIVI). One
//! query token per request; each token's K and V come from the code pools (codes, scale and zero
//! through the block table) once quantised, and from the request's f16 ring before. Checked against
//! the f64 reference, which reads the same codes and rings through [`GroupCache::at`] and attends
//! with `math::decode_attention_f64`. The kernel is `group_decode` in `kernels/group_kv.cu` and
//! `.wgsl` (codes packed in u32 words there, the ring's f16 pairs decoded by hand).

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::group::{GroupCache, GroupShape};
use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

/// The decode problem.
#[derive(Debug, Clone, Copy)]
pub struct GroupDecodeInput<'a> {
    /// The cache's shape.
    pub shape: GroupShape,
    /// The cache.
    pub cache: &'a GroupCache,
    /// Queries `[R, H, hd]`.
    pub q: &'a [f32],
    /// Query heads H (a multiple of the KV heads).
    pub n_heads: usize,
    /// `[R, max_blocks]` physical blocks, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request `[R]`.
    pub context_lens: &'a [i32],
    /// Tokens of each request whose K is quantised (the rest are in its ring).
    pub k_quantised: &'a [i32],
    /// Tokens of each request whose V is quantised.
    pub v_quantised: &'a [i32],
    /// Each request's ring.
    pub rings: &'a [i32],
}

impl GroupDecodeInput<'_> {
    /// Requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }
    /// Columns of the probabilities' scratch.
    pub fn columns(&self) -> usize {
        self.max_blocks * self.shape.fmt.group
    }
    /// The per-request integers the kernels read, in one array: tables, then lengths, K's and V's
    /// quantised counts and rings (`[R]` each).
    pub fn ints(&self) -> Vec<i32> {
        [
            self.block_tables,
            self.context_lens,
            self.k_quantised,
            self.v_quantised,
            self.rings,
        ]
        .concat()
    }
}

impl OpInput for &GroupDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        let s = &self.shape;
        s.validate(MAX_HEAD_DIM).map_err(invalid)?;
        if !self.cache.fits(s) {
            return Err(invalid("the group cache's buffers do not have its shape's sizes"));
        }
        let r = self.requests();
        if self.n_heads == 0 || !self.n_heads.is_multiple_of(s.kv_heads) {
            return Err(invalid(format!(
                "{} query heads do not share {} KV heads evenly",
                self.n_heads, s.kv_heads
            )));
        }
        if self.q.len() != r * self.n_heads * s.head_dim
            || self.block_tables.len() != r * self.max_blocks
            || self.k_quantised.len() != r
            || self.v_quantised.len() != r
            || self.rings.len() != r
        {
            return Err(invalid(format!(
                "{r} requests take q [{r}, {}, {}], tables [{r}, {}] and one count and ring each",
                self.n_heads, s.head_dim, self.max_blocks
            )));
        }
        let g = s.fmt.group;
        for i in 0..r {
            let (len, kq, vq, ring) = (
                self.context_lens[i],
                self.k_quantised[i],
                self.v_quantised[i],
                self.rings[i],
            );
            let bad = |why: &str| Err(invalid(format!("request {i}: {why}")));
            if len < 0 || len as usize > self.max_blocks * g {
                return bad(&format!("{len} tokens do not fit {} blocks of {g}", self.max_blocks));
            }
            if !(0..=len).contains(&kq) || !(0..=len).contains(&vq) {
                return bad(&format!("{kq} and {vq} quantised tokens of {len}"));
            }
            if (len - kq.min(vq)) as usize > s.fmt.cap() {
                return bad(&format!(
                    "{} tokens in f16 overflow the ring of {}",
                    len - kq.min(vq),
                    s.fmt.cap()
                ));
            }
            if ring < 0 || ring as usize >= s.rings {
                return bad(&format!("ring {ring} of {}", s.rings));
            }
            let coded = kq.max(vq) as usize;
            for b in 0..coded.div_ceil(g) {
                let blk = self.block_tables[i * self.max_blocks + b];
                if blk < 0 || blk as usize >= s.num_blocks {
                    return bad(&format!("block {blk} of {}", s.num_blocks));
                }
            }
        }
        Ok(())
    }
    fn nothing_to_do(&self) -> bool {
        self.context_lens.is_empty()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};

pub use reference::reference;
