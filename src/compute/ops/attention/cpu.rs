//! Attention on the CPU backend: the GEMM-based f32 path of `math`, scores and probabilities
//! materialised.

use crate::compute::{AttnInput, BackendError, CpuBackend, Valid};
use crate::math::{AttnCore, attention_core};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    Ok(attention_core(inp.q, inp.k, inp.v, inp.mask))
}
