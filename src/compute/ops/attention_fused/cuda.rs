//! Fused attention on both CUDA backends: `attention_fused_f32` of `kernels/attention.cu`.

use ndarray::Array3;

use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{AttentionFusedF32, Entries, Kernels};
use crate::compute::{AttnInput, BackendError, Valid};

use super::launch;

/// Q, K and V of an attention problem in the kernels' memory.
pub(crate) fn upload_qkv<K: Kernels>(b: &K, inp: &AttnInput) -> Result<[K::Buf<f32>; 3], BackendError> {
    let [q, k, v] = inp.slices();
    Ok([b.upload(q)?, b.upload(k)?, b.upload(v)?])
}

/// Launch `attention_fused_f32` on uploaded Q/K/V into `out` (asynchronous on the GPU). The caller
/// has validated `inp` (it comes from a [`Valid`]) and uploaded it with [`upload_qkv`].
pub(crate) fn launch<K: Entries>(
    b: &K,
    qkv: &[K::Buf<f32>; 3],
    out: &mut K::Buf<f32>,
    inp: &AttnInput,
) -> Result<(), BackendError> {
    let (h, kvh, t, hd) = inp.dims();
    let l = launch::cuda(h, t);
    b.budget(&[l])?;
    let (mask_kind, window, sinks) = inp.mask.code();
    let a = AttentionFusedF32 {
        q: &qkv[0],
        k: &qkv[1],
        v: &qkv[2],
        out,
        n_heads: i(h),
        n_kv_heads: i(kvh),
        seq: i(t),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
        mask_kind,
        window,
        sinks,
    };
    // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated, uploaded whole), out holds h·t·hd values.
    unsafe { b.attention_fused_f32(&l, a) }
}

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&AttnInput>) -> Result<Array3<f32>, BackendError> {
    let (h, _, t, hd) = inp.dims();
    let qkv = upload_qkv(b, &inp)?;
    let mut out = b.zeros(h * t * hd)?;
    launch(b, &qkv, &mut out, &inp)?;
    Array3::from_shape_vec((h, t, hd), b.to_vec(&out)?).map_err(|e| BackendError::Device(e.to_string()))
}
