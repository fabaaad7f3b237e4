//! FlashAttention on the CUDA backend: `flash_attention_f32`.

use cudarc::driver::{CudaSlice, PushKernelArg};
use ndarray::Array3;

use super::launch;
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{BackendError, FlashInput, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&FlashInput>) -> Result<Array3<f32>, BackendError> {
    let a = &inp.attn;
    let (h, kvh, t, hd) = a.dims();
    let qkv = b.upload_qkv(a)?;
    let mut out: CudaSlice<f32> = b.stream().alloc_zeros(h * t * hd).map_err(dev)?;
    let l = launch::cuda(h, t, inp.block_q);
    let (mk, w, sk) = a.mask.code();
    let (hh, kv, tt, hdim, scale) = (i(h), i(kvh), i(t), i(hd), 1.0 / (hd as f32).sqrt());
    let (br, bc) = (i(inp.block_q), i(inp.block_k));
    let mut lb = b.stream().launch_builder(b.func(l.entry)?);
    lb.arg(&qkv[0])
        .arg(&qkv[1])
        .arg(&qkv[2])
        .arg(&mut out)
        .arg(&hh)
        .arg(&kv)
        .arg(&tt)
        .arg(&hdim)
        .arg(&scale)
        .arg(&mk)
        .arg(&w)
        .arg(&sk)
        .arg(&br)
        .arg(&bc);
    // SAFETY: matches flash_attention_f32; q [h,t,hd], k/v [kvh,t,hd], out [h,t,hd] (sizes
    // validated), tiles within FA_SMEM and FA_MAX_BR (validated).
    unsafe { lb.launch(cfg(&l)) }.map_err(dev)?;
    Array3::from_shape_vec((h, t, hd), b.stream().clone_dtoh(&out).map_err(dev)?)
        .map_err(|e| BackendError::Device(e.to_string()))
}
