//! The dequantising decode on both CUDA backends: `quant_decode_u8` of `kernels/quant_kv.cu`, one block
//! per (KV head, request).

use super::{QuantDecodeInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, QuantDecodeU8};
use crate::compute::{BackendError, Valid};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&QuantDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let (fmt, scale_mode) = (
        inp.quant().kernel_code(),
        Quant::scale_mode(inp.0.shape.dtype.format().scales),
    );
    let cols = inp.columns();
    let p = inp.0;
    let s = p.shape;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let l = launch::cuda(s.kv_heads, r);
    b.budget(&[l])?;
    let q = b.upload(p.q)?;
    let (k_pool, v_pool) = (b.upload(p.k_pool.bytes)?, b.upload(p.v_pool.bytes)?);
    let (k_scales, v_scales) = (b.upload(p.k_pool.scales)?, b.upload(p.v_pool.scales)?);
    let (tables, lens) = (b.upload(p.block_tables)?, b.upload(p.context_lens)?);
    let mut out = b.zeros(r * h * hd)?;
    let mut probs = b.zeros((r * h * cols).max(1))?;
    let a = QuantDecodeU8 {
        out: &mut out,
        probs: &mut probs,
        q: &q,
        k_pool: &k_pool,
        v_pool: &v_pool,
        k_scales: &k_scales,
        v_scales: &v_scales,
        block_tables: &tables,
        context_lens: &lens,
        max_blocks: i(p.max_blocks),
        n_heads: i(h),
        n_kv_heads: i(s.kv_heads),
        block_size: i(s.block_size),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
        fmt,
        scale_mode,
    };
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], the pools
    // [num_blocks,kvh,bs,hd] bytes with their layout's scales, block_tables [r,max_blocks] with every
    // block of a live token inside the pool; out is [r,h,hd] and probs [r,h,max_blocks·bs].
    unsafe { b.quant_decode_u8(&l, a) }?;
    b.to_vec(&out)
}
