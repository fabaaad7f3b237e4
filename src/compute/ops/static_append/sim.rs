//! The static-cache append on the CUDA shim: `static_cache_append_f16` of `kernels/kv_cache.cu`.

use super::launch;
use crate::compute::cuda::sim::{SimBackend, bits_mut, budget, dims, ffi, i};
use crate::compute::{BackendError, StaticAppendInput, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<StaticAppendInput>) -> Result<(), BackendError> {
    let StaticAppendInput {
        shape: s,
        k_cache,
        v_cache,
        layer,
        pos,
        k_new,
        v_new,
    } = inp.into_inner();
    let l = launch::cuda(s.batch, s.kv_heads);
    budget(&[l])?;
    let (a, b, c, d, e, f) = dims(&l);
    // SAFETY: the caches hold s.numel() values and k_new/v_new batch·kv_heads·head_dim, with layer and
    // pos in range (validated); the kernel writes only row (layer, ·, ·, pos).
    unsafe {
        ffi::kvs_sim_static_cache_append_f16(
            a,
            b,
            c,
            d,
            e,
            f,
            bits_mut(k_cache).as_mut_ptr(),
            bits_mut(v_cache).as_mut_ptr(),
            k_new.as_ptr(),
            v_new.as_ptr(),
            i(layer),
            i(pos),
            i(s.batch),
            i(s.kv_heads),
            i(s.max_seq_len),
            i(s.head_dim),
        )
    };
    Ok(())
}
