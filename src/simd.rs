//! The CPU's inner loops whose speed depends on the instruction set, chosen at run time: the
//! exponential and softmax sums of the f32 attention path, the paged-decode step, and [`sgemm`] (the
//! `gemm` crate's f32 GEMM, whose entry point is an `unsafe fn`; `kvscope bench` measures against it).
//! The one module besides `compute::cuda` that may use `unsafe`; the lowest layer (it needs only `half`,
//! `gemm` and ndarray's array views).
//!
//! How it works: [`attend_blocks`] does one paged-attention step for one KV head's query group over a
//! run of blocks: convert the blocks' K rows from f16 once, score them against every query of the GQA group,
//! update each query's running max and sum (the online softmax), convert V once and accumulate P·V.
//! The body is written once, as plain Rust over fixed-width lanes ([`body`]), and compiled twice: inside
//! a `#[target_feature(enable = "avx2,fma,f16c")]` function, where LLVM turns the lanes into 256-bit FMAs
//! and the conversion is one `vcvtph2ps` per 8 values, and as a portable version (SSE2 on x86-64, NEON on
//! aarch64) with `half`'s conversion; a third build adds AVX-512F/VL only for their 32 registers (wider
//! score tiles, same 256-bit vectors, the same bits as the AVX2 build). [`attend_blocks`] picks the
//! widest the CPU has (`is_x86_feature_detected!`, cached by std), so the build needs no `target-cpu`
//! and still runs on any x86-64 or ARM machine.
#![allow(unsafe_code)]

use half::f16;
use half::slice::HalfFloatSliceExt;

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
fn exp_shifted_sum_avx2(xs: &mut [f32], shift: f32) -> f32 {
    exp_shifted_sum_body(xs, shift)
}

#[inline(always)]
fn exp_shifted_sum_body(xs: &mut [f32], shift: f32) -> f32 {
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
fn max_f32_avx2(xs: &[f32]) -> f32 {
    max_f32_body(xs)
}

#[inline(always)]
fn max_f32_body(xs: &[f32]) -> f32 {
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

/// Buffers one task reuses across blocks: K and V of one block as f32, and the group's scores.
#[derive(Default)]
pub struct Scratch {
    kf: Vec<f32>,
    vf: Vec<f32>,
    p: Vec<f32>,
}

/// One query group's online-softmax state over a KV head: queries `[group, hd]` (already scaled by
/// 1/√hd), running max and sum per query, and the unnormalised output `[group, hd]`.
pub struct GroupState<'a> {
    /// Scaled queries.
    pub q: &'a [f32],
    /// Running max per query (−∞ before the first block).
    pub m: &'a mut [f32],
    /// Running Σ exp(s − m) per query.
    pub l: &'a mut [f32],
    /// Σ exp(s − m) · v per query, `[group, hd]`.
    pub acc: &'a mut [f32],
}

/// Whether the AVX2 + FMA + F16C version runs on this CPU.
pub fn accelerated() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU also has AVX-512F and AVX-512VL: then the 256-bit code may use 32 vector registers
/// instead of 16 (EVEX encodings), enough for 4 queries × 4 tokens of score accumulators (the vector
/// width stays 256 bits: 512-bit registers gave no gain on the Zen 4 this was tuned on).
pub fn wide_registers() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        accelerated()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `C = A·B` in f32 through the `gemm` crate (its own run-time dispatch to AVX2/AVX-512/NEON kernels),
/// on `threads` rayon threads (1: this thread only). The fastest GEMM this project can call from Rust:
/// `kvscope bench` measures P1 against it.
pub fn sgemm(a: ndarray::ArrayView2<f32>, b: ndarray::ArrayView2<f32>, threads: usize) -> ndarray::Array2<f32> {
    let mut c = ndarray::Array2::<f32>::zeros((a.nrows(), b.ncols()));
    sgemm_into(1.0, a, b, c.view_mut(), threads);
    c
}

/// `C = scale · A·B` into the view `c` (its old values are not read), as [`sgemm`].
pub fn sgemm_into(
    scale: f32,
    a: ndarray::ArrayView2<f32>,
    b: ndarray::ArrayView2<f32>,
    mut c: ndarray::ArrayViewMut2<f32>,
    threads: usize,
) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert!(
        k == k2 && c.dim() == (m, n),
        "sgemm: {m}×{k} · {k2}×{n} into {:?}",
        c.dim()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let (sa, sb, sc) = (a.strides().to_vec(), b.strides().to_vec(), c.strides().to_vec());
    // SAFETY: the pointers and the element strides (ndarray reports row stride, then column stride;
    // the gemm crate takes column stride, then row stride) describe exactly the m×k, k×n and m×n arrays
    // borrowed here; `c` is borrowed mutably, so it aliases neither input; `read_dst` is false, so its
    // old values are never read.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            sc[1],
            sc[0],
            false,
            a.as_ptr(),
            sa[1],
            sa[0],
            b.as_ptr(),
            sb[1],
            sb[0],
            0.0,
            scale,
            false,
            false,
            false,
            par,
        );
    }
}

/// Rows of the register tile [`micro_gemm`] keeps in accumulators (one broadcast each).
pub const MICRO_ROWS: usize = 6;
/// Columns of that tile (two 8-lane vectors): 6 × 16 = twelve accumulators, the shape the `gemm`
/// crate's AVX2 kernel uses too.
pub const MICRO_COLS: usize = 16;

