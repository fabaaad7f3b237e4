//! The `copy_blocks` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::cache::prefix::prefix_kv;
use crate::cache::{PagedKvCache, PagedShape, PoolMut, RequestId};
use crate::compute::{Backend, BackendError, CheckReport, DecodeTables, Tolerance, check, invalid};
use crate::math::Rng;
use half::f16;

use super::*;

fn pool_f64(p: &[f16]) -> Vec<f64> {
    p.iter().map(|x| x.to_f64()).collect()
}

/// Random pools with two copies, against the reference; then a copy-on-write scenario decoded through
/// the shared tables, against contiguous attention on each request's own tokens.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    let mut rng = Rng::stream(seed, 301);
    // An even and an odd number of values per block (f16 pairs packed in u32 words straddle blocks).
    let cases = [
        (
            PagedShape {
                num_blocks: 6,
                block_size: 3,
                kv_heads: 2,
                head_dim: 5,
                dtype: crate::cache::KvDtype::F16,
            },
            vec![4, 1, 0, 5],
        ),
        (
            PagedShape {
                num_blocks: 5,
                block_size: 3,
                kv_heads: 1,
                head_dim: 3,
                dtype: crate::cache::KvDtype::F16,
            },
            vec![0, 1, 3, 2, 0, 4],
        ),
    ];
    for (p, mapping) in cases {
        let mut k_pool: Vec<f16> = rng.normal_vec(p.numel(), 1.0).into_iter().map(f16::from_f32).collect();
        let mut v_pool: Vec<f16> = rng.normal_vec(p.numel(), 1.0).into_iter().map(f16::from_f32).collect();
        let inp = CopyBlocksInput {
            shape: p,
            k_pool: PoolMut::f16(&mut k_pool),
            v_pool: PoolMut::f16(&mut v_pool),
            block_mapping: &mapping,
        };
        let (wk, wv) = reference::copy_blocks(&inp);
        let dims = [p.num_blocks, p.kv_heads, p.block_size, p.head_dim];
        let tag = format!(
            "copy_blocks N{} per{}",
            p.num_blocks,
            p.kv_heads * p.block_size * p.head_dim
        );
        match b.copy_blocks(inp) {
            Ok(()) => {
                out.push(check(
                    &format!("{tag} k_pool"),
                    &dims,
                    &pool_f64(&k_pool),
                    &wk,
                    Tolerance::EXACT,
                ));
                out.push(check(
                    &format!("{tag} v_pool"),
                    &dims,
                    &pool_f64(&v_pool),
                    &wv,
                    Tolerance::EXACT,
                ));
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
    match shared_tables_decode(b, seed) {
        Ok(r) => out.push(r),
        Err(e) => out.push(CheckReport::failed("paged_decode after fork + copy-on-write", e)),
    }
}

/// A shared system prompt, a fork into two children that each append (copy-on-write on `b`), a parent
/// that appends after them (no copy), and a new request that hits the cached prompt; then paged decode
/// on `b` through those shared tables equals contiguous attention over each request's own K/V.
fn shared_tables_decode(b: &dyn Backend, seed: u64) -> Result<CheckReport, BackendError> {
    let shape = PagedShape {
        num_blocks: 16,
        block_size: 4,
        kv_heads: 2,
        head_dim: 8,
        dtype: crate::cache::KvDtype::F16,
    };
    let mut c = PagedKvCache::new(shape);
    let err = |e: crate::cache::PagedError| invalid(e.to_string());
    let prompt = [5, 1, 4, 1, 5, 9, 2];
    let a = c.admit(0, &prompt).map_err(err)?;
    for pos in a.cached_tokens..prompt.len() {
        c.write_prefix_kv(0, pos).map_err(err)?;
    }
    c.fork(0, 1).map_err(err)?;
    c.fork(0, 2).map_err(err)?;
    for (req, tok) in [(1, 6), (2, 7), (0, 3)] {
        let ap = c.append_token(req, tok).map_err(err)?;
        if let Some((src, dst)) = ap.cow {
            let mapping = [src as i32, dst as i32];
            let PagedKvCache { k_pool, v_pool, .. } = &mut c;
            b.copy_blocks(CopyBlocksInput {
                shape,
                k_pool: k_pool.view_mut(),
                v_pool: v_pool.view_mut(),
                block_mapping: &mapping,
            })?;
        }
        c.write_prefix_kv(req, c.len(req) - 1).map_err(err)?;
    }
    let hit = [5, 1, 4, 1, 8, 8];
    let a = c.admit(3, &hit).map_err(err)?;
    for pos in a.cached_tokens..hit.len() {
        c.write_prefix_kv(3, pos).map_err(err)?;
    }
    c.check_invariants().map_err(invalid)?;
    let reqs: Vec<RequestId> = vec![0, 1, 2, 3];
    let tables = DecodeTables::new(&c, &reqs);
    let q = Rng::stream(seed, 302).normal_vec(reqs.len() * 4 * shape.head_dim, 1.0);
    let mut report = crate::compute::ops::paged_decode::paged_equals_contiguous(b, &tables.input(&c, &q, 4))?;
    // The copies must also have put each request's own K/V under its table.
    for &r in &reqs {
        let toks = c.tokens(r).unwrap_or_default().to_vec();
        let (k, _) = c.gather(r).map_err(err)?;
        for pos in 0..toks.len() {
            let (want, _) = prefix_kv(&toks, pos, shape.kv_heads * shape.head_dim);
            if f16::from_f32(want[0]).to_f32() != k[pos * shape.head_dim] {
                return Err(invalid(format!("request {r} token {pos}: K is not its own prefix's")));
            }
        }
    }
    report.label = "paged_decode after fork + copy-on-write (shared tables)".into();
    Ok(report)
}

/// Copies are compared bit for bit.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::EXACT;

/// Both pools after three copies on random contents (an odd number of values per block, so f16 pairs
/// packed in u32 words straddle blocks).
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut rng = Rng::stream(seed, 303);
    let p = PagedShape {
        num_blocks: 7,
        block_size: 3,
        kv_heads: 1,
        head_dim: 5,
        dtype: crate::cache::KvDtype::F16,
    };
    let mut k_pool: Vec<f16> = rng.normal_vec(p.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    let mut v_pool: Vec<f16> = rng.normal_vec(p.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    b.copy_blocks(CopyBlocksInput {
        shape: p,
        k_pool: PoolMut::f16(&mut k_pool),
        v_pool: PoolMut::f16(&mut v_pool),
        block_mapping: &[6, 0, 2, 3, 1, 5],
    })?;
    Ok(pool_f64(&k_pool).into_iter().chain(pool_f64(&v_pool)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependent_or_out_of_range_pairs_are_refused() {
        let s = PagedShape {
            num_blocks: 4,
            block_size: 2,
            kv_heads: 1,
            head_dim: 2,
            dtype: crate::cache::KvDtype::F16,
        };
        let (mut k, mut v) = (vec![f16::ZERO; s.numel()], vec![f16::ZERO; s.numel()]);
        for (mapping, why) in [
            (vec![0, 1, 2], "even"),
            (vec![0, 4], "outside the pool"),
            (vec![0, 1, 2, 1], "destination of two copies"),
            (vec![0, 1, 1, 2], "both copied from and copied into"),
        ] {
            let inp = CopyBlocksInput {
                shape: s,
                k_pool: PoolMut::f16(&mut k),
                v_pool: PoolMut::f16(&mut v),
                block_mapping: &mapping,
            };
            let e = inp.validate().unwrap_err().to_string();
            assert!(e.contains(why), "{mapping:?}: {e}");
        }
    }
}
