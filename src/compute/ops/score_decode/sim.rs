//! The score-returning decode on the CUDA shim: `score_decode_f16` of `kernels/score_attention.cu` on CPU
//! threads.

use super::{ScoreDecodeInput, ScoreDecodeOut, launch};
use crate::compute::cuda::sim::{SimBackend, bits, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&ScoreDecodeInput>) -> Result<ScoreDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd, cols) = (inp.requests(), inp.n_heads, s.head_dim, inp.columns());
    let l = launch::cuda(s.kv_heads, r);
    budget(&[l])?;
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cuda-sim")?, f16_pool(inp.v_pool, "cuda-sim")?);
    let mut out = vec![0f32; r * h * hd];
    let mut probs = vec![0f32; r * h * cols];
    let mut scores = vec![0f32; r * s.kv_heads * cols];
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], pools [num_blocks,kvh,bs,hd]
    // f16, block_tables [r,max_blocks] with every block of a live token inside the pool, valid
    // [num_blocks,kvh,bs]; out is [r,h,hd], probs [r,h,max_blocks·bs] and scores [r,kvh,max_blocks·bs].
    unsafe {
        ffi::kvs_sim_score_decode_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            out.as_mut_ptr(),
            probs.as_mut_ptr(),
            scores.as_mut_ptr(),
            inp.q.as_ptr(),
            bits(k_pool).as_ptr(),
            bits(v_pool).as_ptr(),
            inp.block_tables.as_ptr(),
            inp.context_lens.as_ptr(),
            inp.valid.as_ptr(),
            i(inp.max_blocks),
            i(h),
            i(s.kv_heads),
            i(s.block_size),
            i(hd),
            1.0 / (hd as f32).sqrt(),
        )
    };
    Ok(ScoreDecodeOut { out, probs, scores })
}
