//! The paged-decode step [`attend_blocks`]: one KV head's query group over a run of blocks, its
//! AVX2, AVX-512VL and portable builds of one body, the f16 conversion and the software prefetch.

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

/// f16 → f32, 8 values per `vcvtph2ps`, prefetching `ahead` one cache line per 32 values; the tail
/// through `half`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn cvt_f16c(src: &[f16], dst: &mut [f32], ahead: &[f16]) {
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
pub(super) fn prefetch_at(h: &[f16], i: usize) {
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
pub(super) fn scores_tile_avx2<const G: usize, const T: usize>(
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
pub(super) fn pv_tile_avx2<const G: usize>(
    p: &[f32],
    ld: usize,
    vs: &[&[f16]],
    hd: usize,
    acc: &mut [f32],
    ahead: &[&[f16]],
) {
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
pub(super) fn pv_avx2(p: &[f32], ld: usize, vs: &[&[f16]], hd: usize, acc: &mut [f32], ahead: &[&[f16]]) -> bool {
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
pub(super) fn tile_of(group: usize) -> usize {
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
pub(super) trait KRows: Copy {
    /// Whether rows `t0..t0 + n` exist and hold at least `hd` values each.
    fn holds(self, t0: usize, n: usize, hd: usize) -> bool;
    /// Token t's row (only for t that [`KRows::holds`] vouched for).
    fn row(self, t: usize) -> *const f16;
}

/// `[ntok, hd]` rows back to back.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Contiguous<'a> {
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
pub(super) struct RowList<'a>(&'a [&'a [f16]]);

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
pub(super) fn scores_tiles<const WIDE: bool>(
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
