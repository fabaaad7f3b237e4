//! The quantising append on both CUDA backends: `quant_append_u8` of `kernels/quant_kv.cu` on copies of
//! the pools and their scales in the kernels' memory, copied back.

use super::{QuantAppendInput, launch};
use crate::cache::dtype::quant::Quant;
use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, QuantAppendU8};
use crate::compute::{BackendError, Valid};

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<QuantAppendInput>) -> Result<(), BackendError> {
    let quant = inp.quant();
    let inp = inp.into_inner().0;
    let sh = inp.shape;
    let l = launch::cuda(inp.slot_mapping.len());
    b.budget(&[l])?;
    let (kp_host, vp_host) = (inp.k_pool, inp.v_pool);
    let (mut kp, mut vp) = (b.upload(&*kp_host.bytes)?, b.upload(&*vp_host.bytes)?);
    let (mut ks, mut vs) = (b.upload(&*kp_host.scales)?, b.upload(&*vp_host.scales)?);
    let (kd, vd, sm) = (b.upload(inp.k)?, b.upload(inp.v)?, b.upload(inp.slot_mapping)?);
    let a = QuantAppendU8 {
        k_pool: &mut kp,
        v_pool: &mut vp,
        k_scales: &mut ks,
        v_scales: &mut vs,
        k: &kd,
        v: &vd,
        slot_mapping: &sm,
        num_tokens: i(inp.slot_mapping.len()),
        n_kv_heads: i(sh.kv_heads),
        block_size: i(sh.block_size),
        head_dim: i(sh.head_dim),
        fmt: quant.kernel_code(),
        scale_mode: Quant::scale_mode(sh.dtype.format().scales),
    };
    // SAFETY: the pools hold numel bytes and their layout's scales (validated), every non-negative slot
    // is inside the pool, and k/v hold tokens·kv_heads·head_dim values.
    unsafe { b.quant_append_u8(&l, a) }?;
    b.download(&kp, kp_host.bytes)?;
    b.download(&vp, vp_host.bytes)?;
    b.download(&ks, kp_host.scales)?;
    b.download(&vs, vp_host.scales)
}