/// A matrix operand read in place, without packing: element (i, p) is `data[i·rs + p·cs]`, so the same
/// buffer serves as a matrix (cs = 1) or as its transpose (rs = 1).
#[derive(Clone, Copy)]
pub struct Strided<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Step between rows.
    pub rs: usize,
    /// Step between columns.
    pub cs: usize,
}

/// One register tile of a product: `c[i·ldc + j] = Σ_{p<k} a(i, p) · b[p·ldb + j]` for `i < m ≤ 6`,
/// `j < n ≤ 16` (old values of `c` are overwritten). Each sum runs over p in order with one fused
/// multiply-add per term, in every build and on every tile shape, so the bits do not depend on the CPU
/// or on where a tile falls. A full-width tile (n = 16) runs in AVX2 registers where the CPU has them:
/// per p, two loads of B, m broadcasts of A and 2m FMAs; nothing is packed, so a caller can keep K, V
/// and the score tile where they are.
#[allow(clippy::too_many_arguments)]
pub fn micro_gemm(m: usize, n: usize, k: usize, a: Strided, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    assert!(m <= MICRO_ROWS && n <= MICRO_COLS, "micro_gemm: a {m} × {n} tile");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        (0..m).for_each(|i| c[i * ldc..i * ldc + n].fill(0.0));
        return;
    }
    assert!(
        (m - 1) * a.rs + (k - 1) * a.cs < a.data.len() && (k - 1) * ldb + n <= b.len() && (m - 1) * ldc + n <= c.len(),
        "micro_gemm: operands too short for a {m} × {n} × {k} tile"
    );
    #[cfg(target_arch = "x86_64")]
    if n == MICRO_COLS && accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2 and FMA, the features the
        // `micro_avx2` versions are compiled for; they take only safe references.
        unsafe {
            match m {
                6 => micro_avx2::<6>(k, a, b, ldb, c, ldc),
                5 => micro_avx2::<5>(k, a, b, ldb, c, ldc),
                4 => micro_avx2::<4>(k, a, b, ldb, c, ldc),
                3 => micro_avx2::<3>(k, a, b, ldb, c, ldc),
                2 => micro_avx2::<2>(k, a, b, ldb, c, ldc),
                _ => micro_avx2::<1>(k, a, b, ldb, c, ldc),
            }
        }
        return;
    }
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for p in 0..k {
                s = a.data[i * a.rs + p * a.cs].mul_add(b[p * ldb + j], s);
            }
            c[i * ldc + j] = s;
        }
    }
}

/// The full-width tile of [`micro_gemm`] in AVX2: `M` rows × 16 columns of accumulators.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn micro_avx2<const M: usize>(k: usize, a: Strided, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    use std::arch::x86_64::*;
    assert!(
        k >= 1
            && (M - 1) * a.rs + (k - 1) * a.cs < a.data.len()
            && (k - 1) * ldb + 16 <= b.len()
            && (M - 1) * ldc + 16 <= c.len()
    );
    let (ap, bp, cp) = (a.data.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut acc = [[_mm256_setzero_ps(); 2]; M];
    for p in 0..k {
        // SAFETY: p < k, so B's loads end at (k−1)·ldb + 16 <= b.len() and A's broadcasts index at
        // most (M−1)·rs + (k−1)·cs < a.data.len(), as asserted above; unaligned loads.
        unsafe {
            let b0 = _mm256_loadu_ps(bp.add(p * ldb));
            let b1 = _mm256_loadu_ps(bp.add(p * ldb + 8));
            for (i, ai) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*ap.add(i * a.rs + p * a.cs));
                ai[0] = _mm256_fmadd_ps(x, b0, ai[0]);
                ai[1] = _mm256_fmadd_ps(x, b1, ai[1]);
            }
        }
    }
    for (i, ai) in acc.iter().enumerate() {
        // SAFETY: row i < M ends at (M−1)·ldc + 16 <= c.len(), as asserted above; unaligned stores.
        unsafe {
            _mm256_storeu_ps(cp.add(i * ldc), ai[0]);
            _mm256_storeu_ps(cp.add(i * ldc + 8), ai[1]);
        }
    }
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
fn column_softmax_avx2(st: &mut [f32], ld: usize, l: &mut [f32]) {
    column_softmax_body(st, ld, l);
}

#[inline(always)]
fn column_softmax_body(st: &mut [f32], ld: usize, l: &mut [f32]) {
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

/// The K and V blocks the next [`attend_blocks`] call will read: the AVX2 version prefetches them while it
/// converts this call's, block j's lines while it converts block j, one cache line per line converted,
/// so the next blocks' DRAM reads are under way before they are needed (block tables scatter blocks, and
/// hardware prefetchers stop at 4 KiB pages).
#[derive(Clone, Copy, Default)]
pub struct Next<'a> {
    /// The next call's K blocks (none: nothing to prefetch).
    pub k: &'a [&'a [f16]],
    /// Its V blocks.
    pub v: &'a [&'a [f16]],
}

