//! The streaming decode on the CUDA shim: `stream_decode_f16` of `kernels/stream_attention.cu` on CPU
//! threads.

use super::{StreamDecodeInput, StreamDecodeOut, launch};
use crate::compute::cuda::sim::{SimBackend, bits, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&StreamDecodeInput>) -> Result<StreamDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let l = launch::cuda(h, r);
    budget(&[l])?;
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cuda-sim")?, f16_pool(inp.v_pool, "cuda-sim")?);
    let mut out = vec![0f32; r * h * hd];
    let mut probs = vec![0f32; r * h * inp.columns()];
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], q_pos [r], pools
    // [num_blocks,kvh,bs,hd] f16, block_tables [r,max_blocks] with every block of a live token inside the
    // pool, key_pos [r,max_blocks·bs] with every position of a live token inside the [P,hd] table (as
    // q_pos); out is [r,h,hd] and probs [r,h,max_blocks·bs].
    unsafe {
        ffi::kvs_sim_stream_decode_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            out.as_mut_ptr(),
            probs.as_mut_ptr(),
            inp.q.as_ptr(),
            inp.q_pos.as_ptr(),
            bits(k_pool).as_ptr(),
            bits(v_pool).as_ptr(),
            inp.block_tables.as_ptr(),
            inp.context_lens.as_ptr(),
            inp.key_pos.as_ptr(),
            inp.cos_sin.as_ptr(),
            i(inp.max_blocks),
            i(h),
            i(s.kv_heads),
            i(s.block_size),
            i(hd),
            1.0 / (hd as f32).sqrt(),
        )
    };
    Ok(StreamDecodeOut { out, probs })
}
