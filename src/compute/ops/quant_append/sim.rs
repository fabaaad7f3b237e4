//! The quantising append on the CUDA shim: `quant_append_u8` of `kernels/quant_kv.cu` on CPU threads.

use super::{QuantAppendInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<QuantAppendInput>) -> Result<(), BackendError> {
    let quant = inp.quant();
    let inp = inp.into_inner().0;
    let s = inp.shape;
    let (fmt, mode) = (quant.kernel_code(), Quant::scale_mode(s.dtype.format().scales));
    let l = launch::cuda(inp.slot_mapping.len());
    budget(&[l])?;
    let (a, b, c, d, e, f) = dims(&l);
    let (kp, vp) = (inp.k_pool, inp.v_pool);
    // SAFETY: the pools hold numel bytes and their layout's scales (validated), every non-negative slot
    // is inside the pool, and k/v hold tokens·kv_heads·head_dim values.
    unsafe {
        ffi::kvs_sim_quant_append_u8(
            a,
            b,
            c,
            d,
            e,
            f,
            kp.bytes.as_mut_ptr(),
            vp.bytes.as_mut_ptr(),
            kp.scales.as_mut_ptr(),
            vp.scales.as_mut_ptr(),
            inp.k.as_ptr(),
            inp.v.as_ptr(),
            inp.slot_mapping.as_ptr(),
            i(inp.slot_mapping.len()),
            i(s.kv_heads),
            i(s.block_size),
            i(s.head_dim),
            fmt,
            mode,
        )
    };
    Ok(())
}
