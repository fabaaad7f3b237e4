//! The f64 oracle of the streaming decode.

use crate::compute::reference::pool_f64;

use super::StreamDecodeInput;

/// The streaming decode in f64: each request's live tokens gathered through its table, keys and query
/// turned in f64 by the same table values, masked tokens left out. Returns `(out [R, H, hd], probs
/// [R, H, columns])`.
pub fn stream_decode(inp: &StreamDecodeInput) -> (Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let (h, hd) = (inp.n_heads, s.head_dim);
    let (half, g, cols) = (hd / 2, h / s.kv_heads, inp.columns());
    let (k_pool, v_pool) = (pool_f64(inp.k_pool, s), pool_f64(inp.v_pool, s));
    let rot = |x: &[f64], pos: usize| -> Vec<f64> {
        let cs = &inp.cos_sin[pos * hd..][..hd];
        let mut y = vec![0f64; hd];
        for d in 0..half {
            let (c, sn) = (f64::from(cs[d]), f64::from(cs[half + d]));
            y[d] = x[d] * c - x[d + half] * sn;
            y[d + half] = x[d + half] * c + x[d] * sn;
        }
        y
    };
    let r_n = inp.requests();
    let mut out = vec![0f64; r_n * h * hd];
    let mut probs = vec![0f64; r_n * h * cols];
    let scale = 1.0 / (hd as f64).sqrt();
    for r in 0..r_n {
        let len = inp.context_lens[r].max(0) as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let at = |pool: &[f64], kvh: usize, t: usize| -> Vec<f64> {
            (0..hd)
                .map(|d| pool[s.index(table[t / s.block_size] as usize, kvh, t % s.block_size, d)])
                .collect()
        };
        for head in 0..h {
            let kvh = head / g;
            let q: Vec<f64> = inp.q[(r * h + head) * hd..][..hd]
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            let q = rot(&q, inp.q_pos[r] as usize);
            let scores: Vec<Option<f64>> = (0..len)
                .map(|t| {
                    let kp = inp.key_pos[r * cols + t];
                    (kp >= 0).then(|| {
                        let k = rot(&at(&k_pool, kvh, t), kp as usize);
                        q.iter().zip(&k).map(|(a, b)| a * b).sum::<f64>() * scale
                    })
                })
                .collect();
            let m = scores.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| s.map_or(0.0, |s| (s - m).exp())).collect();
            let l: f64 = e.iter().sum();
            let p = &mut probs[(r * h + head) * cols..][..cols];
            let o = &mut out[(r * h + head) * hd..][..hd];
            for (t, &et) in e.iter().enumerate() {
                let pt = if l > 0.0 { et / l } else { 0.0 };
                p[t] = pt;
                if pt != 0.0 {
                    for (od, vd) in o.iter_mut().zip(at(&v_pool, kvh, t)) {
                        *od += pt * vd;
                    }
                }
            }
        }
    }
    (out, probs)
}
