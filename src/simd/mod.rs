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

mod decode;
mod exp;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod tiles;

pub use decode::*;
pub use exp::*;
pub use gemm::*;

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
                let t = web_time::Instant::now();
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
