//! `Backend::rope`: rotary position embeddings (RoPE) on rows of `[N, heads, hd]` f32, each row at its
//! own position, in the "rotate half" layout of the model in `assets/models` (dimension `d < hd/2`
//! pairs with `d + hd/2`). The angles come from a `cos_sin` table the host computes in f64 and rounds
//! to f32, as the model's tables are ([`cos_sin_table`]), the way vLLM's `rotary_embedding` takes its
//! `cos_sin_cache`. The input, its validation, the table, its suite cases and its probe.

pub(crate) mod cpu;
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
#[allow(unsafe_code)]
pub(crate) mod sim;
pub(crate) mod wgpu;

use crate::compute::{Backend, BackendError, CheckReport, Limits, MAX_HEAD_DIM, OpInput, Tolerance, check, invalid};
use crate::math::Rng;

/// Rows `x` (`[N, n_heads, head_dim]`) rotated at `positions` (`[N]`) by the angles of `cos_sin`
/// (`[positions in the table, head_dim]`: row `p` holds `cos(p·θᵢ)` for `i < hd/2`, then `sin(p·θᵢ)`).
#[derive(Debug, Clone, Copy)]
pub struct RopeInput<'a> {
    /// The rows, `[N, n_heads, head_dim]`.
    pub x: &'a [f32],
    /// Each row's position, `[N]`.
    pub positions: &'a [u32],
    /// The angle table, `[P, head_dim]` ([`cos_sin_table`]).
    pub cos_sin: &'a [f32],
    /// Heads per row.
    pub n_heads: usize,
    /// Dimensions per head (even).
    pub head_dim: usize,
}

impl RopeInput<'_> {
    /// Rows N.
    pub fn rows(&self) -> usize {
        self.positions.len()
    }

    /// Positions the table holds.
    pub fn table_positions(&self) -> usize {
        self.cos_sin.len() / self.head_dim.max(1)
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let (h, hd) = (self.n_heads, self.head_dim);
        if h == 0 || hd < 2 || hd % 2 != 0 || hd > MAX_HEAD_DIM {
            return Err(invalid(format!(
                "{h} heads of {hd} dimensions: RoPE needs at least one head and an even head_dim in 2..={MAX_HEAD_DIM}"
            )));
        }
        let n = self.rows();
        if self.x.len() != n * h * hd {
            return Err(invalid(format!(
                "x has {} values, expected N·heads·head_dim = {n}·{h}·{hd} = {}",
                self.x.len(),
                n * h * hd
            )));
        }
        if self.cos_sin.is_empty() || !self.cos_sin.len().is_multiple_of(hd) {
            return Err(invalid(format!(
                "the cos/sin table has {} values: it must be [positions, head_dim = {hd}]",
                self.cos_sin.len()
            )));
        }
        let p = self.table_positions();
        if let Some((i, &pos)) = self.positions.iter().enumerate().find(|(_, pos)| **pos as usize >= p) {
            return Err(invalid(format!(
                "row {i} is at position {pos}, past the table's {p} positions"
            )));
        }
        Ok(())
    }
}

impl OpInput for RopeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.positions.is_empty()
    }
}

/// The angle table `[positions, head_dim]` for RoPE base `base`: angles `p·θᵢ` with
/// `θᵢ = base^(−2i/hd)` in f64, their cosines (`i < hd/2`) then sines rounded to f32, exactly as the
/// model's tables.
pub fn cos_sin_table(positions: usize, head_dim: usize, base: f64) -> Vec<f32> {
    let half = head_dim / 2;
    let mut t = vec![0f32; positions * head_dim];
    for p in 0..positions {
        for i in 0..half {
            let inv = 1.0 / base.powf((2 * i) as f64 / head_dim as f64);
            let a = p as f64 * inv;
            t[p * head_dim + i] = a.cos() as f32;
            t[p * head_dim + half + i] = a.sin() as f32;
        }
    }
    t
}

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
