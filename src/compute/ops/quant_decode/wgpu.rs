//! The dequantising decode on the wgpu backend: the WGSL `quant_decode_u8`, four codes per u32 word,
//! decoded by hand (FP8 included).

use super::{QuantDecodeInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::ops::quant_append::wgpu::{QuantParams, words};
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, u};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&QuantDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let (fmt, mode) = (
        inp.quant().kernel_code(),
        Quant::scale_mode(inp.0.shape.dtype.format().scales),
    );
    let cols = inp.columns();
    let p = inp.0;
    let s = p.shape;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let n_out = r * h * hd;
    let params = b.uniform(&QuantParams {
        n_heads: u(h)?,
        kv_heads: u(s.kv_heads)?,
        head_dim: u(hd)?,
        block_size: u(s.block_size)?,
        max_blocks: u(p.max_blocks)?,
        fmt: fmt as u32,
        scale_mode: mode as u32,
        vs_at: u(p.k_pool.scales.len())?,
        probs_at: u(n_out)?,
        scale: 1.0 / (hd as f32).sqrt(),
        ..QuantParams::default()
    });
    let q = b.storage(p.q);
    let tables = b.storage(p.block_tables);
    let lens = b.storage(p.context_lens);
    let k_pool = b.storage(&words(p.k_pool.bytes));
    let v_pool = b.storage(&words(p.v_pool.bytes));
    let scales = b.storage(&[p.k_pool.scales, p.v_pool.scales].concat());
    let result = b.zeros(n_out + r * h * cols);
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(s.kv_heads, r),
            bindings: vec![
                (0, &params),
                (1, &q),
                (2, &tables),
                (3, &lens),
                (4, &k_pool),
                (5, &v_pool),
                (6, &scales),
                (7, &result),
            ],
        }],
        &[(&result, n_out)],
    )?;
    let mut out = f32s(got.into_iter().next().unwrap_or_default());
    out.truncate(n_out);
    Ok(out)
}
