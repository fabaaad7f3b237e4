//! Paged decode on both CUDA backends: `paged_attention_decode_f16` over every (KV head, request,
//! partition), then `paged_attention_reduce_f32` over the partitions (`kernels/paged_attention.cu`). The
//! buffers can stay on the device, for the timings (`CudaBackend::time_paged_decode`).

use super::launch;
use crate::compute::cuda::entries::{Entries, Kernels, PagedAttentionDecodeF16, PagedAttentionReduceF32};
use crate::compute::cuda::entries::{bits, i};
use crate::compute::{BackendError, PagedDecodeInput, Valid, f16_pool};

/// The buffers of a paged decode problem in the kernels' memory, for timing without host transfers.
pub struct DecodeBuffers<K: Kernels> {
    q: K::Buf<f32>,
    k_pool: K::Buf<u16>,
    v_pool: K::Buf<u16>,
    tables: K::Buf<i32>,
    lens: K::Buf<i32>,
    tmp_out: K::Buf<f32>,
    tmp_max: K::Buf<f32>,
    tmp_sum: K::Buf<f32>,
    out: K::Buf<f32>,
    dims: (usize, usize, usize, usize, usize, usize, usize),
}

/// Upload a validated paged decode problem.
pub(crate) fn upload<K: Kernels>(b: &K, inp: &Valid<&PagedDecodeInput>) -> Result<DecodeBuffers<K>, BackendError> {
    let sh = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, sh.head_dim);
    let p = launch::cuda_num_partitions(inp.max_context());
    b.budget(&[launch::cuda_decode(sh.kv_heads, r, p), launch::cuda_reduce(h, r)])?;
    Ok(DecodeBuffers {
        q: b.upload(inp.q)?,
        k_pool: b.upload(bits(f16_pool(inp.k_pool, K::NAME)?))?,
        v_pool: b.upload(bits(f16_pool(inp.v_pool, K::NAME)?))?,
        tables: b.upload(inp.block_tables)?,
        lens: b.upload(inp.context_lens)?,
        tmp_out: b.zeros(r * h * p * hd)?,
        tmp_max: b.zeros(r * h * p)?,
        tmp_sum: b.zeros(r * h * p)?,
        out: b.zeros(r * h * hd)?,
        dims: (r, h, hd, sh.kv_heads, sh.block_size, inp.max_blocks, p),
    })
}

/// Launch the two decode kernels on uploaded buffers (asynchronous on the GPU).
pub(crate) fn launch<K: Entries>(b: &K, d: &mut DecodeBuffers<K>) -> Result<(), BackendError> {
    let (r, h, hd, kvh, bs, max_blocks, p) = d.dims;
    let (ld, lr) = (launch::cuda_decode(kvh, r, p), launch::cuda_reduce(h, r));
    let a = PagedAttentionDecodeF16 {
        tmp_out: &mut d.tmp_out,
        tmp_max: &mut d.tmp_max,
        tmp_sum: &mut d.tmp_sum,
        q: &d.q,
        k_pool: &d.k_pool,
        v_pool: &d.v_pool,
        block_tables: &d.tables,
        context_lens: &d.lens,
        max_blocks_per_seq: i(max_blocks),
        num_partitions: i(p),
        n_heads: i(h),
        n_kv_heads: i(kvh),
        block_size: i(bs),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
    };
    // SAFETY: the buffers were sized in `upload` from the validated problem: q [r,h,hd], pools
    // [num_blocks,kvh,bs,hd], block_tables [r,max_blocks] with every block of a live token a table entry
    // inside the pool; the temporaries are [r,h,p,hd] and [r,h,p].
    unsafe { b.paged_attention_decode_f16(&ld, a) }?;
    let a = PagedAttentionReduceF32 {
        out: &mut d.out,
        tmp_out: &d.tmp_out,
        tmp_max: &d.tmp_max,
        tmp_sum: &d.tmp_sum,
        context_lens: &d.lens,
        num_partitions: i(p),
        n_heads: i(h),
        head_dim: i(hd),
    };
    // SAFETY: out is [r,h,hd]; the temporaries were sized for the same r, h, p, hd.
    unsafe { b.paged_attention_reduce_f32(&lr, a) }
}

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&PagedDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let mut d = upload(b, &inp)?;
    launch(b, &mut d)?;
    b.to_vec(&d.out)
}
