//! The quantising append on the CPU backend: each row written through its dtype's encoder
//! (`cache::dtype::quant`), the same path as `paged_append`'s.

use super::QuantAppendInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(b: &CpuBackend, inp: Valid<QuantAppendInput>) -> Result<(), BackendError> {
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.0.slot_mapping.len())]);
    crate::compute::ops::paged_append::cpu::write_rows(b, inp.project(|q| q.0));
    Ok(())
}
