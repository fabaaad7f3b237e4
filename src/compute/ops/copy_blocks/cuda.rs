//! Whole-block copies on the CUDA backend: `copy_blocks_f16` on device copies of the pools, copied back.

use cudarc::driver::PushKernelArg;
use half::f16;

use super::launch;
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, CopyBlocksInput, Valid, f16_pool_mut};

pub(crate) fn run(b: &CudaBackend, inp: Valid<CopyBlocksInput>) -> Result<(), BackendError> {
    let inp = inp.into_inner();
    let sh = inp.shape;
    let pairs = inp.pairs();
    let (k_pool, v_pool) = (f16_pool_mut(inp.k_pool, "CUDA")?, f16_pool_mut(inp.v_pool, "CUDA")?);
    let s = b.stream();
    let mut kp = s.clone_htod(bits(k_pool)).map_err(dev)?;
    let mut vp = s.clone_htod(bits(v_pool)).map_err(dev)?;
    let bm = s.clone_htod(inp.block_mapping).map_err(dev)?;
    let (n, per) = (i(pairs), i(sh.kv_heads * sh.block_size * sh.head_dim));
    let l = launch::cuda(pairs);
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&mut kp).arg(&mut vp).arg(&bm).arg(&n).arg(&per);
    // SAFETY: matches copy_blocks_f16; every block id is inside the pool and no destination is
    // also a source or another pair's destination (validated).
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    s.memcpy_dtoh(&kp, bytemuck::cast_slice_mut::<f16, u16>(k_pool))
        .map_err(dev)?;
    s.memcpy_dtoh(&vp, bytemuck::cast_slice_mut::<f16, u16>(v_pool))
        .map_err(dev)?;
    Ok(())
}
