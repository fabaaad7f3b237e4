//! Attention on the CPU backend: the GEMM-based f32 path of `math`, scores and probabilities
//! materialised.

use super::launch;
use crate::compute::launch::would_run_cuda;
use crate::compute::{AttnInput, BackendError, CpuBackend, Valid};
use crate::math::{AttnCore, attention_core};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&AttnInput>) -> Result<AttnCore<f32>, BackendError> {
    let (h, _, t, hd) = inp.dims();
    would_run_cuda(&[
        launch::cuda_attention_scores(h, t),
        launch::cuda_softmax_rows(h * t),
        launch::cuda_attention_pv(h, t, hd),
    ]);
    Ok(attention_core(inp.q, inp.k, inp.v, inp.mask))
}
