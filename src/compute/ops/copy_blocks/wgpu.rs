//! Whole-block copies on the wgpu backend: the WGSL `copy_blocks_f16`, one invocation per value copied.

use super::launch;
use crate::compute::wgpu::{AppendParams, Dispatch, WgpuBackend, pack_f16, unpack_f16};
use crate::compute::{BackendError, CopyBlocksInput, Valid, f16_pool_mut};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let s = inp.shape;
    let (pairs, per) = (inp.pairs(), s.kv_heads * s.block_size * s.head_dim);
    let params = AppendParams::paged(pairs * per, s, per)?;
    let (k_pool, v_pool) = (f16_pool_mut(inp.k_pool, "wgpu")?, f16_pool_mut(inp.v_pool, "wgpu")?);
    let p = b.uniform(&params);
    let mapping = b.storage(inp.block_mapping);
    let (kd, vd) = (b.storage(&pack_f16(k_pool)), b.storage(&pack_f16(v_pool)));
    let words = k_pool.len().div_ceil(2);
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(pairs, per),
            bindings: vec![(0, &p), (3, &mapping), (4, &kd), (5, &vd)],
        }],
        &[(&kd, words), (&vd, words)],
    )?;
    unpack_f16(&got[0], k_pool);
    unpack_f16(&got[1], v_pool);
    Ok(())
}
