//! The group append on the CUDA shim: `group_store_f16` and `group_quant` of `kernels/group_kv.cu` on
//! CPU threads.

use super::{GroupAppendInput, launch};
use crate::compute::cuda::sim::{SimBackend, budget, dims, ffi, i};
use crate::compute::{BackendError, Valid};

pub(crate) fn run(_b: &SimBackend, inp: Valid<GroupAppendInput>) -> Result<(), BackendError> {
    let (rows, jobs) = (inp.n_rows(), inp.n_jobs());
    let ls = launch::cuda(rows, jobs);
    budget(&ls)?;
    let inp = inp.into_inner();
    let s = inp.shape;
    let c = inp.cache;
    for l in &ls {
        let (a, b, cc, d, e, f) = dims(l);
        if l.entry == "group_store_f16" {
            // SAFETY: validated: rows holds n (ring, token) pairs with rings in range, k/v hold
            // n·KVH·hd values, and the rings [rings, R+1, KVH, hd] (every token lands at t % (R+1)).
            unsafe {
                ffi::kvs_sim_group_store_f16(
                    a,
                    b,
                    cc,
                    d,
                    e,
                    f,
                    c.k_ring.as_mut_ptr(),
                    c.v_ring.as_mut_ptr(),
                    inp.k.as_ptr(),
                    inp.v.as_ptr(),
                    inp.rows.as_ptr(),
                    i(rows),
                    i(s.kv_heads),
                    i(s.head_dim),
                    i(s.fmt.cap()),
                )
            };
        } else {
            // SAFETY: validated: every job's kind fits the format, its ring and destination block (or
            // slot) are inside the cache, and the buffers have the shape's sizes.
            unsafe {
                ffi::kvs_sim_group_quant(
                    a,
                    b,
                    cc,
                    d,
                    e,
                    f,
                    c.k_codes.as_mut_ptr(),
                    c.v_codes.as_mut_ptr(),
                    c.k_scale.as_mut_ptr(),
                    c.k_zero.as_mut_ptr(),
                    c.v_scale.as_mut_ptr(),
                    c.v_zero.as_mut_ptr(),
                    c.k_ring.as_ptr(),
                    c.v_ring.as_ptr(),
                    inp.jobs.as_ptr(),
                    i(jobs),
                    i(s.kv_heads),
                    i(s.head_dim),
                    i(s.fmt.group),
                    i(s.fmt.cap()),
                    s.fmt.bits as i32,
                    i32::from(s.fmt.symmetric),
                )
            };
        }
    }
    Ok(())
}
