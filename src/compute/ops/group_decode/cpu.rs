//! The group decode on the CPU backend: each value read through `GroupCache::at` (the codes, or the
//! ring) and attention in f32, one request and query head at a time.

use super::GroupDecodeInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(p.shape.kv_heads, p.requests())]);
    let s = p.shape;
    let (h, kvh, hd) = (p.n_heads, s.kv_heads, s.head_dim);
    let qg = h / kvh;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; p.requests() * h * hd];
    for r in 0..p.requests() {
        let len = p.context_lens[r] as usize;
        let table = &p.block_tables[r * p.max_blocks..(r + 1) * p.max_blocks];
        let ring = p.rings[r] as usize;
        let (kq, vq) = (p.k_quantised[r] as usize, p.v_quantised[r] as usize);
        for kv in 0..kvh {
            // This KV head's rows, dequantised once for its query group.
            let rows = |v: bool, q: usize| -> Vec<f32> {
                (0..len * hd)
                    .map(|i| p.cache.at(&s, v, table, ring, q, i / hd, kv, i % hd).0)
                    .collect()
            };
            let (k, v) = (rows(false, kq), rows(true, vq));
            for g in 0..qg {
                let head = kv * qg + g;
                let q = &p.q[(r * h + head) * hd..][..hd];
                let mut w: Vec<f32> = (0..len)
                    .map(|t| k[t * hd..(t + 1) * hd].iter().zip(q).map(|(a, b)| a * b).sum::<f32>() * scale)
                    .collect();
                let m = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for x in &mut w {
                    *x = (*x - m).exp();
                    sum += *x;
                }
                let o = &mut out[(r * h + head) * hd..][..hd];
                for (t, &wt) in w.iter().enumerate() {
                    for (d, od) in o.iter_mut().enumerate() {
                        *od += wt / sum * v[t * hd + d];
                    }
                }
            }
        }
    }
    Ok(out)
}
