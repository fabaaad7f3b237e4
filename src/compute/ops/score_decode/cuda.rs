//! The score-returning decode on the CUDA backend: `score_decode_f16`, one block per (KV head, request).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{ScoreDecodeInput, ScoreDecodeOut, launch};
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&ScoreDecodeInput>) -> Result<ScoreDecodeOut, BackendError> {
    let st = b.stream();
    let s = inp.shape;
    let (r, h, hd, cols) = (inp.requests(), inp.n_heads, s.head_dim, inp.columns());
    let q = st.clone_htod(inp.q).map_err(dev)?;
    let k_pool = st.clone_htod(bits(f16_pool(inp.k_pool, "CUDA")?)).map_err(dev)?;
    let v_pool = st.clone_htod(bits(f16_pool(inp.v_pool, "CUDA")?)).map_err(dev)?;
    let tables = st.clone_htod(inp.block_tables).map_err(dev)?;
    let lens = st.clone_htod(inp.context_lens).map_err(dev)?;
    let valid = st.clone_htod(inp.valid).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(r * h * hd).map_err(dev)?;
    let mut probs: CudaSlice<f32> = st.alloc_zeros(r * h * cols).map_err(dev)?;
    let mut scores: CudaSlice<f32> = st.alloc_zeros(r * s.kv_heads * cols).map_err(dev)?;
    let l = launch::cuda(s.kv_heads, r);
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
        .arg(&mut scores)
        .arg(&q)
        .arg(&k_pool)
        .arg(&v_pool)
        .arg(&tables)
        .arg(&lens)
        .arg(&valid)
        .arg(&mb)
        .arg(&hh)
        .arg(&kv)
        .arg(&bs)
        .arg(&hdim)
        .arg(&scale);
    // SAFETY: matches score_decode_f16's signature; sizes validated: q [r,h,hd], pools
    // [num_blocks,kvh,bs,hd], tables [r,max_blocks] with live blocks inside the pool, valid
    // [num_blocks,kvh,bs], out [r,h,hd], probs [r,h,max_blocks·bs], scores [r,kvh,max_blocks·bs].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    Ok(ScoreDecodeOut {
        out: st.clone_dtoh(&out).map_err(dev)?,
        probs: st.clone_dtoh(&probs).map_err(dev)?,
        scores: st.clone_dtoh(&scores).map_err(dev)?,
    })
}
