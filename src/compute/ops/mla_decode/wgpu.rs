//! MLA decode on the wgpu backend: the WGSL `mla_decode_f16`, the latent pool read through the f16
//! pool snippet (as K).

use super::{MlaDecodeInput, launch};
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, pack_f16, u};
use crate::compute::{BackendError, Valid, f16_pool};

/// `mla_attention.wgsl`'s uniforms.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MlaParams {
    n_heads: u32,
    block_size: u32,
    max_blocks: u32,
    d_c: u32,
    d_r: u32,
    scale: f32,
    probs_at: u32,
    rope_at: u32,
}

const _: () = assert!(std::mem::size_of::<MlaParams>() == 32);

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&MlaDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let n_out = p.requests() * p.n_heads * p.d_c;
    let params = b.uniform(&MlaParams {
        n_heads: u(p.n_heads)?,
        block_size: u(p.shape.block_size)?,
        max_blocks: u(p.max_blocks)?,
        d_c: u(p.d_c)?,
        d_r: u(p.d_r)?,
        scale: p.scale,
        probs_at: u(n_out)?,
        rope_at: u(p.q_abs.len())?,
    });
    let q = b.storage(&[p.q_abs, p.q_rope, &[0.0]].concat());
    let lat = b.storage(&pack_f16(f16_pool(p.latent, "wgpu")?));
    let tables = b.storage(p.block_tables);
    let lens = b.storage(p.context_lens);
    let result = b.zeros(n_out + p.requests() * p.n_heads * p.columns());
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(p.n_heads, p.requests()),
            bindings: vec![(0, &params), (1, &q), (2, &lat), (4, &tables), (5, &lens), (7, &result)],
        }],
        &[(&result, n_out)],
    )?;
    let mut out = f32s(got.into_iter().next().unwrap_or_default());
    out.truncate(n_out);
    Ok(out)
}
