//! The paged append on both CUDA backends (the GPU through cudarc, the shim on CPU threads):
//! `paged_append_f16` of `kernels/kv_cache.cu` on copies of the pools in the kernels' memory, copied back.

use crate::compute::cuda::entries::{Entries, PagedAppendF16};
use crate::compute::cuda::entries::{bits, bits_mut, i};
use crate::compute::{BackendError, PagedAppendInput, Valid, f16_pool_mut};

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    let PagedAppendInput {
        shape: sh,
        k_pool,
        v_pool,
        slot_mapping,
        k,
        v,
    } = inp.into_inner();
    let (k_pool, v_pool) = (f16_pool_mut(k_pool, K::NAME)?, f16_pool_mut(v_pool, K::NAME)?);
    let l = launch::cuda(slot_mapping.len());
    b.budget(&[l])?;
    let (mut kp, mut vp) = (b.upload(bits(k_pool))?, b.upload(bits(v_pool))?);
    let (kd, vd, sm) = (b.upload(k)?, b.upload(v)?, b.upload(slot_mapping)?);
    let a = PagedAppendF16 {
        k_pool: &mut kp,
        v_pool: &mut vp,
        k: &kd,
        v: &vd,
        slot_mapping: &sm,
        num_tokens: i(slot_mapping.len()),
        n_kv_heads: i(sh.kv_heads),
        block_size: i(sh.block_size),
        head_dim: i(sh.head_dim),
    };
    // SAFETY: the pools hold sh.numel() values, every non-negative slot lies inside the pool
    // (validated), and k/v hold tokens·kv_heads·head_dim values.
    unsafe { b.paged_append_f16(&l, a) }?;
    b.download(&kp, bits_mut(k_pool))?;
    b.download(&vp, bits_mut(v_pool))
}
