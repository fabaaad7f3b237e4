//! What a KV dtype is made of: its storage ([`KvFormat`]: bits, the Rust write and read of a row) and
//! its scales ([`ScaleLayout`]). Each dtype's file
//! (`f16.rs`) defines one [`KvFormat`]; [`super::KvDtype`] is the handle pools carry. Its kernel snippets are
//! files named after it in `kernels/kv/` (`compute::kv_snippets`).

/// Where a dtype's scales live, per pool. `count` sizes the scale array; `row` is the range of scales
/// one token row (one slot of one KV head) is written and read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleLayout {
    /// No scales (f16, f32).
    None,
    /// `per` scales for each (slot, KV head): INT8 per token has 1.
    PerToken {
        /// Scales per row.
        per: usize,
    },
    /// One scale per KV head (FP8 per head).
    PerHead,
    /// One scale for the whole pool (FP8 per tensor).
    PerTensor,
}

/// A pool's geometry, as the scale layouts see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolGeometry {
    /// Blocks.
    pub blocks: usize,
    /// KV heads (1 for a latent pool).
    pub heads: usize,
    /// Slots per block.
    pub block_size: usize,
    /// Values per row.
    pub row: usize,
}

impl ScaleLayout {
    /// Scales a pool of this geometry holds.
    pub fn count(self, g: PoolGeometry) -> usize {
        let rows = g.blocks * g.heads * g.block_size;
        match self {
            Self::None => 0,
            Self::PerToken { per } => rows * per,
            Self::PerHead => g.heads,
            Self::PerTensor => 1,
        }
    }

    /// The scales of the row of `(block, head, slot)`: what `write` may set and `read` uses.
    pub fn row(self, g: PoolGeometry, block: usize, head: usize, slot: usize) -> std::ops::Range<usize> {
        let r = (block * g.heads + head) * g.block_size + slot;
        let span = |start: usize, n: usize| start..start + n;
        match self {
            Self::None => 0..0,
            Self::PerToken { per } => span(r * per, per),
            Self::PerHead => span(head, 1),
            Self::PerTensor => 0..1,
        }
    }
}

/// One KV dtype's code. A format is a `static`; [`KvDtype`] points at it.
pub struct KvFormat {
    /// Its name (`"f16"`): what lesson files and exports call it.
    pub name: &'static str,
    /// Bits one value takes in the pool (16 for f16; 8 for INT8 and FP8).
    pub bits: usize,
    /// Where its scales live.
    pub scales: ScaleLayout,
    /// What a fresh pool's scales hold: 1.0 for FP8 (vLLM's uncalibrated `k_scale`), 0 otherwise.
    pub scale_init: f32,
    /// The 8-bit format the quantising kernels (`kernels/quant_kv.*`) write and read, if it is one.
    pub quant: Option<super::codes::Quant>,
    /// Encode one row of f32 values into its bytes and its scales (the row's range of the pool's
    /// scales, [`ScaleLayout::row`]).
    pub write: fn(src: &[f32], dst: &mut [u8], scales: &mut [f32]),
    /// Decode one row: bytes and its scales to f32. The CPU decode's read path for every dtype without
    /// a SIMD path of its own in `simd::decode`.
    pub read: fn(src: &[u8], scales: &[f32], dst: &mut [f32]),
}

impl KvFormat {
    /// Bytes `values` values take (packed formats round up to a byte).
    pub fn bytes_for(&self, values: usize) -> usize {
        (values * self.bits).div_ceil(8)
    }
}

impl std::fmt::Debug for KvFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}
