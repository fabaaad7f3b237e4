//! The paged-decode step [`attend_blocks`]: one KV head's query group over a run of blocks, its
//! AVX2, AVX-512VL and portable builds of one body, the f16 conversion and the software prefetch.

#[cfg(target_arch = "x86_64")]
use super::tiles::*;
use super::*;

/// Buffers one task reuses across blocks: K and V of one block as f32, and the group's scores; and, for
/// 8-bit pools, the run's per-token K and V scales ([`Scratch::set_token_scales`]).
#[derive(Default)]
pub struct Scratch {
    kf: Vec<f32>,
    vf: Vec<f32>,
    p: Vec<f32>,
    kscale: Vec<f32>,
    vscale: Vec<f32>,
}

impl Scratch {
    /// Scales for the next [`attend_blocks`] call's tokens, in order (empty: none, the f16 path): each
    /// token's score is multiplied by its K scale before the softmax, and its weight by its V scale
    /// before P·V (the weights' sum is taken before, so the softmax is unchanged). This is how 8-bit
    /// codes, converted exactly to f16, are attended with their scales outside the inner loops.
    pub fn set_token_scales(&mut self, k: impl IntoIterator<Item = f32>, v: impl IntoIterator<Item = f32>) {
        self.kscale.clear();
        self.kscale.extend(k);
        self.vscale.clear();
        self.vscale.extend(v);
    }
}

/// How [`codes_to_f16`] reads 8-bit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codes {
    /// INT8, two's complement: each code as the f16 of its integer (exact).
    Int8,
    /// FP8 E4M3: the f16 whose bits are `S | (code & 0x7F) << 7`, which is the code's value / 256 for
    /// every finite code, subnormals included (the caller multiplies its scale by 256). The NaN code
    /// reads as a finite value here: the encoders write it only for a NaN input.
    E4m3,
    /// FP8 E5M2: the f16 whose high byte is the code (its value exactly, infinities and NaN included).
    E5m2,
}

/// `src`'s 8-bit codes as f16, exactly ([`Codes`]), into `dst`: F16C where the CPU has it.
pub fn codes_to_f16(kind: Codes, src: &[u8], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    #[cfg(target_arch = "x86_64")]
    if kind == Codes::Int8 && accelerated() {
        // SAFETY: `accelerated()` just checked for AVX2 and F16C, the features `int8_to_f16_f16c` is
        // compiled for; it takes only safe references.
        unsafe { int8_to_f16_f16c(&src[..n], &mut dst[..n]) };
        return;
    }
    match kind {
        Codes::Int8 => {
            for (d, &c) in dst[..n].iter_mut().zip(&src[..n]) {
                *d = f16::from_f32(f32::from(c as i8));
            }
        }
        Codes::E4m3 => {
            for (d, &c) in dst[..n].iter_mut().zip(&src[..n]) {
                *d = f16::from_bits((u16::from(c & 0x80) << 8) | (u16::from(c & 0x7f) << 7));
            }
        }
        Codes::E5m2 => {
            for (d, &c) in dst[..n].iter_mut().zip(&src[..n]) {
                *d = f16::from_bits(u16::from(c) << 8);
            }
        }
    }
}

/// INT8 codes → f16, 8 at a time: sign-extend to i32, convert to f32, round to f16 (exact: |code| ≤ 128).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn int8_to_f16_f16c(src: &[u8], dst: &mut [f16]) {
    use std::arch::x86_64::*;
    let whole = src.len() / 8 * 8;
    for (s, d) in src[..whole].chunks_exact(8).zip(dst[..whole].chunks_exact_mut(8)) {
        // SAFETY: `s` holds 8 bytes and `d` 8 f16 (16 bytes), in bounds; unaligned loads and stores.
        unsafe {
            let b = _mm_loadl_epi64(s.as_ptr().cast::<__m128i>());
            let f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
            _mm_storeu_si128(d.as_mut_ptr().cast::<__m128i>(), _mm256_cvtps_ph::<0>(f));
        }
    }
    for (d, &c) in dst[whole..].iter_mut().zip(&src[whole..]) {
        *d = f16::from_f32(f32::from(c as i8));
    }
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

/// The K and V blocks the next [`attend_blocks`] call will read: the AVX2 version prefetches them while it
/// converts this call's, block j's lines while it converts block j, one cache line per line converted,
/// so the next blocks' DRAM reads are under way before they are needed (block tables scatter blocks, and
/// hardware prefetchers stop at 4 KiB pages).
#[derive(Clone, Copy)]
pub struct Next<'a, T = f16> {
    /// The next call's K blocks (none: nothing to prefetch).
    pub k: &'a [&'a [T]],
    /// Its V blocks.
    pub v: &'a [&'a [T]],
}

