//! The group decode on the CUDA backend: `group_decode`, one block per (KV head, request).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{GroupDecodeInput, launch};
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let st = b.stream();
    let p = *inp;
    let s = p.shape;
    let c = p.cache;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let q = st.clone_htod(p.q).map_err(dev)?;
    let kc = st.clone_htod(&c.k_codes).map_err(dev)?;
    let vc = st.clone_htod(&c.v_codes).map_err(dev)?;
    let ks = st.clone_htod(&c.k_scale).map_err(dev)?;
    let kz = st.clone_htod(&c.k_zero).map_err(dev)?;
    let vs = st.clone_htod(&c.v_scale).map_err(dev)?;
    let vz = st.clone_htod(&c.v_zero).map_err(dev)?;
    let kr = st.clone_htod(&c.k_ring).map_err(dev)?;
    let vr = st.clone_htod(&c.v_ring).map_err(dev)?;
    let tables = st.clone_htod(p.block_tables).map_err(dev)?;
    let lens = st.clone_htod(p.context_lens).map_err(dev)?;
    let kq = st.clone_htod(p.k_quantised).map_err(dev)?;
    let vq = st.clone_htod(p.v_quantised).map_err(dev)?;
    let rings = st.clone_htod(p.rings).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(r * h * hd).map_err(dev)?;
    let mut probs: CudaSlice<f32> = st.alloc_zeros((r * h * p.columns()).max(1)).map_err(dev)?;
    let l = launch::cuda(s.kv_heads, r);
    let (mb, hh, kv, hdim, scale, g, cap, bits, sym, vpt) = (
        i(p.max_blocks),
        i(h),
        i(s.kv_heads),
        i(hd),
        1.0 / (hd as f32).sqrt(),
        i(s.fmt.group),
        i(s.fmt.cap()),
        s.fmt.bits as i32,
        i32::from(s.fmt.symmetric),
        i32::from(s.fmt.v_per_token),
    );
    let mut a = st.launch_builder(b.func(l.entry)?);
    a.arg(&mut out)
        .arg(&mut probs)
        .arg(&q)
        .arg(&kc)
        .arg(&vc)
        .arg(&ks)
        .arg(&kz)
        .arg(&vs)
        .arg(&vz)
        .arg(&kr)
        .arg(&vr)
        .arg(&tables)
        .arg(&lens)
        .arg(&kq)
        .arg(&vq)
        .arg(&rings)
        .arg(&mb)
        .arg(&hh)
        .arg(&kv)
        .arg(&hdim)
        .arg(&scale)
        .arg(&g)
        .arg(&cap)
        .arg(&bits)
        .arg(&sym)
        .arg(&vpt);
    // SAFETY: matches group_decode's signature; validated: q [r,h,hd], the cache's buffers have the
    // shape's sizes, quantised tokens' blocks are inside the pools, rings in range; out is [r,h,hd]
    // and probs [r,h,max_blocks·G].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    st.clone_dtoh(&out).map_err(dev)
}
