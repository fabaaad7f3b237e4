//! Attention on the CUDA backend: `attention_scores_f32`, `softmax_rows_f32` and `attention_pv_f32`
//! launched in turn on the device.

use cudarc::driver::{CudaSlice, PushKernelArg};
use ndarray::Array3;

use super::launch;
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::{AttnInput, BackendError, Valid};
use crate::math::AttnCore;

pub(crate) fn run(b: &CudaBackend, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    let (h, kvh, t, hd) = inp.dims();
    let s = b.stream();
    let [q, k, v] = b.upload_qkv(&inp)?;
    let mut scores: CudaSlice<f32> = s.alloc_zeros(h * t * t).map_err(dev)?;
    let mut probs: CudaSlice<f32> = s.alloc_zeros(h * t * t).map_err(dev)?;
    let mut out: CudaSlice<f32> = s.alloc_zeros(h * t * hd).map_err(dev)?;
    let (mk, w, sk) = inp.mask.code();
    let (hh, kv, tt, hdim, rows, scale) = (i(h), i(kvh), i(t), i(hd), i(h * t), 1.0 / (hd as f32).sqrt());
    let l = launch::cuda_attention_scores(h, t);
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&q)
        .arg(&k)
        .arg(&mut scores)
        .arg(&hh)
        .arg(&kv)
        .arg(&tt)
        .arg(&hdim)
        .arg(&scale)
        .arg(&mk)
        .arg(&w)
        .arg(&sk);
    // SAFETY: matches attention_scores_f32; q [h,t,hd], k [kvh,t,hd], scores [h,t,t] (sizes validated).
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    let l = launch::cuda_softmax_rows(h * t);
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&scores).arg(&mut probs).arg(&rows).arg(&tt);
    // SAFETY: matches softmax_rows_f32; both buffers hold rows·cols values.
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    let l = launch::cuda_attention_pv(h, t, hd);
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&probs)
        .arg(&v)
        .arg(&mut out)
        .arg(&hh)
        .arg(&kv)
        .arg(&tt)
        .arg(&hdim);
    // SAFETY: matches attention_pv_f32; probs [h,t,t], v [kvh,t,hd], out [h,t,hd].
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    let arr = |n: usize, data: Vec<f32>| {
        Array3::from_shape_vec((h, t, n), data).map_err(|e| BackendError::Device(e.to_string()))
    };
    Ok(AttnCore {
        scores: arr(t, s.clone_dtoh(&scores).map_err(dev)?)?,
        probs: arr(t, s.clone_dtoh(&probs).map_err(dev)?)?,
        out: arr(hd, s.clone_dtoh(&out).map_err(dev)?)?,
    })
}
