//! The score-returning decode on the CPU backend: the kernel's loop in f32 (scalar: the lesson's model
//! is tiny, and the fast decode is `paged_decode`).

use super::{ScoreDecodeInput, ScoreDecodeOut, launch};
use crate::compute::ops::decode_row::softmax_pv;
use crate::compute::{BackendError, CpuBackend, Valid, f16_pool};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&ScoreDecodeInput>) -> Result<ScoreDecodeOut, BackendError> {
    let s = inp.shape;
    let (r_n, h, hd, kvh_n) = (inp.requests(), inp.n_heads, s.head_dim, s.kv_heads);
    crate::compute::launch::would_run_cuda(&[launch::cuda(kvh_n, r_n)]);
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cpu")?, f16_pool(inp.v_pool, "cpu")?);
    let (g, cols) = (h / kvh_n, inp.columns());
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; r_n * h * hd];
    let mut probs = vec![0f32; r_n * h * cols];
    let mut scores = vec![0f32; r_n * kvh_n * cols];
    let mut sq = vec![0f32; hd];
    for r in 0..r_n {
        let len = inp.context_lens[r].max(0) as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let slot =
            |kvh: usize, t: usize| (table[t / s.block_size] as usize * kvh_n + kvh) * s.block_size + t % s.block_size;
        for kvh in 0..kvh_n {
            for head in kvh * g..(kvh + 1) * g {
                for (d, x) in sq.iter_mut().enumerate() {
                    *x = inp.q[(r * h + head) * hd + d] * scale;
                }
                let p = &mut probs[(r * h + head) * cols..][..cols];
                let mut m = f32::NEG_INFINITY;
                for (t, pt) in p[..len].iter_mut().enumerate() {
                    let sl = slot(kvh, t);
                    if inp.valid[sl] == 0 {
                        *pt = f32::NEG_INFINITY;
                        continue;
                    }
                    let k = &k_pool[sl * hd..][..hd];
                    let dot: f32 = sq.iter().zip(k).map(|(a, b)| a * b.to_f32()).sum();
                    *pt = dot;
                    m = m.max(dot);
                }
                let o = &mut out[(r * h + head) * hd..][..hd];
                softmax_pv(p, len, m, o, |t| &v_pool[slot(kvh, t) * hd..][..hd]);
            }
            let sc = &mut scores[(r * kvh_n + kvh) * cols..][..cols];
            for head in kvh * g..(kvh + 1) * g {
                for (a, &b) in sc.iter_mut().zip(&probs[(r * h + head) * cols..][..cols]) {
                    *a += b;
                }
            }
        }
    }
    Ok(ScoreDecodeOut { out, probs, scores })
}