/// Attend the group `st` to a run of blocks: `k[j]` and `v[j]` are block j's K and V rows (`[ntok_j,
/// hd]` each, f16, the same length), in order; updates the group's running max, sum and accumulator
/// once for the whole run (one softmax update, and the accumulators stay in registers across the run's
/// blocks in P·V). Uses the widest version this CPU has, else the portable one.
pub fn attend_blocks(st: &mut GroupState, k: &[&[f16]], v: &[&[f16]], hd: usize, next: Next, scratch: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if wide_registers() {
        // SAFETY: `wide_registers()` just checked that this CPU has AVX2, FMA, F16C, AVX-512F and
        // AVX-512VL, the features `attend_blocks_avx512vl` is compiled for; it takes only safe references.
        unsafe { attend_blocks_avx512vl(st, k, v, hd, next, scratch) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2, FMA and F16C, the features
        // `attend_blocks_avx2` is compiled for; it takes only safe references.
        unsafe { attend_blocks_avx2(st, k, v, hd, next, scratch) };
        return;
    }
    let _ = next;
    attend_blocks_portable(st, k, v, hd, scratch);
}

/// Prefetch every cache line of `h` toward the core (nothing where the AVX2 version does not run).
pub fn prefetch(h: &[f16]) {
    #[cfg(target_arch = "x86_64")]
    if accelerated() {
        for i in (0..h.len()).step_by(32) {
            prefetch_at(h, i);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = h;
}

/// The portable version of [`attend_blocks`] (also what the tests compare the AVX2 one against).
pub fn attend_blocks_portable(st: &mut GroupState, k: &[&[f16]], v: &[&[f16]], hd: usize, scratch: &mut Scratch) {
    body(
        st,
        k,
        v,
        hd,
        scratch,
        |src, dst, _| src.convert_to_f32_slice(dst),
        |_, _, _, _, _, _, _| false,
        |_, _, _, _, _| false,
        |_, _, _, _, _, _| false,
        Next::default(),
    );
}

/// The x86 step: [`body`] with the register-tiled scores and P·V; `WIDE` takes 4 × 4 score tiles,
/// which need the 32 registers of the AVX-512VL build it is inlined into.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn attend_blocks_x86<const WIDE: bool>(
    st: &mut GroupState,
    k: &[&[f16]],
    v: &[&[f16]],
    hd: usize,
    next: Next,
    scratch: &mut Scratch,
) {
    body(
        st,
        k,
        v,
        hd,
        scratch,
        cvt_f16c,
        |q, k, hd, ntok, p, ld, a| scores_tiles::<WIDE>(q, Contiguous { k, hd }, ntok, hd, p, ld, a),
        |q, rows, hd, p, ld| scores_tiles::<WIDE>(q, RowList(rows), rows.len(), hd, p, ld, &[]),
        |p, ld, v, hd, acc, a| pv_avx2(p, ld, v, hd, acc, a),
        next,
    );
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn attend_blocks_avx2(st: &mut GroupState, k: &[&[f16]], v: &[&[f16]], hd: usize, next: Next, scratch: &mut Scratch) {
    attend_blocks_x86::<false>(st, k, v, hd, next, scratch);
}

/// [`attend_blocks_avx2`] with 32 vector registers: scores in 4-token tiles (P·V in 32-lane tiles was
/// tried too and was slower, so it keeps the 16-lane tiles).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
fn attend_blocks_avx512vl(
    st: &mut GroupState,
    k: &[&[f16]],
    v: &[&[f16]],
    hd: usize,
    next: Next,
    scratch: &mut Scratch,
) {
    attend_blocks_x86::<true>(st, k, v, hd, next, scratch);
}

/// f16 → f32, 8 values per `vcvtph2ps`, prefetching `ahead` one cache line per 32 values; the tail
/// through `half`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn cvt_f16c(src: &[f16], dst: &mut [f32], ahead: &[f16]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
    let n = src.len().min(dst.len());
    let whole = n / 8 * 8;
    for (i, (s, d)) in src[..whole]
        .chunks_exact(8)
        .zip(dst[..whole].chunks_exact_mut(8))
        .enumerate()
    {
        if i % 4 == 0 {
            prefetch_at(ahead, i * 8);
        }
        // SAFETY: `s` holds 8 f16 (16 bytes) and `d` 8 f32 (32 bytes), both in bounds; the loads and
        // stores are unaligned; this is only inlined into `attend_blocks_avx2`, which runs only where
        // F16C and AVX were detected.
        unsafe {
            let h = _mm_loadu_si128(s.as_ptr().cast::<__m128i>());
            _mm256_storeu_ps(d.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    src[whole..n].convert_to_f32_slice(&mut dst[whole..n]);
}

/// Prefetch the cache line holding `h[i]` into L1, if `i` is in bounds: the next block's rows, one line
/// per line this block reads, so its DRAM reads are under way before it starts (block tables scatter
/// blocks, and hardware prefetchers stop at 4 KiB pages).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_at(h: &[f16], i: usize) {
    use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
    if let Some(x) = h.get(i) {
        // SAFETY: a prefetch is a hint that never faults; the address is inside `h`.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(std::ptr::from_ref(x).cast::<i8>()) };
    }
}

/// Scores of `T` tokens (their K rows from `k`, wherever they lie) against `G` queries,
/// `p[g·ld + t0 + t] = q_g · k_{t0+t}`: K converted in
/// registers 8 values at a time (each value once) and shared by the G queries, `G × T` independent
/// accumulators; `hd % 8 == 0`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn scores_tile_avx2<const G: usize, const T: usize>(
    q: &[f32],
    k: impl KRows,
    hd: usize,
    t0: usize,
    ntok: usize,
    p: &mut [f32],
    ld: usize,
    ahead: &[f16],
) {
    use std::arch::x86_64::*;
    assert!(
        hd.is_multiple_of(8)
            && t0 + T <= ntok
            && k.holds(t0, T, hd)
            && G * hd <= q.len()
            && (G - 1) * ld + ntok <= p.len()
    );
    let (kp, qp): ([*const f16; T], _) = (std::array::from_fn(|t| k.row(t0 + t)), q.as_ptr());
    let mut acc = [[_mm256_setzero_ps(); T]; G];
    let mut c = 0;
    while c < hd {
        if c % 32 == 0 {
            for t in 0..T {
                prefetch_at(ahead, (t0 + t) * hd + c);
            }
        }
        // SAFETY: c + 8 <= hd, so every load below ends inside its K row (`k.holds`: each at least hd
        // long) or at or before G·hd <= q.len() (Q), as asserted above; the loads are unaligned.
        unsafe {
            let kv: [__m256; T] =
                std::array::from_fn(|t| _mm256_cvtph_ps(_mm_loadu_si128(kp[t].add(c).cast::<__m128i>())));
            for (g, ag) in acc.iter_mut().enumerate() {
                let qv = _mm256_loadu_ps(qp.add(g * hd + c));
                for (at, kt) in ag.iter_mut().zip(&kv) {
                    *at = _mm256_fmadd_ps(qv, *kt, *at);
                }
            }
        }
        c += 8;
    }
    if T == 4 {
        // One query × four tokens at once: three horizontal adds and one 128-bit add leave the four
        // sums [q_g·k_t0, …, q_g·k_t3] in one register.
        for (g, a) in acc.iter().enumerate() {
            let s = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1 % T]), _mm256_hadd_ps(a[2 % T], a[3 % T]));
            let r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
            let mut four = [0f32; 4];
            // SAFETY: `four` holds 4 f32; an unaligned store.
            unsafe { _mm_storeu_ps(four.as_mut_ptr(), r) };
            p[g * ld + t0..g * ld + t0 + 4].copy_from_slice(&four);
        }
        return;
    }
    if T == 2 && G.is_multiple_of(2) {
        // Two queries × two tokens at once: three horizontal adds and one 128-bit add leave the four
        // sums [q_g·k_t0, q_g·k_t1, q_g+1·k_t0, q_g+1·k_t1] in one register (instead of reducing each
        // accumulator on its own: a quarter of the shuffles).
        for g in (0..G).step_by(2) {
            let (a, b) = (&acc[g], &acc[g + 1]);
            let s = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[T - 1]), _mm256_hadd_ps(b[0], b[T - 1]));
            let r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
            let mut four = [0f32; 4];
            // SAFETY: `four` holds 4 f32; an unaligned store.
            unsafe { _mm_storeu_ps(four.as_mut_ptr(), r) };
            p[g * ld + t0..g * ld + t0 + 2].copy_from_slice(&four[..2]);
            p[(g + 1) * ld + t0..(g + 1) * ld + t0 + 2].copy_from_slice(&four[2..]);
        }
        return;
    }
    for (g, ag) in acc.iter().enumerate() {
        for (t, at) in ag.iter().enumerate() {
            let h = _mm_add_ps(_mm256_castps256_ps128(*at), _mm256_extractf128_ps::<1>(*at));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
            p[g * ld + t0 + t] = _mm_cvtss_f32(h);
        }
    }
}

