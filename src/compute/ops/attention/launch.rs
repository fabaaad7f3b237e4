//! Launch geometry of the three attention kernels (`kernels/attention.cu` and `.wgsl`).

use crate::compute::launch::{LaunchDims, THREADS, TILE, d, groups_2d};

/// `attention_scores_f32`: a 16×16 tile of (query, key) per block, one grid layer per head.
pub fn cuda_attention_scores(heads: usize, seq: usize) -> LaunchDims {
    let t = d(seq.div_ceil(TILE));
    LaunchDims {
        entry: "attention_scores_f32",
        grid: [t, t, d(heads)],
        block: [TILE as u32, TILE as u32, 1],
    }
}

/// `softmax_rows_f32`: one block per row.
pub fn cuda_softmax_rows(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "softmax_rows_f32",
        grid: [d(rows), 1, 1],
        block: [THREADS, 1, 1],
    }
}

/// `attention_pv_f32`: a 16×16 tile of (query, dim) per block.
pub fn cuda_attention_pv(heads: usize, seq: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_pv_f32",
        grid: [d(head_dim.div_ceil(TILE)), d(seq.div_ceil(TILE)), d(heads)],
        block: [TILE as u32, TILE as u32, 1],
    }
}

/// WGSL `attention_scores_f32`: a 16×16 tile of (key, query) per workgroup, one layer per head.
pub fn wgsl_attention_scores(heads: usize, seq: usize) -> LaunchDims {
    let t = d(seq.div_ceil(16));
    LaunchDims {
        entry: "attention_scores_f32",
        grid: [t, t, d(heads)],
        block: [16, 16, 1],
    }
}

/// WGSL `softmax_rows_f32`: one workgroup of 128 per row.
pub fn wgsl_softmax_rows(rows: usize) -> LaunchDims {
    LaunchDims {
        entry: "softmax_rows_f32",
        grid: groups_2d(rows),
        block: [128, 1, 1],
    }
}

/// WGSL `attention_pv_f32`: a 16×16 tile of (dim, query) per workgroup.
pub fn wgsl_attention_pv(heads: usize, seq: usize, head_dim: usize) -> LaunchDims {
    LaunchDims {
        entry: "attention_pv_f32",
        grid: [d(head_dim.div_ceil(16)), d(seq.div_ceil(16)), d(heads)],
        block: [16, 16, 1],
    }
}
