//! KV dtypes: how a pool stores its values. A [`KvDtype`] is part of the cache shape; it names a
//! [`KvFormat`], the one place a dtype's code lives: its bits per value, its scale layout, the Rust
//! row write and read every pool access goes through, and the names of its CUDA and WGSL read paths.
//!
//! Only f16 is built ([`f16`]). The formats to come plug in here, each as one file with one
//! `KvFormat`: INT8 per token (one scale per slot and KV head) and per channel (one scale per block,
//! KV head and channel, final when the block fills), FP8 (per tensor or per head), KIVI (2- or 4-bit
//! codes packed, a scale and zero point per group). Code outside a format never matches on the dtype:
//! it asks the format ([`KvFormat::bytes_for`], [`ScaleLayout::count`], `write`, `read`), and a backend
//! without a read path for a dtype says so with a typed error.
//!
//! The anchor is candle: the dtype sits on the storage, and a quantised block keeps its codes and its
//! scales together (a [`super::Pool`] holds both).

pub mod f16;

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
    /// One scale per (block, KV head, channel): INT8 per channel (KIVI's K), final when the block fills.
    PerChannel,
    /// One scale per KV head (FP8 per head).
    PerHead,
    /// One scale for the whole pool (FP8 per tensor).
    PerTensor,
    /// A scale and a zero point per group of `group` values of a row (KIVI).
    PerGroup {
        /// Values per group.
        group: usize,
    },
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
            Self::PerChannel => g.blocks * g.heads * g.row,
            Self::PerHead => g.heads,
            Self::PerTensor => 1,
            Self::PerGroup { group } => rows * 2 * g.row.div_ceil(group.max(1)),
        }
    }

    /// The scales of the row of `(block, head, slot)`: what `write` may set and `read` uses.
    pub fn row(self, g: PoolGeometry, block: usize, head: usize, slot: usize) -> std::ops::Range<usize> {
        let r = (block * g.heads + head) * g.block_size + slot;
        let span = |start: usize, n: usize| start..start + n;
        match self {
            Self::None => 0..0,
            Self::PerToken { per } => span(r * per, per),
            Self::PerChannel => span((block * g.heads + head) * g.row, g.row),
            Self::PerHead => span(head, 1),
            Self::PerTensor => 0..1,
            Self::PerGroup { group } => {
                let n = 2 * g.row.div_ceil(group.max(1));
                span(r * n, n)
            }
        }
    }
}

/// One KV dtype's code. A format is a `static`; [`KvDtype`] points at it.
pub struct KvFormat {
    /// Its name (`"f16"`): what lesson files and exports call it.
    pub name: &'static str,
    /// Bits one value takes in the pool (16 for f16; 8 for INT8 and FP8; 2 or 4 for KIVI).
    pub bits: usize,
    /// Where its scales live.
    pub scales: ScaleLayout,
    /// Encode one row of f32 values into its bytes and its scales (the row's range of the pool's
    /// scales, [`ScaleLayout::row`]).
    pub write: fn(src: &[f32], dst: &mut [u8], scales: &mut [f32]),
    /// Decode one row: bytes and its scales to f32. The CPU decode's read path for every dtype without
    /// a SIMD path of its own in `simd::decode`.
    pub read: fn(src: &[u8], scales: &[f32], dst: &mut [f32]),
    /// The named read functions of its kernels, or `None` where the backend has no path for it yet.
    pub kernels: Option<KernelReads>,
}

/// The files that hold a dtype's read (and write) functions on the GPU backends.
#[derive(Debug, Clone, Copy)]
pub struct KernelReads {
    /// `kernels/kv/<name>.cuh`, included where a kernel includes `kv_dtype.cuh`: `kv_t`, `kv_load8`,
    /// `kv_unpack8`, `kv_store`.
    pub cuda: (&'static str, &'static str),
    /// `kernels/kv/<name>_read*.wgsl` and `_write*.wgsl`: `k_at`/`v_at` and `store_k`/`store_v`, the
    /// packed (any adapter) and native (shader-f16) bindings.
    pub wgsl: WgslReads,
}

/// A dtype's WGSL pool snippets: (path, text) each.
#[derive(Debug, Clone, Copy)]
pub struct WgslReads {
    /// Read-only pools, words.
    pub read_packed: (&'static str, &'static str),
    /// Read-only pools, native elements (needs `enable f16;` for f16).
    pub read_native: (&'static str, &'static str),
    /// Written pools, words.
    pub write_packed: (&'static str, &'static str),
    /// Written pools, native elements.
    pub write_native: (&'static str, &'static str),
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

/// A KV dtype: a handle on its [`KvFormat`]. Two dtypes are equal when they name the same format.
#[derive(Clone, Copy)]
pub struct KvDtype(&'static KvFormat);

impl KvDtype {
    /// IEEE half precision, two bytes a value: what every lesson stores today.
    pub const F16: Self = Self(&f16::FORMAT);

    /// The dtypes a lesson file or an export may name.
    pub const BUILTIN: [Self; 1] = [Self::F16];

    /// A dtype of `format`: the built-in ones are constants; a test or a lesson adds its own this way.
    pub const fn new(format: &'static KvFormat) -> Self {
        Self(format)
    }

    /// Its format.
    pub fn format(self) -> &'static KvFormat {
        self.0
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Bytes one value takes, as a fraction for packed formats: `bits / 8`.
    pub fn bytes_per_value(self) -> f64 {
        self.0.bits as f64 / 8.0
    }

    /// The built-in dtype called `name`.
    pub fn by_name(name: &str) -> Option<Self> {
        Self::BUILTIN.into_iter().find(|d| d.name() == name)
    }
}

impl Default for KvDtype {
    fn default() -> Self {
        Self::F16
    }
}

impl PartialEq for KvDtype {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) || self.0.name == other.0.name
    }
}

impl Eq for KvDtype {}

impl std::fmt::Debug for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KvDtype({})", self.0.name)
    }
}

impl std::fmt::Display for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl serde::Serialize for KvDtype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}

impl<'de> serde::Deserialize<'de> for KvDtype {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::by_name(&name).ok_or_else(|| {
            let known: Vec<_> = Self::BUILTIN.iter().map(|d| d.name()).collect();
            serde::de::Error::custom(format!("unknown KV dtype `{name}` (known: {})", known.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_layouts_size_their_arrays_and_rows_stay_inside() {
        let g = PoolGeometry {
            blocks: 3,
            heads: 2,
            block_size: 4,
            row: 10,
        };
        for (layout, count) in [
            (ScaleLayout::None, 0),
            (ScaleLayout::PerToken { per: 1 }, 24),
            (ScaleLayout::PerChannel, 60),
            (ScaleLayout::PerHead, 2),
            (ScaleLayout::PerTensor, 1),
            (ScaleLayout::PerGroup { group: 4 }, 24 * 6),
        ] {
            assert_eq!(layout.count(g), count, "{layout:?}");
            let last = layout.row(g, 2, 1, 3);
            assert!(last.end <= count, "{layout:?}: {last:?} past {count}");
        }
    }

    #[test]
    fn dtypes_serialise_by_name() {
        let j = serde_json::to_string(&KvDtype::F16).unwrap();
        assert_eq!(j, "\"f16\"");
        assert_eq!(serde_json::from_str::<KvDtype>(&j).unwrap(), KvDtype::F16);
        let e = serde_json::from_str::<KvDtype>("\"int3\"").unwrap_err().to_string();
        assert!(e.contains("unknown KV dtype `int3`"), "{e}");
        assert_eq!(KvDtype::F16.format().bytes_for(3), 6);
    }
}
