//! FlashAttention on both CUDA backends: `flash_attention_f32` of `kernels/flash_attention.cu`.

use ndarray::Array3;

use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, FlashAttentionF32};
use crate::compute::ops::attention_fused::cuda::upload_qkv;
use crate::compute::{BackendError, FlashInput, Valid};

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&FlashInput>) -> Result<Array3<f32>, BackendError> {
    let at = &inp.attn;
    let (h, kvh, t, hd) = at.dims();
    let l = launch::cuda(h, t, inp.block_q);
    b.budget(&[l])?;
    let [q, k, v] = upload_qkv(b, at)?;
    let mut out = b.zeros(h * t * hd)?;
    let (mask_kind, window, sinks) = at.mask.code();
    let a = FlashAttentionF32 {
        q: &q,
        k: &k,
        v: &v,
        out: &mut out,
        n_heads: i(h),
        n_kv_heads: i(kvh),
        seq: i(t),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
        mask_kind,
        window,
        sinks,
        block_q: i(inp.block_q),
        block_k: i(inp.block_k),
    };
    // SAFETY: q is [h,t,hd], k and v are [kvh,t,hd] (validated), out holds h·t·hd values; the tiles
    // fit the kernel's static shared memory (validated against FA_SMEM and FA_MAX_BR).
    unsafe { b.flash_attention_f32(&l, a) }?;
    Array3::from_shape_vec((h, t, hd), b.to_vec(&out)?).map_err(|e| BackendError::Device(e.to_string()))
}
