//! The `stream_decode` op's checks against the f64 reference: the seeded cases, the suite every backend
//! runs, and the probe the twin and registry tests compare.

use crate::cache::{KvDtype, PagedKvCache, PagedShape};
use crate::compute::ops::paged_decode::{DecodeTables, scattered_cache};
use crate::compute::ops::rope::cos_sin_table;
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// Suite cases: (block_size, H, KVH, hd, context lengths, table positions); block size 1, an empty
/// request, a request whose tokens are all masked, MQA, and a context past 256 tokens.
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>, usize)> {
    vec![
        (1, 1, 1, 2, vec![1], 4),
        (4, 4, 2, 8, vec![1, 9, 0], 32),
        (16, 4, 2, 32, vec![70, 3], 300),
        (8, 8, 1, 16, vec![33], 64),
        (3, 6, 3, 64, vec![300, 5, 2], 1024),
    ]
}

/// One case (seeded): a scattered cache, its tables, the queries, their positions, the key positions
/// (about one token in five masked; the last request of a case with three is masked whole) and the
/// angle table.
struct Case {
    cache: PagedKvCache,
    tables: DecodeTables,
    q: Vec<f32>,
    q_pos: Vec<i32>,
    key_pos: Vec<i32>,
    cos_sin: Vec<f32>,
    heads: usize,
}

impl Case {
    fn input(&self) -> StreamDecodeInput<'_> {
        StreamDecodeInput {
            paged: self.tables.input(&self.cache, &self.q, self.heads),
            q_pos: &self.q_pos,
            key_pos: &self.key_pos,
            cos_sin: &self.cos_sin,
        }
    }
}

fn case(i: usize, seed: u64) -> Case {
    let (bs, h, kvh, hd, lens, p) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 600 + i as u64);
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
    let cols = tables.max_blocks * bs;
    let mut key_pos = vec![-1i32; lens.len() * cols];
    for (r, &len) in lens.iter().enumerate() {
        let all_masked = lens.len() == 3 && r == 2;
        for t in 0..len {
            if !all_masked && rng.below(5) != 0 {
                key_pos[r * cols + t] = rng.below(p) as i32;
            }
        }
    }
    Case {
        q: rng.normal_vec(lens.len() * h * hd, 1.0),
        q_pos: lens.iter().map(|_| rng.below(p) as i32).collect(),
        key_pos,
        cos_sin: cos_sin_table(p, hd, 10000.0),
        cache,
        tables,
        heads: h,
    }
}

/// The streaming decode of `b` on every case, output and weights against the f64 reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens, p)) in cases().into_iter().enumerate() {
        let c = case(i, seed);
        let inp = c.input();
        let tag = format!("stream_decode bs{bs} H{h} KVH{kvh} hd{hd} lens{lens:?} P{p}");
        match b.stream_decode(&inp) {
            Ok(got) => {
                let (want_out, want_p) = reference::stream_decode(&inp);
                let r = inp.requests();
                out.push(check(
                    &format!("{tag} out"),
                    &[r, h, hd],
                    &got.out,
                    &want_out,
                    Tolerance::F32,
                ));
                out.push(check(
                    &format!("{tag} probs"),
                    &[r, h, inp.columns()],
                    &got.probs,
                    &want_p,
                    Tolerance::F32,
                ));
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output and weights of three cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let c = case(i, seed);
        let got = b.stream_decode(&c.input())?;
        out.extend(got.out.iter().chain(&got.probs).map(|&x| f64::from(x)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    #[test]
    fn bad_positions_are_refused_with_the_reason() {
        let c = case(1, 3);
        let mut key_pos = c.key_pos.clone();
        key_pos[0] = 32;
        let inp = StreamDecodeInput {
            key_pos: &key_pos,
            ..c.input()
        };
        let e = CpuBackend.stream_decode(&inp).unwrap_err().to_string();
        assert!(e.contains("past the table's 32 positions"), "{e}");
        let q_pos = vec![0, 40, 0];
        let e = CpuBackend
            .stream_decode(&StreamDecodeInput {
                q_pos: &q_pos,
                ..c.input()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("the query is at position 40"), "{e}");
    }

    #[test]
    fn masked_tokens_get_no_weight_and_an_all_masked_request_gets_zeros() {
        let c = case(1, 5);
        let inp = c.input();
        let got = CpuBackend.stream_decode(&inp).unwrap();
        let cols = inp.columns();
        for r in 0..inp.requests() {
            for h in 0..inp.n_heads {
                let p = &got.probs[(r * inp.n_heads + h) * cols..][..cols];
                for (t, &pt) in p.iter().enumerate() {
                    if t >= inp.context_lens[r] as usize || inp.key_pos[r * cols + t] < 0 {
                        assert_eq!(pt, 0.0, "r{r} h{h} t{t}");
                    }
                }
                let sum: f32 = p.iter().sum();
                let live = (0..inp.context_lens[r] as usize).any(|t| inp.key_pos[r * cols + t] >= 0);
                assert!(
                    if live { (sum - 1.0).abs() < 1e-5 } else { sum == 0.0 },
                    "r{r} h{h}: {sum}"
                );
            }
        }
        let hd = inp.shape.head_dim;
        assert!(got.out[2 * inp.n_heads * hd..].iter().all(|&x| x == 0.0));
    }

    /// Turning the query and every key by the same shift leaves every weight as it was: RoPE scores
    /// depend only on the distance, which is what lets StreamingLLM renumber positions.
    #[test]
    fn a_common_shift_of_all_positions_changes_nothing() {
        let c = case(2, 9);
        let inp = c.input();
        let shift = |x: i32| if x < 0 { x } else { x + 100 };
        let base = CpuBackend.stream_decode(&inp).unwrap();
        let (q_pos, key_pos): (Vec<i32>, Vec<i32>) = (
            c.q_pos.iter().map(|&x| x.min(199)).collect(),
            c.key_pos.iter().map(|&x| x.min(199)).collect(),
        );
        let clipped = StreamDecodeInput {
            q_pos: &q_pos,
            key_pos: &key_pos,
            ..inp
        };
        let a = CpuBackend.stream_decode(&clipped).unwrap();
        let (q2, k2): (Vec<i32>, Vec<i32>) = (
            q_pos.iter().map(|&x| shift(x)).collect(),
            key_pos.iter().map(|&x| shift(x)).collect(),
        );
        let b = CpuBackend
            .stream_decode(&StreamDecodeInput {
                q_pos: &q2,
                key_pos: &k2,
                ..inp
            })
            .unwrap();
        let worst = a
            .probs
            .iter()
            .zip(&b.probs)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "{worst}");
        assert_ne!(base.probs, vec![0.0; base.probs.len()]);
    }
}
