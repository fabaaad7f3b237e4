//! Launch geometry of `score_decode_f16` (`kernels/score_attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d};

/// `score_decode_f16`: one warp (a block of 32 threads) per (KV head, request), walking its query group.
/// The lesson's model attends to at most a few hundred tokens per step, which a warp strides through;
/// the CPU shim, which runs the GPU threads one after another, then switches between 32 threads.
pub fn cuda(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "score_decode_f16",
        grid: [d(kv_heads), d(requests), 1],
        block: [32, 1, 1],
    }
}

/// WGSL `score_decode_f16`: one workgroup of 128 per (KV head, request).
pub fn wgsl(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "score_decode_f16",
        grid: [d(kv_heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
