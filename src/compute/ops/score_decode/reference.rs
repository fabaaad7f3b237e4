//! The f64 oracle of the score-returning decode.

use crate::compute::reference::pool_f64;

use super::ScoreDecodeInput;

/// The decode in f64: each request's tokens gathered through its table, the ones its KV head's mask
/// clears left out. Returns `(out [R, H, hd], probs [R, H, columns], scores [R, KVH, columns])`.
pub fn score_decode(inp: &ScoreDecodeInput) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let (h, hd, kvh_n) = (inp.n_heads, s.head_dim, s.kv_heads);
    let (g, cols) = (h / kvh_n, inp.columns());
    let (k_pool, v_pool) = (pool_f64(inp.k_pool, s), pool_f64(inp.v_pool, s));
    let r_n = inp.requests();
    let mut out = vec![0f64; r_n * h * hd];
    let mut probs = vec![0f64; r_n * h * cols];
    let mut scores = vec![0f64; r_n * kvh_n * cols];
    let scale = 1.0 / (hd as f64).sqrt();
    for r in 0..r_n {
        let len = inp.context_lens[r].max(0) as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let blk = |t: usize| table[t / s.block_size] as usize;
        for head in 0..h {
            let kvh = head / g;
            let q = &inp.q[(r * h + head) * hd..][..hd];
            let sc: Vec<Option<f64>> = (0..len)
                .map(|t| {
                    let live = inp.valid[(blk(t) * kvh_n + kvh) * s.block_size + t % s.block_size] != 0;
                    live.then(|| {
                        (0..hd)
                            .map(|d| f64::from(q[d]) * k_pool[s.index(blk(t), kvh, t % s.block_size, d)])
                            .sum::<f64>()
                            * scale
                    })
                })
                .collect();
            let m = sc.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = sc.iter().map(|x| x.map_or(0.0, |x| (x - m).exp())).collect();
            let l: f64 = e.iter().sum();
            let o = &mut out[(r * h + head) * hd..][..hd];
            for (t, &et) in e.iter().enumerate() {
                let pt = if l > 0.0 { et / l } else { 0.0 };
                probs[(r * h + head) * cols + t] = pt;
                scores[(r * kvh_n + kvh) * cols + t] += pt;
                if pt != 0.0 {
                    for (d, od) in o.iter_mut().enumerate() {
                        *od += pt * v_pool[s.index(blk(t), kvh, t % s.block_size, d)];
                    }
                }
            }
        }
    }
    (out, probs, scores)
}
