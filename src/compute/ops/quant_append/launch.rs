//! Launch geometry of `quant_append_u8` (`kernels/quant_kv.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d, groups_2d};

/// `quant_append_u8`: one block of 32 per token; thread h writes KV head h's rows.
pub fn cuda(tokens: usize) -> LaunchDims {
    LaunchDims {
        entry: "quant_append_u8",
        grid: [d(tokens), 1, 1],
        block: [32, 1, 1],
    }
}

/// WGSL `quant_append_u8`: one invocation per (token, KV head) row, 64 per workgroup.
pub fn wgsl(tokens: usize, kv_heads: usize) -> LaunchDims {
    LaunchDims {
        entry: "quant_append_u8",
        grid: groups_2d((tokens * kv_heads).div_ceil(64)),
        block: [64, 1, 1],
    }
}
