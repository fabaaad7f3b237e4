//! Paged decode on the CUDA shim: `paged_attention_decode_f16` and `paged_attention_reduce_f32` of
//! `kernels/paged_attention.cu` on CPU threads.

use super::launch;
use crate::compute::cuda::sim::{SimBackend, bits, budget, dims, ffi, i};
use crate::compute::{BackendError, PagedDecodeInput, Valid, f16_pool};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&PagedDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let p = launch::cuda_num_partitions(inp.max_context());
    let (ld, lr) = (launch::cuda_decode(s.kv_heads, r, p), launch::cuda_reduce(h, r));
    budget(&[ld, lr])?;
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cuda-sim")?, f16_pool(inp.v_pool, "cuda-sim")?);
    let mut tmp_out = vec![0f32; r * h * p * hd];
    let mut tmp_max = vec![0f32; r * h * p];
    let mut tmp_sum = vec![0f32; r * h * p];
    let mut out = vec![0f32; r * h * hd];
    let (a, b, c, d, e, f) = dims(&ld);
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], pools
    // [num_blocks,kvh,bs,hd], block_tables [r,max_blocks] with every block a table entry for a live token
    // inside the pool; the temporaries are [r,h,p,hd] and [r,h,p].
    unsafe {
        ffi::kvs_sim_paged_attention_decode_f16(
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
            inp.context_lens.as_ptr(),
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
    // SAFETY: out is [r,h,hd]; the temporaries were sized above for the same r, h, p, hd.
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
            inp.context_lens.as_ptr(),
            i(p),
            i(h),
            i(hd),
        )
    };
    Ok(out)
}
