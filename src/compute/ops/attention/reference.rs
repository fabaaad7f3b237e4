//! The f64 oracle of attention (both the three-kernel and the fused op).

use ndarray::Array3;

use crate::compute::AttnInput;
use crate::math::{AttnCore, attention_core};

/// Attention in f64 on the same (f32) inputs.
pub fn attention(inp: &AttnInput) -> AttnCore<f64> {
    let c = |a: &Array3<f32>| a.mapv(f64::from);
    attention_core(&c(inp.q), &c(inp.k), &c(inp.v), inp.mask)
}
