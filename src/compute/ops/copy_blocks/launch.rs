//! Launch geometry of `copy_blocks_f16` (`kernels/kv_cache.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, d, groups_2d};

/// `copy_blocks_f16`: one block per (src, dst) pair.
pub fn cuda(pairs: usize) -> LaunchDims {
    LaunchDims {
        entry: "copy_blocks_f16",
        grid: [d(pairs), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `copy_blocks_f16`: one invocation per value copied (of K and of V), 64 per workgroup.
pub fn wgsl(pairs: usize, per_block: usize) -> LaunchDims {
    LaunchDims {
        entry: "copy_blocks_f16",
        grid: groups_2d((pairs * per_block).div_ceil(64)),
        block: [64, 1, 1],
    }
}
