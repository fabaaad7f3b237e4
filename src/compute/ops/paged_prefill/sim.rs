//! Paged prefill on the CUDA shim: `paged_prefill_f16` and `paged_attention_reduce_f32` of
//! `kernels/paged_attention.cu` on CPU threads.

use super::{PagedPrefillInput, launch};
use crate::compute::cuda::sim::{SimBackend, bits, budget, dims, ffi, i};
use crate::compute::ops::paged_decode::launch as decode_launch;
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&PagedPrefillInput>) -> Result<Vec<f32>, BackendError> {
    let s = inp.shape;
    let (q_rows, h, hd) = (inp.rows(), inp.n_heads, s.head_dim);
    let p = decode_launch::cuda_num_partitions(inp.max_context());
    let (lp, lr) = (
        launch::cuda(s.kv_heads, q_rows, p),
        decode_launch::cuda_reduce(h, q_rows),
    );
    budget(&[lp, lr])?;
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cuda-sim")?, f16_pool(inp.v_pool, "cuda-sim")?);
    let map = inp.row_map();
    let mut tmp_out = vec![0f32; q_rows * h * p * hd];
    let mut tmp_max = vec![0f32; q_rows * h * p];
    let mut tmp_sum = vec![0f32; q_rows * h * p];
    let mut out = vec![0f32; q_rows * h * hd];
    let (a, b, c, d, e, f) = dims(&lp);
    // SAFETY: validated as the rows' decode problem: q [Q,H,hd], pools [num_blocks,KVH,B,hd], every row's
    // live blocks a table entry inside the pool; row_req/row_ctx [Q]; temporaries [Q,H,P(,hd)].
    unsafe {
        ffi::kvs_sim_paged_prefill_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            tmp_out.as_mut_ptr(),
            tmp_max.as_mut_ptr(),
            tmp_sum.as_mut_ptr(),
            inp.q.as_ptr(),
            bits(k_pool).as_ptr(),
            bits(v_pool).as_ptr(),
            inp.block_tables.as_ptr(),
            map.req.as_ptr(),
            map.ctx.as_ptr(),
            i(q_rows),
            i(inp.max_blocks),
            i(p),
            i(h),
            i(s.kv_heads),
            i(s.block_size),
            i(hd),
            1.0 / (hd as f32).sqrt(),
        )
    };
    let (a, b, c, d, e, f) = dims(&lr);
    // SAFETY: out is [Q,H,hd]; the temporaries were sized above for the same Q, H, P, hd.
    unsafe {
        ffi::kvs_sim_paged_attention_reduce_f32(
            a,
            b,
            c,
            d,
            e,
            f,
            out.as_mut_ptr(),
            tmp_out.as_ptr(),
            tmp_max.as_ptr(),
            tmp_sum.as_ptr(),
            map.ctx.as_ptr(),
            i(p),
            i(h),
            i(hd),
        )
    };
    Ok(out)
}
