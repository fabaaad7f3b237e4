//! The reference math: seeded inputs, masks and attention, in f64 (the oracle) and f32 (the fast
//! path of the CPU backend). No UI and no GPU code here.

mod attention;
pub mod flash;
mod mask;
pub mod mla;
mod rng;
mod scalar;

pub use crate::simd::exp_f32;
pub use attention::{
    AttnCore, AttnShape, AttnWeights, Forward, Qkv, ShapeError, attention_core, decode_attention_f64, forward,
    kv_family, matmul, output_projection, project, softmax_row,
};
pub use mask::{Mask, MaskParseError};
pub use rng::Rng;
pub use scalar::Real;
