//! The streaming decode on the CPU backend: the kernel's loop in f32 (a scalar loop: the lesson's model
//! is tiny, and the fast decode is `paged_decode`).

use super::{StreamDecodeInput, StreamDecodeOut, launch};
use crate::compute::ops::decode_row::softmax_pv;
use crate::compute::{BackendError, CpuBackend, Valid, f16_pool};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&StreamDecodeInput>) -> Result<StreamDecodeOut, BackendError> {
    let s = inp.shape;
    let (r_n, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    crate::compute::launch::would_run_cuda(&[launch::cuda(h, r_n)]);
    let (k_pool, v_pool) = (f16_pool(inp.k_pool, "cpu")?, f16_pool(inp.v_pool, "cpu")?);
    let (half, g, cols) = (hd / 2, h / s.kv_heads, inp.columns());
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; r_n * h * hd];
    let mut probs = vec![0f32; r_n * h * cols];
    let mut sq = vec![0f32; hd];
    for r in 0..r_n {
        let len = inp.context_lens[r].max(0) as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let row = |kvh: usize, t: usize| s.index(table[t / s.block_size] as usize, kvh, t % s.block_size, 0);
        let qcs = &inp.cos_sin[inp.q_pos[r] as usize * hd..][..hd];
        for head in 0..h {
            let kvh = head / g;
            let q = &inp.q[(r * h + head) * hd..][..hd];
            for d in 0..half {
                let (c, sn) = (qcs[d], qcs[half + d]);
                sq[d] = (q[d] * c - q[d + half] * sn) * scale;
                sq[d + half] = (q[d + half] * c + q[d] * sn) * scale;
            }
            let p = &mut probs[(r * h + head) * cols..][..cols];
            let mut m = f32::NEG_INFINITY;
            for t in 0..len {
                let kp = inp.key_pos[r * cols + t];
                if kp < 0 {
                    p[t] = f32::NEG_INFINITY;
                    continue;
                }
                let k = &k_pool[row(kvh, t)..][..hd];
                let kcs = &inp.cos_sin[kp as usize * hd..][..hd];
                let mut dot = 0f32;
                for d in 0..half {
                    let (k1, k2) = (k[d].to_f32(), k[d + half].to_f32());
                    let (c, sn) = (kcs[d], kcs[half + d]);
                    dot += sq[d] * (k1 * c - k2 * sn);
                    dot += sq[d + half] * (k2 * c + k1 * sn);
                }
                p[t] = dot;
                m = m.max(dot);
            }
            let o = &mut out[(r * h + head) * hd..][..hd];
            softmax_pv(p, len, m, o, |t| &v_pool[row(kvh, t)..][..hd]);
        }
    }
    Ok(StreamDecodeOut { out, probs })
}
