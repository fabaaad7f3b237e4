//! The `paged_prefill` op's checks: ragged chunks of several requests (a whole prompt, one token, a chunk
//! that crosses block edges, an empty request, several partitions) against the f64 reference, and chunks
//! of one token against `paged_decode` on the same backend, value for value.

use crate::cache::{KvDtype, PagedKvCache, PagedShape};
use crate::compute::ops::paged_decode::{DecodeTables, scattered_cache};
use crate::compute::{Against, Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// (block_size, H, KVH, hd, tokens cached per request, chunk per request).
type Case = (usize, usize, usize, usize, Vec<usize>, Vec<usize>);

fn cases() -> Vec<Case> {
    vec![
        (4, 4, 2, 8, vec![9, 1, 13], vec![9, 1, 5]),
        (16, 8, 2, 64, vec![600, 20], vec![3, 20]),
        (1, 2, 1, 3, vec![6], vec![6]),
        (16, 8, 2, 40, vec![33, 0, 2], vec![4, 0, 1]),
        (7, 4, 4, 128, vec![513, 40], vec![1, 1]),
        (3, 6, 3, 16, vec![2, 11, 7], vec![1, 1, 1]),
    ]
}

/// A case's cache, tables, lengths and queries.
pub struct Problem {
    /// The cache.
    pub cache: PagedKvCache,
    /// Its tables.
    pub tables: DecodeTables,
    /// Chunk lengths.
    pub query_lens: Vec<i32>,
    /// Queries `[Q, H, hd]`.
    pub q: Vec<f32>,
    /// Query heads.
    pub n_heads: usize,
}

impl Problem {
    /// The prefill input.
    pub fn input(&self) -> PagedPrefillInput<'_> {
        PagedPrefillInput {
            q: &self.q,
            n_heads: self.n_heads,
            shape: self.cache.shape(),
            k_pool: self.cache.k_pool.view(),
            v_pool: self.cache.v_pool.view(),
            block_tables: &self.tables.tables,
            max_blocks: self.tables.max_blocks,
            context_lens: &self.tables.context_lens,
            query_lens: &self.query_lens,
        }
    }
}

fn case(i: usize, seed: u64) -> Problem {
    let (bs, h, kvh, hd, lens, chunks) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 1300 + i as u64);
    let shape = PagedShape {
        num_blocks: lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2,
        block_size: bs,
        kv_heads: kvh,
        head_dim: hd,
        dtype: KvDtype::F16,
    };
    let cache = scattered_cache(shape, &lens, &mut rng);
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let tables = DecodeTables::new(&cache, &reqs);
    let q_rows: usize = chunks.iter().sum();
    Problem {
        cache,
        tables,
        query_lens: chunks.iter().map(|&c| c as i32).collect(),
        q: rng.normal_vec(q_rows * h * hd, 1.0),
        n_heads: h,
    }
}

/// Prefill on `b` against the reference, and its rows of one-token chunks against `b.paged_decode`.
pub fn check_case(b: &dyn Backend, p: &Problem, tag: &str, out: &mut Vec<CheckReport>) {
    let inp = p.input();
    let shape = [inp.rows(), inp.n_heads, inp.shape.head_dim];
    let got = match b.paged_prefill(&inp) {
        Ok(g) => g,
        Err(e) => return out.push(CheckReport::failed(tag, e)),
    };
    out.push(check(tag, &shape, &got, &reference(&inp), Tolerance::F32));
    if inp.query_lens.iter().all(|&c| c == 1) {
        let tag = format!("{tag} · C = 1 equals paged_decode");
        let dec = p.tables.input(&p.cache, &p.q, p.n_heads);
        match b.paged_decode(&dec) {
            Ok(want) => {
                let mut r = check(&tag, &shape, &got, &want, Tolerance::EXACT);
                r.against = Against::PagedDecode;
                if got.iter().zip(&want).any(|(a, b)| a.to_bits() != b.to_bits()) && r.passed() {
                    // Equal values with different bits (±0): still not the same computation.
                    r = CheckReport::failed(&tag, "equal values, different bits (±0)");
                }
                out.push(r);
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Every case.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens, chunks)) in cases().into_iter().enumerate() {
        let tag = format!("paged_prefill bs{bs} H{h}/{kvh} hd{hd} ctx{lens:?} chunks{chunks:?}");
        check_case(b, &case(i, seed), &tag, out);
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The outputs of three cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [0, 2, 3] {
        let p = case(i, seed);
        out.extend(b.paged_prefill(&p.input())?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
