//! Paged prefill on the wgpu backend: the WGSL `paged_prefill_f16` and `paged_attention_reduce_f32` in one
//! submission. `lens` carries the rows' contexts and then their requests.

use super::{PagedPrefillInput, launch};
use crate::compute::ops::paged_decode::launch as decode_launch;
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, pack_f16, u};
use crate::compute::{BackendError, Valid, f16_pool};

/// `paged_attention.wgsl`'s uniforms, with the query rows in the last field.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PrefillParams {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    num_partitions: u32,
    scale: f32,
    n_rows: u32,
}

const _: () = assert!(std::mem::size_of::<PrefillParams>() == 32);

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&PagedPrefillInput>) -> Result<Vec<f32>, BackendError> {
    let s = inp.shape;
    let (q_rows, h, hd) = (inp.rows(), inp.n_heads, s.head_dim);
    let parts = decode_launch::wgsl_num_partitions(inp.max_context());
    let map = inp.row_map();
    let params = b.uniform(&PrefillParams {
        n_heads: u(h)?,
        kv_heads: u(s.kv_heads)?,
        head_dim: u(hd)?,
        block_size: u(s.block_size)?,
        max_blocks: u(inp.max_blocks)?,
        num_partitions: u(parts)?,
        scale: 1.0 / (hd as f32).sqrt(),
        n_rows: u(q_rows)?,
    });
    let q = b.storage(inp.q);
    let k_pool = b.storage(&pack_f16(f16_pool(inp.k_pool, "wgpu")?));
    let v_pool = b.storage(&pack_f16(f16_pool(inp.v_pool, "wgpu")?));
    let tables = b.storage(inp.block_tables);
    let lens = b.storage(&[map.ctx.as_slice(), map.req.as_slice()].concat());
    let tmp_out = b.zeros(q_rows * h * parts * hd);
    let tmp_max = b.zeros(q_rows * h * parts);
    let tmp_sum = b.zeros(q_rows * h * parts);
    let out = b.zeros(q_rows * h * hd);
    let got = b.run(
        &[
            Dispatch {
                dims: launch::wgsl(s.kv_heads, q_rows, parts),
                bindings: vec![
                    (0, &params),
                    (1, &q),
                    (2, &k_pool),
                    (3, &v_pool),
                    (4, &tables),
                    (5, &lens),
                    (6, &tmp_out),
                    (7, &tmp_max),
                    (8, &tmp_sum),
                ],
            },
            Dispatch {
                dims: decode_launch::wgsl_reduce(h, q_rows),
                bindings: vec![(0, &params), (6, &tmp_out), (7, &tmp_max), (8, &tmp_sum), (9, &out)],
            },
        ],
        &[(&out, q_rows * h * hd)],
    )?;
    Ok(f32s(got.into_iter().next().unwrap_or_default()))
}
