//! The f64 oracle for every op of the [`super::Backend`] trait. Backends are compared with these
//! through [`super::check`].

use half::f16;
use ndarray::{Array2, Array3};

use super::{AttnInput, PagedAppendInput, PagedDecodeInput, StaticAppendInput};
use crate::math::{AttnCore, attention_core, decode_attention_f64};

/// Attention in f64 on the same (f32) inputs.
pub fn attention(inp: &AttnInput) -> AttnCore<f64> {
    let c = |a: &Array3<f32>| a.mapv(f64::from);
    attention_core(&c(inp.q), &c(inp.k), &c(inp.v), inp.mask)
}

fn round_f16(x: f32) -> f64 {
    f16::from_f32(x).to_f64()
}

/// The caches after a static append, as f64: old contents with the new row rounded to f16.
pub fn static_cache_append(inp: &StaticAppendInput) -> (Vec<f64>, Vec<f64>) {
    let (s, layer, pos, k_new, v_new) = (inp.shape, inp.layer, inp.pos, inp.k_new, inp.v_new);
    let mut k: Vec<f64> = inp.k_cache.iter().map(|x| x.to_f64()).collect();
    let mut v: Vec<f64> = inp.v_cache.iter().map(|x| x.to_f64()).collect();
    for b in 0..s.batch {
        for h in 0..s.kv_heads {
            for d in 0..s.head_dim {
                let src = (b * s.kv_heads + h) * s.head_dim + d;
                k[s.index(layer, b, h, pos, d)] = round_f16(k_new[src]);
                v[s.index(layer, b, h, pos, d)] = round_f16(v_new[src]);
            }
        }
    }
    (k, v)
}

/// The pools after a paged append, as f64.
pub fn paged_append(inp: &PagedAppendInput) -> (Vec<f64>, Vec<f64>) {
    let (s, slots, k, v) = (inp.shape, inp.slot_mapping, inp.k, inp.v);
    let mut kp: Vec<f64> = inp.k_pool.iter().map(|x| x.to_f64()).collect();
    let mut vp: Vec<f64> = inp.v_pool.iter().map(|x| x.to_f64()).collect();
    for (t, &slot) in slots.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let (block, off) = (slot as usize / s.block_size, slot as usize % s.block_size);
        for h in 0..s.kv_heads {
            for d in 0..s.head_dim {
                let src = (t * s.kv_heads + h) * s.head_dim + d;
                kp[s.index(block, h, off, d)] = round_f16(k[src]);
                vp[s.index(block, h, off, d)] = round_f16(v[src]);
            }
        }
    }
    (kp, vp)
}

/// The pools after whole-block copies, as f64.
pub fn copy_blocks(inp: &crate::compute::CopyBlocksInput) -> (Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let per = s.kv_heads * s.block_size * s.head_dim;
    let mut kp: Vec<f64> = inp.k_pool.iter().map(|x| x.to_f64()).collect();
    let mut vp: Vec<f64> = inp.v_pool.iter().map(|x| x.to_f64()).collect();
    for p in inp.block_mapping.chunks_exact(2) {
        let (src, dst) = (p[0] as usize * per, p[1] as usize * per);
        for e in 0..per {
            kp[dst + e] = inp.k_pool[src + e].to_f64();
            vp[dst + e] = inp.v_pool[src + e].to_f64();
        }
    }
    (kp, vp)
}

/// Paged decode in f64: gather each request's K/V through its block table (the checking path), then
/// plain decode attention. Returns `[R, H, hd]`.
pub fn paged_decode(inp: &PagedDecodeInput) -> Vec<f64> {
    let s = inp.shape;
    let (h, hd) = (inp.n_heads, s.head_dim);
    let mut out = Vec::with_capacity(inp.requests() * h * hd);
    for (r, &len) in inp.context_lens.iter().enumerate() {
        let len = len as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let gather = |pool: &[f16]| {
            Array3::from_shape_fn((s.kv_heads, len, hd), |(kv, pos, d)| {
                pool[s.index(table[pos / s.block_size] as usize, kv, pos % s.block_size, d)].to_f64()
            })
        };
        let q = Array2::from_shape_fn((h, hd), |(head, d)| inp.q[(r * h + head) * hd + d] as f64);
        out.extend(decode_attention_f64(&q, &gather(inp.k_pool), &gather(inp.v_pool)).iter());
    }
    out
}
