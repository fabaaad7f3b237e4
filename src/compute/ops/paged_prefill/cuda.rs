//! Paged prefill on the CUDA backend: `paged_prefill_f16` over every (KV head, query row, partition), then
//! `paged_attention_reduce_f32` over the rows' partitions.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{PagedPrefillInput, launch};
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::ops::paged_decode::launch as decode_launch;
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&PagedPrefillInput>) -> Result<Vec<f32>, BackendError> {
    let st = b.stream();
    let s = inp.shape;
    let (q_rows, h, hd) = (inp.rows(), inp.n_heads, s.head_dim);
    let p = decode_launch::cuda_num_partitions(inp.max_context());
    let map = inp.row_map();
    let q = st.clone_htod(inp.q).map_err(dev)?;
    let k_pool = st.clone_htod(bits(f16_pool(inp.k_pool, "CUDA")?)).map_err(dev)?;
    let v_pool = st.clone_htod(bits(f16_pool(inp.v_pool, "CUDA")?)).map_err(dev)?;
    let tables = st.clone_htod(inp.block_tables).map_err(dev)?;
    let row_req = st.clone_htod(&map.req).map_err(dev)?;
    let row_ctx = st.clone_htod(&map.ctx).map_err(dev)?;
    let mut tmp_out: CudaSlice<f32> = st.alloc_zeros(q_rows * h * p * hd).map_err(dev)?;
    let mut tmp_max: CudaSlice<f32> = st.alloc_zeros(q_rows * h * p).map_err(dev)?;
    let mut tmp_sum: CudaSlice<f32> = st.alloc_zeros(q_rows * h * p).map_err(dev)?;
    let mut out: CudaSlice<f32> = st.alloc_zeros(q_rows * h * hd).map_err(dev)?;
    let (lp, lr) = (
        launch::cuda(s.kv_heads, q_rows, p),
        decode_launch::cuda_reduce(h, q_rows),
    );
    let (nq, mb, np, hh, kv, bsz, hdim, scale) = (
        i(q_rows),
        i(inp.max_blocks),
        i(p),
        i(h),
        i(s.kv_heads),
        i(s.block_size),
        i(hd),
        1.0 / (hd as f32).sqrt(),
    );
    let mut a = st.launch_builder(b.func(lp.entry)?);
    a.arg(&mut tmp_out)
        .arg(&mut tmp_max)
        .arg(&mut tmp_sum)
        .arg(&q)
        .arg(&k_pool)
        .arg(&v_pool)
        .arg(&tables)
        .arg(&row_req)
        .arg(&row_ctx);
    a.arg(&nq)
        .arg(&mb)
        .arg(&np)
        .arg(&hh)
        .arg(&kv)
        .arg(&bsz)
        .arg(&hdim)
        .arg(&scale);
    // SAFETY: matches paged_prefill_f16's signature; validated as the rows' decode problem: q [Q,H,hd],
    // pools [num_blocks,KVH,B,hd] f16, every row's live blocks inside the pool; row_req/row_ctx [Q];
    // temporaries [Q,H,P(,hd)].
    unsafe { a.launch(cfg(&lp)) }.map_err(dev)?;
    let mut a = st.launch_builder(b.func(lr.entry)?);
    a.arg(&mut out)
        .arg(&tmp_out)
        .arg(&tmp_max)
        .arg(&tmp_sum)
        .arg(&row_ctx)
        .arg(&np)
        .arg(&hh)
        .arg(&hdim);
    // SAFETY: matches paged_attention_reduce_f32 over Q rows: out [Q,H,hd], temporaries as above.
    unsafe { a.launch(cfg(&lr)) }.map_err(dev)?;
    st.clone_dtoh(&out).map_err(dev)
}
