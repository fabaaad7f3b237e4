//! The group append on the CUDA backend: `group_store_f16` and `group_quant` on device copies of the
//! cache, copied back.

use cudarc::driver::PushKernelArg;

use super::{GroupAppendInput, launch};
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<GroupAppendInput>) -> Result<(), BackendError> {
    let (rows, jobs) = (inp.n_rows(), inp.n_jobs());
    let ls = launch::cuda(rows, jobs);
    let inp = inp.into_inner();
    let sh = inp.shape;
    let c = inp.cache;
    let s = b.stream();
    let mut kc = s.clone_htod(&c.k_codes).map_err(dev)?;
    let mut vc = s.clone_htod(&c.v_codes).map_err(dev)?;
    let mut ks = s.clone_htod(&c.k_scale).map_err(dev)?;
    let mut kz = s.clone_htod(&c.k_zero).map_err(dev)?;
    let mut vs = s.clone_htod(&c.v_scale).map_err(dev)?;
    let mut vz = s.clone_htod(&c.v_zero).map_err(dev)?;
    let mut kr = s.clone_htod(&c.k_ring).map_err(dev)?;
    let mut vr = s.clone_htod(&c.v_ring).map_err(dev)?;
    let (kvh, hd, g, cap, bits, sym) = (
        i(sh.kv_heads),
        i(sh.head_dim),
        i(sh.fmt.group),
        i(sh.fmt.cap()),
        sh.fmt.bits as i32,
        i32::from(sh.fmt.symmetric),
    );
    for l in &ls {
        if l.entry == "group_store_f16" {
            let kd = s.clone_htod(inp.k).map_err(dev)?;
            let vd = s.clone_htod(inp.v).map_err(dev)?;
            let rd = s.clone_htod(inp.rows).map_err(dev)?;
            let n = i(rows);
            let mut a = s.launch_builder(b.func(l.entry)?);
            a.arg(&mut kr)
                .arg(&mut vr)
                .arg(&kd)
                .arg(&vd)
                .arg(&rd)
                .arg(&n)
                .arg(&kvh)
                .arg(&hd)
                .arg(&cap);
            // SAFETY: matches group_store_f16; validated: rows' rings are in range, k/v hold
            // n·KVH·hd values and the rings have the shape's size.
            unsafe { a.launch(cfg(l)) }.map_err(dev)?;
        } else {
            let jd = s.clone_htod(inp.jobs).map_err(dev)?;
            let n = i(jobs);
            let mut a = s.launch_builder(b.func(l.entry)?);
            a.arg(&mut kc)
                .arg(&mut vc)
                .arg(&mut ks)
                .arg(&mut kz)
                .arg(&mut vs)
                .arg(&mut vz)
                .arg(&kr)
                .arg(&vr)
                .arg(&jd)
                .arg(&n)
                .arg(&kvh)
                .arg(&hd)
                .arg(&g)
                .arg(&cap)
                .arg(&bits)
                .arg(&sym);
            // SAFETY: matches group_quant; validated: every job's ring and destination are inside
            // the cache, whose buffers have the shape's sizes.
            unsafe { a.launch(cfg(l)) }.map_err(dev)?;
        }
    }
    s.memcpy_dtoh(&kc, &mut c.k_codes).map_err(dev)?;
    s.memcpy_dtoh(&vc, &mut c.v_codes).map_err(dev)?;
    s.memcpy_dtoh(&ks, &mut c.k_scale).map_err(dev)?;
    s.memcpy_dtoh(&kz, &mut c.k_zero).map_err(dev)?;
    s.memcpy_dtoh(&vs, &mut c.v_scale).map_err(dev)?;
    s.memcpy_dtoh(&vz, &mut c.v_zero).map_err(dev)?;
    s.memcpy_dtoh(&kr, &mut c.k_ring).map_err(dev)?;
    s.memcpy_dtoh(&vr, &mut c.v_ring).map_err(dev)?;
    Ok(())
}
