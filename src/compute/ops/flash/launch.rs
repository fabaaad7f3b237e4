//! Launch geometry of `flash_attention_f32` (`kernels/flash_attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d};

/// `flash_attention_f32`: one block of 128 threads per (row block of `block_q` queries, head).
pub fn cuda(heads: usize, seq: usize, block_q: usize) -> LaunchDims {
    LaunchDims {
        entry: "flash_attention_f32",
        grid: [d(seq.div_ceil(block_q.max(1))), d(heads), 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `flash_attention_f32`: one workgroup of 128 per (row block of `block_q` queries, head).
pub fn wgsl(heads: usize, seq: usize, block_q: usize) -> LaunchDims {
    LaunchDims {
        entry: "flash_attention_f32",
        grid: [d(seq.div_ceil(block_q.max(1))), d(heads), 1],
        block: [128, 1, 1],
    }
}
