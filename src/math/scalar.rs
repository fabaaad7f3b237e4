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
    /// The largest value of a slice (−∞ when empty).
    fn max_of_slice(xs: &[Self]) -> Self {
        xs.iter().fold(Self::NEG_INFINITY, |m, &x| m.max_of(x))
    }
    /// `x ← e^(x − shift)` over a slice; e^(−∞) is exactly 0. Returns the sum of the results.
    fn exp_shifted_sum(xs: &mut [Self], shift: Self) -> Self {
        let mut sum = Self::zero();
        for x in xs.iter_mut() {
            *x = (*x - shift).exp();
            sum = sum + *x;
        }
        sum
    }
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
    fn max_of_slice(xs: &[Self]) -> Self {
        crate::simd::max_f32(xs)
    }
    fn exp_shifted_sum(xs: &mut [Self], shift: Self) -> Self {
        crate::simd::exp_shifted_sum(xs, shift)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::exp_f32;

    #[test]
    fn fast_exp_is_accurate_and_exact_at_minus_infinity() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = exp_f32(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(0.0), 1.0);
        let mut v = vec![f32::NEG_INFINITY, 0.0, -1.0, 1.0, -3.0, 2.0, 0.5, -0.5, 0.25];
        let s = <f32 as Real>::exp_shifted_sum(&mut v, 2.0);
        assert_eq!(v[0], 0.0);
        assert!((v[5] - 1.0).abs() < 1e-7 && (s - v.iter().sum::<f32>()).abs() < 1e-6);
    }
}
