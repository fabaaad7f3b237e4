//! The group append on the CPU backend: the scalar encoder of this op's `mod.rs`, the rule the kernels
//! are checked against.

use super::GroupAppendInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<GroupAppendInput>) -> Result<(), BackendError> {
    crate::compute::launch::would_run_cuda(&super::launch::cuda(inp.n_rows(), inp.n_jobs()));
    super::append_scalar(inp.into_inner());
    Ok(())
}
