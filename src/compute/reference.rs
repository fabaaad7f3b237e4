//! The f64 oracle for every op of the [`super::Backend`] trait. Each op keeps its reference in its
//! folder (`ops/<op>/reference.rs`); this module gathers them, and holds what they share. Backends are
//! compared with these through [`super::check`].

use half::f16;

pub use super::ops::attention::reference::attention;
pub use super::ops::copy_blocks::reference::copy_blocks;
pub use super::ops::paged_append::reference::paged_append;
pub use super::ops::paged_decode::reference::paged_decode;
pub use super::ops::static_append::reference::static_cache_append;

/// `x` rounded to f16, as f64: what an f16 store keeps.
pub fn round_f16(x: f32) -> f64 {
    f16::from_f32(x).to_f64()
}
