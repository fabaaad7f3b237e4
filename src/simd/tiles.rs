//! The x86 register tiles of the paged-decode step ([`super::attend_blocks`]): f16 → f32 with F16C and
//! the software prefetch, the scores of a group of queries against a run of K rows, and P·V over a run
//! of V blocks, each with its accumulators held in registers.

use super::*;

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
    pub(super) k: &'a [f16],
    pub(super) hd: usize,
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
pub(super) struct RowList<'a>(pub(super) &'a [&'a [f16]]);

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
