//! The `paged_decode` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::cache::{PagedKvCache, PagedShape};
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Suite cases: (block_size, H, KVH, hd, context lengths); empty requests, block size 1 and several
/// partitions of the split-context kernel included.
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    vec![
        (1, 1, 1, 1, vec![1]),
        (4, 4, 2, 8, vec![1, 9, 0]),
        (16, 6, 3, 3, vec![5, 17]),
        (64, 8, 1, 16, vec![3]),
        (3, 2, 2, 32, vec![40, 7, 1]),
        (16, 8, 2, 64, vec![600, 1]),
        (7, 4, 4, 128, vec![1100, 513, 512]),
        // head_dim a multiple of 8 but not 16 (the CPU tiles scores but not P·V), group 4, ragged.
        (16, 8, 2, 40, vec![33, 16, 2]),
    ]
}

/// A paged cache holding `lens` tokens per request, filled round-robin one token at a time, with an
/// extra request that is freed halfway, so block tables are scattered as a real allocator leaves them.
pub fn scattered_cache(shape: PagedShape, lens: &[usize], rng: &mut Rng) -> PagedKvCache {
    let mut c = PagedKvCache::new(shape);
    let row = shape.kv_heads * shape.head_dim;
    let extra = lens.len() as u32;
    let longest = lens.iter().copied().max().unwrap_or(0);
    for pos in 0..longest {
        for (r, &len) in lens.iter().enumerate() {
            if pos < len {
                let (k, v) = (rng.normal_vec(row, 1.0), rng.normal_vec(row, 1.0));
                c.append(r as u32, pos, &k, &v).expect("pool sized for the case");
            }
        }
        if pos < longest / 2 && pos % 2 == 0 && c.append(extra, c.len(extra), &vec![0.0; row], &vec![0.0; row]).is_err()
        {
            break;
        }
        if pos == longest / 2 && c.table(extra).is_some() {
            c.free_request(extra).expect("known request");
        }
    }
    c
}

/// Suite case `i` (seeded): a scattered cache, its block tables, the queries and the query heads.
fn case(i: usize, seed: u64) -> (PagedKvCache, DecodeTables, Vec<f32>, usize) {
    let (bs, h, kvh, hd, lens) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 200 + i as u64);
    let blocks: usize = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
    let shape = PagedShape {
        num_blocks: blocks,
        block_size: bs,
        kv_heads: kvh,
        head_dim: hd,
        dtype: crate::cache::KvDtype::F16,
    };
    let cache = scattered_cache(shape, &lens, &mut rng);
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let dt = DecodeTables::new(&cache, &reqs);
    let q = rng.normal_vec(lens.len() * h * hd, 1.0);
    (cache, dt, q, h)
}

/// Paged decode of `b` on every case, against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens)) in cases().into_iter().enumerate() {
        let (cache, dt, q, _) = case(i, seed);
        let inp = dt.input(&cache, &q, h);
        let tag = format!("paged_decode bs{bs} H{h}/{kvh} hd{hd} ctx{lens:?}");
        match paged_equals_contiguous(b, &inp) {
            Ok(mut report) => {
                report.label = tag;
                out.push(report);
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Paged decode output compared with contiguous attention over the same tokens (the f64 reference
/// gathers each request's K/V through its table, then runs plain decode attention). The suite, the
/// lessons, `kvscope export` and the benchmarks all check paged decode with this.
pub fn paged_equals_contiguous(b: &dyn Backend, inp: &PagedDecodeInput) -> Result<CheckReport, BackendError> {
    decode_and_check(b, inp).map(|(_, report)| report)
}

/// Run paged decode on `b` and check it as [`paged_equals_contiguous`] does: the output `[R, H, hd]`
/// and its report.
pub fn decode_and_check(b: &dyn Backend, inp: &PagedDecodeInput) -> Result<(Vec<f32>, CheckReport), BackendError> {
    let got = b.paged_decode(inp)?;
    let want = reference::paged_decode(inp);
    let report = check(
        "paged == contiguous",
        &[inp.requests(), inp.n_heads, inp.shape.head_dim],
        &got,
        &want,
        Tolerance::F32,
    );
    Ok((got, report))
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three suite cases: block size 1, an empty request, GQA and MQA.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let (cache, dt, q, h) = case(i, seed);
        out.extend(b.paged_decode(&dt.input(&cache, &q, h))?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
