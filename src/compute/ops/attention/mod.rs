//! Attention forward as three kernels (`Backend::attention`: scores, softmax and P·V): the input (which
//! the fused op shares), its validation, its suite cases and its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use ndarray::Array3;

use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};
use crate::math::Mask;

/// Inputs of an attention forward: Q `[H,T,hd]`, K and V `[KVH,T,hd]`.
#[derive(Debug, Clone, Copy)]
pub struct AttnInput<'a> {
    /// Queries.
    pub q: &'a Array3<f32>,
    /// Keys.
    pub k: &'a Array3<f32>,
    /// Values.
    pub v: &'a Array3<f32>,
    /// The mask.
    pub mask: Mask,
}

impl AttnInput<'_> {
    /// (H, KVH, T, hd).
    pub fn dims(&self) -> (usize, usize, usize, usize) {
        let (h, t, hd) = self.q.dim();
        (h, self.k.dim().0, t, hd)
    }

    /// Q, K and V as flat slices (validation checked that they are contiguous).
    pub fn slices(&self) -> [&[f32]; 3] {
        [self.q, self.k, self.v].map(|a| a.as_slice().unwrap_or_default())
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let (h, t, hd) = self.q.dim();
        let (kvh, tk, hdk) = self.k.dim();
        if self.v.dim() != self.k.dim() {
            return Err(invalid(format!("K is {:?} but V is {:?}", self.k.dim(), self.v.dim())));
        }
        if tk != t || hdk != hd {
            return Err(invalid(format!(
                "Q is {:?} but K is {:?}: seq and head_dim must agree",
                self.q.dim(),
                self.k.dim()
            )));
        }
        if h == 0 || kvh == 0 || t == 0 || hd == 0 || h % kvh != 0 {
            return Err(invalid(format!(
                "{h} query heads and {kvh} KV heads: both must be positive and KV heads must divide query heads"
            )));
        }
        if hd > MAX_HEAD_DIM {
            return Err(invalid(format!(
                "head_dim {hd} is larger than the kernels' limit {MAX_HEAD_DIM}"
            )));
        }
        for (name, a) in [("q", self.q), ("k", self.k), ("v", self.v)] {
            if !a.is_standard_layout() {
                return Err(invalid(format!("{name} must be contiguous")));
            }
        }
        Ok(())
    }
}

impl OpInput for AttnInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
pub(crate) use suite::{case_qkv, cases};
