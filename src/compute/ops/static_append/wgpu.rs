//! The static-cache append on the wgpu backend: the WGSL `static_cache_append_f16`, one invocation per
//! element written.

use super::launch;
use crate::compute::wgpu::{AppendParams, WgpuBackend, u};
use crate::compute::{BackendError, StaticAppendInput, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<StaticAppendInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let s = inp.shape;
    let n = s.batch * s.kv_heads * s.head_dim;
    let params = AppendParams {
        n: u(n)?,
        kv_heads: u(s.kv_heads)?,
        head_dim: u(s.head_dim)?,
        layers: u(s.layers)?,
        batch: u(s.batch)?,
        max_seq_len: u(s.max_seq_len)?,
        layer: u(inp.layer)?,
        pos: u(inp.pos)?,
        block_size: 1,
        num_slots: 0,
        _pad: [0; 2],
    };
    b.append(
        launch::wgsl(s.batch, s.kv_heads, s.head_dim),
        &params,
        inp.k_new,
        inp.v_new,
        &[0],
        inp.k_cache,
        inp.v_cache,
    )
}
