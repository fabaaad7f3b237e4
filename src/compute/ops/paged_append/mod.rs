//! `Backend::paged_append`: write tokens' K/V into the paged pools through a slot mapping (vLLM's
//! `reshape_and_cache`). The input, its validation, its suite cases and its probe.

pub(crate) mod cpu;
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
#[allow(unsafe_code)]
pub(crate) mod sim;
pub(crate) mod wgpu;

use half::f16;

use crate::cache::{PagedShape, PoolMut};
use crate::compute::{Backend, BackendError, CheckReport, Limits, OpInput, Tolerance, check, invalid};
use crate::math::Rng;

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

/// `b`'s append at scattered slots (one skipped, −1) into zeroed pools, checked against the reference
/// into `out` when there is one; the pools after it.
fn append(
    b: &dyn Backend,
    seed: u64,
    out: Option<&mut Vec<CheckReport>>,
) -> Result<(Vec<f16>, Vec<f16>), BackendError> {
    let mut rng = Rng::stream(seed, 101);
    let p = PagedShape {
        num_blocks: 6,
        block_size: 3,
        kv_heads: 2,
        head_dim: 5,
        dtype: crate::cache::KvDtype::F16,
    };
    let mut k_pool = vec![f16::ZERO; p.numel()];
    let mut v_pool = vec![f16::ZERO; p.numel()];
    let slots = [16, 0, -1, 5, 9, 17, 3];
    let n = slots.len() * p.kv_heads * p.head_dim;
    let (k, v) = (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0));
    let inp = PagedAppendInput {
        shape: p,
        k_pool: PoolMut::f16(&mut k_pool),
        v_pool: PoolMut::f16(&mut v_pool),
        slot_mapping: &slots,
        k: &k,
        v: &v,
    };
    let want = out.is_some().then(|| reference::paged_append(&inp));
    b.paged_append(inp)?;
    if let (Some(out), Some((wk, wv))) = (out, want) {
        let dims = [p.num_blocks, p.kv_heads, p.block_size, p.head_dim];
        let kf: Vec<f64> = k_pool.iter().map(|x| x.to_f64()).collect();
        let vf: Vec<f64> = v_pool.iter().map(|x| x.to_f64()).collect();
        out.push(check("paged_append.k_pool", &dims, &kf, &wk, Tolerance::EXACT));
        out.push(check("paged_append.v_pool", &dims, &vf, &wv, Tolerance::EXACT));
    }
    Ok((k_pool, v_pool))
}

/// Scattered slots with a skipped (−1) entry, against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    if let Err(e) = append(b, seed, Some(out)) {
        out.push(CheckReport::failed("paged_append", e));
    }
}

/// Appends are compared bit for bit: every backend rounds the same f32 to the same f16.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::EXACT;

/// Both pools after the suite's append.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let (k, v) = append(b, seed, None)?;
    Ok(k.iter().chain(&v).map(|x| x.to_f64()).collect())
}
