//! Launch configurations of every kernel, in one place: the CUDA backend, the CPU shim and the app's
//! kernel panel all read them from here, so what a student sees is what ran.

use std::fmt;

/// A kernel launch: grid and block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LaunchDims {
    /// The kernel entry point.
    pub entry: &'static str,
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
}

impl LaunchDims {
    /// Total threads launched.
    pub fn threads(&self) -> u64 {
        self.grid.iter().chain(&self.block).map(|&d| d as u64).product()
    }
}

impl fmt::Display for LaunchDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        write!(
            f,
            "{}<<<grid ({gx}, {gy}, {gz}), block ({bx}, {by}, {bz})>>>",
            self.entry
        )
    }
}

fn d(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Tile edge of the 2-D attention kernels (scores and P·V).
pub const TILE: usize = 16;
/// Threads of the 1-D kernels.
pub const THREADS: u32 = 128;
/// Tokens per partition of the split-context paged decode kernel (`PARTITION_SIZE` in the .cu file).
pub const PARTITION_SIZE: usize = 512;

/// `attention_scores_f32`: a 16×16 tile of (query, key) per block, one grid layer per head.
pub fn attention_scores(heads: usize, seq: usize) -> LaunchDims {
    let t = d(seq.div_ceil(TILE));
    LaunchDims {
        entry: "attention_scores_f32",
        grid: [t, t, d(heads)],
        block: [TILE as u32, TILE as u32, 1],
    }
}

/// `softmax_rows_f32`: one block per row.
pub fn softmax_rows(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "softmax_rows_f32",
        grid: [d(rows), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// `attention_pv_f32`: a 16×16 tile of (query, dim) per block.
pub fn attention_pv(heads: usize, seq: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_pv_f32",
        grid: [d(head_dim.div_ceil(TILE)), d(seq.div_ceil(TILE)), d(heads)],
        block: [TILE as u32, TILE as u32, 1],
    }
}

/// `attention_fused_f32`: one block per (query, head).
pub fn attention_fused(heads: usize, seq: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_fused_f32",
        grid: [d(seq), d(heads), 1],
        block: [THREADS, 1, 1],
    }
}

/// `flash_attention_f32`: one block of 128 threads per (row block of `block_q` queries, head).
pub fn flash_attention(heads: usize, seq: usize, block_q: usize) -> LaunchDims {
    LaunchDims {
        entry: "flash_attention_f32",
        grid: [d(seq.div_ceil(block_q.max(1))), d(heads), 1],
        block: [THREADS, 1, 1],
    }
}

/// `static_cache_append_f16`: one block per (batch row, KV head).
pub fn static_cache_append(batch: usize, kv_heads: usize) -> LaunchDims {
    LaunchDims {
        entry: "static_cache_append_f16",
        grid: [d(batch * kv_heads), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// `paged_append_f16`: one block per token.
pub fn paged_append(tokens: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_append_f16",
        grid: [d(tokens), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// `copy_blocks_f16`: one block per (src, dst) pair.
pub fn copy_blocks(pairs: usize) -> LaunchDims {
    LaunchDims {
        entry: "copy_blocks_f16",
        grid: [d(pairs), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// Partitions of the split-context decode for the longest context.
pub fn num_partitions(max_context: usize) -> usize {
    max_context.div_ceil(PARTITION_SIZE).max(1)
}

/// `paged_attention_decode_f16`: one block per (KV head, request, partition), serving the GQA group.
pub fn paged_decode(kv_heads: usize, requests: usize, partitions: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_decode_f16",
        grid: [d(kv_heads), d(requests), d(partitions)],
        block: [THREADS, 1, 1],
    }
}

/// `read_stream_u32` (the read-only roof): 256 threads per block, grid-stride over `words` 16-byte
/// words, at most 4096 blocks.
pub fn read_stream(words: usize) -> LaunchDims {
    LaunchDims {
        entry: "read_stream_u32",
        grid: [d(words.div_ceil(256).clamp(1, 4096)), 1, 1],
        block: [256, 1, 1],
    }
}

/// `paged_attention_reduce_f32`: one block per (query head, request).
pub fn paged_reduce(heads: usize, requests: usize) -> LaunchDims {
    LaunchDims {
        entry: "paged_attention_reduce_f32",
        grid: [d(heads), d(requests), 1],
        block: [THREADS, 1, 1],
    }
}
