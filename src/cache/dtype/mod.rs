//! KV dtypes: how a pool stores its values. A [`KvDtype`] is part of the cache shape; it names a
//! [`KvFormat`], the one place a dtype's code lives: its bits per value, its scale layout, the Rust
//! row write and read every pool access goes through. Its CUDA and WGSL read paths are files named after
//! it in `kernels/kv/`, which the compute layer finds (`compute::kv_snippets`).
//!
//! Built: f16 ([`f16`]); INT8 per token (one scale per slot and KV head) and FP8 E4M3/E5M2 (one scale
//! per tensor or per KV head), in [`quant`]. INT8 per channel and KIVI are not pool dtypes: their codes
//! wait for a group of tokens, so they live in the cache quantised in groups ([`super::group`]); the one
//! list of every format, of both kinds, is [`super::formats`]. Code outside a format never matches on the dtype:
//! it asks the format ([`KvFormat::bytes_for`], [`ScaleLayout::count`], `write`, `read`), and a backend
//! without a read path for a dtype says so with a typed error.
//!
//! The anchor is candle: the dtype sits on the storage, and a quantised block keeps its codes and its
//! scales together (a [`super::Pool`] holds both).

mod codes;
pub mod f16;
mod format;
pub mod quant;

pub use format::{KvFormat, PoolGeometry, ScaleLayout};

/// A KV dtype: a handle on its [`KvFormat`]. Two dtypes are equal when they name the same format.
#[derive(Clone, Copy)]
pub struct KvDtype(&'static KvFormat);

impl KvDtype {
    /// IEEE half precision, two bytes a value: what every lesson stores today.
    pub const F16: Self = Self(&f16::FORMAT);

    /// INT8, symmetric, one f16 scale per token row.
    pub const INT8_TOKEN: Self = Self(&quant::INT8_TOKEN);
    /// FP8 E4M3 with one scale per tensor.
    pub const FP8_E4M3: Self = Self(&quant::FP8_E4M3);
    /// FP8 E5M2 with one scale per tensor.
    pub const FP8_E5M2: Self = Self(&quant::FP8_E5M2);
    /// FP8 E4M3 with one scale per KV head.
    pub const FP8_E4M3_HEAD: Self = Self(&quant::FP8_E4M3_HEAD);
    /// FP8 E5M2 with one scale per KV head.
    pub const FP8_E5M2_HEAD: Self = Self(&quant::FP8_E5M2_HEAD);

    /// The dtypes a lesson file or an export may name.
    pub const BUILTIN: [Self; 6] = [
        Self::F16,
        Self::INT8_TOKEN,
        Self::FP8_E4M3,
        Self::FP8_E5M2,
        Self::FP8_E4M3_HEAD,
        Self::FP8_E5M2_HEAD,
    ];

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
            (ScaleLayout::PerHead, 2),
            (ScaleLayout::PerTensor, 1),
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
