//! `Backend::quant_decode`: the dequantising paged decode. One query token per request reads 8-bit K/V
//! codes (INT8 per token, FP8 E4M3/E5M2 per tensor or per KV head) and their scales through the block
//! tables, and attends in f32. It is checked against the f64 reference of `paged_decode`, which reads the
//! same codes through the dtype's decoder (`cache::dtype::quant`). The kernels are
//! `kernels/quant_kv.cu` and `.wgsl` (four codes per u32 word there: WGSL has no 8-bit types).
//!
//! Its f64 reference is paged decode's (`ops/paged_decode/reference.rs`), on the same codes dequantised.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::dtype::quant::Quant;
use crate::compute::ops::paged_decode::PagedDecodeInput;
use crate::compute::ops::quant_append::check_quant;
use crate::compute::{BackendError, Limits, OpInput};

/// A paged decode over pools of a quantised dtype.
#[derive(Debug, Clone, Copy)]
pub struct QuantDecodeInput<'a>(pub PagedDecodeInput<'a>);

impl QuantDecodeInput<'_> {
    /// The format the kernels read.
    pub fn quant(&self) -> Quant {
        self.0.shape.dtype.format().quant.expect("validated: a quantised dtype")
    }

    /// Columns of the probabilities' scratch: `max_blocks · block_size`.
    pub fn columns(&self) -> usize {
        self.0.max_blocks * self.0.shape.block_size
    }
}

impl OpInput for &QuantDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        check_quant(self.0.shape.dtype)?;
        self.0.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.0.context_lens.is_empty()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
