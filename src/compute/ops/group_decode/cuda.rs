//! The group decode on both CUDA backends: `group_decode` of `kernels/group_kv.cu`, one block per
//! (KV head, request).

use super::{GroupDecodeInput, launch};
use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, GroupDecode};
use crate::compute::{BackendError, Valid};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    let s = p.shape;
    let c = p.cache;
    let (r, h, hd) = (p.requests(), p.n_heads, s.head_dim);
    let l = launch::cuda(s.kv_heads, r);
    b.budget(&[l])?;
    let (q, tables, lens) = (b.upload(p.q)?, b.upload(p.block_tables)?, b.upload(p.context_lens)?);
    let (k_codes, v_codes) = (b.upload(&c.k_codes)?, b.upload(&c.v_codes)?);
    let (k_scale, k_zero) = (b.upload(&c.k_scale)?, b.upload(&c.k_zero)?);
    let (v_scale, v_zero) = (b.upload(&c.v_scale)?, b.upload(&c.v_zero)?);
    let (k_ring, v_ring) = (b.upload(&c.k_ring)?, b.upload(&c.v_ring)?);
    let (k_quantised, v_quantised) = (b.upload(p.k_quantised)?, b.upload(p.v_quantised)?);
    let rings = b.upload(p.rings)?;
    let mut out = b.zeros(r * h * hd)?;
    let mut probs = b.zeros((r * h * p.columns()).max(1))?;
    let a = GroupDecode {
        out: &mut out,
        probs: &mut probs,
        q: &q,
        k_codes: &k_codes,
        v_codes: &v_codes,
        k_scale: &k_scale,
        k_zero: &k_zero,
        v_scale: &v_scale,
        v_zero: &v_zero,
        k_ring: &k_ring,
        v_ring: &v_ring,
        block_tables: &tables,
        context_lens: &lens,
        k_quantised: &k_quantised,
        v_quantised: &v_quantised,
        rings: &rings,
        max_blocks: i(p.max_blocks),
        n_heads: i(h),
        n_kv_heads: i(s.kv_heads),
        head_dim: i(hd),
        scale: 1.0 / (hd as f32).sqrt(),
        group: i(s.fmt.group),
        cap: i(s.fmt.cap()),
        bits: s.fmt.bits as i32,
        sym: i32::from(s.fmt.symmetric),
        v_per_token: i32::from(s.fmt.v_per_token),
    };
    // SAFETY: validated: q is [r,h,hd], the cache's buffers have the shape's sizes, every block of a
    // quantised token is inside the pools, every ring in range and the tokens in f16 fit their ring;
    // out is [r,h,hd] and probs [r,h,max_blocks·G].
    unsafe { b.group_decode(&l, a) }?;
    b.to_vec(&out)
}
