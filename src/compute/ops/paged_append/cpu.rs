//! The paged append on the CPU backend: each token's rows written at its slot through the pools' dtype
//! (f16: rounded to nearest even).

use crate::compute::{BackendError, CpuBackend, PagedAppendInput, Valid};

pub(crate) fn run(b: &CpuBackend, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.slot_mapping.len())]);
    write_rows(b, inp);
    Ok(())
}

/// Each token's rows written at its slot through the pools' dtype (shared with `quant_append`).
pub(crate) fn write_rows(_b: &CpuBackend, inp: Valid<PagedAppendInput>) {
    let PagedAppendInput {
        shape: s,
        k_pool,
        v_pool,
        slot_mapping,
        k,
        v,
    } = inp.into_inner();
    let f = s.dtype.format();
    let row = s.kv_heads * s.head_dim;
    for (t, &slot) in slot_mapping.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let (block, off) = (slot as usize / s.block_size, slot as usize % s.block_size);
        for h in 0..s.kv_heads {
            let dst = s.index(block, h, off, 0);
            let (a, b) = (f.bytes_for(dst), f.bytes_for(dst + s.head_dim));
            let src = t * row + h * s.head_dim..t * row + (h + 1) * s.head_dim;
            let sc = s.row_scales(block, h, off);
            (f.write)(&k[src.clone()], &mut k_pool.bytes[a..b], &mut k_pool.scales[sc.clone()]);
            (f.write)(&v[src], &mut v_pool.bytes[a..b], &mut v_pool.scales[sc]);
        }
    }
}
