//! `Backend::static_cache_append`: write one token of one layer into a static cache
//! `[layers, batch, kv_heads, max_seq_len, head_dim]`. The input, its validation, its suite cases and
//! its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use half::f16;

use crate::cache::StaticShape;
use crate::compute::{BackendError, Limits, OpInput, invalid};

/// One token's K/V (`[batch, kv_heads, head_dim]`, f32) written at (`layer`, `pos`) of the f16 caches.
#[derive(Debug)]
pub struct StaticAppendInput<'a> {
    /// The cache's shape.
    pub shape: StaticShape,
    /// K cache, written in place.
    pub k_cache: &'a mut [f16],
    /// V cache, written in place.
    pub v_cache: &'a mut [f16],
    /// Layer written.
    pub layer: usize,
    /// Position written.
    pub pos: usize,
    /// The new K row.
    pub k_new: &'a [f32],
    /// The new V row.
    pub v_new: &'a [f32],
}

impl StaticAppendInput<'_> {
    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        if self.k_cache.len() != s.numel() || self.v_cache.len() != s.numel() {
            return Err(invalid(format!("caches must have {} values", s.numel())));
        }
        if self.layer >= s.layers || self.pos >= s.max_seq_len {
            return Err(invalid(format!(
                "(layer {}, pos {}) is outside the cache [{} layers, {} positions]",
                self.layer, self.pos, s.layers, s.max_seq_len
            )));
        }
        let n = s.batch * s.kv_heads * s.head_dim;
        if self.k_new.len() != n || self.v_new.len() != n {
            return Err(invalid(format!(
                "k_new/v_new must be [batch, kv_heads, head_dim] = {n} values"
            )));
        }
        Ok(())
    }
}

impl OpInput for StaticAppendInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
