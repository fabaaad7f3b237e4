//! The score-returning decode on both CUDA backends: `score_decode_f16` of `kernels/score_attention.cu`,
//! one block per (KV head, request).

use super::{ScoreDecodeInput, ScoreDecodeOut, launch};
use crate::compute::cuda::entries::{Entries, ScoreDecodeF16};
use crate::compute::cuda::entries::{bits, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&ScoreDecodeInput>) -> Result<ScoreDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd, cols) = (inp.requests(), inp.n_heads, s.head_dim, inp.columns());
    let l = launch::cuda(s.kv_heads, r);
    b.budget(&[l])?;
    let q = b.upload(inp.q)?;
    let k_pool = b.upload(bits(f16_pool(inp.k_pool, K::NAME)?))?;
    let v_pool = b.upload(bits(f16_pool(inp.v_pool, K::NAME)?))?;
    let (tables, lens, valid) = (
        b.upload(inp.block_tables)?,
        b.upload(inp.context_lens)?,
        b.upload(inp.valid)?,
    );
    let mut out = b.zeros(r * h * hd)?;
    let mut probs = b.zeros(r * h * cols)?;
    let mut scores = b.zeros(r * s.kv_heads * cols)?;
    let a = ScoreDecodeF16 {
        out: &mut out,
        probs: &mut probs,
        scores: &mut scores,
        q: &q,
        k_pool: &k_pool,
        v_pool: &v_pool,
        block_tables: &tables,
        context_lens: &lens,
        valid: &valid,
        max_blocks: i(inp.max_blocks),
        n_heads: i(h),
        n_kv_heads: i(s.kv_heads),
        block_size: i(s.block_size),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
    };
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], pools [num_blocks,kvh,bs,hd]
    // f16, block_tables [r,max_blocks] with every block of a live token inside the pool, valid
    // [num_blocks,kvh,bs]; out is [r,h,hd], probs [r,h,max_blocks·bs] and scores [r,kvh,max_blocks·bs].
    unsafe { b.score_decode_f16(&l, a) }?;
    Ok(ScoreDecodeOut {
        out: b.to_vec(&out)?,
        probs: b.to_vec(&probs)?,
        scores: b.to_vec(&scores)?,
    })
}
