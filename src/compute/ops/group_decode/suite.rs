//! The `group_decode` op's checks: the caches `group_append`'s suite builds (two requests that
//! appended 13 and 9 tokens under each format's rule, with the scalar encoder), plus an empty request,
//! decoded by the backend with GQA (4 query heads on 2 KV heads) and MQA, against the f64 reference on
//! the same codes and rings.

use crate::cache::{GroupCache, GroupFormat};
use crate::compute::ops::group_append::append_scalar;
use crate::compute::ops::group_append::suite::{LENS, build, formats, shape, tables};
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Format `fmt`'s cache, its tables (an empty third request added), the quantised counts and rings.
struct Case {
    cache: GroupCache,
    tables: Vec<i32>,
    max_blocks: usize,
    lens: Vec<i32>,
    kq: Vec<i32>,
    vq: Vec<i32>,
    rings: Vec<i32>,
}

fn case(fmt: GroupFormat, seed: u64) -> Result<Case, BackendError> {
    let cache = build(fmt, seed, |inp| {
        append_scalar(inp);
        Ok(())
    })?;
    let (mut t, mb) = tables(fmt);
    t.extend(std::iter::repeat_n(-1, mb));
    let lens = [LENS[0], LENS[1], 0];
    let (kq, vq): (Vec<i32>, Vec<i32>) = lens
        .iter()
        .map(|&l| {
            let (k, v) = fmt.quantised(l);
            (k as i32, v as i32)
        })
        .unzip();
    Ok(Case {
        cache,
        tables: t,
        max_blocks: mb,
        lens: lens.iter().map(|&l| l as i32).collect(),
        kq,
        vq,
        rings: vec![0, 1, 0],
    })
}

fn input<'a>(fmt: GroupFormat, c: &'a Case, q: &'a [f32], h: usize) -> GroupDecodeInput<'a> {
    GroupDecodeInput {
        shape: shape(fmt),
        cache: &c.cache,
        q,
        n_heads: h,
        block_tables: &c.tables,
        max_blocks: c.max_blocks,
        context_lens: &c.lens,
        k_quantised: &c.kq,
        v_quantised: &c.vq,
        rings: &c.rings,
    }
}

/// Every format, GQA and MQA, against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, fmt) in formats().into_iter().enumerate() {
        for h in [4usize, 2] {
            let tag = format!("group_decode {}-bit G{} R{} H{h}/2", fmt.bits, fmt.group, fmt.residual);
            let c = match case(fmt, seed) {
                Ok(c) => c,
                Err(e) => {
                    out.push(CheckReport::failed(&tag, e));
                    continue;
                }
            };
            let q = Rng::stream(seed, 700 + (10 * i + h) as u64).normal_vec(3 * h * 16, 1.0);
            let inp = input(fmt, &c, &q, h);
            match b.group_decode(&inp) {
                Ok(got) => out.push(check(&tag, &[3, h, 16], &got, &reference(&inp), Tolerance::F32)),
                Err(e) => out.push(CheckReport::failed(&tag, e)),
            }
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// Every format's GQA output.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for (i, fmt) in formats().into_iter().enumerate() {
        let c = case(fmt, seed)?;
        let q = Rng::stream(seed, 700 + (10 * i + 4) as u64).normal_vec(3 * 4 * 16, 1.0);
        out.extend(b.group_decode(&input(fmt, &c, &q, 4))?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
