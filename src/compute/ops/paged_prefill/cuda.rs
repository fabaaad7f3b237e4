//! Paged prefill on both CUDA backends: `paged_prefill_f16` over every (KV head, query row, partition),
//! then `paged_attention_reduce_f32` over the rows' partitions (`kernels/paged_attention.cu`).

use super::{PagedPrefillInput, launch};
use crate::compute::cuda::entries::{Entries, PagedAttentionReduceF32, PagedPrefillF16};
use crate::compute::cuda::entries::{bits, i};
use crate::compute::ops::paged_decode::launch as decode_launch;
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&PagedPrefillInput>) -> Result<Vec<f32>, BackendError> {
    let s = inp.shape;
    let (q_rows, h, hd) = (inp.rows(), inp.n_heads, s.head_dim);
    let p = decode_launch::cuda_num_partitions(inp.max_context());
    let (lp, lr) = (
        launch::cuda(s.kv_heads, q_rows, p),
        decode_launch::cuda_reduce(h, q_rows),
    );
    b.budget(&[lp, lr])?;
    let map = inp.row_map();
    let q = b.upload(inp.q)?;
    let k_pool = b.upload(bits(f16_pool(inp.k_pool, K::NAME)?))?;
    let v_pool = b.upload(bits(f16_pool(inp.v_pool, K::NAME)?))?;
    let tables = b.upload(inp.block_tables)?;
    let (row_req, row_ctx) = (b.upload(&map.req)?, b.upload(&map.ctx)?);
    let mut tmp_out = b.zeros(q_rows * h * p * hd)?;
    let mut tmp_max = b.zeros(q_rows * h * p)?;
    let mut tmp_sum = b.zeros(q_rows * h * p)?;
    let mut out = b.zeros(q_rows * h * hd)?;
    let a = PagedPrefillF16 {
        tmp_out: &mut tmp_out,
        tmp_max: &mut tmp_max,
        tmp_sum: &mut tmp_sum,
        q: &q,
        k_pool: &k_pool,
        v_pool: &v_pool,
        block_tables: &tables,
        row_req: &row_req,
        row_ctx: &row_ctx,
        n_rows: i(q_rows),
        max_blocks_per_seq: i(inp.max_blocks),
        num_partitions: i(p),
        n_heads: i(h),
        n_kv_heads: i(s.kv_heads),
        block_size: i(s.block_size),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
    };
    // SAFETY: validated as the rows' decode problem: q [Q,H,hd], pools [num_blocks,KVH,B,hd] f16, every
    // row's live blocks a table entry inside the pool; row_req/row_ctx [Q]; temporaries [Q,H,P(,hd)].
    unsafe { b.paged_prefill_f16(&lp, a) }?;
    let a = PagedAttentionReduceF32 {
        out: &mut out,
        tmp_out: &tmp_out,
        tmp_max: &tmp_max,
        tmp_sum: &tmp_sum,
        context_lens: &row_ctx,
        num_partitions: i(p),
        n_heads: i(h),
        head_dim: i(hd),
    };
    // SAFETY: out is [Q,H,hd]; the temporaries were sized above for the same Q, H, P, hd, and each row's
    // context length is in row_ctx [Q].
    unsafe { b.paged_attention_reduce_f32(&lr, a) }?;
    b.to_vec(&out)
}
