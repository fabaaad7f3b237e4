//! FlashAttention on the wgpu backend: the WGSL `flash_attention_f32`.

use ndarray::Array3;

use super::launch;
use crate::compute::wgpu::{Dispatch, FlashParams, WgpuBackend, dev, f32s, u};
use crate::compute::{BackendError, FlashInput, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&FlashInput>) -> Result<Array3<f32>, BackendError> {
    let a = &inp.attn;
    let (h, _, t, hd) = a.dims();
    let l = launch::wgsl(h, t, inp.block_q);
    if l.grid[0] > 65535 {
        return Err(BackendError::InvalidInput(format!(
            "T = {t} with Br = {}: {} row blocks, more than the 65535 workgroups a dispatch dimension allows",
            inp.block_q, l.grid[0]
        )));
    }
    let p = b.uniform(&FlashParams {
        attn: b.attn_params(a)?,
        block_q: u(inp.block_q)?,
        block_k: u(inp.block_k)?,
        _pad: [0; 2],
    });
    let [q, k, v] = a.slices().map(|s| b.storage(s));
    let out = b.zeros(h * t * hd);
    let got = b.run(
        &[Dispatch {
            dims: l,
            bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (4, &out)],
        }],
        &[(&out, h * t * hd)],
    )?;
    Array3::from_shape_vec((h, t, hd), f32s(got.into_iter().next().unwrap_or_default())).map_err(dev)
}
