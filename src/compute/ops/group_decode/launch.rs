//! Launch geometry of `group_decode` (`kernels/group_kv.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d};

/// `group_decode`: one warp (a block of 32) per (KV head, request), walking its query group.
pub fn cuda(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "group_decode",
        grid: [d(kv_heads), d(requests), 1],
        block: [32, 1, 1],
    }
}

/// WGSL `group_decode`: one workgroup of 128 per (KV head, request).
pub fn wgsl(kv_heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "group_decode",
        grid: [d(kv_heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
