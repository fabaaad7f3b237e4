//! `Backend::rope`: rotary position embeddings (RoPE) on rows of `[N, heads, hd]` f32, each row at its
//! own position, in the "rotate half" layout of the model in `assets/models` (dimension `d < hd/2`
//! pairs with `d + hd/2`). The angles come from a `cos_sin` table the host computes in f64 and rounds
//! to f32, as the model's tables are ([`cos_sin_table`]), the way vLLM's `rotary_embedding` takes its
//! `cos_sin_cache`. The input, its validation, the table, its suite cases and its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

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

pub use suite::{TWIN_TOLERANCE, probe, suite};
