//! The paged append on the CPU backend: each token's rows converted to f16 at its slot.

use half::slice::HalfFloatSliceExt;

use crate::compute::{BackendError, CpuBackend, PagedAppendInput, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    let PagedAppendInput {
        shape: s,
        k_pool,
        v_pool,
        slot_mapping,
        k,
        v,
    } = inp.into_inner();
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(slot_mapping.len())]);
    let row = s.kv_heads * s.head_dim;
    for (t, &slot) in slot_mapping.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let (block, off) = (slot as usize / s.block_size, slot as usize % s.block_size);
        for h in 0..s.kv_heads {
            let dst = s.index(block, h, off, 0);
            let src = t * row + h * s.head_dim;
            k_pool[dst..dst + s.head_dim].convert_from_f32_slice(&k[src..src + s.head_dim]);
            v_pool[dst..dst + s.head_dim].convert_from_f32_slice(&v[src..src + s.head_dim]);
        }
    }
    Ok(())
}
