//! The dequantising decode on the CPU backend: `paged_decode`'s CPU path, which reads any dtype's rows
//! through its format (codes times scales) and attends in f32.

use super::QuantDecodeInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(b: &CpuBackend, inp: Valid<&QuantDecodeInput>) -> Result<Vec<f32>, BackendError> {
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.0.shape.kv_heads, inp.0.requests())]);
    Ok(crate::compute::ops::paged_decode::cpu::decode(b, inp.project(|q| &q.0)))
}
