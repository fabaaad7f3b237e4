//! `Backend::paged_append`: write tokens' K/V into the paged pools through a slot mapping (vLLM's
//! `reshape_and_cache`). The input, its validation, its suite cases and its probe.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::{PagedShape, PoolMut};
use crate::compute::{BackendError, Limits, OpInput, invalid};

/// Tokens' K/V (`[tokens, kv_heads, head_dim]`, f32) written into the pools (of the shape's dtype) at `slot_mapping`
/// (slot = block · block_size + offset; negative slots are skipped).
#[derive(Debug)]
pub struct PagedAppendInput<'a> {
    /// The pool's shape.
    pub shape: PagedShape,
    /// K pool, written in place.
    pub k_pool: PoolMut<'a>,
    /// V pool, written in place.
    pub v_pool: PoolMut<'a>,
    /// One slot per token.
    pub slot_mapping: &'a [i32],
    /// The tokens' K.
    pub k: &'a [f32],
    /// The tokens' V.
    pub v: &'a [f32],
}

impl PagedAppendInput<'_> {
    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        crate::compute::check_pools(s, [self.k_pool.as_ref(), self.v_pool.as_ref()])?;
        let n = self.slot_mapping.len() * s.kv_heads * s.head_dim;
        if self.k.len() != n || self.v.len() != n {
            return Err(invalid(format!(
                "k/v must be [tokens, kv_heads, head_dim] = {n} values"
            )));
        }
        let cap = s.num_blocks * s.block_size;
        if let Some(bad) = self.slot_mapping.iter().find(|&&x| x >= 0 && x as usize >= cap) {
            return Err(invalid(format!("slot {bad} is outside the pool ({cap} slots)")));
        }
        Ok(())
    }
}

impl OpInput for PagedAppendInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.slot_mapping.is_empty()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
