//! The group append on both CUDA backends: `group_store_f16` and `group_quant` of `kernels/group_kv.cu`
//! on copies of the cache in the kernels' memory, copied back.

use super::{GroupAppendInput, launch};
use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, GroupQuant, GroupStoreF16};
use crate::compute::{BackendError, Valid};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<GroupAppendInput>) -> Result<(), BackendError> {
    let (rows, jobs) = (inp.n_rows(), inp.n_jobs());
    let ls = launch::cuda(rows, jobs);
    b.budget(&ls)?;
    let inp = inp.into_inner();
    let s = inp.shape;
    let c = inp.cache;
    let (mut k_codes, mut v_codes) = (b.upload(&c.k_codes)?, b.upload(&c.v_codes)?);
    let (mut k_scale, mut k_zero) = (b.upload(&c.k_scale)?, b.upload(&c.k_zero)?);
    let (mut v_scale, mut v_zero) = (b.upload(&c.v_scale)?, b.upload(&c.v_zero)?);
    let (mut k_ring, mut v_ring) = (b.upload(&c.k_ring)?, b.upload(&c.v_ring)?);
    for l in &ls {
        if l.entry == "group_store_f16" {
            let (k, v, rows_buf) = (b.upload(inp.k)?, b.upload(inp.v)?, b.upload(inp.rows)?);
            let a = GroupStoreF16 {
                k_ring: &mut k_ring,
                v_ring: &mut v_ring,
                k: &k,
                v: &v,
                rows: &rows_buf,
                n_rows: i(rows),
                n_kv_heads: i(s.kv_heads),
                head_dim: i(s.head_dim),
                cap: i(s.fmt.cap()),
            };
            // SAFETY: validated: rows holds n (ring, token) pairs with rings in range, k/v hold
            // n·KVH·hd values, and the rings [rings, R+1, KVH, hd] (every token lands at t % (R+1)).
            unsafe { b.group_store_f16(l, a) }?;
        } else {
            let jobs_buf = b.upload(inp.jobs)?;
            let a = GroupQuant {
                k_codes: &mut k_codes,
                v_codes: &mut v_codes,
                k_scale: &mut k_scale,
                k_zero: &mut k_zero,
                v_scale: &mut v_scale,
                v_zero: &mut v_zero,
                k_ring: &k_ring,
                v_ring: &v_ring,
                jobs: &jobs_buf,
                n_jobs: i(jobs),
                n_kv_heads: i(s.kv_heads),
                head_dim: i(s.head_dim),
                group: i(s.fmt.group),
                cap: i(s.fmt.cap()),
                bits: s.fmt.bits as i32,
                sym: i32::from(s.fmt.symmetric),
            };
            // SAFETY: validated: every job's kind fits the format, its ring and destination block (or
            // slot) are inside the cache, and the buffers have the shape's sizes.
            unsafe { b.group_quant(l, a) }?;
        }
    }
    b.download(&k_codes, &mut c.k_codes)?;
    b.download(&v_codes, &mut c.v_codes)?;
    b.download(&k_scale, &mut c.k_scale)?;
    b.download(&k_zero, &mut c.k_zero)?;
    b.download(&v_scale, &mut c.v_scale)?;
    b.download(&v_zero, &mut c.v_zero)?;
    b.download(&k_ring, &mut c.k_ring)?;
    b.download(&v_ring, &mut c.v_ring)
}
