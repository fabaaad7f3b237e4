//! The quality table lesson 9 draws: `assets/measurements/eviction.json`, written by `kvscope export
//! eviction-table` (every policy at budgets 16–128 over the held-out file's 256-byte windows, and the
//! recall trials; the backend is recorded in it). The views label it as stored. SmolLM2's table
//! (`assets/measurements/smollm2/eviction.json`) is stored beside it; the lesson does not draw it yet.

use std::sync::OnceLock;

use crate::drivers::evict::{QualityCell, QualityTable};

impl QualityTable {
    /// The cell of `policy` at budget `k`.
    pub fn cell(&self, policy: &str, k: usize) -> Option<&QualityCell> {
        self.cells.iter().find(|c| c.policy == policy && c.budget == k)
    }
}

/// The embedded table (`None` if the file does not parse; a test checks that it does).
pub fn embedded() -> Option<&'static QualityTable> {
    static F: OnceLock<Option<QualityTable>> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../../../assets/measurements/eviction.json")).ok())
        .as_ref()
}

/// The same table on SmolLM2-135M (`assets/measurements/smollm2/eviction.json`: 2 windows of its held-out
/// text, 3 recall trials; `None` if the file does not parse, a test checks that it does).
pub fn embedded_smollm2() -> Option<&'static QualityTable> {
    static F: OnceLock<Option<QualityTable>> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../../../assets/measurements/smollm2/eviction.json")).ok())
        .as_ref()
}

#[cfg(test)]
mod tests {
    use crate::drivers::evict::{BUDGETS, EvictPolicy};

    #[test]
    fn the_stored_table_parses_and_covers_every_policy_and_budget() {
        let t = super::embedded().expect("assets/measurements/eviction.json parses");
        for p in EvictPolicy::ALL {
            for k in BUDGETS {
                assert!(t.cell(p.name(), k).is_some(), "{} {k}", p.name());
            }
        }
        assert_eq!(t.windows, crate::model::HELDOUT.len() / 256);
        assert_eq!(t.model, "tiny");
    }

    #[test]
    fn the_stored_smollm2_table_parses_and_covers_every_policy_and_budget() {
        let t = super::embedded_smollm2().expect("assets/measurements/smollm2/eviction.json parses");
        assert_eq!(t.model, "smollm2");
        for p in EvictPolicy::ALL {
            for k in BUDGETS {
                assert!(t.cell(p.name(), k).is_some(), "{} {k}", p.name());
            }
        }
        assert!(t.windows >= 1 && t.trials >= 1);
        // SmolLM2's shape: 30 layers of 9 query heads.
        assert_eq!((t.layers, t.heads, t.top10_share.len()), (30, 9, 270));
    }
}
