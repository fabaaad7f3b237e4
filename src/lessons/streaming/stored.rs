//! The 16 KiB measurements lesson 8 draws beside its live runs: `assets/measurements/streaming.json`,
//! written by `scripts/streaming-summary.py` from the folders of `kvscope export streaming` runs over the
//! whole held-out file (the command and backend are recorded in it). The views label them as stored.

use std::sync::OnceLock;

use serde::Deserialize;

/// One stored run.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredRun {
    /// `dense`, `window`, `sinks` or `recompute`.
    pub policy: String,
    /// `cache` or `text`.
    pub positions: String,
    /// W.
    pub window: usize,
    /// S.
    pub sinks: usize,
    /// B.
    pub block_size: usize,
    /// Bytes streamed (the start byte included for a model trained with one).
    pub bytes: usize,
    /// Bits per byte over the file.
    pub bits_per_byte: f64,
    /// The most blocks in use at once.
    pub max_blocks_in_use: usize,
    /// Seconds the run took.
    pub seconds: f64,
    /// Bits per byte per bucket of `curve_bucket` predictions.
    pub curve: Vec<f64>,
}

/// The stored measurements of one model.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredModel {
    /// The model file.
    pub model: String,
    /// Bytes streamed by its longest run (a BPE model's: the bytes of the tokens it predicted).
    pub bytes: usize,
    /// Tokens streamed by its longest run (BPE models only; the tiny model's tokens are its bytes).
    #[serde(default)]
    pub tokens: Option<usize>,
    /// The command that produced these runs, where it differs from the file's.
    #[serde(default)]
    pub command: Option<String>,
    /// The backend they ran on.
    pub backend: String,
    /// Predictions per curve bucket (each bucket's bits per byte: its loss over its tokens' bytes).
    pub curve_bucket: usize,
    /// The runs.
    pub runs: Vec<StoredRun>,
    /// `[layer][head]`: mean attention mass on tokens 0…S−1 (S = `sink_mass_sinks`) in dense steps 16…255.
    pub dense_sink_mass: Vec<Vec<f64>>,
    /// S of `dense_sink_mass`.
    pub sink_mass_sinks: usize,
}

/// The stored dense run's curve past its first bucket (the part past the trained context): its lowest
/// and highest bucket, and its mean over the first and the second half of those buckets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DenseTrend {
    /// The lowest bucket's bits per byte.
    pub low: f64,
    /// The highest bucket's bits per byte.
    pub high: f64,
    /// The mean of the first half of the buckets.
    pub early: f64,
    /// The mean of the second half.
    pub late: f64,
}

impl StoredModel {
    /// The dense run's curve after its first bucket, summarised (None without a dense run of at least
    /// three buckets).
    pub fn dense_trend(&self) -> Option<DenseTrend> {
        let r = self
            .runs
            .iter()
            .find(|r| r.policy == "dense" && r.positions == "cache")?;
        let c = r.curve.get(1..).filter(|c| c.len() >= 2)?;
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        let (a, b) = c.split_at(c.len() / 2);
        Some(DenseTrend {
            low: c.iter().copied().fold(f64::INFINITY, f64::min),
            high: c.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            early: mean(a),
            late: mean(b),
        })
    }

    /// The run of these settings (dense runs match any W).
    pub fn find(&self, policy: &str, positions: &str, window: usize, sinks: usize) -> Option<&StoredRun> {
        self.runs.iter().find(|r| {
            r.policy == policy
                && (r.positions == positions || policy == "recompute" || policy == "dense")
                && (policy == "dense" || (r.window == window && (r.sinks == sinks || policy != "sinks")))
        })
    }
}

/// The file: the committed model and, when measured, the variant trained with a start byte.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredFile {
    /// The command that produced the runs.
    pub command: String,
    /// The committed model.
    pub base: StoredModel,
    /// The variant trained with a start byte at the head of every window (lesson 8's sink experiment).
    #[serde(default)]
    pub start: Option<StoredModel>,
    /// SmolLM2-135M-Instruct streaming its English held-out text (`kvscope export streaming --model
    /// smollm2`, summarised by `scripts/streaming-summary.py --add-smollm2`).
    #[serde(default)]
    pub smollm2: Option<StoredModel>,
}

impl StoredModel {
    /// The head with the most mean sink mass: (layer, head, mass).
    pub fn strongest_sink(&self) -> (usize, usize, f64) {
        let mut best = (0, 0, f64::MIN);
        for (l, row) in self.dense_sink_mass.iter().enumerate() {
            for (h, &m) in row.iter().enumerate() {
                if m > best.2 {
                    best = (l, h, m);
                }
            }
        }
        best
    }

    /// Heads whose mean sink mass is at least `at`, and all heads.
    pub fn heads_at_least(&self, at: f64) -> (usize, usize) {
        let all = self.dense_sink_mass.iter().map(Vec::len).sum();
        let n = self.dense_sink_mass.iter().flatten().filter(|&&m| m >= at).count();
        (n, all)
    }
}

/// The embedded measurements (`None` if the file does not parse; a test checks that it does).
pub fn file() -> Option<&'static StoredFile> {
    static F: OnceLock<Option<StoredFile>> = OnceLock::new();
    F.get_or_init(|| serde_json::from_str(include_str!("../../../assets/measurements/streaming.json")).ok())
        .as_ref()
}

/// SmolLM2's stored runs.
pub fn smollm2() -> Option<&'static StoredModel> {
    file().and_then(|f| f.smollm2.as_ref())
}

/// The committed model's stored runs.
pub fn embedded() -> Option<&'static StoredModel> {
    file().map(|f| &f.base)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stored_measurements_parse_and_cover_the_default_settings() {
        let f = super::file().expect("assets/measurements/streaming.json parses");
        for p in ["dense", "window", "sinks", "recompute"] {
            assert!(f.base.find(p, "cache", 64, 4).is_some(), "{p}");
        }
        assert_eq!(f.base.bytes, crate::model::HELDOUT.len());
    }

    /// Lesson 8's `breaks` step says, from these numbers, that the dense run past the trained context
    /// does not keep getting worse and that its worst bucket is worse than a uniform guess (8 bits per
    /// byte): both must stay true of the stored file.
    #[test]
    fn the_stored_dense_run_has_no_upward_trend_and_a_bucket_past_uniform() {
        let t = super::embedded().unwrap().dense_trend().unwrap();
        assert!(t.late < t.early + 0.25, "{t:?}");
        assert!(t.high > 8.0 && t.low > 5.0, "{t:?}");
        // The figures, 512-byte buckets: 5.83 to 8.67.
        assert_eq!(
            (format!("{:.2}", t.low), format!("{:.2}", t.high)),
            ("5.83".into(), "8.67".into())
        );
    }

    #[test]
    fn the_stored_smollm2_runs_cover_the_four_policies_and_every_head() {
        let s = super::smollm2().expect("assets/measurements/streaming.json has SmolLM2's runs");
        for p in ["dense", "window", "sinks", "recompute"] {
            let r = s.find(p, "cache", 64, 4).unwrap_or_else(|| panic!("{p}"));
            assert!(r.bits_per_byte.is_finite() && !r.curve.is_empty(), "{p}");
        }
        // 30 layers of 9 query heads.
        assert_eq!(s.dense_sink_mass.len(), 30);
        assert!(s.dense_sink_mass.iter().all(|row| row.len() == 9));
        assert!(s.tokens.is_some_and(|t| t > 256));
    }
}
