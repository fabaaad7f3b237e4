//! The `static_append` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::cache::StaticShape;
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;
use half::f16;

use super::*;

/// Three (layer, pos) writes of `b` on top of random caches (seeded), each checked against the
/// reference into `out` when there is one; the caches after them.
fn writes(
    b: &dyn Backend,
    seed: u64,
    mut out: Option<&mut Vec<CheckReport>>,
) -> Result<(Vec<f16>, Vec<f16>), BackendError> {
    let mut rng = Rng::stream(seed, 100);
    let s = StaticShape {
        layers: 2,
        batch: 2,
        kv_heads: 3,
        max_seq_len: 7,
        head_dim: 5,
    };
    let mut k_cache: Vec<f16> = rng.normal_vec(s.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    let mut v_cache: Vec<f16> = rng.normal_vec(s.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    for (layer, pos) in [(0, 0), (1, 6), (0, 3)] {
        let n = s.batch * s.kv_heads * s.head_dim;
        let (k_new, v_new) = (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0));
        let inp = StaticAppendInput {
            shape: s,
            k_cache: &mut k_cache,
            v_cache: &mut v_cache,
            layer,
            pos,
            k_new: &k_new,
            v_new: &v_new,
        };
        let want = out.is_some().then(|| reference::static_cache_append(&inp));
        b.static_cache_append(inp)?;
        if let (Some(out), Some((wk, wv))) = (out.as_deref_mut(), want) {
            let dims = [s.layers, s.batch, s.kv_heads, s.max_seq_len, s.head_dim];
            let kf: Vec<f64> = k_cache.iter().map(|x| x.to_f64()).collect();
            let vf: Vec<f64> = v_cache.iter().map(|x| x.to_f64()).collect();
            let label = |which: &str| format!("static_cache_append.{which} l{layer} p{pos}");
            out.push(check(&label("k"), &dims, &kf, &wk, Tolerance::EXACT));
            out.push(check(&label("v"), &dims, &vf, &wv, Tolerance::EXACT));
        }
    }
    Ok((k_cache, v_cache))
}

/// A few (layer, pos) writes on top of earlier contents, against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    if let Err(e) = writes(b, seed, Some(out)) {
        out.push(CheckReport::failed("static_cache_append", e));
    }
}

/// Appends are compared bit for bit: every backend rounds the same f32 to the same f16.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::EXACT;

/// Both caches after the suite's writes.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let (k, v) = writes(b, seed, None)?;
    Ok(k.iter().chain(&v).map(|x| x.to_f64()).collect())
}
