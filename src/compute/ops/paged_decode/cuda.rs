//! Paged decode on the CUDA backend: `paged_attention_decode_f16` over every (KV head, request,
//! partition), then `paged_attention_reduce_f32` over the partitions. The buffers can stay on the
//! device, for the timings (`CudaBackend::time_paged_decode`).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::launch;
use crate::compute::cuda::device::{CudaBackend, bits, cfg, dev, i};
use crate::compute::{BackendError, PagedDecodeInput, Valid, f16_pool};

/// Device buffers of a paged decode problem, for timing without host transfers.
pub struct DecodeBuffers {
    q: CudaSlice<f32>,
    k_pool: CudaSlice<u16>,
    v_pool: CudaSlice<u16>,
    tables: CudaSlice<i32>,
    lens: CudaSlice<i32>,
    tmp_out: CudaSlice<f32>,
    tmp_max: CudaSlice<f32>,
    tmp_sum: CudaSlice<f32>,
    out: CudaSlice<f32>,
    dims: (usize, usize, usize, usize, usize, usize, usize),
}

/// Upload a validated paged decode problem.
pub(crate) fn upload(b: &CudaBackend, inp: &Valid<&PagedDecodeInput>) -> Result<DecodeBuffers, BackendError> {
    let s = b.stream();
    let sh = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, sh.head_dim);
    let p = launch::cuda_num_partitions(inp.max_context());
    Ok(DecodeBuffers {
        q: s.clone_htod(inp.q).map_err(dev)?,
        k_pool: s.clone_htod(bits(f16_pool(inp.k_pool, "CUDA")?)).map_err(dev)?,
        v_pool: s.clone_htod(bits(f16_pool(inp.v_pool, "CUDA")?)).map_err(dev)?,
        tables: s.clone_htod(inp.block_tables).map_err(dev)?,
        lens: s.clone_htod(inp.context_lens).map_err(dev)?,
        tmp_out: s.alloc_zeros(r * h * p * hd).map_err(dev)?,
        tmp_max: s.alloc_zeros(r * h * p).map_err(dev)?,
        tmp_sum: s.alloc_zeros(r * h * p).map_err(dev)?,
        out: s.alloc_zeros(r * h * hd).map_err(dev)?,
        dims: (r, h, hd, sh.kv_heads, sh.block_size, inp.max_blocks, p),
    })
}

/// Launch the two decode kernels on uploaded buffers (asynchronous).
pub(crate) fn launch(b: &CudaBackend, d: &mut DecodeBuffers) -> Result<(), BackendError> {
    let (r, h, hd, kvh, bs, max_blocks, p) = d.dims;
    let (ld, lr) = (launch::cuda_decode(kvh, r, p), launch::cuda_reduce(h, r));
    let (mb, np, hh, kv, bsz, hdim, scale) = (
        i(max_blocks),
        i(p),
        i(h),
        i(kvh),
        i(bs),
        i(hd),
        1.0 / (hd as f32).sqrt(),
    );
    let mut a = b.stream().launch_builder(b.func(ld.entry)?);
    a.arg(&mut d.tmp_out)
        .arg(&mut d.tmp_max)
        .arg(&mut d.tmp_sum)
        .arg(&d.q)
        .arg(&d.k_pool)
        .arg(&d.v_pool)
        .arg(&d.tables)
        .arg(&d.lens);
    a.arg(&mb).arg(&np).arg(&hh).arg(&kv).arg(&bsz).arg(&hdim).arg(&scale);
    // SAFETY: argument order and types match paged_attention_decode_f16; buffer sizes were set from the
    // validated problem in `upload` (tmp buffers [r,h,p,hd] and [r,h,p]).
    unsafe { a.launch(cfg(&ld)) }.map_err(dev)?;
    let mut a = b.stream().launch_builder(b.func(lr.entry)?);
    a.arg(&mut d.out)
        .arg(&d.tmp_out)
        .arg(&d.tmp_max)
        .arg(&d.tmp_sum)
        .arg(&d.lens)
        .arg(&np)
        .arg(&hh)
        .arg(&hdim);
    // SAFETY: matches paged_attention_reduce_f32; out is [r,h,hd], temporaries as above.
    unsafe { a.launch(cfg(&lr)) }.map_err(dev)?;
    Ok(())
}

pub(crate) fn run(b: &CudaBackend, inp: Valid<&PagedDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let mut d = upload(b, &inp)?;
    launch(b, &mut d)?;
    b.stream().clone_dtoh(&d.out).map_err(dev)
}
