//! The one checker: tests, `kvscope check` and the app's "verified" badge all call [`check`].
//!
//! An element passes when `|got − want| ≤ atol + rtol·|want|` (as llm.c's dev/cuda checker does), or
//! when both are the same infinity (a masked score is −∞ in every backend). NaN never passes. The
//! report keeps the first 10 mismatches with their multi-dimensional index.

use std::fmt;

use serde::Deserialize;

/// Absolute and relative tolerance.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    /// Absolute part.
    pub atol: f64,
    /// Relative part, times |reference|.
    pub rtol: f64,
}

impl Tolerance {
    /// Exact equality.
    pub const EXACT: Tolerance = Tolerance { atol: 0.0, rtol: 0.0 };
    /// For f32 math against the f64 oracle.
    pub const F32: Tolerance = Tolerance { atol: 1e-4, rtol: 1e-4 };
    /// For paths that store K/V in f16 and accumulate in f32 (compared with an f64 oracle that reads
    /// the same f16 values).
    pub const F16_STORAGE: Tolerance = Tolerance { atol: 2e-3, rtol: 2e-3 };
}

/// One element that did not match.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Mismatch {
    /// Multi-dimensional index.
    pub index: Vec<usize>,
    /// What the backend produced.
    #[serde(serialize_with = "number_or_word", deserialize_with = "number_from_word")]
    pub got: f64,
    /// What the reference says.
    #[serde(serialize_with = "number_or_word", deserialize_with = "number_from_word")]
    pub want: f64,
}

/// [`number_or_word`] read back: a number, or `"inf"`, `"-inf"` or `"NaN"`.
fn number_from_word<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Value {
        Number(f64),
        Word(String),
    }
    match Value::deserialize(d)? {
        Value::Number(v) => Ok(v),
        Value::Word(w) => w.parse().map_err(serde::de::Error::custom),
    }
}

/// A value as a JSON number, or, where JSON has none, as `"inf"`, `"-inf"` or `"NaN"` (a masked score is
/// −∞; plain serde would write null).
fn number_or_word<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

/// What a check compared the result with: the f64 oracle, or (where a lesson compares two of its own
/// paths) the other path. Every line that reports a check names it, so no line says "the f64 reference"
/// for a comparison that was not with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// The CPU f64 reference of the op (`compute::reference`).
    #[default]
    F64Reference,
    /// Lesson 1's three f32 attention kernels (scores, softmax, P·V) on the same backend.
    ThreeKernels,
    /// The flash kernel's own output (the tile walker's replay is compared with it).
    FlashKernel,
    /// The model recomputed in f32 over the whole sequence, without a cache, on the CPU.
    RecomputeWithoutCache,
    /// `paged_decode` on the same backend and cache (a prefill chunk of one token must equal it exactly).
    PagedDecode,
}

impl Against {
    /// What was compared with, in English.
    pub fn en(self) -> &'static str {
        match self {
            Against::F64Reference => "the CPU f64 reference",
            Against::ThreeKernels => "lesson 1's three f32 kernels",
            Against::FlashKernel => "the flash kernel's output",
            Against::RecomputeWithoutCache => "an f32 recompute without the cache (CPU)",
            Against::PagedDecode => "paged_decode on the same backend",
        }
    }

    /// What was compared with, in Chinese.
    pub fn zh(self) -> &'static str {
        match self {
            Against::F64Reference => "CPU f64 参考结果",
            Against::ThreeKernels => "第 1 课的三个 f32 kernel",
            Against::FlashKernel => "flash kernel 的输出",
            Against::RecomputeWithoutCache => "不用缓存的 f32 重算（CPU）",
            Against::PagedDecode => "同一后端上的 paged_decode",
        }
    }
}

