//! Fused attention on the CUDA backend: `attention_fused_f32`.

use ndarray::Array3;

use crate::compute::cuda::device::{CudaBackend, dev};
use crate::compute::{AttnInput, BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&AttnInput>) -> Result<Array3<f32>, BackendError> {
    let (h, _, t, hd) = inp.dims();
    let qkv = b.upload_qkv(&inp)?;
    let mut out = b.stream().alloc_zeros(h * t * hd).map_err(dev)?;
    b.launch_fused(&qkv, &mut out, &inp)?;
    Array3::from_shape_vec((h, t, hd), b.stream().clone_dtoh(&out).map_err(dev)?)
        .map_err(|e| BackendError::Device(e.to_string()))
}
