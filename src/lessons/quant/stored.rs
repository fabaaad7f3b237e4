//! The quality table lesson 10 draws: `assets/measurements/quant.json`, written by `kvscope export
//! quant-table` (held-out bits per byte with the cache in each format, every 256-byte window decoded byte
//! by byte from an empty cache; the backend is recorded in it). The views label it as stored. SmolLM2's
//! table (`assets/measurements/smollm2/quant.json`) is stored beside it; the lesson does not draw it yet.

use std::sync::OnceLock;

use crate::drivers::quant::{QuantCell, QuantTable};

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
            assert!(t.cell(&f.name()).is_some(), "{}", f.name());
        }
    }
}
