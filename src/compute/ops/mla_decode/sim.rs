//! MLA decode on the CUDA shim: `mla_decode_f16` of `kernels/mla_attention.cu` on CPU threads.

use super::{MlaDecodeInput, launch};
use crate::compute::cuda::sim::{SimBackend, bits, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&MlaDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let l = launch::cuda(p.n_heads, p.requests());
    budget(&[l])?;
    let lat = f16_pool(p.latent, "cuda-sim")?;
    let mut out = vec![0f32; p.requests() * p.n_heads * p.d_c];
    let mut probs = vec![0f32; (p.requests() * p.n_heads * p.columns()).max(1)];
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: validated: q_abs [R,H,d_c], q_rope [R,H,d_r], the latent pool [blocks,B,d_c+d_r] f16, the
    // tables [R,max_blocks] with every live token's block inside the pool; out is [R,H,d_c] and probs
    // [R,H,max_blocks·B].
    unsafe {
        ffi::kvs_sim_mla_decode_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            out.as_mut_ptr(),
            probs.as_mut_ptr(),
            p.q_abs.as_ptr(),
            p.q_rope.as_ptr(),
            bits(lat).as_ptr(),
            p.block_tables.as_ptr(),
            p.context_lens.as_ptr(),
            i(p.max_blocks),
            i(p.n_heads),
            i(p.shape.block_size),
            i(p.d_c),
            i(p.d_r),
            p.scale,
        )
    };
    Ok(out)
}
