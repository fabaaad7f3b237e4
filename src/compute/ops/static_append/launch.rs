//! Launch geometry of `static_cache_append_f16` (`kernels/kv_cache.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d, groups_2d};

/// `static_cache_append_f16`: one block per (batch row, KV head).
pub fn cuda(batch: usize, kv_heads: usize) -> LaunchDims {
    LaunchDims {
        entry: "static_cache_append_f16",
        grid: [d(batch * kv_heads), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `static_cache_append_f16`: one invocation per element written, 64 per workgroup.
pub fn wgsl(batch: usize, kv_heads: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "static_cache_append_f16",
        grid: groups_2d((batch * kv_heads * head_dim).div_ceil(64)),
        block: [64, 1, 1],
    }
}
