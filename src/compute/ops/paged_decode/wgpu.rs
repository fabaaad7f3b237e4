//! Paged decode on the wgpu backend: the WGSL `paged_attention_decode_f16` and
//! `paged_attention_reduce_f32` in one submission. The buffers can stay on the device, for the timings
//! (`WgpuBackend::time_paged_decode`).

use super::launch;
use crate::compute::launch::LaunchDims;
use crate::compute::wgpu::{Dispatch, Pooled, WgpuBackend, f32s, pack_f16, u};
use crate::compute::{BackendError, PagedDecodeInput, Valid, f16_pool};

/// `paged_attention.wgsl`'s uniforms.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DecodeParams {
    pub(crate) n_heads: u32,
    pub(crate) kv_heads: u32,
    pub(crate) head_dim: u32,
    pub(crate) block_size: u32,
    pub(crate) max_blocks: u32,
    pub(crate) num_partitions: u32,
    pub(crate) scale: f32,
    pub(crate) _pad: u32,
}

const _: () = assert!(std::mem::size_of::<DecodeParams>() == 32);

/// A decode problem uploaded to the device.
pub(crate) struct DecodeBuffers {
    params: Pooled,
    q: Pooled,
    k_pool: Pooled,
    v_pool: Pooled,
    tables: Pooled,
    lens: Pooled,
    tmp_out: Pooled,
    tmp_max: Pooled,
    tmp_sum: Pooled,
    out: Pooled,
    /// The geometry of the decode and of the reduce.
    dims: (LaunchDims, LaunchDims),
}

impl DecodeBuffers {
    /// The two dispatches of one decode step.
    pub(crate) fn dispatches(&self) -> [Dispatch<'_>; 2] {
        [
            Dispatch {
                dims: self.dims.0,
                bindings: vec![
                    (0, &self.params),
                    (1, &self.q),
                    (2, &self.k_pool),
                    (3, &self.v_pool),
                    (4, &self.tables),
                    (5, &self.lens),
                    (6, &self.tmp_out),
                    (7, &self.tmp_max),
                    (8, &self.tmp_sum),
                ],
            },
            Dispatch {
                dims: self.dims.1,
                bindings: vec![
                    (0, &self.params),
                    (6, &self.tmp_out),
                    (7, &self.tmp_max),
                    (8, &self.tmp_sum),
                    (9, &self.out),
                ],
            },
        ]
    }
}

/// Upload a validated decode problem.
pub(crate) fn upload(b: &WgpuBackend, inp: &Valid<&PagedDecodeInput>) -> Result<DecodeBuffers, BackendError> {
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let parts = launch::wgsl_num_partitions(inp.max_context());
    let params = DecodeParams {
        n_heads: u(h)?,
        kv_heads: u(s.kv_heads)?,
        head_dim: u(hd)?,
        block_size: u(s.block_size)?,
        max_blocks: u(inp.max_blocks)?,
        num_partitions: u(parts)?,
        scale: 1.0 / (hd as f32).sqrt(),
        _pad: 0,
    };
    Ok(DecodeBuffers {
        params: b.uniform(&params),
        q: b.storage(inp.q),
        k_pool: b.storage(&pack_f16(f16_pool(inp.k_pool, "wgpu")?)),
        v_pool: b.storage(&pack_f16(f16_pool(inp.v_pool, "wgpu")?)),
        tables: b.storage(inp.block_tables),
        lens: b.storage(inp.context_lens),
        tmp_out: b.zeros(r * h * parts * hd),
        tmp_max: b.zeros(r * h * parts),
        tmp_sum: b.zeros(r * h * parts),
        out: b.zeros(r * h * hd),
        dims: (launch::wgsl_decode(s.kv_heads, r, parts), launch::wgsl_reduce(h, r)),
    })
}

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&PagedDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let d = upload(b, &inp)?;
    let n = inp.requests() * inp.n_heads * inp.shape.head_dim;
    let got = b.run(&d.dispatches(), &[(&d.out, n)])?;
    Ok(f32s(got.into_iter().next().unwrap_or_default()))
}
