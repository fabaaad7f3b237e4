//! MLA decode on both CUDA backends: `mla_decode_f16` of `kernels/mla_attention.cu`, one block per
//! (head, request).

use super::{MlaDecodeInput, launch};
use crate::compute::cuda::entries::{Entries, MlaDecodeF16};
use crate::compute::cuda::entries::{bits, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&MlaDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let l = launch::cuda(p.n_heads, p.requests());
    b.budget(&[l])?;
    let lat = b.upload(bits(f16_pool(p.latent, K::NAME)?))?;
    let (q_abs, q_rope) = (b.upload(p.q_abs)?, b.upload(p.q_rope)?);
    let (tables, lens) = (b.upload(p.block_tables)?, b.upload(p.context_lens)?);
    let mut out = b.zeros(p.requests() * p.n_heads * p.d_c)?;
    let mut probs = b.zeros((p.requests() * p.n_heads * p.columns()).max(1))?;
    let a = MlaDecodeF16 {
        out: &mut out,
        probs: &mut probs,
        q_abs: &q_abs,
        q_rope: &q_rope,
        latent: &lat,
        block_tables: &tables,
        context_lens: &lens,
        max_blocks: i(p.max_blocks),
        n_heads: i(p.n_heads),
        block_size: i(p.shape.block_size),
        d_c: i(p.d_c),
        d_r: i(p.d_r),
        scale: p.scale,
    };
    // SAFETY: validated: q_abs [R,H,d_c], q_rope [R,H,d_r], the latent pool [blocks,B,d_c+d_r] f16, the
    // tables [R,max_blocks] with every live token's block inside the pool; out is [R,H,d_c] and probs
    // [R,H,max_blocks·B].
    unsafe { b.mla_decode_f16(&l, a) }?;
    b.to_vec(&out)
}
