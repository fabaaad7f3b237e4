//! The 8-bit KV dtypes, written from their specifications (no library encodes for us):
//!
//! - **INT8 per token** (`int8-token`): symmetric, one scale per token row (slot, KV head). The scale is
//!   the row's absolute maximum over 127, rounded *up* to an f16 value, so every `x / scale` lies in
//!   [−127, 127] and the round trip errs by at most half a step (`scale / 2`). Codes are two's complement.
//! - **FP8 E4M3** (OCP 8-bit floating point, "E4M3FN"): 4 exponent bits (bias 7), 3 mantissa bits, no
//!   infinities, largest finite 448 (`0x7E`), NaN only at `S.1111.111`.
//! - **FP8 E5M2**: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like with infinities (`0x7C`) and
//!   NaNs (`0x7D`–`0x7F`), largest finite 57344 (`0x7B`).
//!
//! FP8 pools carry a scale per tensor (vLLM's `k_scale`/`v_scale`) or per KV head; stored values are
//! `x / scale`. The encoder takes that quotient in f32, rounds to nearest with ties to even (subnormals
//! included), **saturates** finite values beyond the range and ±Inf to ±max (as vLLM's KV-cache write
//! does, a saturating conversion rather than a plain cast) and writes NaN as [`FP8_NAN`]. A fresh pool's
//! FP8 scale is 1.0, vLLM's uncalibrated default; the engine calibrates it at prefill
//! (`KvEngine::calibrate_fp8`). The kernels' twins of these functions are in `kernels/quant_kv.cu` and
//! `.wgsl`; tests compare them code for code.

pub use super::codes::*;
use super::format::{KvFormat, ScaleLayout};

impl Quant {
    /// The `scale_mode` argument of `kernels/quant_kv.*` for `layout`: 0 a scale per row, 1 per KV head,
    /// 2 per tensor.
    pub fn scale_mode(layout: ScaleLayout) -> i32 {
        match layout {
            ScaleLayout::PerHead => 1,
            ScaleLayout::PerTensor => 2,
            _ => 0,
        }
    }
}

fn int8_write(src: &[f32], dst: &mut [u8], scales: &mut [f32]) {
    let s = int8_scale(src);
    scales[0] = s;
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = int8_encode(x, s);
    }
}

fn int8_read(src: &[u8], scales: &[f32], dst: &mut [f32]) {
    let s = scales[0];
    for (d, &c) in dst.iter_mut().zip(src) {
        *d = int8_decode(c, s);
    }
}

fn fp8_write(f: Fp8, src: &[f32], dst: &mut [u8], scales: &[f32]) {
    let s = scales[0];
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = f.encode(x / s);
    }
}

fn fp8_read(f: Fp8, src: &[u8], scales: &[f32], dst: &mut [f32]) {
    let s = scales[0];
    for (d, &c) in dst.iter_mut().zip(src) {
        *d = f.decode(c) * s;
    }
}

macro_rules! fp8_format {
    ($name:ident, $label:literal, $fmt:ident, $layout:expr, $doc:literal) => {
        #[doc = $doc]
        pub static $name: KvFormat = KvFormat {
            name: $label,
            bits: 8,
            scales: $layout,
            scale_init: 1.0,
            quant: Some(Quant::Fp8($fmt)),
            write: |s, d, sc| fp8_write($fmt, s, d, sc),
            read: |s, sc, d| fp8_read($fmt, s, sc, d),
        };
    };
}

/// INT8 per token.
pub static INT8_TOKEN: KvFormat = KvFormat {
    name: "int8-token",
    bits: 8,
    scales: ScaleLayout::PerToken { per: 1 },
    scale_init: 0.0,
    quant: Some(Quant::Int8Token),
    write: int8_write,
    read: int8_read,
};

