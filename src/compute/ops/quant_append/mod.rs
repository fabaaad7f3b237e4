//! `Backend::quant_append`: write tokens' K/V into 8-bit pools (INT8 per token, FP8 E4M3/E5M2 per
//! tensor or per KV head) through a slot mapping: the quantising twin of `paged_append`. INT8 computes
//! each row's scale and writes it; FP8 divides by the pool's scale (calibrated at prefill, or 1.0) and
//! writes codes. The kernels are `kernels/quant_kv.cu` and `.wgsl`; the Rust encoder they are checked
//! against, code for code, is `cache::dtype::quant`.
//!
//! Its reference is the scalar encoder of `cache::dtype::quant` (`src/cache/dtype/quant.rs`), compared
//! code for code: an encoder has no f64 answer, only the codes its specification gives.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::dtype::quant::Quant;
use crate::compute::ops::paged_append::PagedAppendInput;
use crate::compute::{BackendError, Limits, OpInput, invalid};

/// A paged append into pools of a quantised dtype (the shape's dtype must have a `quant` format).
#[derive(Debug)]
pub struct QuantAppendInput<'a>(pub PagedAppendInput<'a>);

impl QuantAppendInput<'_> {
    /// The format the kernels write.
    pub fn quant(&self) -> Quant {
        self.0.shape.dtype.format().quant.expect("validated: a quantised dtype")
    }
}

/// Refuses a dtype the quantising kernels do not write.
pub(crate) fn check_quant(dtype: crate::cache::KvDtype) -> Result<Quant, BackendError> {
    dtype.format().quant.ok_or_else(|| {
        invalid(format!(
            "the quantising kernels write 8-bit pools (int8-token, fp8-e4m3, fp8-e5m2 and their per-head \
             variants), not {dtype}"
        ))
    })
}

impl OpInput for QuantAppendInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        check_quant(self.0.shape.dtype)?;
        self.0.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.0.slot_mapping.is_empty()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
