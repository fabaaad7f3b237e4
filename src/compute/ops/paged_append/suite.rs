//! The `paged_append` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::cache::{PagedShape, PoolMut};
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;
use half::f16;

use super::*;

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
