//! The 8-bit codes of the KV dtypes in `quant`, as plain functions: FP8 E4M3 and E5M2 (OCP), INT8
//! with a scale, and what the quantising kernels need to know of a format ([`Quant`]). No `KvFormat`
//! here: `quant` builds the formats from these, and `format` names [`Quant`].

/// The NaN code both FP8 formats write (`0x7F`: S=0, exponent and mantissa all ones; a NaN in each).
pub const FP8_NAN: u8 = 0x7F;

/// An 8-bit floating-point format's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8 {
    /// Its name in exports (`"e4m3"`).
    pub name: &'static str,
    /// Exponent bits.
    pub ebits: u32,
    /// Mantissa bits.
    pub mbits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Whether the all-ones exponent holds infinities and NaNs (E5M2) or finite values and one NaN (E4M3).
    pub ieee: bool,
    /// The code of the largest finite value (positive).
    pub max_code: u8,
}

/// OCP E4M3 ("E4M3FN").
pub const E4M3: Fp8 = Fp8 {
    name: "e4m3",
    ebits: 4,
    mbits: 3,
    bias: 7,
    ieee: false,
    max_code: 0x7E,
};

/// OCP E5M2.
pub const E5M2: Fp8 = Fp8 {
    name: "e5m2",
    ebits: 5,
    mbits: 2,
    bias: 15,
    ieee: true,
    max_code: 0x7B,
};

/// `2^e` as f32 (`e` in the normal range).
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

impl Fp8 {
    /// The smallest normal exponent, `1 − bias`.
    pub fn emin(self) -> i32 {
        1 - self.bias
    }

    /// The largest finite value (448 for E4M3, 57344 for E5M2).
    pub fn max(self) -> f32 {
        self.decode(self.max_code)
    }

    /// The value of `code`, exactly.
    pub fn decode(self, code: u8) -> f32 {
        let sign = if code & 0x80 != 0 { -1.0f32 } else { 1.0 };
        let emask = (1u32 << self.ebits) - 1;
        let mmask = (1u32 << self.mbits) - 1;
        let e = (u32::from(code) >> self.mbits) & emask;
        let m = u32::from(code) & mmask;
        if e == emask {
            if self.ieee {
                return if m == 0 { sign * f32::INFINITY } else { f32::NAN };
            }
            if m == mmask {
                return f32::NAN;
            }
        }
        let mbits = self.mbits as i32;
        if e == 0 {
            return sign * m as f32 * pow2(self.emin() - mbits);
        }
        sign * ((1u32 << self.mbits) + m) as f32 * pow2(e as i32 - self.bias - mbits)
    }

    /// The code of `x` (already divided by its scale): round to nearest, ties to even, subnormals
    /// included; finite values beyond ±max and ±Inf saturate to ±max; NaN is [`FP8_NAN`].
    pub fn encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return FP8_NAN;
        }
        let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = x.abs();
        if a >= self.max() {
            return sign | self.max_code;
        }
        let mbits = self.mbits as i32;
        // The exponent a sits at, no lower than the smallest normal one (below it, the subnormal
        // quantum applies). An f32 subnormal has exponent field 0: −127, below every emin.
        let e = (((a.to_bits() >> 23) & 0xff) as i32 - 127).max(self.emin());
        // a / 2^(e − mbits), as a product by a power of two (exact); round_ties_even is the rounding.
        let mut q = (a * pow2(mbits - e)).round_ties_even() as u32;
        let mut e = e;
        if q == 1u32 << (self.mbits + 1) {
            // Rounded up into the next binade.
            q >>= 1;
            e += 1;
        }
        let code = if q < (1u32 << self.mbits) {
            q // subnormal (exponent field 0), or zero
        } else {
            (((e + self.bias) as u32) << self.mbits) | (q - (1u32 << self.mbits))
        };
        sign | code as u8
    }

    /// Value bits as the pool's kernel code for it (`kernels/quant_kv.cu`: 2 = E4M3, 3 = E5M2).
    pub fn kernel_code(self) -> i32 {
        if self.ieee { 3 } else { 2 }
    }
}

/// The smallest f16 value at or above `s` (`s ≥ 0`, finite), as f32: the INT8 per-token scale's
/// rounding. Above f16's largest finite value (65504) it stays 65504 (codes then saturate at ±127).
pub fn f16_ceil(s: f32) -> f32 {
    if s <= 0.0 || s.is_nan() {
        return 0.0;
    }
    if s >= 65504.0 {
        return 65504.0;
    }
    if s < pow2(-14) {
        // f16 subnormals: multiples of 2^-24.
        return (s * pow2(24)).ceil() * pow2(-24);
    }
    // Keep f32's top 10 mantissa bits; any of the 13 bits below set rounds up (a carry into the
    // exponent is the next binade, still exact).
    let b = s.to_bits();
    let low = b & 0x1fff;
    f32::from_bits(if low == 0 { b } else { (b & !0x1fff) + 0x2000 })
}

/// INT8 per token: the scale of a row (its absolute maximum over 127, rounded up to f16).
pub fn int8_scale(row: &[f32]) -> f32 {
    let amax = row.iter().fold(0.0f32, |m, &x| if x.abs() > m { x.abs() } else { m });
    f16_ceil(amax / 127.0)
}

/// INT8 code of `x` at `scale`: `round_ties_even(x / scale)` clamped to [−127, 127], as a two's
/// complement byte (0 when the scale is 0).
pub fn int8_encode(x: f32, scale: f32) -> u8 {
    if scale <= 0.0 || x.is_nan() {
        return 0;
    }
    (x / scale).round_ties_even().clamp(-127.0, 127.0) as i8 as u8
}

/// INT8 value of `code` at `scale`.
pub fn int8_decode(code: u8, scale: f32) -> f32 {
    f32::from(code as i8) * scale
}

/// What the quantising kernels need to know about an 8-bit format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    /// Symmetric INT8 with one scale per row.
    Int8Token,
    /// FP8 with a scale per tensor or per KV head.
    Fp8(Fp8),
}

impl Quant {
    /// The `fmt` argument of `kernels/quant_kv.*`: 1 INT8 per token, 2 E4M3, 3 E5M2.
    pub fn kernel_code(self) -> i32 {
        match self {
            Self::Int8Token => 1,
            Self::Fp8(f) => f.kernel_code(),
        }
    }

    /// One code of `x` with `scale` (the row's, head's or tensor's).
    pub fn encode(self, x: f32, scale: f32) -> u8 {
        match self {
            Self::Int8Token => int8_encode(x, scale),
            Self::Fp8(f) => f.encode(x / scale),
        }
    }

    /// The value of `code` with `scale`.
    pub fn decode(self, code: u8, scale: f32) -> f32 {
        match self {
            Self::Int8Token => int8_decode(code, scale),
            Self::Fp8(f) => f.decode(code) * scale,
        }
    }
}
