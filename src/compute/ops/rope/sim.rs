//! RoPE on the CUDA shim: `rope_f32` of `kernels/rope.cu` on CPU threads.

use super::launch;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::ops::rope::RopeInput;
use crate::compute::{BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&RopeInput>) -> Result<Vec<f32>, BackendError> {
    let l = launch::cuda(inp.rows());
    budget(&[l])?;
    let mut out = vec![0f32; inp.x.len()];
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: x and out hold N·heads·hd values, positions N, and every position has a row of the
    // [P, hd] table (validated); the kernel reads and writes only those.
    unsafe {
        ffi::kvs_sim_rope_f32(
            a,
            b,
            c,
            d,
            e,
            f,
            inp.x.as_ptr(),
            inp.positions.as_ptr(),
            inp.cos_sin.as_ptr(),
            out.as_mut_ptr(),
            i(inp.rows()),
            i(inp.n_heads),
            i(inp.head_dim),
        )
    };
    Ok(out)
}
