//! The static-cache append on the CUDA backend: `static_cache_append_f16` on device copies of the
//! caches, copied back.

use cudarc::driver::PushKernelArg;
use half::f16;

use super::launch;
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, StaticAppendInput, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<StaticAppendInput>) -> Result<(), BackendError> {
    let StaticAppendInput {
        shape: sh,
        k_cache,
        v_cache,
        layer,
        pos,
        k_new,
        v_new,
    } = inp.into_inner();
    let s = b.stream();
    let mut kc = s.clone_htod(bits(k_cache)).map_err(dev)?;
    let mut vc = s.clone_htod(bits(v_cache)).map_err(dev)?;
    let kn = s.clone_htod(k_new).map_err(dev)?;
    let vn = s.clone_htod(v_new).map_err(dev)?;
    let (ly, ps, bt, kv, ms, hd) = (
        i(layer),
        i(pos),
        i(sh.batch),
        i(sh.kv_heads),
        i(sh.max_seq_len),
        i(sh.head_dim),
    );
    let l = launch::cuda(sh.batch, sh.kv_heads);
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&mut kc)
        .arg(&mut vc)
        .arg(&kn)
        .arg(&vn)
        .arg(&ly)
        .arg(&ps)
        .arg(&bt)
        .arg(&kv)
        .arg(&ms)
        .arg(&hd);
    // SAFETY: matches static_cache_append_f16; caches hold numel() values, layer/pos validated in range.
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    s.memcpy_dtoh(&kc, bytemuck::cast_slice_mut::<f16, u16>(k_cache))
        .map_err(dev)?;
    s.memcpy_dtoh(&vc, bytemuck::cast_slice_mut::<f16, u16>(v_cache))
        .map_err(dev)?;
    Ok(())
}
