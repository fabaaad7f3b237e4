//! Launch geometry of `quant_decode_u8` (`kernels/quant_kv.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d};

/// `quant_decode_u8`: one warp (a block of 32) per (KV head, request), walking its query group.
pub fn cuda(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "quant_decode_u8",
        grid: [d(kv_heads), d(requests), 1],
        block: [32, 1, 1],
    }
}

/// WGSL `quant_decode_u8`: one workgroup of 128 per (KV head, request).
pub fn wgsl(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "quant_decode_u8",
        grid: [d(kv_heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
