//! Launch geometry of `paged_append_f16` (`kernels/kv_cache.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d, groups_2d};

/// `paged_append_f16`: one block per token.
pub fn cuda(tokens: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_append_f16",
        grid: [d(tokens), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `paged_append_f16`: one invocation per element written, 64 per workgroup.
pub fn wgsl(tokens: usize, kv_heads: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_append_f16",
        grid: groups_2d((tokens * kv_heads * head_dim).div_ceil(64)),
        block: [64, 1, 1],
    }
}
