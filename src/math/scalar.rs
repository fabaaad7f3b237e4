//! The two precisions the math is written for: f64 (the oracle) and f32 (the CPU fast path).

use ndarray::LinalgScalar;

/// A float type the reference math runs in. Only f32 and f64 implement it.
pub trait Real: LinalgScalar + PartialOrd + Send + Sync + std::fmt::Debug + std::iter::Sum {
    /// −∞, the value of a masked score.
    const NEG_INFINITY: Self;
    /// From f64 (rounding for f32).
    fn from_f64(x: f64) -> Self;
    /// To f64 (exact).
    fn to_f64(self) -> f64;
    /// e^x.
    fn exp(self) -> Self;
    /// max(self, other), treating −∞ as the smallest value.
    fn max_of(self, other: Self) -> Self;
}

impl Real for f32 {
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn max_of(self, other: Self) -> Self {
        f32::max(self, other)
    }
}

impl Real for f64 {
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn max_of(self, other: Self) -> Self {
        f64::max(self, other)
    }
}
