//! Fused attention on the CUDA shim: `attention_fused_f32` of `kernels/attention.cu` on CPU threads.

use ndarray::Array3;

use super::launch;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{AttnInput, BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&AttnInput>) -> Result<Array3<f32>, BackendError> {
    let (h, kvh, t, hd) = inp.dims();
    let l = launch::cuda(h, t);
    budget(&[l])?;
    let (mk, w, s) = inp.mask.code();
    let mut out = vec![0f32; h * t * hd];
    let [q, k, v] = inp.slices();
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated), out holds h·t·hd values.
    unsafe {
        ffi::kvs_sim_attention_fused_f32(
            a,
            b,
            c,
            d,
            e,
            f,
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
        )
    };
    Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))
}