/// The result of comparing one tensor with its reference.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckReport {
    /// What was compared, e.g. `attention.probs`.
    pub label: String,
    /// The tensor's shape.
    pub shape: Vec<usize>,
    /// Elements compared.
    pub count: usize,
    /// Largest |got − want| over finite pairs.
    pub max_abs: f64,
    /// Largest |got − want| / |want| over pairs with |want| > atol (or > 0 when atol is 0).
    pub max_rel: f64,
    /// Elements outside the tolerance.
    pub mismatch_count: usize,
    /// The first 10 of them.
    pub mismatches: Vec<Mismatch>,
    /// Computed values that are NaN (each is also a mismatch): what a lesson's `has_nan` reads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nan_count: usize,
    /// The tolerance used.
    pub tolerance: Tolerance,
    /// What the result was compared with ([`Against::F64Reference`] unless the caller says otherwise).
    pub against: Against,
    /// A structural problem (length mismatch) that made the comparison impossible.
    pub error: Option<String>,
    /// Where the mismatches are, over the last two dimensions (None when every element matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong_map: Option<WrongMap>,
}

/// Where a check's mismatches lie: the tensor's last two dimensions (rows × columns, the leading ones
/// folded in), binned down to at most [`WrongMap::MAX_ROWS`] × [`WrongMap::MAX_COLS`] cells, each
/// counting the mismatches that fall in it. What an exercise's grade draws as "where the output is
/// wrong".
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WrongMap {
    /// The tensor's rows (its second-last dimension; 1 for a vector).
    pub rows: usize,
    /// The tensor's columns (its last dimension).
    pub cols: usize,
    /// Rows of the map.
    pub map_rows: usize,
    /// Columns of the map.
    pub map_cols: usize,
    /// Mismatches per map cell, row-major.
    pub counts: Vec<u32>,
}

impl WrongMap {
    /// Most rows a map keeps.
    pub const MAX_ROWS: usize = 32;
    /// Most columns a map keeps.
    pub const MAX_COLS: usize = 64;

    fn new(shape: &[usize]) -> Self {
        let cols = shape.last().copied().unwrap_or(1).max(1);
        let rows = if shape.len() >= 2 {
            shape[shape.len() - 2].max(1)
        } else {
            1
        };
        let (map_rows, map_cols) = (rows.min(Self::MAX_ROWS), cols.min(Self::MAX_COLS));
        Self {
            rows,
            cols,
            map_rows,
            map_cols,
            counts: vec![0; map_rows * map_cols],
        }
    }

    fn add(&mut self, flat: usize) {
        let c = flat % self.cols;
        let r = (flat / self.cols) % self.rows;
        let (mr, mc) = (r * self.map_rows / self.rows, c * self.map_cols / self.cols);
        self.counts[mr * self.map_cols + mc] += 1;
    }

    /// The map as text: one line per map row, `X` where something is wrong and `.` where all is right.
    pub fn text(&self) -> String {
        self.counts
            .chunks(self.map_cols.max(1))
            .map(|row| row.iter().map(|&n| if n > 0 { 'X' } else { '.' }).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How many mismatches a report keeps.
pub const MAX_REPORTED: usize = 10;

impl CheckReport {
    /// Whether every element matched.
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.mismatch_count == 0
    }

    /// The same report, saying it compared with `against` rather than the f64 reference.
    pub fn against(mut self, against: Against) -> Self {
        self.against = against;
        self
    }

    /// A check that could not run because the op failed (`error` says why); it never passes.
    pub fn failed(label: &str, error: impl fmt::Display) -> Self {
        let mut r = check::<f32, f64>(label, &[0], &[], &[], Tolerance::EXACT);
        r.error = Some(error.to_string());
        r
    }
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[i] = flat % d;
            flat /= d;
        }
    }
    idx
}

