//! The CPU backend's fused attention in f32: FlashAttention's loop order with the CPU's register tiles.
//!
//! Per head, `TILE` query rows at a time: the tile's queries are transposed and scaled once, the scores
//! come out transposed (`S^T = K · Q^T`, `[keys, queries]`) from [`simd::micro_gemm`] reading K where
//! it lies, the softmax numerators are taken down each column (vectorised across queries), P·V reads
//! V where it lies and that transposed tile as P, and each output row is divided by its sum last.
//! Nothing is packed, so K and V stay in place for every tile; under a causal or sliding-window mask
//! the register tiles wholly right of the diagonal are never computed (masked entries are −∞ all the
//! same, so they add exact zeros). The f64 reference and the materialising path stay in
//! `math::attention`; this is the one the P1 benchmark and the lessons' fused kernel run.

use ndarray::{Array3, Axis};
use rayon::prelude::*;

use crate::compute::{AttnInput, BackendError, CpuBackend, Valid};
use crate::math::Mask;
use crate::simd::{self, MICRO_COLS, MICRO_ROWS, Strided};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&AttnInput>) -> Result<Array3<f32>, BackendError> {
    let (h, _, t, _) = inp.dims();
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(h, t)]);
    Ok(fused(inp.q, inp.k, inp.v, inp.mask))
}

/// Query rows per tile: a multiple of both register tile sides, so that only a ragged last tile (or a
/// head_dim that is not a multiple of 16) takes the narrow paths. The transposed score tile is
/// `[T, TILE]` (192 KB at T = 1024), which stays in L2 from its GEMM through P·V.
const TILE: usize = 48;

/// Fused attention over Q `[H,T,hd]`, K and V `[KVH,T,hd]` (contiguous) with `mask`: only the output
/// `[H,T,hd]`. Heads run in parallel.
pub(crate) fn fused(q: &Array3<f32>, k: &Array3<f32>, v: &Array3<f32>, mask: Mask) -> Array3<f32> {
    let (h, t, hd) = q.dim();
    let group = h / k.dim().0;
    let mut out = Array3::<f32>::zeros((h, t, hd));
    let (qs, ks, vs) = (contiguous(q), contiguous(k), contiguous(v));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(head, mut o)| {
            let kv = head / group;
            let o = o.as_slice_mut().expect("a new array is contiguous");
            one_head(
                &qs[head * t * hd..(head + 1) * t * hd],
                &ks[kv * t * hd..(kv + 1) * t * hd],
                &vs[kv * t * hd..(kv + 1) * t * hd],
                (t, hd),
                mask,
                o,
            );
        });
    out
}

fn contiguous(a: &Array3<f32>) -> &[f32] {
    a.as_slice().expect("attention inputs are validated contiguous")
}

/// One head: `q`, `k`, `v` and `out` are `[t, hd]` row-major.
fn one_head(q: &[f32], k: &[f32], v: &[f32], (t, hd): (usize, usize), mask: Mask, out: &mut [f32]) {
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    // Keys right of the diagonal are masked for causal and sliding-window masks.
    let future_masked = !matches!(mask, Mask::None);
    let mut qt = vec![0f32; hd * TILE];
    let mut st = vec![0f32; t * TILE];
    let mut l = [0f32; TILE];
    for i0 in (0..t).step_by(TILE) {
        let nq = TILE.min(t - i0);
        let end = if future_masked { i0 + nq } else { t };
        // Q^T of the tile, scaled: qt[c·nq + j] = q[i0 + j][c] / √hd.
        for (j, row) in q[i0 * hd..(i0 + nq) * hd].chunks_exact(hd).enumerate() {
            for (c, &x) in row.iter().enumerate() {
                qt[c * nq + j] = x * scale;
            }
        }
        // S^T[t][j] = k_t · q_j / √hd, skipping register tiles wholly right of the diagonal.
        let st = &mut st[..end * nq];
        for t0 in (0..end).step_by(MICRO_ROWS) {
            let m = MICRO_ROWS.min(end - t0);
            for j0 in (0..nq).step_by(MICRO_COLS) {
                let n = MICRO_COLS.min(nq - j0);
                if future_masked && t0 > i0 + j0 + n - 1 {
                    continue;
                }
                let a = Strided {
                    data: &k[t0 * hd..],
                    rs: hd,
                    cs: 1,
                };
                simd::micro_gemm(m, n, hd, a, &qt[j0..], nq, &mut st[t0 * nq + j0..], nq);
            }
        }
        // The mask: −∞ wherever query i0 + j may not look (this also covers the skipped tiles).
        for j in 0..nq {
            let [a, b] = mask.hidden(i0 + j, end);
            a.chain(b).for_each(|x| st[x * nq + j] = f32::NEG_INFINITY);
        }
        simd::column_softmax_numerators(st, nq, &mut l[..nq]);
        // O = P·V with the unnormalised P; query rows r0.. need keys up to their own position only.
        for r0 in (0..nq).step_by(MICRO_ROWS) {
            let m = MICRO_ROWS.min(nq - r0);
            let keys = if future_masked { i0 + r0 + m } else { end };
            let p = Strided {
                data: &st[r0..],
                rs: 1,
                cs: nq,
            };
            for c0 in (0..hd).step_by(MICRO_COLS) {
                let n = MICRO_COLS.min(hd - c0);
                simd::micro_gemm(m, n, keys, p, &v[c0..], hd, &mut out[(i0 + r0) * hd + c0..], hd);
            }
        }
        for (row, &sum) in out[i0 * hd..(i0 + nq) * hd].chunks_exact_mut(hd).zip(&l[..nq]) {
            let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
            row.iter_mut().for_each(|x| *x *= inv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{AttnInput, Tolerance, check, reference};
    use crate::math::{AttnShape, AttnWeights, project};

    /// Against the f64 reference through the shared checker: ragged last tiles (T not a multiple of
    /// 48), head_dims that are not multiples of 16 or 8 (the narrow tiles), GQA, every mask kind,
    /// windows and sinks that cross tile edges, and a P1-sized head.
    #[test]
    fn fused_matches_the_f64_reference_on_ragged_shapes() {
        let cases = [
            (1, 8, 1, 1, Mask::Causal),
            (47, 48, 2, 1, Mask::Causal),
            (49, 20, 2, 2, Mask::None),
            (97, 40, 4, 2, Mask::Causal),
            (130, 72, 3, 1, Mask::Window { window: 50, sinks: 3 }),
            (200, 64, 2, 2, Mask::Window { window: 7, sinks: 0 }),
            (96, 96, 1, 1, Mask::None),
            (300, 256, 4, 4, Mask::Causal),
        ];
        for (i, (t, d, h, kvh, mask)) in cases.into_iter().enumerate() {
            let shape = AttnShape {
                seq: t,
                d_model: d,
                n_heads: h,
                n_kv_heads: kvh,
            };
            let qkv = project(&AttnWeights::random(shape, 40 + i as u64));
            let inp = AttnInput {
                q: &qkv.q,
                k: &qkv.k,
                v: &qkv.v,
                mask,
            };
            let got = fused(inp.q, inp.k, inp.v, mask);
            let want = reference::attention(&inp).out;
            let r = check(
                &format!("fused T{t} d{d} H{h}/{kvh} {mask}"),
                got.shape(),
                got.as_slice().unwrap(),
                want.as_slice().unwrap(),
                Tolerance::F32,
            );
            assert!(r.passed(), "{r}");
        }
    }
}
