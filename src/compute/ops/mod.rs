//! The ops every backend implements, one file each: the op's input struct, its validation and its
//! cases in the cross-backend [`super::suite`] sit together. One name each across the project: the Rust
//! method, the CUDA entry point and the kernel file share it (`paged_attention_decode_f16` lives in
//! `kernels/paged_attention.cu` and is `Backend::paged_decode`). Launch geometry stays in
//! [`super::cuda::launch`], the one home of launch configurations.

pub mod attention;
pub mod copy_blocks;
pub mod flash;
pub mod paged_append;
pub mod paged_decode;
pub mod static_append;

/// One op family of the [`super::Backend`] trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Op {
    /// Scaled, masked scores `Q·Kᵀ/√hd`.
    AttentionScores,
    /// Row softmax.
    Softmax,
    /// `P·V`.
    AttentionPv,
    /// Scores, softmax and P·V in one kernel (online softmax).
    AttentionFused,
    /// Write one token's K/V into the static cache.
    StaticCacheAppend,
    /// Write tokens' K/V into the paged pools through a slot mapping.
    PagedAppend,
    /// One query token per request, reading K/V through the block tables.
    PagedDecode,
    /// Whole-block copies in the paged pools (copy-on-write).
    CopyBlocks,
    /// FlashAttention's tiled forward pass (Br query rows per block, Bc-key tiles in shared memory).
    FlashAttention,
}

impl Op {
    /// Every op.
    pub const ALL: [Op; 9] = [
        Op::AttentionScores,
        Op::Softmax,
        Op::AttentionPv,
        Op::AttentionFused,
        Op::StaticCacheAppend,
        Op::PagedAppend,
        Op::PagedDecode,
        Op::CopyBlocks,
        Op::FlashAttention,
    ];

    /// The file under `kernels/` that holds this op's CUDA source.
    pub fn kernel_file(self) -> &'static str {
        match self {
            Op::AttentionScores | Op::Softmax | Op::AttentionPv | Op::AttentionFused => "attention.cu",
            Op::StaticCacheAppend | Op::PagedAppend | Op::CopyBlocks => "kv_cache.cu",
            Op::PagedDecode => "paged_attention.cu",
            Op::FlashAttention => "flash_attention.cu",
        }
    }

    /// The `extern "C"` entry points that implement it, in launch order.
    pub fn cuda_entries(self) -> &'static [&'static str] {
        match self {
            Op::AttentionScores => &["attention_scores_f32"],
            Op::Softmax => &["softmax_rows_f32"],
            Op::AttentionPv => &["attention_pv_f32"],
            Op::AttentionFused => &["attention_fused_f32"],
            Op::StaticCacheAppend => &["static_cache_append_f16"],
            Op::PagedAppend => &["paged_append_f16"],
            Op::PagedDecode => &["paged_attention_decode_f16", "paged_attention_reduce_f32"],
            Op::CopyBlocks => &["copy_blocks_f16"],
            Op::FlashAttention => &["flash_attention_f32"],
        }
    }
}