impl<T> Default for Next<'_, T> {
    fn default() -> Self {
        Self { k: &[], v: &[] }
    }
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

/// [`attend_blocks`] over rows already in f32: the step of every KV dtype without a SIMD read path of its
/// own (the CPU decode fills the rows through the dtype's `read`), on the portable body.
pub fn attend_blocks_f32(st: &mut GroupState, k: &[&[f32]], v: &[&[f32]], hd: usize, scratch: &mut Scratch) {
    body(
        st,
        k,
        v,
        hd,
        scratch,
        |src, dst, _| dst[..src.len()].copy_from_slice(src),
        |_, _, _, _, _, _, _| false,
        |_, _, _, _, _| false,
        |_, _, _, _, _, _| false,
        Next::default(),
    );
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
pub(super) fn attend_blocks_x86<const WIDE: bool>(
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
pub(super) fn attend_blocks_avx2(
    st: &mut GroupState,
    k: &[&[f16]],
    v: &[&[f16]],
    hd: usize,
    next: Next,
    scratch: &mut Scratch,
) {
    attend_blocks_x86::<false>(st, k, v, hd, next, scratch);
}

/// [`attend_blocks_avx2`] with 32 vector registers: scores in 4-token tiles (P·V in 32-lane tiles was
/// tried too and was slower, so it keeps the 16-lane tiles).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) fn attend_blocks_avx512vl(
    st: &mut GroupState,
    k: &[&[f16]],
    v: &[&[f16]],
    hd: usize,
    next: Next,
    scratch: &mut Scratch,
) {
    attend_blocks_x86::<true>(st, k, v, hd, next, scratch);
}

/// `a · b` over 16 lanes in two independent chains of 8 (the tail one by one).
#[inline(always)]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
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
pub(super) fn pv_lanes<const W: usize>(p: &[f32], vf: &[f32], hd: usize, acc: &mut [f32], c: usize) {
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
pub(super) const MAX_ROWS: usize = 64;

/// The step itself, written once. The instruction-set specific parts come in as functions: `cvt`
/// converts f16 rows to f32 (prefetching a slice), `scores` and `pv` are register-tiled versions of the
/// two products that return false where they do not apply (then the plain loops here run). The run's
/// scores go into one row per query (`p[g·ntot + t]`), so one softmax update covers all its blocks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn body<T: Copy + Default>(
    st: &mut GroupState,
    ks: &[&[T]],
    vs: &[&[T]],
    hd: usize,
    scratch: &mut Scratch,
    cvt: impl Fn(&[T], &mut [f32], &[T]),
    scores: impl Fn(&[f32], &[T], usize, usize, &mut [f32], usize, &[T]) -> bool,
    scores_rows: impl Fn(&[f32], &[&[T]], usize, &mut [f32], usize) -> bool,
    pv: impl Fn(&[f32], usize, &[&[T]], usize, &mut [f32], &[&[T]]) -> bool,
    next: Next<T>,
) {
    let group = st.m.len();
    if hd == 0 {
        return;
    }
    let rows = |b: &[&[T]]| b.iter().map(|x| x.len()).sum::<usize>();
    let ntot = rows(ks) / hd;
    assert!(
        rows(ks) == rows(vs) && ks.iter().chain(vs).all(|x| x.len().is_multiple_of(hd)),
        "attend_blocks: K and V must hold the same number of whole rows"
    );
    if ntot == 0 {
        return;
    }
    let Scratch {
        kf,
        vf,
        p,
        kscale,
        vscale,
    } = scratch;
    p.resize(group * ntot, 0.0);
    let mut scored = false;
    if ks.len() > 1 && ntot <= MAX_ROWS && ks.iter().any(|k| k.len() < 4 * hd) {
        // Blocks of fewer than 4 tokens: score the run's rows as one list, so that a register tile
        // spans several blocks.
        let mut rows: [&[T]; MAX_ROWS] = [&[]; MAX_ROWS];
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
    if kscale.len() == ntot {
        for pg in p.chunks_exact_mut(ntot) {
            pg.iter_mut().zip(kscale.iter()).for_each(|(x, s)| *x *= s);
        }
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
    if vscale.len() == ntot {
        for pg in p.chunks_exact_mut(ntot) {
            pg.iter_mut().zip(vscale.iter()).for_each(|(x, s)| *x *= s);
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
