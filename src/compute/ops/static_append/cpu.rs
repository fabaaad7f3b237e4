//! The static-cache append on the CPU backend: each (batch row, KV head) row converted to f16 in place.

use half::slice::HalfFloatSliceExt;

use crate::compute::{BackendError, CpuBackend, StaticAppendInput, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<StaticAppendInput>) -> Result<(), BackendError> {
    let StaticAppendInput {
        shape: s,
        k_cache,
        v_cache,
        layer,
        pos,
        k_new,
        v_new,
    } = inp.into_inner();
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(s.batch, s.kv_heads)]);
    for bh in 0..s.batch * s.kv_heads {
        let (b, h) = (bh / s.kv_heads, bh % s.kv_heads);
        let dst = s.index(layer, b, h, pos, 0);
        let src = bh * s.head_dim;
        k_cache[dst..dst + s.head_dim].convert_from_f32_slice(&k_new[src..src + s.head_dim]);
        v_cache[dst..dst + s.head_dim].convert_from_f32_slice(&v_new[src..src + s.head_dim]);
    }
    Ok(())
}
