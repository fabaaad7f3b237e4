//! The `quant_decode` op's checks: for each 8-bit dtype, a scattered cache written through the dtype's
//! encoder, decoded by the backend and compared with the f64 reference on the same codes (dequantised
//! by the dtype's decoder, then plain decode attention).

use crate::cache::{PagedKvCache, PagedShape};
use crate::compute::ops::paged_decode::{DecodeTables, reference, scattered_cache};
use crate::compute::ops::quant_append::suite::dtypes;
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Suite cases: (block_size, H, KVH, hd, context lengths); block size 1, an empty request, GQA, MQA,
/// odd head_dim and a context past 256 tokens.
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    vec![
        (1, 1, 1, 2, vec![1]),
        (4, 4, 2, 8, vec![1, 9, 0]),
        (16, 4, 2, 32, vec![70, 3]),
        (8, 8, 1, 13, vec![33]),
        (3, 6, 3, 64, vec![300, 5, 2]),
    ]
}

/// Case `i` of dtype `j` (seeded): a scattered cache of the dtype (FP8 scales halved after the writes,
/// so a kernel that skipped them would fail), its tables, the queries and the query heads.
fn case(i: usize, j: usize, seed: u64) -> (PagedKvCache, DecodeTables, Vec<f32>, usize) {
    let (bs, h, kvh, hd, lens) = cases()[i].clone();
    let dtype = dtypes()[j].0;
    let mut rng = Rng::stream(seed, 900 + (10 * j + i) as u64);
    let blocks: usize = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
    let shape = PagedShape {
        num_blocks: blocks,
        block_size: bs,
        kv_heads: kvh,
        head_dim: hd,
        dtype,
    };
    let mut cache = scattered_cache(shape, &lens, &mut rng);
    if dtype.format().scale_init != 0.0 {
        for p in [&mut cache.k_pool, &mut cache.v_pool] {
            for (n, s) in p.view_mut().scales.iter_mut().enumerate() {
                *s *= 0.5 + 0.25 * n as f32;
            }
        }
    }
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let dt = DecodeTables::new(&cache, &reqs);
    let q = rng.normal_vec(lens.len() * h * hd, 1.0);
    (cache, dt, q, h)
}

/// Every dtype and case against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (j, (dtype, _)) in dtypes().into_iter().enumerate() {
        for (i, (bs, h, kvh, hd, lens)) in cases().into_iter().enumerate() {
            let (cache, dt, q, _) = case(i, j, seed);
            let inp = QuantDecodeInput(dt.input(&cache, &q, h));
            let tag = format!("quant_decode {dtype} bs{bs} H{h}/{kvh} hd{hd} ctx{lens:?}");
            match b.quant_decode(&inp) {
                Ok(got) => out.push(check(
                    &tag,
                    &[inp.0.requests(), h, hd],
                    &got,
                    &reference::paged_decode(&inp.0),
                    Tolerance::F32,
                )),
                Err(e) => out.push(CheckReport::failed(&tag, e)),
            }
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three cases of every dtype.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for j in 0..dtypes().len() {
        for i in [1, 2, 3] {
            let (cache, dt, q, h) = case(i, j, seed);
            let got = b.quant_decode(&QuantDecodeInput(dt.input(&cache, &q, h)))?;
            out.extend(got.iter().map(|&x| f64::from(x)));
        }
    }
    Ok(out)
}
