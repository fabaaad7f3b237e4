//! Launch geometry of the split-context paged decode (`kernels/paged_attention.cu` and `.wgsl`): the
//! decode kernel, one block per (KV head, request, partition), and the reduce over partitions.

use crate::compute::launch::{LaunchDims, THREADS, d};

/// Tokens per partition of the CUDA kernel (`PARTITION_SIZE` in the .cu file).
pub const PARTITION_SIZE: usize = 512;
/// Tokens per partition of the WGSL twin (`PART` in the .wgsl file).
pub const PARTITION: usize = 256;

/// Partitions of the CUDA decode for the longest context.
pub fn cuda_num_partitions(max_context: usize) -> usize {
    max_context.div_ceil(PARTITION_SIZE).max(1)
}

/// `paged_attention_decode_f16`: one block per (KV head, request, partition), serving the GQA group.
pub fn cuda_decode(kv_heads: usize, requests: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_decode_f16",
        grid: [d(kv_heads), d(requests), d(partitions)],
        block: [THREADS, 1, 1],
    }
}

/// `paged_attention_reduce_f32`: one block per (query head, request).
pub fn cuda_reduce(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_reduce_f32",
        grid: [d(heads), d(requests), 1],
        block: [THREADS, 1, 1],
    }
}

/// Partitions of the WGSL decode for the longest context.
pub fn wgsl_num_partitions(max_context: usize) -> usize {
    max_context.div_ceil(PARTITION).max(1)
}

/// WGSL `paged_attention_decode_f16`: one workgroup of 128 per (KV head, request, partition).
pub fn wgsl_decode(kv_heads: usize, requests: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_decode_f16",
        grid: [d(kv_heads), d(requests), d(partitions)],
        block: [128, 1, 1],
    }
}

/// WGSL `paged_attention_reduce_f32`: one workgroup of 128 per (query head, request).
pub fn wgsl_reduce(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_reduce_f32",
        grid: [d(heads), d(requests), 1],
        block: [128, 1, 1],
    }
}
