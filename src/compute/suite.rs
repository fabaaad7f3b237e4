//! The cross-backend check suite: every op on random seeded inputs, odd shapes included, compared
//! with the f64 reference. Each op keeps its cases next to its input and validation
//! (`compute::ops::*::suite`); `kvscope check`, the tests and the app run them per backend.

use super::{Backend, CheckReport};

pub use super::ops::paged_decode::{paged_equals_contiguous, scattered_cache};

/// Run every op of `b` against the reference.
pub fn run(b: &dyn Backend, seed: u64) -> Vec<CheckReport> {
    let mut out = Vec::new();
    super::ops::attention::suite(b, seed, &mut out);
    super::ops::static_append::suite(b, seed, &mut out);
    super::ops::paged_append::suite(b, seed, &mut out);
    super::ops::paged_decode::suite(b, seed, &mut out);
    super::ops::copy_blocks::suite(b, seed, &mut out);
    super::ops::flash::suite(b, seed, &mut out);
    out
}
