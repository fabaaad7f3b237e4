//! Whole-block copies on both CUDA backends: `copy_blocks_f16` of `kernels/kv_cache.cu` on copies of
//! the pools in the kernels' memory, copied back.

use crate::compute::cuda::entries::{CopyBlocksF16, Entries};
use crate::compute::cuda::entries::{bits, bits_mut, i};
use crate::compute::{BackendError, CopyBlocksInput, Valid, f16_pool_mut};

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let sh = inp.shape;
    let pairs = inp.pairs();
    let (k_pool, v_pool) = (f16_pool_mut(inp.k_pool, K::NAME)?, f16_pool_mut(inp.v_pool, K::NAME)?);
    let l = launch::cuda(pairs);
    b.budget(&[l])?;
    let (mut kp, mut vp) = (b.upload(bits(k_pool))?, b.upload(bits(v_pool))?);
    let bm = b.upload(inp.block_mapping)?;
    let a = CopyBlocksF16 {
        k_pool: &mut kp,
        v_pool: &mut vp,
        block_mapping: &bm,
        num_pairs: i(pairs),
        numel_per_block: i(sh.kv_heads * sh.block_size * sh.head_dim),
    };
    // SAFETY: the pools hold sh.numel() values; every block id in the mapping is inside the pool and
    // the pairs are independent (validated), so each pair copies kv_heads·block_size·head_dim values
    // within the pools.
    unsafe { b.copy_blocks_f16(&l, a) }?;
    b.download(&kp, bits_mut(k_pool))?;
    b.download(&vp, bits_mut(v_pool))
}
