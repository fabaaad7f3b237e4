//! The `score_decode` op's checks against the f64 reference: the seeded cases, the suite every backend
//! runs, and the probe the twin and registry tests compare.

use crate::cache::{KvDtype, PagedKvCache, PagedShape};
use crate::compute::ops::paged_decode::{DecodeTables, scattered_cache};
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Suite cases: (block_size, H, KVH, hd, context lengths); block size 1, an empty request, MQA, the
/// lesson's shape (H 4, KVH 2, hd 32) and a context past 256 tokens.
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    vec![
        (1, 1, 1, 2, vec![1]),
        (4, 4, 2, 8, vec![1, 9, 0]),
        (16, 4, 2, 32, vec![70, 3]),
        (8, 8, 1, 16, vec![33]),
        (3, 6, 3, 64, vec![300, 5, 2]),
    ]
}

/// One case (seeded): a scattered cache, its tables, the queries and a validity mask that clears about
/// one slot in four per KV head (different per KV head), and every slot of the last request of a case
/// with three (a request evicted whole gets zeros).
struct Case {
    cache: PagedKvCache,
    tables: DecodeTables,
    q: Vec<f32>,
    valid: Vec<i32>,
    heads: usize,
}

impl Case {
    fn input(&self) -> ScoreDecodeInput<'_> {
        ScoreDecodeInput {
            paged: self.tables.input(&self.cache, &self.q, self.heads),
            valid: &self.valid,
        }
    }
}

fn case(i: usize, seed: u64) -> Case {
    let (bs, h, kvh, hd, lens) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 700 + i as u64);
    let blocks: usize = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
    let shape = PagedShape {
        num_blocks: blocks,
        block_size: bs,
        kv_heads: kvh,
        head_dim: hd,
        dtype: KvDtype::F16,
    };
    let cache = scattered_cache(shape, &lens, &mut rng);
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let tables = DecodeTables::new(&cache, &reqs);
    let mut valid: Vec<i32> = (0..blocks * kvh * bs).map(|_| i32::from(rng.below(4) != 0)).collect();
    if lens.len() == 3 {
        let row = &tables.tables[2 * tables.max_blocks..][..lens[2].div_ceil(bs)];
        for &b in row {
            valid[b as usize * kvh * bs..][..kvh * bs].fill(0);
        }
    }
    Case {
        q: rng.normal_vec(lens.len() * h * hd, 1.0),
        valid,
        cache,
        tables,
        heads: h,
    }
}

/// The score decode of `b` on every case: output, weights and group scores against the f64 reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens)) in cases().into_iter().enumerate() {
        let c = case(i, seed);
        let inp = c.input();
        let tag = format!("score_decode bs{bs} H{h} KVH{kvh} hd{hd} lens{lens:?}");
        match b.score_decode(&inp) {
            Ok(got) => {
                let (want_out, want_p, want_s) = reference::score_decode(&inp);
                let (r, cols) = (inp.requests(), inp.columns());
                out.push(check(
                    &format!("{tag} out"),
                    &[r, h, hd],
                    &got.out,
                    &want_out,
                    Tolerance::F32,
                ));
                out.push(check(
                    &format!("{tag} probs"),
                    &[r, h, cols],
                    &got.probs,
                    &want_p,
                    Tolerance::F32,
                ));
                out.push(check(
                    &format!("{tag} scores"),
                    &[r, kvh, cols],
                    &got.scores,
                    &want_s,
                    Tolerance::F32,
                ));
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output, weights and scores of three cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let c = case(i, seed);
        let got = b.score_decode(&c.input())?;
        out.extend(
            got.out
                .iter()
                .chain(&got.probs)
                .chain(&got.scores)
                .map(|&x| f64::from(x)),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    #[test]
    fn a_bad_mask_is_refused_with_the_reason() {
        let c = case(1, 3);
        let valid = vec![1; 3];
        let e = CpuBackend
            .score_decode(&ScoreDecodeInput {
                valid: &valid,
                ..c.input()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("the validity mask has 3 entries"), "{e}");
    }

    /// With every slot valid, the output is `paged_decode`'s, and each KV head's scores sum to its group
    /// size; evicted slots get no weight, and the mask differs per KV head.
    #[test]
    fn all_valid_equals_paged_decode_and_evicted_slots_get_nothing() {
        let c = case(2, 5);
        let all = vec![1; c.valid.len()];
        let inp = ScoreDecodeInput {
            valid: &all,
            ..c.input()
        };
        let got = CpuBackend.score_decode(&inp).unwrap();
        let plain = CpuBackend.paged_decode(&inp.paged).unwrap();
        let worst = got
            .out
            .iter()
            .zip(&plain)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "{worst}");
        let (cols, kvh, g) = (inp.columns(), inp.shape.kv_heads, inp.n_heads / inp.shape.kv_heads);
        for row in got.scores.chunks(cols) {
            let s: f32 = row.iter().sum();
            assert!((s - g as f32).abs() < 1e-4, "{s}");
        }
        let inp = c.input();
        let got = CpuBackend.score_decode(&inp).unwrap();
        let s = inp.shape;
        for r in 0..inp.requests() {
            for k in 0..kvh {
                for t in 0..inp.context_lens[r] as usize {
                    let b = inp.block_tables[r * inp.max_blocks + t / s.block_size] as usize;
                    if inp.valid[(b * kvh + k) * s.block_size + t % s.block_size] == 0 {
                        assert_eq!(got.scores[(r * kvh + k) * cols + t], 0.0, "r{r} k{k} t{t}");
                    }
                }
            }
        }
        assert!(got.scores.iter().any(|&x| x > 0.0));
    }
}
