//! Whole-block copies on the CPU backend.

use crate::cache::paged::copy_block;
use crate::compute::{BackendError, CopyBlocksInput, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let mut inp = inp.into_inner();
    let s = inp.shape;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.pairs())]);
    for p in inp.block_mapping.chunks_exact(2) {
        let (src, dst) = (p[0] as usize, p[1] as usize);
        copy_block(inp.k_pool.reborrow(), s, src, dst);
        copy_block(inp.v_pool.reborrow(), s, src, dst);
    }
    Ok(())
}
