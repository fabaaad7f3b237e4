//! The cross-backend check suite: every op on random seeded inputs, odd shapes included, compared
//! with the f64 reference. Each op keeps its cases next to its input and validation
//! (`compute::ops::*::suite`); `kvscope check`, the tests and the app run them per backend.

use super::{Backend, CheckReport};

pub use super::ops::paged_decode::{decode_and_check, paged_equals_contiguous, scattered_cache};

/// Run every op of `b` against the reference, in the op table's order.
pub fn run(b: &dyn Backend, seed: u64) -> Vec<CheckReport> {
    let mut out = Vec::new();
    for op in super::Op::ALL {
        super::ops::suite(op, b, seed, &mut out);
    }
    out
}
