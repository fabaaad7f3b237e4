//! The `rope` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Suite cases: (rows, heads, head_dim, table positions); head_dim 2, odd head counts, one row, and
/// rows past the WGSL dispatch's first dimension would need 65536 rows (left to the kernels' own
/// tests).
fn cases() -> Vec<(usize, usize, usize, usize)> {
    vec![
        (1, 1, 2, 1),
        (5, 3, 8, 16),
        (17, 4, 16, 64),
        (64, 2, 32, 256),
        (9, 5, 128, 4096),
        (3, 1, 256, 40),
    ]
}

/// One case's input (seeded): random rows, random positions inside the table, base 10000.
fn case(i: usize, seed: u64) -> (Vec<f32>, Vec<u32>, Vec<f32>, usize, usize) {
    let (n, h, hd, p) = cases()[i];
    let mut rng = Rng::stream(seed, 500 + i as u64);
    let x = rng.normal_vec(n * h * hd, 1.0);
    let positions: Vec<u32> = (0..n)
        .map(|r| if r == 0 { p as u32 - 1 } else { rng.below(p) as u32 })
        .collect();
    (x, positions, cos_sin_table(p, hd, 10000.0), h, hd)
}

/// RoPE of `b` on every case, against the f64 reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (n, h, hd, p)) in cases().into_iter().enumerate() {
        let (x, positions, cos_sin, _, _) = case(i, seed);
        let inp = RopeInput {
            x: &x,
            positions: &positions,
            cos_sin: &cos_sin,
            n_heads: h,
            head_dim: hd,
        };
        let tag = format!("rope N{n} H{h} hd{hd} P{p}");
        match b.rope(&inp) {
            Ok(got) => out.push(check(
                &format!("{tag} out"),
                &[n, h, hd],
                &got,
                &reference::rope(&inp),
                Tolerance::F32,
            )),
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance (a GPU may fuse the multiply and the add).
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let (x, positions, cos_sin, h, hd) = case(i, seed);
        let got = b.rope(&RopeInput {
            x: &x,
            positions: &positions,
            cos_sin: &cos_sin,
            n_heads: h,
            head_dim: hd,
        })?;
        out.extend(got.iter().map(|&v| f64::from(v)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    #[test]
    fn bad_inputs_are_refused_with_the_reason() {
        let table = cos_sin_table(4, 4, 10000.0);
        let x = vec![0.0; 8];
        for (positions, hd, heads, why) in [
            (vec![0u32, 4], 4, 1, "past the table's 4 positions"),
            (vec![0u32, 1], 3, 1, "even head_dim"),
            (vec![0u32], 4, 1, "expected N·heads·head_dim"),
            (vec![0u32, 1], 4, 0, "at least one head"),
        ] {
            let e = CpuBackend
                .rope(&RopeInput {
                    x: &x,
                    positions: &positions,
                    cos_sin: &table,
                    n_heads: heads,
                    head_dim: hd,
                })
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }

    #[test]
    fn position_zero_is_the_identity_and_a_rotation_keeps_each_pairs_length() {
        let table = cos_sin_table(8, 6, 10000.0);
        let x: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
        let y = CpuBackend
            .rope(&RopeInput {
                x: &x,
                positions: &[0, 7],
                cos_sin: &table,
                n_heads: 1,
                head_dim: 6,
            })
            .unwrap();
        assert_eq!(&y[..6], &x[..6]);
        for d in 0..3 {
            let (a, b) = (x[6 + d], x[6 + d + 3]);
            let (c, s) = (y[6 + d], y[6 + d + 3]);
            assert!(((a * a + b * b) - (c * c + s * s)).abs() < 1e-4);
        }
    }
}