/// `acc_g += Σ_t p[g·ld + t] · v_t` for `G` queries over a run of V blocks (t counts the run's tokens
/// in order), 16 lanes at a time held in registers across the whole run: V converted in registers
/// (each value once) and shared by the G queries; `hd % 16 == 0`. Block j prefetches `ahead[j]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn pv_tile_avx2<const G: usize>(p: &[f32], ld: usize, vs: &[&[f16]], hd: usize, acc: &mut [f32], ahead: &[&[f16]]) {
    use std::arch::x86_64::*;
    let ntot: usize = vs.iter().map(|v| v.len() / hd).sum();
    assert!(hd.is_multiple_of(16) && G * hd <= acc.len() && (G - 1) * ld + ntot <= p.len());
    let (pp, ap) = (p.as_ptr(), acc.as_mut_ptr());
    let mut c = 0;
    while c < hd {
        // SAFETY: c + 16 <= hd, so the accumulator loads end at or before G·hd <= acc.len(), as
        // asserted above; unaligned.
        let mut a: [[__m256; 2]; G] = std::array::from_fn(|g| unsafe {
            [
                _mm256_loadu_ps(ap.add(g * hd + c)),
                _mm256_loadu_ps(ap.add(g * hd + c + 8)),
            ]
        });
        let mut off = 0;
        for (j, v) in vs.iter().enumerate() {
            let ntok = v.len() / hd;
            let (vp, ahead) = (v.as_ptr(), ahead.get(j).copied().unwrap_or_default());
            for t in 0..ntok {
                if c % 32 == 0 {
                    prefetch_at(ahead, t * hd + c);
                }
                // SAFETY: t < ntok and c + 16 <= hd, so the V loads end at or before ntok·hd <= v.len();
                // P's index g·ld + off + t stays below (G−1)·ld + ntot <= p.len() (asserted above;
                // off + t < ntot); all unaligned.
                unsafe {
                    let row = vp.add(t * hd + c);
                    let v0 = _mm256_cvtph_ps(_mm_loadu_si128(row.cast::<__m128i>()));
                    let v1 = _mm256_cvtph_ps(_mm_loadu_si128(row.add(8).cast::<__m128i>()));
                    for (g, ag) in a.iter_mut().enumerate() {
                        let pg = _mm256_broadcast_ss(&*pp.add(g * ld + off + t));
                        ag[0] = _mm256_fmadd_ps(pg, v0, ag[0]);
                        ag[1] = _mm256_fmadd_ps(pg, v1, ag[1]);
                    }
                }
            }
            off += ntok;
        }
        for (g, ag) in a.iter().enumerate() {
            // SAFETY: the stores end at or before G·hd <= acc.len(), as the loads; unaligned.
            unsafe {
                _mm256_storeu_ps(ap.add(g * hd + c), ag[0]);
                _mm256_storeu_ps(ap.add(g * hd + c + 8), ag[1]);
            }
        }
        c += 16;
    }
}

