//! Launch geometry of `rope_f32` (`kernels/rope.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d, groups_2d};

/// `rope_f32`: one block of 128 threads per row.
pub fn cuda(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "rope_f32",
        grid: [d(rows), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `rope_f32`: one workgroup of 128 per row, rows past 65535 in the second dimension.
pub fn wgsl(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "rope_f32",
        grid: groups_2d(rows),
        block: [128, 1, 1],
    }
}
