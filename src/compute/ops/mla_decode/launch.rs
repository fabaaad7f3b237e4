//! Launch geometry of `mla_decode_f16` (`kernels/mla_attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d};

/// `mla_decode_f16`: one block of 32 per (head, request).
pub fn cuda(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "mla_decode_f16",
        grid: [d(heads), d(requests), 1],
        block: [32, 1, 1],
    }
}

/// WGSL `mla_decode_f16`: one workgroup of 128 per (head, request).
pub fn wgsl(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "mla_decode_f16",
        grid: [d(heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
