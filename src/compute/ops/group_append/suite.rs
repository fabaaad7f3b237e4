//! The `group_append` op's checks: two requests append tokens step by step into a group-quantised
//! cache under each format's rule (INT8 per channel, KIVI-2 and KIVI-4), through `b`; the final codes,
//! scales, zero points and f16 rings equal the scalar encoder's, exactly. The caches these runs build
//! are also what `group_decode`'s suite reads.

use crate::cache::GroupFormat;
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// The suite's formats: INT8 per channel (blocks of 4), KIVI-2 (G 4, R 8) and KIVI-4 (G 2, R 4).
pub fn formats() -> Vec<GroupFormat> {
    vec![
        GroupFormat::int8_channel(4),
        GroupFormat::kivi(2, 4, 8),
        GroupFormat::kivi(4, 2, 4),
    ]
}

/// Tokens each request appends.
pub const LENS: [usize; 2] = [13, 9];

/// The suite's shape for `fmt`: 2 KV heads of 16, 2 rings, enough blocks.
pub fn shape(fmt: GroupFormat) -> GroupShape {
    GroupShape {
        num_blocks: 2 * LENS[0].div_ceil(fmt.group) + 1,
        kv_heads: 2,
        head_dim: 16,
        rings: 2,
        fmt,
    }
}

/// Request r's block i: interleaved, request 1 first, so tables are not the identity.
pub fn block_of(r: usize, i: usize) -> usize {
    2 * i + (1 - r)
}

/// The block tables `[2, max_blocks]` of the suite's requests.
pub fn tables(fmt: GroupFormat) -> (Vec<i32>, usize) {
    let mb = LENS[0].div_ceil(fmt.group);
    let t = (0..2)
        .flat_map(|r| (0..mb).map(move |i| block_of(r, i) as i32))
        .collect();
    (t, mb)
}

/// Runs the rule step by step through `append` (one call a step, both requests' rows and jobs), on
/// rows with outlier channels and one constant channel.
pub fn build(
    fmt: GroupFormat,
    seed: u64,
    mut append: impl FnMut(GroupAppendInput) -> Result<(), BackendError>,
) -> Result<GroupCache, BackendError> {
    let s = shape(fmt);
    let mut cache = GroupCache::new(&s);
    let mut rng = Rng::stream(seed, 300 + u64::from(fmt.bits) + fmt.group as u64);
    let row = s.kv_heads * s.head_dim;
    for t in 0..LENS[0] {
        let live: Vec<usize> = (0..2).filter(|&r| t < LENS[r]).collect();
        let mut rows = Vec::new();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut jobs = Vec::new();
        for &r in &live {
            rows.extend([r as i32, t as i32]);
            let mut kr = rng.normal_vec(row, 1.0);
            let vr = rng.normal_vec(row, 0.5);
            for (c, x) in kr.iter_mut().enumerate() {
                let d = c % s.head_dim;
                if d == 3 {
                    *x *= 12.0; // an outlier channel
                } else if d == 5 {
                    *x = 0.75; // a constant channel: a scale of 0 when asymmetric
                }
            }
            k.extend(kr);
            v.extend(vr);
            jobs.extend(fmt.step_job_words(r, t, |b| block_of(r, b)));
        }
        append(GroupAppendInput {
            shape: s,
            cache: &mut cache,
            rows: &rows,
            k: &k,
            v: &v,
            jobs: &jobs,
        })?;
    }
    Ok(cache)
}

/// The cache flattened: codes (as unsigned bytes), scales and zeros, ring values.
pub fn flatten(c: &GroupCache) -> Vec<f64> {
    let bytes = c.k_codes.iter().chain(&c.v_codes).map(|&x| f64::from(x));
    let params = [&c.k_scale, &c.k_zero, &c.v_scale, &c.v_zero]
        .into_iter()
        .flatten()
        .map(|&x| f64::from(x));
    let rings = c
        .k_ring
        .iter()
        .chain(&c.v_ring)
        .map(|&h| f64::from(half::f16::from_bits(h).to_f32()));
    bytes.chain(params).chain(rings).collect()
}

/// Every format: `b`'s cache equals the scalar encoder's, code for code.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for fmt in formats() {
        let tag = format!(
            "group_append {}-bit G{} R{}{}",
            fmt.bits,
            fmt.group,
            fmt.residual,
            if fmt.symmetric { " symmetric" } else { "" }
        );
        let want = build(fmt, seed, |inp| {
            append_scalar(inp);
            Ok(())
        })
        .map(|c| flatten(&c));
        match (build(fmt, seed, |inp| b.group_append(inp)), want) {
            (Ok(got), Ok(want)) => {
                let got = flatten(&got);
                out.push(check(&tag, &[got.len()], &got, &want, Tolerance::EXACT));
            }
            (Err(e), _) | (_, Err(e)) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Codes are compared exactly: every backend rounds the same f32 quotients the same way.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::EXACT;

/// Every format's final cache.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for fmt in formats() {
        out.extend(flatten(&build(fmt, seed, |inp| b.group_append(inp))?));
    }
    Ok(out)
}
