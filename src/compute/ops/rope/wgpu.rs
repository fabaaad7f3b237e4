//! RoPE on the wgpu backend: the WGSL `rope_f32`.

use super::launch;
use crate::compute::ops::rope::RopeInput;
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, u};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&RopeInput>) -> Result<Vec<f32>, BackendError> {
    let p = b.uniform(&[u(inp.rows())?, u(inp.n_heads)?, u(inp.head_dim)?, 0u32]);
    let x = b.storage(inp.x);
    let pos = b.storage(inp.positions);
    let table = b.storage(inp.cos_sin);
    let out = b.zeros(inp.x.len());
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(inp.rows()),
            bindings: vec![(0, &p), (1, &x), (2, &pos), (3, &table), (4, &out)],
        }],
        &[(&out, inp.x.len())],
    )?;
    Ok(f32s(got.into_iter().next().unwrap_or_default()))
}
