//! The paged append on the CUDA backend: `paged_append_f16` on device copies of the pools, copied back.

use cudarc::driver::PushKernelArg;
use half::f16;

use super::launch;
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, PagedAppendInput, Valid, f16_pool_mut};

pub(crate) fn run(b: &CudaBackend, inp: Valid<PagedAppendInput>) -> Result<(), BackendError> {
    let PagedAppendInput {
        shape: sh,
        k_pool,
        v_pool,
        slot_mapping,
        k,
        v,
    } = inp.into_inner();
    let (k_pool, v_pool) = (f16_pool_mut(k_pool, "CUDA")?, f16_pool_mut(v_pool, "CUDA")?);
    let s = b.stream();
    let mut kp = s.clone_htod(bits(k_pool)).map_err(dev)?;
    let mut vp = s.clone_htod(bits(v_pool)).map_err(dev)?;
    let kd = s.clone_htod(k).map_err(dev)?;
    let vd = s.clone_htod(v).map_err(dev)?;
    let sm = s.clone_htod(slot_mapping).map_err(dev)?;
    let (n, kv, bs, hd) = (i(slot_mapping.len()), i(sh.kv_heads), i(sh.block_size), i(sh.head_dim));
    let l = launch::cuda(slot_mapping.len());
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&mut kp)
        .arg(&mut vp)
        .arg(&kd)
        .arg(&vd)
        .arg(&sm)
        .arg(&n)
        .arg(&kv)
        .arg(&bs)
        .arg(&hd);
    // SAFETY: matches paged_append_f16; every non-negative slot lies inside the pool (validated).
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    s.memcpy_dtoh(&kp, bytemuck::cast_slice_mut::<f16, u16>(k_pool))
        .map_err(dev)?;
    s.memcpy_dtoh(&vp, bytemuck::cast_slice_mut::<f16, u16>(v_pool))
        .map_err(dev)?;
    Ok(())
}
