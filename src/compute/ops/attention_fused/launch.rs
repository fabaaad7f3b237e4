//! Launch geometry of `attention_fused_f32` (`kernels/attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d};

/// `attention_fused_f32`: one block per (query, head).
pub fn cuda(heads: usize, seq: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_fused_f32",
        grid: [d(seq), d(heads), 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `attention_fused_f32`: one workgroup of 128 per (query, head).
pub fn wgsl(heads: usize, seq: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_fused_f32",
        grid: [d(seq), d(heads), 1],
        block: [128, 1, 1],
    }
}