/// P·V for the whole group over a run of blocks, queries in tiles of 4 (or 2, or 1). Returns false
/// (nothing done) when `hd` is not a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn pv_avx2(p: &[f32], ld: usize, vs: &[&[f16]], hd: usize, acc: &mut [f32], ahead: &[&[f16]]) -> bool {
    if !hd.is_multiple_of(16) {
        return false;
    }
    let group = acc.len() / hd;
    let tile = tile_of(group);
    for g0 in (0..group).step_by(tile) {
        let (pt, at) = (&p[g0 * ld..], &mut acc[g0 * hd..(g0 + tile) * hd]);
        match tile {
            4 => pv_tile_avx2::<4>(pt, ld, vs, hd, at, ahead),
            2 => pv_tile_avx2::<2>(pt, ld, vs, hd, at, ahead),
            _ => pv_tile_avx2::<1>(pt, ld, vs, hd, at, ahead),
        }
    }
    true
}

/// Queries per register tile for a group of `group`: 4, 2 or 1.
#[cfg(target_arch = "x86_64")]
fn tile_of(group: usize) -> usize {
    if group.is_multiple_of(4) {
        4
    } else if group.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Where a score tile finds token t's K row: one block's contiguous rows, or a list of rows.
#[cfg(target_arch = "x86_64")]
trait KRows: Copy {
    /// Whether rows `t0..t0 + n` exist and hold at least `hd` values each.
    fn holds(self, t0: usize, n: usize, hd: usize) -> bool;
    /// Token t's row (only for t that [`KRows::holds`] vouched for).
    fn row(self, t: usize) -> *const f16;
}

/// `[ntok, hd]` rows back to back.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Contiguous<'a> {
    k: &'a [f16],
    hd: usize,
}

#[cfg(target_arch = "x86_64")]
impl KRows for Contiguous<'_> {
    #[inline(always)]
    fn holds(self, t0: usize, n: usize, hd: usize) -> bool {
        hd <= self.hd && (t0 + n) * self.hd <= self.k.len()
    }
    #[inline(always)]
    fn row(self, t: usize) -> *const f16 {
        self.k.as_ptr().wrapping_add(t * self.hd)
    }
}

/// One slice per token.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct RowList<'a>(&'a [&'a [f16]]);

#[cfg(target_arch = "x86_64")]
impl KRows for RowList<'_> {
    #[inline(always)]
    fn holds(self, t0: usize, n: usize, hd: usize) -> bool {
        self.0.get(t0..t0 + n).is_some_and(|r| r.iter().all(|x| x.len() >= hd))
    }
    #[inline(always)]
    fn row(self, t: usize) -> *const f16 {
        self.0[t].as_ptr()
    }
}

/// Scores of tokens `0..ntok` (rows from `k`) against the group's queries, 4 (or 2, or 1) queries at
/// a time; tokens in fours where `WIDE` (32 registers hold 4 × 4 accumulators) and the group is a
/// multiple of 4, else in pairs; a last odd token alone. Returns false (nothing done) when `hd` is not
/// a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn scores_tiles<const WIDE: bool>(
    q: &[f32],
    k: impl KRows,
    ntok: usize,
    hd: usize,
    p: &mut [f32],
    ld: usize,
    ahead: &[f16],
) -> bool {
    if !hd.is_multiple_of(8) {
        return false;
    }
    let group = q.len() / hd;
    let tile = tile_of(group);
    for g0 in (0..group).step_by(tile) {
        let (qt, pt) = (&q[g0 * hd..(g0 + tile) * hd], &mut p[g0 * ld..]);
        let mut t = 0;
        if WIDE && tile == 4 {
            while t + 4 <= ntok {
                scores_tile_avx2::<4, 4>(qt, k, hd, t, ntok, pt, ld, ahead);
                t += 4;
            }
        }
        while t + 2 <= ntok {
            match tile {
                4 => scores_tile_avx2::<4, 2>(qt, k, hd, t, ntok, pt, ld, ahead),
                2 => scores_tile_avx2::<2, 2>(qt, k, hd, t, ntok, pt, ld, ahead),
                _ => scores_tile_avx2::<1, 2>(qt, k, hd, t, ntok, pt, ld, ahead),
            }
            t += 2;
        }
        if t < ntok {
            match tile {
                4 => scores_tile_avx2::<4, 1>(qt, k, hd, t, ntok, pt, ld, ahead),
                2 => scores_tile_avx2::<2, 1>(qt, k, hd, t, ntok, pt, ld, ahead),
                _ => scores_tile_avx2::<1, 1>(qt, k, hd, t, ntok, pt, ld, ahead),
            }
        }
    }
    true
}

/// `a · b` over 16 lanes in two independent chains of 8 (the tail one by one).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] = x[i].mul_add(y[i], acc[i]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        s = x.mul_add(*y, s);
    }
    s
}

