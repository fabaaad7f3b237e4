//! The paged append on the wgpu backend: the WGSL `paged_append_f16`, one invocation per element
//! written.

use super::launch;
use crate::compute::wgpu::{AppendParams, WgpuBackend};
use crate::compute::{BackendError, PagedAppendInput, Valid, f16_pool_mut};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let s = inp.shape;
    let n = inp.slot_mapping.len() * s.kv_heads * s.head_dim;
    if n == 0 {
        return Ok(());
    }
    let params = AppendParams::paged(n, s, inp.slot_mapping.len())?;
    b.append(
        launch::wgsl(inp.slot_mapping.len(), s.kv_heads, s.head_dim),
        &params,
        inp.k,
        inp.v,
        inp.slot_mapping,
        f16_pool_mut(inp.k_pool, "wgpu")?,
        f16_pool_mut(inp.v_pool, "wgpu")?,
    )
}
