//! Fused attention on the wgpu backend: the WGSL `attention_fused_f32`.

use ndarray::Array3;

use super::launch;
use crate::compute::wgpu::{Dispatch, WgpuBackend, dev, f32s};
use crate::compute::{AttnInput, BackendError, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&AttnInput>) -> Result<Array3<f32>, BackendError> {
    let (h, _, t, hd) = inp.dims();
    if t > 65535 {
        return Err(BackendError::InvalidInput(format!(
            "T = {t}: the fused WGSL kernel dispatches one workgroup per query (at most 65535)"
        )));
    }
    let p = b.uniform(&b.attn_params(&inp)?);
    let [q, k, v] = inp.slices().map(|s| b.storage(s));
    let out = b.zeros(h * t * hd);
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(h, t),
            bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (5, &out)],
        }],
        &[(&out, h * t * hd)],
    )?;
    Array3::from_shape_vec((h, t, hd), f32s(got.into_iter().next().unwrap_or_default())).map_err(dev)
}
