//! The static-cache append on both CUDA backends: `static_cache_append_f16` of `kernels/kv_cache.cu`
//! on copies of the caches in the kernels' memory, copied back.

use crate::compute::cuda::entries::{Entries, StaticCacheAppendF16};
use crate::compute::cuda::entries::{bits, bits_mut, i};
use crate::compute::{BackendError, StaticAppendInput, Valid};

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<StaticAppendInput>) -> Result<(), BackendError> {
    let StaticAppendInput {
        shape: sh,
        k_cache,
        v_cache,
        layer,
        pos,
        k_new,
        v_new,
    } = inp.into_inner();
    let l = launch::cuda(sh.batch, sh.kv_heads);
    b.budget(&[l])?;
    let (mut kc, mut vc) = (b.upload(bits(k_cache))?, b.upload(bits(v_cache))?);
    let (kn, vn) = (b.upload(k_new)?, b.upload(v_new)?);
    let a = StaticCacheAppendF16 {
        k_cache: &mut kc,
        v_cache: &mut vc,
        k_new: &kn,
        v_new: &vn,
        layer: i(layer),
        pos: i(pos),
        batch: i(sh.batch),
        n_kv_heads: i(sh.kv_heads),
        max_seq: i(sh.max_seq_len),
        head_dim: i(sh.head_dim),
    };
    // SAFETY: the caches hold sh.numel() values and k_new/v_new batch·kv_heads·head_dim, with layer and
    // pos in range (validated); the kernel writes only row (layer, ·, ·, pos).
    unsafe { b.static_cache_append_f16(&l, a) }?;
    b.download(&kc, bits_mut(k_cache))?;
    b.download(&vc, bits_mut(v_cache))
}
