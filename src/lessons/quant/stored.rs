//! The quality table lesson 10 draws: `assets/measurements/quant.json`, written by `kvscope export
//! quant-table` (held-out bits per byte with the cache in each format, every 256-byte window decoded byte
//! by byte from an empty cache; the backend is recorded in it). The views label it as stored. SmolLM2's
//! table (`assets/measurements/smollm2/quant.json`) is stored beside it, with the keys' and values'
//! channel maxima; the real-model step draws it.

use std::sync::{Arc, OnceLock};

use crate::drivers::quant::{QuantCell, QuantTable};
use crate::figure::HeatmapData;

impl QuantTable {
    /// The cell of `format`.
    pub fn cell(&self, format: &str) -> Option<&QuantCell> {
        self.cells.iter().find(|c| c.format == format)
    }
}

/// The embedded table (`None` if the file does not parse; a test checks that it does).
pub fn embedded() -> Option<&'static QuantTable> {
    static F: OnceLock<Option<QuantTable>> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../../../assets/measurements/quant.json")).ok())
        .as_ref()
}

/// The same table on SmolLM2-135M (`assets/measurements/smollm2/quant.json`: 2 windows of its held-out
/// text; `None` if the file does not parse, a test checks that it does).
pub fn embedded_smollm2() -> Option<&'static QuantTable> {
    static F: OnceLock<Option<QuantTable>> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../../../assets/measurements/smollm2/quant.json")).ok())
        .as_ref()
}

/// SmolLM2's channel maxima as heatmaps, K then V, one row per channel and one column per (layer, KV
/// head) (`[head_dim, layers × KV heads]`: wide, to fill a wide panel); `None` without them.
pub fn smollm2_channel_heat() -> Option<&'static [Arc<HeatmapData>; 2]> {
    static F: OnceLock<Option<[Arc<HeatmapData>; 2]>> = OnceLock::new();
    F.get_or_init(|| {
        let c = embedded_smollm2()?.channels.as_ref()?;
        let (lh, hd) = (c.layers * c.kv_heads, c.head_dim);
        let t = |x: &[f32]| (0..hd * lh).map(|i| x[(i % lh) * hd + i / lh]).collect();
        Some([
            crate::lessons::heat(hd, lh, t(&c.k)),
            crate::lessons::heat(hd, lh, t(&c.v)),
        ])
    })
    .as_ref()
}

#[cfg(test)]
mod tests {
    use crate::cache::CacheFormat;

    #[test]
    fn the_stored_table_parses_and_covers_every_format() {
        let t = super::embedded().expect("assets/measurements/quant.json parses");
        for f in CacheFormat::all(t.group, t.residual) {
            assert!(t.cell(&f.name()).is_some(), "{}", f.name());
        }
        assert_eq!(t.windows, crate::model::HELDOUT.len() / 256);
        assert_eq!(t.model, "tiny");
    }

    #[test]
    fn the_stored_smollm2_table_parses_and_covers_every_format() {
        let t = super::embedded_smollm2().expect("assets/measurements/smollm2/quant.json parses");
        assert_eq!(t.model, "smollm2");
        for f in CacheFormat::all(t.group, t.residual) {
            let c = t.cell(&f.name()).unwrap_or_else(|| panic!("{}", f.name()));
            assert!(
                c.k_rel_err.is_some() && c.v_rel_err.is_some(),
                "{}: K and V errors",
                f.name()
            );
        }
        let ch = t.channels.as_ref().expect("the channel maxima are stored");
        assert_eq!((ch.layers, ch.kv_heads, ch.head_dim), (30, 3, 64));
        assert_eq!(ch.k.len(), 30 * 3 * 64);
        assert_eq!(ch.v.len(), ch.k.len());
        assert!(ch.k.iter().chain(&ch.v).all(|x| x.is_finite() && *x >= 0.0));
        assert!(super::smollm2_channel_heat().is_some());
    }
}
