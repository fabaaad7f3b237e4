//! The quantising append on the CUDA backend: `quant_append_u8` on device copies of the pools and
//! their scales, copied back.

use cudarc::driver::PushKernelArg;

use super::{QuantAppendInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<QuantAppendInput>) -> Result<(), BackendError> {
    let quant = inp.quant();
    let inp = inp.into_inner().0;
    let sh = inp.shape;
    let (fmt, mode) = (quant.kernel_code(), Quant::scale_mode(sh.dtype.format().scales));
    let (kp_host, vp_host) = (inp.k_pool, inp.v_pool);
    let s = b.stream();
    let mut kp = s.clone_htod(&*kp_host.bytes).map_err(dev)?;
    let mut vp = s.clone_htod(&*vp_host.bytes).map_err(dev)?;
    let mut ks = s.clone_htod(&*kp_host.scales).map_err(dev)?;
    let mut vs = s.clone_htod(&*vp_host.scales).map_err(dev)?;
    let kd = s.clone_htod(inp.k).map_err(dev)?;
    let vd = s.clone_htod(inp.v).map_err(dev)?;
    let sm = s.clone_htod(inp.slot_mapping).map_err(dev)?;
    let (n, kv, bs, hd) = (
        i(inp.slot_mapping.len()),
        i(sh.kv_heads),
        i(sh.block_size),
        i(sh.head_dim),
    );
    let l = launch::cuda(inp.slot_mapping.len());
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&mut kp)
        .arg(&mut vp)
        .arg(&mut ks)
        .arg(&mut vs)
        .arg(&kd)
        .arg(&vd)
        .arg(&sm)
        .arg(&n)
        .arg(&kv)
        .arg(&bs)
        .arg(&hd)
        .arg(&fmt)
        .arg(&mode);
    // SAFETY: matches quant_append_u8; the pools hold numel bytes and the scales the layout's count
    // (validated), and every non-negative slot lies inside the pool.
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    s.memcpy_dtoh(&kp, kp_host.bytes).map_err(dev)?;
    s.memcpy_dtoh(&vp, vp_host.bytes).map_err(dev)?;
    s.memcpy_dtoh(&ks, kp_host.scales).map_err(dev)?;
    s.memcpy_dtoh(&vs, vp_host.scales).map_err(dev)?;
    Ok(())
}
