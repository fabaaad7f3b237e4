//! The paged append on the CUDA shim: `paged_append_f16` of `kernels/kv_cache.cu`.

use super::launch;
use crate::compute::cuda::sim::{SimBackend, bits_mut, budget, dims, ffi, i};
use crate::compute::{BackendError, PagedAppendInput, Valid, f16_pool_mut};

pub(crate) fn run(_b: &SimBackend, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    let PagedAppendInput {
        shape: s,
        k_pool,
        v_pool,
        slot_mapping,
        k,
        v,
    } = inp.into_inner();
    let (k_pool, v_pool) = (f16_pool_mut(k_pool, "cuda-sim")?, f16_pool_mut(v_pool, "cuda-sim")?);
    let l = launch::cuda(slot_mapping.len());
    budget(&[l])?;
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: pools hold s.numel() values, every non-negative slot is inside the pool (validated),
    // k/v hold tokens·kv_heads·head_dim values.
    unsafe {
        ffi::kvs_sim_paged_append_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            bits_mut(k_pool).as_mut_ptr(),
            bits_mut(v_pool).as_mut_ptr(),
            k.as_ptr(),
            v.as_ptr(),
            slot_mapping.as_ptr(),
            i(slot_mapping.len()),
            i(s.kv_heads),
            i(s.block_size),
            i(s.head_dim),
        )
    };
    Ok(())
}
