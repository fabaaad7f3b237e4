//! The dequantising decode on the CUDA backend: `quant_decode_u8`, one block per (KV head, request).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{QuantDecodeInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&QuantDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let st = b.stream();
    let (fmt, mode) = (
        inp.quant().kernel_code(),
        Quant::scale_mode(inp.0.shape.dtype.format().scales),
    );
    let cols = inp.columns();
    let p = inp.0;
    let s = p.shape;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let q = st.clone_htod(p.q).map_err(dev)?;
    let k_pool = st.clone_htod(p.k_pool.bytes).map_err(dev)?;
    let v_pool = st.clone_htod(p.v_pool.bytes).map_err(dev)?;
    let k_scales = st.clone_htod(p.k_pool.scales).map_err(dev)?;
    let v_scales = st.clone_htod(p.v_pool.scales).map_err(dev)?;
    let tables = st.clone_htod(p.block_tables).map_err(dev)?;
    let lens = st.clone_htod(p.context_lens).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(r * h * hd).map_err(dev)?;
    let mut probs: CudaSlice<f32> = st.alloc_zeros((r * h * cols).max(1)).map_err(dev)?;
    let l = launch::cuda(s.kv_heads, r);
    let (mb, hh, kv, bs, hdim, scale) = (
        i(p.max_blocks),
        i(h),
        i(s.kv_heads),
        i(s.block_size),
        i(hd),
        1.0 / (hd as f32).sqrt(),
    );
    let mut a = st.launch_builder(b.func(l.entry)?);
    a.arg(&mut out)
        .arg(&mut probs)
        .arg(&q)
        .arg(&k_pool)
        .arg(&v_pool)
        .arg(&k_scales)
        .arg(&v_scales)
        .arg(&tables)
        .arg(&lens)
        .arg(&mb)
        .arg(&hh)
        .arg(&kv)
        .arg(&bs)
        .arg(&hdim)
        .arg(&scale)
        .arg(&fmt)
        .arg(&mode);
    // SAFETY: matches quant_decode_u8's signature; sizes validated: q [r,h,hd], pools
    // [num_blocks,kvh,bs,hd] bytes with their layout's scales, tables [r,max_blocks] with live blocks
    // inside the pool; out is [r,h,hd] and probs [r,h,max_blocks·bs].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    st.clone_dtoh(&out).map_err(dev)
}
