//! Launch geometry of `group_store_f16` and `group_quant` (`kernels/group_kv.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, d, groups_2d};

/// `group_store_f16` (a block of 32 per new row), then `group_quant` (a block of 32 per job; thread h
/// runs KV head h). An empty part launches nothing.
pub fn cuda(rows: usize, jobs: usize) -> Vec<LaunchDims> {
    let mut v = Vec::new();
    if rows > 0 {
        v.push(LaunchDims {
            entry: "group_store_f16",
            grid: [d(rows), 1, 1],
            block: [32, 1, 1],
        });
    }
    if jobs > 0 {
        v.push(LaunchDims {
            entry: "group_quant",
            grid: [d(jobs), 1, 1],
            block: [32, 1, 1],
        });
    }
    v
}

/// WGSL `group_store_f16`: one invocation per (row, word of two f16 values), 64 per workgroup.
pub fn wgsl_store(rows: usize, words_per_row: usize) -> LaunchDims {
    LaunchDims {
        entry: "group_store_f16",
        grid: groups_2d((rows * words_per_row).div_ceil(64)),
        block: [64, 1, 1],
    }
}

/// WGSL `group_quant`: one invocation per (job, KV head), 64 per workgroup.
pub fn wgsl_quant(jobs: usize, kv_heads: usize) -> LaunchDims {
    LaunchDims {
        entry: "group_quant",
        grid: groups_2d((jobs * kv_heads).div_ceil(64)),
        block: [64, 1, 1],
    }
}
