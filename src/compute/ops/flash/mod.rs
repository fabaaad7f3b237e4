//! FlashAttention's tiled forward pass (`Backend::flash_attention`, `kernels/flash_attention.cu`
//! `flash_attention_f32` and its WGSL twin): the input (an attention input plus the tile sizes), the
//! shared-memory budget that limits the tiles, its validation, its suite cases and its probe.
//!
//! Its f64 reference is the attention op's (`compute::reference::attention`, `ops/attention/reference.rs`):
//! the tiled kernel computes the same output.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod suite;
pub(crate) mod wgpu;

use crate::compute::{AttnInput, BackendError, Limits, OpInput, invalid};

/// Shared memory of the CUDA kernel's tiles, in floats (`FA_SMEM` in `kernels/flash_attention.cu`):
/// 40 KiB, under the 48 KiB a block may declare statically.
pub const CUDA_SMEM_FLOATS: usize = 10240;
/// Workgroup memory of the WGSL twin's tiles, in floats (`FA_SMEM` in `kernels/flash_attention.wgsl`):
/// WebGPU's guaranteed 16 KiB less the three per-row arrays.
pub const WGSL_SMEM_FLOATS: usize = 4096 - 3 * MAX_BLOCK_Q;
/// The most query rows per block (`FA_MAX_BR`): the per-row m, l and rescale arrays are this long.
pub const MAX_BLOCK_Q: usize = 64;

/// Floats of shared memory the kernel's tiles take: Q and the accumulator (`Br × hd` each), K and V
/// (`Bc × hd` each) and the score tile (`Br × Bc`).
pub fn smem_floats(block_q: usize, block_k: usize, head_dim: usize) -> usize {
    (2 * block_q + 2 * block_k) * head_dim + block_q * block_k
}

/// Inputs of a tiled forward pass.
#[derive(Debug, Clone, Copy)]
pub struct FlashInput<'a> {
    /// Q, K, V and the mask.
    pub attn: AttnInput<'a>,
    /// Query rows per block (`Br`).
    pub block_q: usize,
    /// Keys per tile (`Bc`).
    pub block_k: usize,
}

impl FlashInput<'_> {
    /// Check the attention input and that the tiles fit in `smem_floats` floats of shared memory.
    pub(crate) fn validate(&self, smem_floats_cap: usize) -> Result<(), BackendError> {
        self.attn.validate()?;
        let (_, _, _, hd) = self.attn.dims();
        let (br, bc) = (self.block_q, self.block_k);
        if br == 0 || bc == 0 {
            return Err(invalid(format!("tiles of {br} × {bc}: Br and Bc must be at least 1")));
        }
        if br > MAX_BLOCK_Q {
            return Err(invalid(format!(
                "Br = {br} query rows per block: the kernel keeps m, l and the rescale factor for at most {MAX_BLOCK_Q} rows"
            )));
        }
        let need = smem_floats(br, bc, hd);
        if need > smem_floats_cap {
            return Err(invalid(format!(
                "tiles Br = {br}, Bc = {bc} at head_dim {hd} need (2·Br + 2·Bc)·hd + Br·Bc = {need} floats ({:.1} KiB) of shared memory; this kernel has {smem_floats_cap} ({:.1} KiB). Choose smaller tiles",
                need as f64 * 4.0 / 1024.0,
                smem_floats_cap as f64 * 4.0 / 1024.0
            )));
        }
        Ok(())
    }
}

impl OpInput for FlashInput<'_> {
    fn validate_for(&self, limits: &Limits) -> Result<(), BackendError> {
        self.validate(limits.flash_smem_floats)
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
