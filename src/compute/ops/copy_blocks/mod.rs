//! `Backend::copy_blocks`: copy whole blocks of the paged pools, `(src, dst)` pairs (vLLM's
//! `copy_blocks`, which runs the copy-on-write the block manager asks for). The input, its validation and
//! its suite cases, including paged decode through shared tables after forks and copies, and its probe.

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

/// Whole-block copies within the K and V pools.
#[derive(Debug)]
pub struct CopyBlocksInput<'a> {
    /// The pool's shape.
    pub shape: PagedShape,
    /// K pool, written in place.
    pub k_pool: PoolMut<'a>,
    /// V pool, written in place.
    pub v_pool: PoolMut<'a>,
    /// `(src, dst)` physical blocks, flattened: `[src0, dst0, src1, dst1, …]`.
    pub block_mapping: &'a [i32],
}

impl CopyBlocksInput<'_> {
    /// Pairs in the mapping.
    pub fn pairs(&self) -> usize {
        self.block_mapping.len() / 2
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        crate::compute::check_pools(s, [self.k_pool.as_ref(), self.v_pool.as_ref()])?;
        if !self.block_mapping.len().is_multiple_of(2) {
            return Err(invalid("block_mapping holds (src, dst) pairs: its length must be even"));
        }
        if let Some(bad) = self
            .block_mapping
            .iter()
            .find(|&&b| b < 0 || b as usize >= s.num_blocks)
        {
            return Err(invalid(format!(
                "block {bad} is outside the pool ({} blocks)",
                s.num_blocks
            )));
        }
        // Pairs must be independent (kernels run them in any order): every dst distinct, and no dst
        // also read as a src.
        let mut dst = std::collections::BTreeSet::new();
        for p in self.block_mapping.chunks_exact(2) {
            if !dst.insert(p[1]) {
                return Err(invalid(format!("block {} is the destination of two copies", p[1])));
            }
        }
        if let Some(p) = self.block_mapping.chunks_exact(2).find(|p| dst.contains(&p[0])) {
            return Err(invalid(format!("block {} is both copied from and copied into", p[0])));
        }
        Ok(())
    }
}

impl OpInput for CopyBlocksInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.block_mapping.is_empty()
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
