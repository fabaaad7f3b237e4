//! `Backend::mla_decode`: multi-head latent attention decode (DeepSeek-V2/V3's MLA) over a paged latent
//! cache, with the up-projections absorbed. Each cached row holds the normalised latent `c_KV` (d_c) and
//! the decoupled RoPE key `k_R` (d_r) for all heads together; the kernel scores `q̃ · c_KV + q_R · k_R`
//! (q̃ = W_UK q_nope, absorbed on the host), scaled by `1/√(d_nope + d_r)`, and returns the latent-space
//! output `Σ p · c_KV` (`[R, H, d_c]`); W_UV is applied after it. K and V are never expanded. The kernel
//! is `kernels/mla_attention.cu` and `.wgsl`; the suite checks it against the f64 absorbed reference and,
//! through a random MLA layer (`math::mla`), against the naive expanded attention.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::{KvDtype, PagedShape, PoolRef};
use crate::compute::ops::paged_decode::check_block_tables;
use crate::compute::{BackendError, Limits, OpInput, check_pools, invalid};

/// The largest row (d_c + d_r) the kernels take.
pub const MLA_MAX_DIM: usize = 1024;

/// One MLA decode step: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct MlaDecodeInput<'a> {
    /// Absorbed queries `q̃ = W_UK q_nope`, `[R, H, d_c]`.
    pub q_abs: &'a [f32],
    /// RoPE queries `[R, H, d_r]` (rotated).
    pub q_rope: &'a [f32],
    /// Query heads H.
    pub n_heads: usize,
    /// Latent width d_c.
    pub d_c: usize,
    /// RoPE key width d_r.
    pub d_r: usize,
    /// The softmax scale (DeepSeek: `1/√(d_nope + d_r)`).
    pub scale: f32,
    /// The latent pool's shape: one KV head, head_dim = d_c + d_r, f16.
    pub shape: PagedShape,
    /// The latent pool `[blocks, B, d_c + d_r]`.
    pub latent: PoolRef<'a>,
    /// `[R, max_blocks]` physical block ids, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request `[R]`.
    pub context_lens: &'a [i32],
}

impl MlaDecodeInput<'_> {
    /// Requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }
    /// Columns of the probabilities' scratch.
    pub fn columns(&self) -> usize {
        self.max_blocks * self.shape.block_size
    }
    /// The latent pool's physical row of request `r`'s token `t`.
    pub fn row(&self, r: usize, t: usize) -> usize {
        let b = self.shape.block_size;
        self.block_tables[r * self.max_blocks + t / b] as usize * b + t % b
    }
}

impl OpInput for &MlaDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        let s = self.shape;
        if s.dtype != KvDtype::F16 {
            return Err(invalid(format!("mla_decode reads an f16 latent pool, not {}", s.dtype)));
        }
        if s.kv_heads != 1 || s.head_dim != self.d_c + self.d_r {
            return Err(invalid(format!(
                "the latent pool has one KV head of d_c + d_r = {} values, not {} of {}",
                self.d_c + self.d_r,
                s.kv_heads,
                s.head_dim
            )));
        }
        if self.d_c == 0 || self.d_c + self.d_r > MLA_MAX_DIM || s.block_size == 0 {
            return Err(invalid(format!(
                "1 ≤ d_c and d_c + d_r ≤ {MLA_MAX_DIM} (got {} + {}), block size ≥ 1",
                self.d_c, self.d_r
            )));
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(invalid(format!("the scale must be positive, not {}", self.scale)));
        }
        check_pools(s, [self.latent, self.latent])?;
        let r = self.requests();
        if self.q_abs.len() != r * self.n_heads * self.d_c || self.q_rope.len() != r * self.n_heads * self.d_r {
            return Err(invalid(format!(
                "{r} requests take q_abs [{r}, {h}, {}] and q_rope [{r}, {h}, {}]",
                self.d_c,
                self.d_r,
                h = self.n_heads
            )));
        }
        check_block_tables(
            self.block_tables,
            self.max_blocks,
            self.context_lens,
            s.block_size,
            s.num_blocks,
        )
    }
    fn nothing_to_do(&self) -> bool {
        self.context_lens.is_empty() || self.n_heads == 0
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};

pub use reference::reference;
