//! The group decode on the CUDA shim: `group_decode` of `kernels/group_kv.cu` on CPU threads.

use super::{GroupDecodeInput, launch};
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let s = p.shape;
    let c = p.cache;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let l = launch::cuda(s.kv_heads, r);
    budget(&[l])?;
    let mut out = vec![0f32; r * h * hd];
    let mut probs = vec![0f32; (r * h * p.columns()).max(1)];
    let (a, b, cc, d, e, f) = dims(&l);
    // SAFETY: validated: q is [r,h,hd], the cache's buffers have the shape's sizes, every block of a
    // quantised token is inside the pools, every ring in range and the tokens in f16 fit their ring;
    // out is [r,h,hd] and probs [r,h,max_blocks·G].
    unsafe {
        ffi::kvs_sim_group_decode(
            a,
            b,
            cc,
            d,
            e,
            f,
            out.as_mut_ptr(),
            probs.as_mut_ptr(),
            p.q.as_ptr(),
            c.k_codes.as_ptr(),
            c.v_codes.as_ptr(),
            c.k_scale.as_ptr(),
            c.k_zero.as_ptr(),
            c.v_scale.as_ptr(),
            c.v_zero.as_ptr(),
            c.k_ring.as_ptr(),
            c.v_ring.as_ptr(),
            p.block_tables.as_ptr(),
            p.context_lens.as_ptr(),
            p.k_quantised.as_ptr(),
            p.v_quantised.as_ptr(),
            p.rings.as_ptr(),
            i(p.max_blocks),
            i(h),
            i(s.kv_heads),
            i(hd),
            1.0 / (hd as f32).sqrt(),
            i(s.fmt.group),
            i(s.fmt.cap()),
            s.fmt.bits as i32,
            i32::from(s.fmt.symmetric),
            i32::from(s.fmt.v_per_token),
        )
    };
    Ok(out)
}
