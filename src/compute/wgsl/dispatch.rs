//! Dispatch geometry of every WGSL kernel, in one place (as `cuda::launch` is for CUDA): the wgpu
//! backend dispatches with these, and the kernel panel shows them. `grid` is the number of workgroups
//! in x, y, z and `block` the `@workgroup_size`.

use crate::compute::cuda::launch::LaunchDims;

/// Tokens per partition of the split-context decode (`PART` in `kernels/paged_attention.wgsl`).
pub const PARTITION: usize = 256;

fn d(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `n` workgroups of a 1-D kernel, in x and (past 65535) y.
pub fn groups_2d(n: usize) -> [u32; 3] {
    let g = n.max(1);
    if g <= 65535 {
        [g as u32, 1, 1]
    } else {
        [65535, d(g.div_ceil(65535)), 1]
    }
}

/// `attention_scores_f32`: a 16×16 tile of (key, query) per workgroup, one layer per head.
pub fn attention_scores(heads: usize, seq: usize) -> LaunchDims {
    let t = d(seq.div_ceil(16));
    LaunchDims {
        entry: "attention_scores_f32",
        grid: [t, t, d(heads)],
        block: [16, 16, 1],
    }
}

/// `softmax_rows_f32`: one workgroup of 128 per row.
pub fn softmax_rows(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "softmax_rows_f32",
        grid: groups_2d(rows),
        block: [128, 1, 1],
    }
}

/// `attention_pv_f32`: a 16×16 tile of (dim, query) per workgroup.
pub fn attention_pv(heads: usize, seq: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_pv_f32",
        grid: [d(head_dim.div_ceil(16)), d(seq.div_ceil(16)), d(heads)],
        block: [16, 16, 1],
    }
}

/// `flash_attention_f32`: one workgroup of 128 per (row block of `block_q` queries, head).
pub fn flash_attention(heads: usize, seq: usize, block_q: usize) -> LaunchDims {
    LaunchDims {
        entry: "flash_attention_f32",
        grid: [d(seq.div_ceil(block_q.max(1))), d(heads), 1],
        block: [128, 1, 1],
    }
}

/// `attention_fused_f32`: one workgroup of 128 per (query, head).
pub fn attention_fused(heads: usize, seq: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_fused_f32",
        grid: [d(seq), d(heads), 1],
        block: [128, 1, 1],
    }
}

/// `static_cache_append_f16`: one invocation per element written, 64 per workgroup.
pub fn static_cache_append(batch: usize, kv_heads: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "static_cache_append_f16",
        grid: groups_2d((batch * kv_heads * head_dim).div_ceil(64)),
        block: [64, 1, 1],
    }
}

/// `paged_append_f16`: one invocation per element written, 64 per workgroup.
pub fn paged_append(tokens: usize, kv_heads: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_append_f16",
        grid: groups_2d((tokens * kv_heads * head_dim).div_ceil(64)),
        block: [64, 1, 1],
    }
}

/// `copy_blocks_f16`: one invocation per value copied (of K and of V), 64 per workgroup.
pub fn copy_blocks(pairs: usize, per_block: usize) -> LaunchDims {
    LaunchDims {
        entry: "copy_blocks_f16",
        grid: groups_2d((pairs * per_block).div_ceil(64)),
        block: [64, 1, 1],
    }
}

/// Partitions of the longest context.
pub fn num_partitions(max_context: usize) -> usize {
    max_context.div_ceil(PARTITION).max(1)
}

/// `paged_attention_decode_f16`: one workgroup of 128 per (KV head, request, partition).
pub fn paged_decode(kv_heads: usize, requests: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_decode_f16",
        grid: [d(kv_heads), d(requests), d(partitions)],
        block: [128, 1, 1],
    }
}

/// `paged_attention_reduce_f32`: one workgroup of 128 per (query head, request).
pub fn paged_reduce(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_reduce_f32",
        grid: [d(heads), d(requests), 1],
        block: [128, 1, 1],
    }
}

/// `read_stream_u32`: 256 per workgroup, at most 4096 workgroups.
pub fn read_stream(words: usize) -> LaunchDims {
    LaunchDims {
        entry: "read_stream_u32",
        grid: [d(words.div_ceil(256).clamp(1, 4096)), 1, 1],
        block: [256, 1, 1],
    }
}

/// How the kernel panel writes a WGSL dispatch.
pub fn describe(l: &LaunchDims) -> String {
    let [gx, gy, gz] = l.grid;
    let [bx, by, bz] = l.block;
    format!(
        "{}: dispatch ({gx}, {gy}, {gz}) × @workgroup_size({bx}, {by}, {bz})",
        l.entry
    )
}
