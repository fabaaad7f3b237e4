//! MLA decode on the CUDA backend: `mla_decode_f16`, one block per (head, request).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{MlaDecodeInput, launch};
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&MlaDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let st = b.stream();
    let p = *inp;
    let qa = st.clone_htod(p.q_abs).map_err(dev)?;
    // A zero-length copy would be an empty allocation: d_r = 0 uploads one unused value.
    let qr = st
        .clone_htod(if p.q_rope.is_empty() { &[0.0f32][..] } else { p.q_rope })
        .map_err(dev)?;
    let lat = st.clone_htod(bits(f16_pool(p.latent, "CUDA")?)).map_err(dev)?;
    let tables = st.clone_htod(p.block_tables).map_err(dev)?;
    let lens = st.clone_htod(p.context_lens).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(p.requests() * p.n_heads * p.d_c).map_err(dev)?;
    let mut probs: CudaSlice<f32> = st
        .alloc_zeros((p.requests() * p.n_heads * p.columns()).max(1))
        .map_err(dev)?;
    let l = launch::cuda(p.n_heads, p.requests());
    let (mb, h, bs, dc, dr) = (i(p.max_blocks), i(p.n_heads), i(p.shape.block_size), i(p.d_c), i(p.d_r));
    let mut a = st.launch_builder(b.func(l.entry)?);
    a.arg(&mut out)
        .arg(&mut probs)
        .arg(&qa)
        .arg(&qr)
        .arg(&lat)
        .arg(&tables)
        .arg(&lens)
        .arg(&mb)
        .arg(&h)
        .arg(&bs)
        .arg(&dc)
        .arg(&dr)
        .arg(&p.scale);
    // SAFETY: matches mla_decode_f16's signature; validated: q_abs [R,H,d_c], q_rope [R,H,d_r], the
    // latent pool [blocks,B,d_c+d_r] f16, live tokens' blocks inside the pool; out [R,H,d_c] and probs
    // [R,H,max_blocks·B].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    st.clone_dtoh(&out).map_err(dev)
}