/// `acc[c..c+W] += Σ_t p[t] · v[t][c..c+W]` with the W lanes held in registers across tokens.
#[inline(always)]
fn pv_lanes<const W: usize>(p: &[f32], vf: &[f32], hd: usize, acc: &mut [f32], c: usize) {
    let mut a: [f32; W] = acc[c..c + W].try_into().expect("W lanes");
    for (t, &pt) in p.iter().enumerate() {
        let row: &[f32; W] = vf[t * hd + c..t * hd + c + W].try_into().expect("W lanes");
        for i in 0..W {
            a[i] = pt.mul_add(row[i], a[i]);
        }
    }
    acc[c..c + W].copy_from_slice(&a);
}

/// The most rows [`body`] scores as one list (a run of small blocks).
const MAX_ROWS: usize = 64;

/// The step itself, written once. The instruction-set specific parts come in as functions: `cvt`
/// converts f16 rows to f32 (prefetching a slice), `scores` and `pv` are register-tiled versions of the
/// two products that return false where they do not apply (then the plain loops here run). The run's
/// scores go into one row per query (`p[g·ntot + t]`), so one softmax update covers all its blocks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn body(
    st: &mut GroupState,
    ks: &[&[f16]],
    vs: &[&[f16]],
    hd: usize,
    scratch: &mut Scratch,
    cvt: impl Fn(&[f16], &mut [f32], &[f16]),
    scores: impl Fn(&[f32], &[f16], usize, usize, &mut [f32], usize, &[f16]) -> bool,
    scores_rows: impl Fn(&[f32], &[&[f16]], usize, &mut [f32], usize) -> bool,
    pv: impl Fn(&[f32], usize, &[&[f16]], usize, &mut [f32], &[&[f16]]) -> bool,
    next: Next,
) {
    let group = st.m.len();
    if hd == 0 {
        return;
    }
    let rows = |b: &[&[f16]]| b.iter().map(|x| x.len()).sum::<usize>();
    let ntot = rows(ks) / hd;
    assert!(
        rows(ks) == rows(vs) && ks.iter().chain(vs).all(|x| x.len().is_multiple_of(hd)),
        "attend_blocks: K and V must hold the same number of whole rows"
    );
    if ntot == 0 {
        return;
    }
    let Scratch { kf, vf, p } = scratch;
    p.resize(group * ntot, 0.0);
    let mut scored = false;
    if ks.len() > 1 && ntot <= MAX_ROWS && ks.iter().any(|k| k.len() < 4 * hd) {
        // Blocks of fewer than 4 tokens: score the run's rows as one list, so that a register tile
        // spans several blocks.
        let mut rows: [&[f16]; MAX_ROWS] = [&[]; MAX_ROWS];
        let mut n = 0;
        for k in ks {
            let mut r = 0;
            while r + hd <= k.len() {
                rows[n] = &k[r..r + hd];
                (n, r) = (n + 1, r + hd);
            }
        }
        scored = scores_rows(st.q, &rows[..n], hd, p, ntot);
    }
    let mut off = 0;
    for (j, k) in ks.iter().enumerate().filter(|_| !scored) {
        let ntok = k.len() / hd;
        let ahead = next.k.get(j).copied().unwrap_or_default();
        if !scores(st.q, k, hd, ntok, &mut p[off..], ntot, ahead) {
            kf.resize(ntok * hd, 0.0);
            cvt(k, kf, ahead);
            for g in 0..group {
                let qg = &st.q[g * hd..(g + 1) * hd];
                for (t, kt) in kf.chunks_exact(hd).enumerate() {
                    p[g * ntot + off + t] = dot(qg, kt);
                }
            }
        }
        off += ntok;
    }
    for (g, pg) in p.chunks_exact_mut(ntot).enumerate() {
        let m_new = st.m[g].max(max_f32_body(pg));
        let corr = exp_f32(st.m[g] - m_new); // 0 on the first run (m = −∞)
        st.l[g] = st.l[g] * corr + exp_shifted_sum_body(pg, m_new);
        st.m[g] = m_new;
        if corr != 1.0 {
            st.acc[g * hd..(g + 1) * hd].iter_mut().for_each(|a| *a *= corr);
        }
    }
    if !pv(p, ntot, vs, hd, st.acc, next.v) {
        let mut off = 0;
        for (j, v) in vs.iter().enumerate() {
            let ntok = v.len() / hd;
            vf.resize(ntok * hd, 0.0);
            cvt(v, vf, next.v.get(j).copied().unwrap_or_default());
            for g in 0..group {
                let pg = &p[g * ntot + off..g * ntot + off + ntok];
                let ag = &mut st.acc[g * hd..(g + 1) * hd];
                let mut c = 0;
                while c + 32 <= hd {
                    pv_lanes::<32>(pg, vf, hd, ag, c);
                    c += 32;
                }
                while c + 8 <= hd {
                    pv_lanes::<8>(pg, vf, hd, ag, c);
                    c += 8;
                }
                for cc in c..hd {
                    ag[cc] += pg.iter().enumerate().map(|(t, &pt)| pt * vf[t * hd + cc]).sum::<f32>();
                }
            }
            off += ntok;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeded queries `[group, hd]` (standard deviation `q_std`) and one block's K and V rows
    /// `[ntok, hd]` in f16.
    fn inputs(seed: u64, group: usize, ntok: usize, hd: usize, q_std: f64) -> (Vec<f32>, Vec<f16>, Vec<f16>) {
        let mut rng = crate::math::Rng::new(seed);
        let q = rng.normal_vec(group * hd, q_std);
        let k = rng.normal_vec(ntok * hd, 1.0).into_iter().map(f16::from_f32).collect();
        let v = rng.normal_vec(ntok * hd, 1.0).into_iter().map(f16::from_f32).collect();
        (q, k, v)
    }

    /// One block through `f`, from a fresh state, against f64 arithmetic on the same f16 values.
    ///
    /// The block's K rows go in as blocks of `split.0` tokens and its V rows as blocks of `split.1`
    /// (the last ones ragged), one call for all.
    fn check(f: AttendFn, group: usize, ntok: usize, hd: usize, split: (usize, usize)) {
        let (q, k, v) = inputs((group * 1000 + ntok * 10 + hd) as u64, group, ntok, hd, 0.3);
        let ks: Vec<&[f16]> = k.chunks(split.0 * hd.max(1)).collect();
        let vs: Vec<&[f16]> = v.chunks(split.1 * hd.max(1)).collect();
        let (mut m, mut l, mut acc) = (
            vec![f32::NEG_INFINITY; group],
            vec![0f32; group],
            vec![0f32; group * hd],
        );
        let mut st = GroupState {
            q: &q,
            m: &mut m,
            l: &mut l,
            acc: &mut acc,
        };
        f(&mut st, &ks, &vs, hd, &mut Scratch::default());
        for g in 0..group {
            let s: Vec<f64> = (0..ntok)
                .map(|t| (0..hd).map(|d| q[g * hd + d] as f64 * k[t * hd + d].to_f64()).sum())
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            assert!(
                (m[g] as f64 - mx).abs() < 1e-4,
                "max g{g} ntok{ntok} hd{hd} split{split:?}"
            );
            assert!(
                (l[g] as f64 - sum).abs() < 1e-4 * sum,
                "sum g{g} ntok{ntok} hd{hd} split{split:?}"
            );
            for d in 0..hd {
                let want: f64 = (0..ntok).map(|t| e[t] * v[t * hd + d].to_f64()).sum();
                let got = acc[g * hd + d] as f64;
                assert!(
                    (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "acc g{g} d{d} ntok{ntok} hd{hd} split{split:?}: {got} {want}"
                );
            }
        }
    }

    type AttendFn = fn(&mut GroupState, &[&[f16]], &[&[f16]], usize, &mut Scratch);

    /// Every version against f64, on ragged shapes: group sizes that take each query tile, head_dims
    /// that are not multiples of the vector width, one token, and runs split into one block, blocks of
    /// one token (scored as one row list), and ragged blocks of 5 and 16 tokens, with V in the same
    /// blocks or in one (as the small-block path gathers it).
    #[test]
    fn every_version_matches_f64_for_ragged_shapes() {
        for group in [1, 2, 4, 6, 8] {
            for ntok in [1, 3, 16, 17, 40] {
                for hd in [1, 3, 8, 13, 32, 40, 128] {
                    for split in [ntok, 1, 5, 16].into_iter().flat_map(|b| [(b, b), (b, ntok)]) {
                        check(attend_blocks_portable, group, ntok, hd, split);
                        // The dispatching entry (the widest version this CPU has), prefetching its
                        // own blocks as if they came next …
                        check(
                            |st, k, v, hd, sc| attend_blocks(st, k, v, hd, Next { k, v }, sc),
                            group,
                            ntok,
                            hd,
                            split,
                        );
                        // … and the AVX2 one on its own where the AVX-512VL one is what dispatch picks.
                        #[cfg(target_arch = "x86_64")]
                        if accelerated() {
                            check(
                                // SAFETY: `accelerated()` checked AVX2, FMA and F16C, the features of
                                // `attend_blocks_avx2`.
                                |st, k, v, hd, sc| unsafe { attend_blocks_avx2(st, k, v, hd, Next { k, v }, sc) },
                                group,
                                ntok,
                                hd,
                                split,
                            );
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 tiles give the same bits as the portable loop (each sum in order, one FMA per term),
    /// and both match f64 products, on every tile height, with A read as a matrix or as a transpose,
    /// and on narrow edge tiles.
    #[test]
    fn micro_gemm_builds_agree_bit_for_bit_and_match_f64() {
        let mut rng = crate::math::Rng::new(7);
        let (k, lda, ldb, ldc) = (37, 41, 19, 23);
        let a = rng.normal_vec(6 * lda + k * 7, 1.0);
        let b = rng.normal_vec(k * ldb, 1.0);
        for (m, n) in [(6, 16), (5, 16), (1, 16), (3, 7), (6, 1)] {
            for (rs, cs) in [(lda, 1), (1, 7)] {
                let a = Strided { data: &a, rs, cs };
                let mut c = vec![f32::NAN; 6 * ldc];
                micro_gemm(m, n, k, a, &b, ldb, &mut c, ldc);
                for i in 0..m {
                    for j in 0..n {
                        let mut plain = 0f32;
                        let mut exact = 0f64;
                        for p in 0..k {
                            let (x, y) = (a.data[i * rs + p * cs], b[p * ldb + j]);
                            plain = x.mul_add(y, plain);
                            exact += f64::from(x) * f64::from(y);
                        }
                        let got = c[i * ldc + j];
                        assert_eq!(got.to_bits(), plain.to_bits(), "({m}×{n}) [{i},{j}]");
                        assert!((f64::from(got) - exact).abs() < 1e-4, "({m}×{n}) [{i},{j}]");
                    }
                }
            }
        }
    }

    /// The AVX2 and the AVX-512VL builds give the same bits (their score tiles differ in size but
    /// reduce each accumulator in the same order), so what the app shows does not depend on whether the
    /// CPU has AVX-512.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_and_avx512vl_builds_agree_bit_for_bit() {
        if !wide_registers() {
            eprintln!("no AVX-512VL here: nothing to compare");
            return;
        }
        for (group, ntok, hd) in [
            (4, 16, 128),
            (4, 17, 128),
            (8, 5, 64),
            (4, 3, 40),
            (2, 16, 32),
            (6, 9, 16),
        ] {
            let (q, k, v) = inputs((group * 31 + ntok * 7 + hd) as u64, group, ntok, hd, 0.3);
            let run = |wide: bool| {
                let (mut m, mut l, mut acc) = (
                    vec![f32::NEG_INFINITY; group],
                    vec![0f32; group],
                    vec![0f32; group * hd],
                );
                let mut st = GroupState {
                    q: &q,
                    m: &mut m,
                    l: &mut l,
                    acc: &mut acc,
                };
                let mut sc = Scratch::default();
                // Three calls, so the running max and the rescale take part too; the second splits
                // the rows into two blocks, the third into one-token blocks (scored as a row list).
                let half = (ntok / 2) * hd;
                for (ks, vs) in [
                    (vec![&k[..]], vec![&v[..]]),
                    (vec![&k[..half], &k[half..]], vec![&v[..half], &v[half..]]),
                    (k.chunks(hd).collect(), v.chunks(hd).collect()),
                ] {
                    if wide {
                        // SAFETY: `wide_registers()` checked every feature of `attend_blocks_avx512vl`.
                        unsafe { attend_blocks_avx512vl(&mut st, &ks, &vs, hd, Next::default(), &mut sc) };
                    } else {
                        // SAFETY: `wide_registers()` implies `accelerated()`, the features of
                        // `attend_blocks_avx2`.
                        unsafe { attend_blocks_avx2(&mut st, &ks, &vs, hd, Next::default(), &mut sc) };
                    }
                }
                (m, l, acc)
            };
            let (a, b) = (run(false), run(true));
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.0), bits(&b.0), "max g{group} ntok{ntok} hd{hd}");
            assert_eq!(bits(&a.1), bits(&b.1), "sum g{group} ntok{ntok} hd{hd}");
            assert_eq!(bits(&a.2), bits(&b.2), "acc g{group} ntok{ntok} hd{hd}");
        }
    }

    /// Nanoseconds per 16-token block of one KV head for a GQA group of 4 at head_dim 128 with the
    /// blocks in L1, one block per call and four per call (the decode's runs): the compute speed of the
    /// decode step alone (`cargo test --release --lib simd::tests::l1_step_speed -- --ignored
    /// --nocapture`). A measurement, not a check.
    #[test]
    #[ignore]
    fn l1_step_speed() {
        let (group, ntok, hd) = (4, 16, 128);
        let (q, k, v) = inputs(9, group, 4 * ntok, hd, 0.05);
        for per_call in [1, 4] {
            let ks: Vec<&[f16]> = k.chunks(ntok * hd).take(per_call).collect();
            let vs: Vec<&[f16]> = v.chunks(ntok * hd).take(per_call).collect();
            let (mut m, mut l, mut acc) = (
                vec![f32::NEG_INFINITY; group],
                vec![0f32; group],
                vec![0f32; group * hd],
            );
            let mut sc = Scratch::default();
            let n = 800_000 / per_call;
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let t = std::time::Instant::now();
                for _ in 0..n {
                    let mut st = GroupState {
                        q: &q,
                        m: &mut m,
                        l: &mut l,
                        acc: &mut acc,
                    };
                    attend_blocks(&mut st, &ks, &vs, hd, Next::default(), &mut sc);
                }
                best = best.min(t.elapsed().as_secs_f64() * 1e9 / (n * per_call) as f64);
            }
            let bytes = 2.0 * (ntok * hd * 2) as f64;
            println!(
                "L1, {per_call} block(s) per call: {best:.0} ns per 16-token block = {:.1} GB/s per thread",
                bytes / best
            );
            std::hint::black_box(&acc);
        }
    }

    #[test]
    fn sgemm_equals_f64_products_for_views_and_odd_shapes() {
        let mut rng = crate::math::Rng::new(5);
        for (m, k, n) in [(1, 1, 1), (3, 5, 7), (17, 64, 33), (64, 128, 64)] {
            let a = ndarray::Array2::from_shape_vec((m, k), rng.normal_vec(m * k, 1.0)).unwrap();
            let bt = ndarray::Array2::from_shape_vec((n, k), rng.normal_vec(n * k, 1.0)).unwrap();
            // B as a transposed view: column-major strides, as attention's Kᵀ is.
            let b = bt.t();
            for threads in [1, 2] {
                let c = sgemm(a.view(), b, threads);
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k).map(|x| f64::from(a[[i, x]]) * f64::from(b[[x, j]])).sum();
                        assert!(
                            (f64::from(c[[i, j]]) - want).abs() < 1e-4 * (1.0 + want.abs()),
                            "{m}x{k}x{n} [{i},{j}]"
                        );
                    }
                }
            }
        }
    }
}