fp8_format!(
    FP8_E4M3,
    "fp8-e4m3",
    E4M3,
    ScaleLayout::PerTensor,
    "FP8 E4M3, one scale per tensor."
);
fp8_format!(
    FP8_E5M2,
    "fp8-e5m2",
    E5M2,
    ScaleLayout::PerTensor,
    "FP8 E5M2, one scale per tensor."
);
fp8_format!(
    FP8_E4M3_HEAD,
    "fp8-e4m3-head",
    E4M3,
    ScaleLayout::PerHead,
    "FP8 E4M3, one scale per KV head."
);
fp8_format!(
    FP8_E5M2_HEAD,
    "fp8-e5m2-head",
    E5M2,
    ScaleLayout::PerHead,
    "FP8 E5M2, one scale per KV head."
);

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// An independent encoder: the nearest finite code by search over all 256 decoded values, ties to
    /// the even code (mantissa LSB 0), beyond max saturating, NaN to FP8_NAN.
    fn brute(f: Fp8, x: f32) -> u8 {
        if x.is_nan() {
            return FP8_NAN;
        }
        let max = f.max();
        if x >= max {
            return f.max_code;
        }
        if x <= -max {
            return 0x80 | f.max_code;
        }
        let mut best: Option<(u8, f64)> = None;
        for c in 0..=255u8 {
            let v = f.decode(c);
            if !v.is_finite() || (v == 0.0 && (c & 0x80 != 0) != x.is_sign_negative()) {
                continue; // the zero of the other sign never wins
            }
            let d = (f64::from(v) - f64::from(x)).abs();
            best = match best {
                None => Some((c, d)),
                Some((bc, bd)) if d < bd || (d == bd && c & 1 == 0 && bc & 1 == 1) => Some((c, d)),
                b => b,
            };
        }
        best.expect("some code is finite").0
    }

    #[test]
    fn fp8_decode_tables_are_exact_for_all_256_codes() {
        // Independent: value = (-1)^s 2^(e - bias) (1 + m / 2^mbits), subnormal 2^(1 - bias) m / 2^mbits.
        for f in [E4M3, E5M2] {
            let mut finite = 0;
            for c in 0..=255u8 {
                let (s, e, m) = (c >> 7, (c >> f.mbits) & ((1 << f.ebits) - 1), c & ((1 << f.mbits) - 1));
                let emax = (1u8 << f.ebits) - 1;
                let v = f.decode(c);
                let mant = f64::from(m) / f64::from(1u32 << f.mbits);
                let want = if f.ieee && e == emax {
                    if m == 0 { f64::INFINITY } else { f64::NAN }
                } else if !f.ieee && e == emax && m == (1 << f.mbits) - 1 {
                    f64::NAN
                } else if e == 0 {
                    2f64.powi(1 - f.bias) * mant
                } else {
                    2f64.powi(i32::from(e) - f.bias) * (1.0 + mant)
                };
                let want = if s == 1 { -want } else { want };
                if want.is_nan() {
                    assert!(v.is_nan(), "{} {c:#04x}: {v}", f.name);
                } else {
                    assert_eq!(f64::from(v), want, "{} {c:#04x}", f.name);
                    finite += usize::from(want.is_finite());
                }
            }
            assert_eq!(finite, if f.ieee { 248 } else { 254 }, "{}", f.name);
        }
        assert_eq!(E4M3.max(), 448.0);
        assert_eq!(E5M2.max(), 57344.0);
        assert!(E4M3.decode(FP8_NAN).is_nan() && E5M2.decode(FP8_NAN).is_nan());
    }

    #[test]
    fn fp8_encoding_is_round_to_nearest_even_on_every_f16_input() {
        for f in [E4M3, E5M2] {
            for bits in 0..=u16::MAX {
                let x = f16::from_bits(bits).to_f32();
                assert_eq!(f.encode(x), brute(f, x), "{} f16 {bits:#06x} = {x}", f.name);
            }
        }
    }

    #[test]
    fn fp8_encoding_handles_f32_ties_near_ties_subnormals_and_out_of_range() {
        for f in [E4M3, E5M2] {
            // Every midpoint between consecutive finite positive codes, and one f32 ULP either side.
            let vals: Vec<f32> = (0..f.max_code).map(|c| f.decode(c)).collect();
            for w in vals.windows(2) {
                let mid = (w[0] + w[1]) / 2.0; // exact in f32
                for x in [
                    mid,
                    f32::from_bits(mid.to_bits() - 1),
                    f32::from_bits(mid.to_bits() + 1),
                ] {
                    assert_eq!(f.encode(x), brute(f, x), "{} {x}", f.name);
                    assert_eq!(f.encode(-x), brute(f, -x), "{} {}", f.name, -x);
                }
            }
            // Half the smallest subnormal ties to zero (even); a hair above rounds up.
            let tiny = f.decode(1);
            assert_eq!(f.encode(tiny / 2.0), 0);
            assert_eq!(f.encode(f32::from_bits((tiny / 2.0).to_bits() + 1)), 1);
            assert_eq!(f.encode(1e-30), 0);
            assert_eq!(f.encode(-1e-30), 0x80);
            // Saturation: just past max, far past it, ±Inf; NaN.
            let max = f.max();
            for x in [max * 1.01, 1e30, f32::INFINITY] {
                assert_eq!(f.encode(x), f.max_code, "{} {x}", f.name);
                assert_eq!(f.encode(-x), 0x80 | f.max_code, "{} {}", f.name, -x);
            }
            assert_eq!(f.encode(f32::NAN), FP8_NAN);
        }
        // E4M3: 464 (the midpoint between 448 and the missing 480) and above saturate to 448.
        assert_eq!(E4M3.decode(E4M3.encode(470.0)), 448.0);
        // E5M2 keeps 1.25 exactly; 1.125 is a tie between 1.0 (even) and 1.25.
        assert_eq!(E5M2.decode(E5M2.encode(1.125)), 1.0);
        assert_eq!(E5M2.decode(E5M2.encode(1.375)), 1.5);
    }

    #[test]
    fn int8_round_trip_errs_by_at_most_half_a_step() {
        let mut rng = crate::math::Rng::stream(7, 1);
        for n in [1usize, 3, 64, 200] {
            for amp in [1e-6f32, 1e-3, 1.0, 37.0, 5000.0] {
                let row: Vec<f32> = rng.normal_vec(n, 1.0).iter().map(|x| x * amp).collect();
                let s = int8_scale(&row);
                let amax = row.iter().fold(0f32, |m, x| m.max(x.abs()));
                assert!(s * 127.0 >= amax, "scale {s} too small for {amax}");
                assert_eq!(f16::from_f32(s).to_f32(), s, "the scale is an f16 value");
                for &x in &row {
                    let back = int8_decode(int8_encode(x, s), s);
                    assert!((back - x).abs() <= s / 2.0 * (1.0 + 1e-6), "{x} -> {back} at {s}");
                }
            }
        }
        assert_eq!(int8_scale(&[0.0, 0.0]), 0.0);
        assert_eq!(int8_encode(0.3, 0.0), 0);
        assert_eq!(f16_ceil(1.0), 1.0);
        assert_eq!(f16_ceil(f32::from_bits(1.0f32.to_bits() + 1)), 1.0 + 2f32.powi(-10));
        assert_eq!(f16_ceil(1e-7), 2f32.powi(-24) * 2.0);
    }
}
