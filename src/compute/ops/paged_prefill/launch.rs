//! Launch geometry of `paged_prefill_f16` (`kernels/paged_attention.cu` and `.wgsl`): one block per (KV
//! head, query row, partition), then the decode's reduce over the rows.

use crate::compute::launch::{LaunchDims, THREADS, d};

/// `paged_prefill_f16`: one block per (KV head, query row, partition), serving the GQA group.
pub fn cuda(kv_heads: usize, rows: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_prefill_f16",
        grid: [d(kv_heads), d(rows), d(partitions)],
        block: [THREADS, 1, 1],
    }
}

/// WGSL `paged_prefill_f16`: one workgroup of 128 per (KV head, query row, partition).
pub fn wgsl(kv_heads: usize, rows: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_prefill_f16",
        grid: [d(kv_heads), d(rows), d(partitions)],
        block: [128, 1, 1],
    }
}
