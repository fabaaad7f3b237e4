//! Attention on the CUDA shim: the same three kernels of `kernels/attention.cu` on CPU threads.

use ndarray::Array3;

use super::launch;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{AttnInput, BackendError, Valid};
use crate::math::AttnCore;

pub(crate) fn run(_b: &SimBackend, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    let (h, kvh, t, hd) = inp.dims();
    let (ls, lm, lp) = (
        launch::cuda_attention_scores(h, t),
        launch::cuda_softmax_rows(h * t),
        launch::cuda_attention_pv(h, t, hd),
    );
    budget(&[ls, lm, lp])?;
    let (mk, w, s) = inp.mask.code();
    let scale = 1.0 / (hd as f32).sqrt();
    let mut scores = vec![0f32; h * t * t];
    let mut probs = vec![0f32; h * t * t];
    let mut out = vec![0f32; h * t * hd];
    let [q, k, v] = inp.slices();
    let (a, b, c, d, e, f) = dims(&ls);
    // SAFETY: q is [h,t,hd], k is [kvh,t,hd] (validated: contiguous, consistent) and scores holds h·t·t
    // values, the extents the kernel indexes for these sizes; the call returns when the kernel is done.
    unsafe {
        ffi::kvs_sim_attention_scores_f32(
            a,
            b,
            c,
            d,
            e,
            f,
            q.as_ptr(),
            k.as_ptr(),
            scores.as_mut_ptr(),
            i(h),
            i(kvh),
            i(t),
            i(hd),
            scale,
            mk,
            w,
            s,
        )
    };
    let (a, b, c, d, e, f) = dims(&lm);
    // SAFETY: both buffers hold rows·cols = h·t·t values.
    unsafe { ffi::kvs_sim_softmax_rows_f32(a, b, c, d, e, f, scores.as_ptr(), probs.as_mut_ptr(), i(h * t), i(t)) };
    let (a, b, c, d, e, f) = dims(&lp);
    // SAFETY: probs is [h,t,t], v is [kvh,t,hd], out holds h·t·hd values.
    unsafe {
        ffi::kvs_sim_attention_pv_f32(
            a,
            b,
            c,
            d,
            e,
            f,
            probs.as_ptr(),
            v.as_ptr(),
            out.as_mut_ptr(),
            i(h),
            i(kvh),
            i(t),
            i(hd),
        )
    };
    Ok(AttnCore {
        scores: Array3::from_shape_vec((h, t, t), scores).map_err(|e| BackendError::Device(e.to_string()))?,
        probs: Array3::from_shape_vec((h, t, t), probs).map_err(|e| BackendError::Device(e.to_string()))?,
        out: Array3::from_shape_vec((h, t, hd), out).map_err(|e| BackendError::Device(e.to_string()))?,
    })
}
