//! The `attention` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::{AttnShape, AttnWeights, Mask, project};

use super::*;

/// Suite cases: (T, d_model, H, KVH, mask), odd shapes and every mask kind included.
pub(crate) fn cases() -> Vec<(usize, usize, usize, usize, Mask)> {
    vec![
        (1, 1, 1, 1, Mask::Causal),
        (5, 9, 3, 1, Mask::None),
        (7, 16, 4, 2, Mask::Causal),
        (9, 24, 4, 4, Mask::Window { window: 3, sinks: 0 }),
        (13, 20, 5, 5, Mask::Window { window: 2, sinks: 3 }),
        (6, 6, 2, 1, Mask::Window { window: 10, sinks: 0 }),
        (33, 32, 2, 1, Mask::Causal),
        (64, 128, 4, 2, Mask::Causal),
        (100, 96, 6, 2, Mask::Window { window: 17, sinks: 4 }),
        (130, 256, 1, 1, Mask::None),
    ]
}

/// The three-kernel attention of `b` on every case, against the f64 reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (t, d, h, kvh, mask)) in cases().into_iter().enumerate() {
        let shape = AttnShape {
            seq: t,
            d_model: d,
            n_heads: h,
            n_kv_heads: kvh,
        };
        let qkv = project(&AttnWeights::random(shape, seed + i as u64));
        let inp = AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let want = reference::attention(&inp);
        let tag = format!("T{t} H{h}/{kvh} hd{} {mask}", d / h);
        match b.attention(&inp) {
            Ok(got) => {
                for (name, g, w) in [
                    ("scores", &got.scores, &want.scores),
                    ("probs", &got.probs, &want.probs),
                    ("out", &got.out, &want.out),
                ] {
                    out.push(check(
                        &format!("attention.{name} {tag}"),
                        g.shape(),
                        g.as_slice().unwrap_or_default(),
                        w.as_slice().unwrap_or_default(),
                        Tolerance::F32,
                    ));
                }
            }
            Err(e) => out.push(CheckReport::failed(&format!("attention {tag}"), e)),
        }
    }
}

/// Q, K, V of suite case `i` (seeded).
pub(crate) fn case_qkv(i: usize, seed: u64) -> (crate::math::Qkv<f32>, Mask) {
    let (t, d, h, kvh, mask) = cases()[i];
    let shape = AttnShape {
        seq: t,
        d_model: d,
        n_heads: h,
        n_kv_heads: kvh,
    };
    (project(&AttnWeights::random(shape, seed)), mask)
}

/// Twins agree within the checker's f32 tolerance (the kernels sum in different orders).
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// Scores, probabilities and output of three small cases (a GQA window with sinks among them).
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let (qkv, mask) = case_qkv(i, seed);
        let got = b.attention(&AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        })?;
        for a in [&got.scores, &got.probs, &got.out] {
            out.extend(a.iter().map(|&x| f64::from(x)));
        }
    }
    Ok(out)
}
