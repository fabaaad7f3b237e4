//! The streaming decode on both CUDA backends: `stream_decode_f16` of `kernels/stream_attention.cu`, one
//! block per (query head, request).

use super::{StreamDecodeInput, StreamDecodeOut, launch};
use crate::compute::cuda::entries::{Entries, StreamDecodeF16};
use crate::compute::cuda::entries::{bits, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&StreamDecodeInput>) -> Result<StreamDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let l = launch::cuda(h, r);
    b.budget(&[l])?;
    let (q, q_pos) = (b.upload(inp.q)?, b.upload(inp.q_pos)?);
    let k_pool = b.upload(bits(f16_pool(inp.k_pool, K::NAME)?))?;
    let v_pool = b.upload(bits(f16_pool(inp.v_pool, K::NAME)?))?;
    let (tables, lens) = (b.upload(inp.block_tables)?, b.upload(inp.context_lens)?);
    let (key_pos, cos_sin) = (b.upload(inp.key_pos)?, b.upload(inp.cos_sin)?);
    let mut out = b.zeros(r * h * hd)?;
    let mut probs = b.zeros(r * h * inp.columns())?;
    let a = StreamDecodeF16 {
        out: &mut out,
        probs: &mut probs,
        q: &q,
        q_pos: &q_pos,
        k_pool: &k_pool,
        v_pool: &v_pool,
        block_tables: &tables,
        context_lens: &lens,
        key_pos: &key_pos,
        cos_sin: &cos_sin,
        max_blocks: i(inp.max_blocks),
        n_heads: i(h),
        n_kv_heads: i(s.kv_heads),
        block_size: i(s.block_size),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
    };
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], q_pos [r], pools
    // [num_blocks,kvh,bs,hd] f16, block_tables [r,max_blocks] with every block of a live token inside the
    // pool, key_pos [r,max_blocks·bs] with every position of a live token inside the [P,hd] table (as
    // q_pos); out is [r,h,hd] and probs [r,h,max_blocks·bs].
    unsafe { b.stream_decode_f16(&l, a) }?;
    Ok(StreamDecodeOut {
        out: b.to_vec(&out)?,
        probs: b.to_vec(&probs)?,
    })
}
