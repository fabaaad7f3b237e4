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
    fn exp_shifted_sum(xs: &mut [Self], shift: Self) -> Self {
        let mut acc = [0f32; 8];
        let mut chunks = xs.chunks_exact_mut(8);
        for c in &mut chunks {
            for i in 0..8 {
                c[i] = exp_f32(c[i] - shift);
                acc[i] += c[i];
            }
        }
        let mut sum: f32 = acc.iter().sum();
        for x in chunks.into_remainder() {
            *x = exp_f32(*x - shift);
            sum += *x;
        }
        sum
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

/// e^x in f32 with a Cephes-style polynomial (relative error about 2e-7). Inputs below −87.3 (−∞
/// included) give exactly 0. Written without branches (min/max and bit masks instead of `if` and
/// `clamp`) so that LLVM vectorises loops over it.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5·2²³ rounds to the nearest integer and leaves it in the low mantissa bits, with
    // integer operations only, which vectorise (a float→int cast would not).
    const MAGIC: f32 = 12_582_912.0;
    // max/min rather than clamp: clamp's NaN handling keeps LLVM from vectorising.
    #[allow(clippy::manual_clamp)]
    let xc = x.max(-87.3).min(88.7);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    p = p * r * r + r + 1.0;
    let scale = f32::from_bits((ni.wrapping_add(127) as u32) << 23);
    let keep = (x >= -87.3) as u32;
    f32::from_bits((p * scale).to_bits() & keep.wrapping_neg())
}

#[cfg(test)]
mod tests {
    use super::*;

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
