//! The streaming decode on the CUDA backend: `stream_decode_f16`, one block per (query head, request).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{StreamDecodeInput, StreamDecodeOut, launch};
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&StreamDecodeInput>) -> Result<StreamDecodeOut, BackendError> {
    let st = b.stream();
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let q = st.clone_htod(inp.q).map_err(dev)?;
    let q_pos = st.clone_htod(inp.q_pos).map_err(dev)?;
    let k_pool = st.clone_htod(bits(f16_pool(inp.k_pool, "CUDA")?)).map_err(dev)?;
    let v_pool = st.clone_htod(bits(f16_pool(inp.v_pool, "CUDA")?)).map_err(dev)?;
    let tables = st.clone_htod(inp.block_tables).map_err(dev)?;
    let lens = st.clone_htod(inp.context_lens).map_err(dev)?;
    let key_pos = st.clone_htod(inp.key_pos).map_err(dev)?;
    let table = st.clone_htod(inp.cos_sin).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(r * h * hd).map_err(dev)?;
    let mut probs: CudaSlice<f32> = st.alloc_zeros(r * h * inp.columns()).map_err(dev)?;
    let l = launch::cuda(h, r);
    let (mb, hh, kv, bs, hdim, scale) = (
        i(inp.max_blocks),
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
        .arg(&q_pos)
        .arg(&k_pool)
        .arg(&v_pool)
        .arg(&tables)
        .arg(&lens)
        .arg(&key_pos)
        .arg(&table)
        .arg(&mb)
        .arg(&hh)
        .arg(&kv)
        .arg(&bs)
        .arg(&hdim)
        .arg(&scale);
    // SAFETY: matches stream_decode_f16's signature; sizes validated: q [r,h,hd], q_pos [r], pools
    // [num_blocks,kvh,bs,hd], tables [r,max_blocks] with live blocks inside the pool, key_pos
    // [r,max_blocks·bs] with live positions inside the table, out [r,h,hd], probs [r,h,max_blocks·bs].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    Ok(StreamDecodeOut {
        out: st.clone_dtoh(&out).map_err(dev)?,
        probs: st.clone_dtoh(&probs).map_err(dev)?,
    })
}
