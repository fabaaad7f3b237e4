//! The `mla_decode` op's checks: (1) against the f64 absorbed reference on scattered latent caches of
//! several d_c, d_r, head counts, block sizes and ragged contexts (an empty request included, and
//! DeepSeek-V3's 512 + 64); (2) through a random MLA layer (`math::mla`): the kernel's latent output times
//! W_UV against the naive expanded attention, which materialises every head's keys and values.

use crate::cache::{KvDtype, PagedKvCache, PagedShape};
use crate::compute::ops::paged_decode::scattered_cache;
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;
use crate::math::mla::{MlaDims, MlaLayer};

use super::*;

/// (d_c, d_r, H, block size, context lengths).
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    vec![
        (8, 4, 2, 4, vec![5, 1, 0]),
        (32, 16, 4, 16, vec![70, 33]),
        (5, 3, 3, 3, vec![10]),
        (64, 0, 2, 8, vec![20]),
        (512, 64, 2, 16, vec![40, 17]),
    ]
}

fn shape(dc: usize, dr: usize, bs: usize, lens: &[usize]) -> PagedShape {
    PagedShape {
        num_blocks: lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2,
        block_size: bs,
        kv_heads: 1,
        head_dim: dc + dr,
        dtype: KvDtype::F16,
    }
}

struct Case {
    cache: PagedKvCache,
    tables: crate::compute::ops::paged_decode::DecodeTables,
    q_abs: Vec<f32>,
    q_rope: Vec<f32>,
}

fn case(i: usize, seed: u64) -> Case {
    let (dc, dr, h, bs, lens) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 1100 + i as u64);
    let cache = scattered_cache(shape(dc, dr, bs, &lens), &lens, &mut rng);
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let tables = crate::compute::ops::paged_decode::DecodeTables::new(&cache, &reqs);
    let q_abs = rng.normal_vec(lens.len() * h * dc, 1.0);
    let q_rope = rng.normal_vec(lens.len() * h * dr, 1.0);
    Case {
        cache,
        tables,
        q_abs,
        q_rope,
    }
}

fn input<'a>(i: usize, c: &'a Case) -> MlaDecodeInput<'a> {
    let (dc, dr, h, ..) = cases()[i].clone();
    MlaDecodeInput {
        q_abs: &c.q_abs,
        q_rope: &c.q_rope,
        n_heads: h,
        d_c: dc,
        d_r: dr,
        scale: 1.0 / ((dc / 2 + dr).max(1) as f32).sqrt(),
        shape: c.cache.shape(),
        latent: c.cache.k_pool.view(),
        block_tables: &c.tables.tables,
        max_blocks: c.tables.max_blocks,
        context_lens: &c.tables.context_lens,
    }
}

/// A random MLA layer's decode of `t` tokens of one request through `b`: the kernel's output times W_UV,
/// and the expanded f64 attention over the rows as cached (f16).
pub fn layer_check(b: &dyn Backend, dims: MlaDims, t: usize, seed: u64) -> Result<(Vec<f32>, Vec<f64>), BackendError> {
    let layer = MlaLayer::random(dims, seed);
    let mut rng = Rng::stream(seed, 1200);
    let bs = 4;
    let mut cache = PagedKvCache::new(shape(dims.d_c, dims.d_r, bs, &[t]));
    let slots = cache
        .append_slots(0, t)
        .map_err(|e| BackendError::InvalidInput(e.to_string()))?;
    let xs = rng.normal_vec(t * dims.d_model, 1.0);
    let mut rows = Vec::with_capacity(t * dims.row());
    for (pos, (x, &slot)) in xs.chunks_exact(dims.d_model).zip(&slots).enumerate() {
        let row: Vec<f32> = layer
            .cache_row(x, pos)
            .iter()
            .map(|v| half::f16::from_f32(*v).to_f32())
            .collect();
        let s = cache.shape();
        let at = s.index(slot as usize / bs, 0, slot as usize % bs, 0);
        let pool = cache.k_pool.view_mut();
        let f = pool
            .into_f16()
            .ok_or_else(|| BackendError::InvalidInput("an f16 pool".into()))?;
        for (d, v) in f[at..at + dims.row()].iter_mut().zip(&row) {
            *d = half::f16::from_f32(*v);
        }
        rows.extend(row);
    }
    let (qn, qr) = layer.queries(&xs[(t - 1) * dims.d_model..], t - 1);
    let q_abs = layer.absorb(&qn);
    let tables = crate::compute::ops::paged_decode::DecodeTables::new(&cache, &[0]);
    let got = b.mla_decode(&MlaDecodeInput {
        q_abs: &q_abs,
        q_rope: &qr,
        n_heads: dims.heads,
        d_c: dims.d_c,
        d_r: dims.d_r,
        scale: dims.scale(),
        shape: cache.shape(),
        latent: cache.k_pool.view(),
        block_tables: &tables.tables,
        max_blocks: tables.max_blocks,
        context_lens: &tables.context_lens,
    })?;
    Ok((layer.up_v(&got), layer.expanded_f64(&qn, &qr, &rows, t)))
}

/// The layers `layer_check` runs: small, GQA-free (MLA has none), and DeepSeek-V3's latent sizes with
/// fewer heads.
pub fn layers() -> Vec<(MlaDims, usize)> {
    vec![
        (
            MlaDims {
                d_model: 24,
                heads: 3,
                d_c: 8,
                d_r: 4,
                d_nope: 6,
                d_v: 5,
            },
            9,
        ),
        (
            MlaDims {
                d_model: 64,
                heads: 2,
                d_c: 512,
                d_r: 64,
                d_nope: 128,
                d_v: 128,
            },
            13,
        ),
    ]
}

/// Every case against the absorbed reference, and every layer against the expanded one.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (dc, dr, h, bs, lens)) in cases().into_iter().enumerate() {
        let c = case(i, seed);
        let inp = input(i, &c);
        let tag = format!("mla_decode d_c{dc} d_r{dr} H{h} bs{bs} ctx{lens:?}");
        match b.mla_decode(&inp) {
            Ok(got) => out.push(check(
                &tag,
                &[lens.len(), h, dc],
                &got,
                &reference(&inp),
                Tolerance::F32,
            )),
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
    for (dims, t) in layers() {
        let tag = format!(
            "mla_decode · W_UV vs expanded: d_c{} d_r{} H{} d_nope{} d_v{} ctx{t}",
            dims.d_c, dims.d_r, dims.heads, dims.d_nope, dims.d_v
        );
        match layer_check(b, dims, t, seed) {
            Ok((got, want)) => out.push(check(&tag, &[dims.heads, dims.d_v], &got, &want, Tolerance::F32)),
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The outputs of three cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [0, 1, 2] {
        let c = case(i, seed);
        out.extend(b.mla_decode(&input(i, &c))?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
