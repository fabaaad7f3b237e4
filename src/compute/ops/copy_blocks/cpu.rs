//! Whole-block copies on the CPU backend.

use crate::compute::{BackendError, CopyBlocksInput, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let s = inp.shape;
    let per = s.kv_heads * s.block_size * s.head_dim;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.pairs())]);
    for p in inp.block_mapping.chunks_exact(2) {
        let (src, dst) = (p[0] as usize * per, p[1] as usize * per);
        inp.k_pool.copy_within(src..src + per, dst);
        inp.v_pool.copy_within(src..src + per, dst);
    }
    Ok(())
}
