//! The group decode on the wgpu backend: the WGSL `group_decode`, codes in u32 words and the rings'
//! f16 pairs decoded by hand.

use super::{GroupDecodeInput, launch};
use crate::compute::ops::group_append::wgpu::{GroupParams, buffers};
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, u};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let s = p.shape;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let n_out = r * h * hd;
    let at = p.block_tables.len();
    let mut params = GroupParams {
        n_heads: u(h)?,
        max_blocks: u(p.max_blocks)?,
        scale: 1.0 / (hd as f32).sqrt(),
        lens_at: u(at)?,
        kq_at: u(at + r)?,
        vq_at: u(at + 2 * r)?,
        rings_at: u(at + 3 * r)?,
        probs_at: u(n_out)?,
        ..GroupParams::default()
    };
    let [cw, pw, rw] = buffers(&s, p.cache, &mut params)?;
    let uniform = b.uniform(&params);
    let q = b.storage(p.q);
    let ints = b.storage(&p.ints());
    let (codes, pbuf, ring) = (b.storage(&cw), b.storage(&pw), b.storage(&rw));
    let result = b.zeros(n_out + r * h * p.columns());
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(s.kv_heads, r),
            bindings: vec![
                (0, &uniform),
                (1, &q),
                (2, &ints),
                (3, &codes),
                (4, &pbuf),
                (5, &ring),
                (6, &result),
            ],
        }],
        &[(&result, n_out)],
    )?;
    let mut out = f32s(got.into_iter().next().unwrap_or_default());
    out.truncate(n_out);
    Ok(out)
}
