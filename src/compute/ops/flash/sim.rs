//! FlashAttention on the CUDA shim: `flash_attention_f32` of `kernels/flash_attention.cu`.

use ndarray::Array3;

use super::launch;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{BackendError, FlashInput, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&FlashInput>) -> Result<Array3<f32>, BackendError> {
    let a = &inp.attn;
    let (h, kvh, t, hd) = a.dims();
    let l = launch::cuda(h, t, inp.block_q);
    budget(&[l])?;
    let (mk, w, s) = a.mask.code();
    let mut out = vec![0f32; h * t * hd];
    let [q, k, v] = a.slices();
    let (gx, gy, gz, bx, by, bz) = dims(&l);
    // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated), out holds h·t·hd values; the tiles
    // fit the kernel's static shared memory (validated against FA_SMEM and FA_MAX_BR).
    unsafe {
        ffi::kvs_sim_flash_attention_f32(
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            q.as_ptr(),
            k.as_ptr(),
            v.as_ptr(),
            out.as_mut_ptr(),
            i(h),
            i(kvh),
            i(t),
            i(hd),
            1.0 / (hd as f32).sqrt(),
            mk,
            w,
            s,
            i(inp.block_q),
            i(inp.block_k),
        )
    };
    Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))
}
