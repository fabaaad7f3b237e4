//! The dequantising decode on the CUDA shim: `quant_decode_u8` of `kernels/quant_kv.cu` on CPU threads.

use super::{QuantDecodeInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&QuantDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let (fmt, mode) = (
        inp.quant().kernel_code(),
        Quant::scale_mode(inp.0.shape.dtype.format().scales),
    );
    let cols = inp.columns();
    let p = inp.0;
    let s = p.shape;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let l = launch::cuda(s.kv_heads, r);
    budget(&[l])?;
    let mut out = vec![0f32; r * h * hd];
    let mut probs = vec![0f32; (r * h * cols).max(1)];
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: sizes validated (only validation makes a `Valid`): q is [r,h,hd], the pools
    // [num_blocks,kvh,bs,hd] bytes with their layout's scales, block_tables [r,max_blocks] with every
    // block of a live token inside the pool; out is [r,h,hd] and probs [r,h,max_blocks·bs].
    unsafe {
        ffi::kvs_sim_quant_decode_u8(
            a,
            b,
            c,
            d,
            e,
            f,
            out.as_mut_ptr(),
            probs.as_mut_ptr(),
            p.q.as_ptr(),
            p.k_pool.bytes.as_ptr(),
            p.v_pool.bytes.as_ptr(),
            p.k_pool.scales.as_ptr(),
            p.v_pool.scales.as_ptr(),
            p.block_tables.as_ptr(),
            p.context_lens.as_ptr(),
            i(p.max_blocks),
            i(h),
            i(s.kv_heads),
            i(s.block_size),
            i(hd),
            1.0 / (hd as f32).sqrt(),
            fmt,
            mode,
        )
    };
    Ok(out)
}
