//! Attention on both CUDA backends: `attention_scores_f32`, `softmax_rows_f32` and `attention_pv_f32`
//! of `kernels/attention.cu`, launched in turn.

use ndarray::Array3;

use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{AttentionPvF32, AttentionScoresF32, Entries, SoftmaxRowsF32};
use crate::compute::ops::attention_fused::cuda::upload_qkv;
use crate::compute::{AttnInput, BackendError, Valid};
use crate::math::AttnCore;

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    let (h, kvh, t, hd) = inp.dims();
    let (ls, lm, lp) = (
        launch::cuda_attention_scores(h, t),
        launch::cuda_softmax_rows(h * t),
        launch::cuda_attention_pv(h, t, hd),
    );
    b.budget(&[ls, lm, lp])?;
    let [q, k, v] = upload_qkv(b, &inp)?;
    let mut scores = b.zeros(h * t * t)?;
    let mut probs = b.zeros(h * t * t)?;
    let mut out = b.zeros(h * t * hd)?;
    let (mask_kind, window, sinks) = inp.mask.code();
    let a = AttentionScoresF32 {
        q: &q,
        k: &k,
        scores: &mut scores,
        n_heads: i(h),
        n_kv_heads: i(kvh),
        seq: i(t),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
        mask_kind,
        window,
        sinks,
    };
    // SAFETY: q is [h,t,hd], k is [kvh,t,hd] (validated: contiguous, consistent) and scores holds h·t·t
    // values, the extents the kernel indexes for these sizes.
    unsafe { b.attention_scores_f32(&ls, a) }?;
    let a = SoftmaxRowsF32 {
        r#in: &scores,
        out: &mut probs,
        rows: i(h * t),
        cols: i(t),
    };
    // SAFETY: both buffers hold rows·cols = h·t·t values.
    unsafe { b.softmax_rows_f32(&lm, a) }?;
    let a = AttentionPvF32 {
        probs: &probs,
        v: &v,
        out: &mut out,
        n_heads: i(h),
        n_kv_heads: i(kvh),
        seq: i(t),
        head_dim: i(hd),
    };
    // SAFETY: probs is [h,t,t], v [kvh,t,hd] (validated), out [h,t,hd].
    unsafe { b.attention_pv_f32(&lp, a) }?;
    let arr = |n: usize, data: Vec<f32>| {
        Array3::from_shape_vec((h, t, n), data).map_err(|e| BackendError::Device(e.to_string()))
    };
    Ok(AttnCore {
        scores: arr(t, b.to_vec(&scores)?)?,
        probs: arr(t, b.to_vec(&probs)?)?,
        out: arr(hd, b.to_vec(&out)?)?,
    })
}
