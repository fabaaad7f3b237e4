//! Launch geometry of `stream_decode_f16` (`kernels/stream_attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d};

/// `stream_decode_f16`: one warp (a block of 32 threads) per (query head, request). The lesson's model
/// attends to a few hundred tokens per step, which a warp strides through; the CPU shim, which runs
/// the GPU threads one after another, then switches between 32 threads instead of 128.
pub fn cuda(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "stream_decode_f16",
        grid: [d(heads), d(requests), 1],
        block: [32, 1, 1],
    }
}

/// WGSL `stream_decode_f16`: one workgroup of 128 per (query head, request).
pub fn wgsl(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "stream_decode_f16",
        grid: [d(heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
