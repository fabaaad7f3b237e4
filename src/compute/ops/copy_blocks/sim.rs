//! Whole-block copies on the CUDA shim: `copy_blocks_f16` of `kernels/kv_cache.cu`.

use super::launch;
use crate::compute::cuda::sim::{SimBackend, bits_mut, budget, dims, ffi, i};
use crate::compute::{BackendError, CopyBlocksInput, Valid, f16_pool_mut};

pub(crate) fn run(_b: &SimBackend, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let s = inp.shape;
    let pairs = inp.pairs();
    let (k_pool, v_pool) = (
        f16_pool_mut(inp.k_pool, "cuda-sim")?,
        f16_pool_mut(inp.v_pool, "cuda-sim")?,
    );
    let l = launch::cuda(pairs);
    budget(&[l])?;
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: pools hold s.numel() values; every block id in the mapping is inside the pool and the
    // pairs are independent (validated), so each pair copies kv_heads·block_size·head_dim values
    // within the pools.
    unsafe {
        ffi::kvs_sim_copy_blocks_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            bits_mut(k_pool).as_mut_ptr(),
            bits_mut(v_pool).as_mut_ptr(),
            inp.block_mapping.as_ptr(),
            i(pairs),
            i(s.kv_heads * s.block_size * s.head_dim),
        )
    };
    Ok(())
}
