//! Attention on the wgpu backend: the three WGSL twins dispatched in one submission.

use ndarray::Array3;

use super::launch;
use crate::compute::wgpu::{Dispatch, WgpuBackend, dev, f32s};
use crate::compute::{AttnInput, BackendError, Valid};
use crate::math::AttnCore;

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    let (h, _, t, hd) = inp.dims();
    let p = b.uniform(&b.attn_params(&inp)?);
    let [q, k, v] = inp.slices().map(|s| b.storage(s));
    let (n_s, n_o) = (h * t * t, h * t * hd);
    let (scores, probs, out) = (b.zeros(n_s), b.zeros(n_s), b.zeros(n_o));
    let got = b.run(
        &[
            Dispatch {
                dims: launch::wgsl_attention_scores(h, t),
                bindings: vec![(0, &p), (1, &q), (2, &k), (5, &scores)],
            },
            Dispatch {
                dims: launch::wgsl_softmax_rows(h * t),
                bindings: vec![(0, &p), (4, &scores), (5, &probs)],
            },
            Dispatch {
                dims: launch::wgsl_attention_pv(h, t, hd),
                bindings: vec![(0, &p), (3, &v), (4, &probs), (5, &out)],
            },
        ],
        &[(&scores, n_s), (&probs, n_s), (&out, n_o)],
    )?;
    let mut it = got.into_iter().map(f32s);
    let mut arr =
        |shape: (usize, usize, usize)| Array3::from_shape_vec(shape, it.next().unwrap_or_default()).map_err(dev);
    Ok(AttnCore {
        scores: arr((h, t, t))?,
        probs: arr((h, t, t))?,
        out: arr((h, t, hd))?,
    })
}
