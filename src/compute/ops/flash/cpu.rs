//! FlashAttention on the CPU backend: the Rust tile walker (`math::flash`), the same tiling under the
//! CUDA kernel's shared-memory budget.

use ndarray::Array3;

use crate::compute::{BackendError, CpuBackend, FlashInput, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&FlashInput>) -> Result<Array3<f32>, BackendError> {
    let a = inp.attn;
    let (h, _, t, _) = a.dims();
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(h, t, inp.block_q)]);
    Ok(crate::math::flash::forward(
        a.q,
        a.k,
        a.v,
        a.mask,
        inp.block_q,
        inp.block_k,
    ))
}