/// Compare `got` with the reference `want` (same flat layout, shape `shape`).
pub fn check<G, W>(label: &str, shape: &[usize], got: &[G], want: &[W], tol: Tolerance) -> CheckReport
where
    G: Copy + Into<f64>,
    W: Copy + Into<f64>,
{
    let mut r = CheckReport {
        label: label.to_string(),
        shape: shape.to_vec(),
        count: got.len(),
        max_abs: 0.0,
        max_rel: 0.0,
        mismatch_count: 0,
        mismatches: Vec::new(),
        nan_count: 0,
        tolerance: tol,
        against: Against::F64Reference,
        error: None,
        wrong_map: None,
    };
    let expected_len: usize = shape.iter().product();
    if got.len() != want.len() || want.len() != expected_len {
        r.error = Some(format!(
            "length mismatch: got {} values, reference has {}, shape {:?} needs {expected_len}",
            got.len(),
            want.len(),
            shape
        ));
        return r;
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w): (f64, f64) = (g.into(), w.into());
        r.nan_count += usize::from(g.is_nan());
        let ok = if g.is_finite() && w.is_finite() {
            let d = (g - w).abs();
            r.max_abs = r.max_abs.max(d);
            if w.abs() > tol.atol.max(f64::MIN_POSITIVE) {
                r.max_rel = r.max_rel.max(d / w.abs());
            }
            d <= tol.atol + tol.rtol * w.abs()
        } else {
            g == w // equal infinities pass; NaN never equals anything
        };
        if !ok {
            r.mismatch_count += 1;
            r.wrong_map.get_or_insert_with(|| WrongMap::new(shape)).add(i);
            if r.mismatches.len() < MAX_REPORTED {
                r.mismatches.push(Mismatch {
                    index: unravel(i, shape),
                    got: g,
                    want: w,
                });
            }
        }
    }
    r
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if self.passed() { "ok" } else { "MISMATCH" };
        write!(
            f,
            "{status:8} {:52} {:>16} max_abs {:9.2e} max_rel {:9.2e}",
            self.label,
            format!("{:?}", self.shape),
            self.max_abs,
            self.max_rel
        )?;
        if let Some(e) = &self.error {
            write!(f, "\n         {e}")?;
        }
        if self.mismatch_count > 0 {
            write!(
                f,
                "\n         {} of {} outside atol {:.0e} + rtol {:.0e}·|ref|; first:",
                self.mismatch_count, self.count, self.tolerance.atol, self.tolerance.rtol
            )?;
            for m in &self.mismatches {
                write!(f, "\n           {:?}: got {} want {}", m.index, m.got, m.want)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_indices_and_errors() {
        let want = [1.0f64, 2.0, f64::NEG_INFINITY, 4.0, 5.0, 6.0];
        let got = [1.0f32, 2.5, f32::NEG_INFINITY, 4.0, f32::NAN, 6.0];
        let r = check("t", &[2, 3], &got, &want, Tolerance { atol: 1e-3, rtol: 0.0 });
        assert!(!r.passed());
        assert_eq!(r.mismatch_count, 2);
        assert_eq!(r.mismatches[0].index, vec![0, 1]);
        assert_eq!(r.mismatches[1].index, vec![1, 1]);
        assert!((r.max_abs - 0.5).abs() < 1e-12);
        assert_eq!(r.nan_count, 1, "the NaN is counted (max_abs skips it)");
        assert!(r.to_string().contains("MISMATCH"));
        let ok = check(
            "t",
            &[2],
            &[1.0f32, f32::NEG_INFINITY],
            &[1.0f64, f64::NEG_INFINITY],
            Tolerance::EXACT,
        );
        assert!(ok.passed());
        let bad = check("t", &[3], &[1.0f32], &[1.0f64], Tolerance::EXACT);
        assert!(!bad.passed() && bad.error.is_some());
    }

    #[test]
    fn keeps_only_first_ten() {
        let want = vec![0.0f64; 50];
        let got = vec![1.0f32; 50];
        let r = check("t", &[50], &got, &want, Tolerance::F32);
        assert_eq!(r.mismatch_count, 50);
        assert_eq!(r.mismatches.len(), MAX_REPORTED);
    }
}
