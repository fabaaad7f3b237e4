//! The exponential and the softmax sums of the f32 attention path: `exp_f32`, the row softmax's
//! shifted exponential sum and max, and the fused attention's column softmax over a transposed tile.

#[allow(unused_imports)]
use super::*;

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

/// `xs[i] = e^(xs[i] − shift)` in place, returning Σ xs: the softmax's exponentials (8 lanes, one
/// polynomial per lane), in AVX2+FMA where the CPU has them.
pub fn exp_shifted_sum(xs: &mut [f32], shift: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2, FMA and F16C, the features
        // `exp_shifted_sum_avx2` is compiled for; it takes only safe references.
        return unsafe { exp_shifted_sum_avx2(xs, shift) };
    }
    exp_shifted_sum_body(xs, shift)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn exp_shifted_sum_avx2(xs: &mut [f32], shift: f32) -> f32 {
    exp_shifted_sum_body(xs, shift)
}

#[inline(always)]
pub(super) fn exp_shifted_sum_body(xs: &mut [f32], shift: f32) -> f32 {
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

/// The largest value of `xs` (−∞ when empty): eight independent lanes, so that LLVM vectorises it (a
/// plain `fold(f32::max)` is one serial chain), in AVX2 where the CPU has it. Max is exact, so the
/// result equals the serial fold's bit for bit.
pub fn max_f32(xs: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2, FMA and F16C, the features
        // `max_f32_avx2` is compiled for; it takes only a safe reference.
        return unsafe { max_f32_avx2(xs) };
    }
    max_f32_body(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn max_f32_avx2(xs: &[f32]) -> f32 {
    max_f32_body(xs)
}

#[inline(always)]
pub(super) fn max_f32_body(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] = acc[i].max(c[i]);
        }
    }
    acc.iter()
        .chain(chunks.remainder())
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// The softmax numerators of a transposed score tile `st` (`[rows, ld]`, one column per query, the
/// first `l.len()` columns used): each column's max, then `x ← e^(x − max)` in place, and `l[j]` ← the
/// column's sum. A column of −∞ only becomes zeros with sum 0. Vectorised across columns (queries),
/// in AVX2 where the CPU has it.
pub fn column_softmax_numerators(st: &mut [f32], ld: usize, l: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2, FMA and F16C, the features
        // `column_softmax_avx2` is compiled for; it takes only safe references.
        unsafe { column_softmax_avx2(st, ld, l) };
        return;
    }
    column_softmax_body(st, ld, l);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn column_softmax_avx2(st: &mut [f32], ld: usize, l: &mut [f32]) {
    column_softmax_body(st, ld, l);
}

#[inline(always)]
pub(super) fn column_softmax_body(st: &mut [f32], ld: usize, l: &mut [f32]) {
    let n = l.len();
    assert!(n <= ld, "column_softmax_numerators: {n} columns in rows of {ld}");
    let mut shift = vec![f32::NEG_INFINITY; n];
    for row in st.chunks_exact(ld) {
        for (m, &x) in shift.iter_mut().zip(&row[..n]) {
            *m = m.max(x);
        }
    }
    // A column of −∞ only: shift by 0, so that e^(−∞ − 0) = 0 (not e^NaN).
    shift
        .iter_mut()
        .filter(|m| **m == f32::NEG_INFINITY)
        .for_each(|m| *m = 0.0);
    l.fill(0.0);
    for row in st.chunks_exact_mut(ld) {
        for ((x, &m), s) in row[..n].iter_mut().zip(&shift).zip(l.iter_mut()) {
            *x = exp_f32(*x - m);
            *s += *x;
        }
    }
}
