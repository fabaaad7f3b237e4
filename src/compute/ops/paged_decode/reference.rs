//! The f64 oracle of paged decode.

use ndarray::{Array2, Array3};

use crate::compute::PagedDecodeInput;
use crate::compute::reference::pool_f64;
use crate::math::decode_attention_f64;

/// Paged decode in f64: gather each request's K/V through its block table (the checking path), then
/// plain decode attention. Returns `[R, H, hd]`.
pub fn paged_decode(inp: &PagedDecodeInput) -> Vec<f64> {
    let s = inp.shape;
    let (h, hd) = (inp.n_heads, s.head_dim);
    let mut out = Vec::with_capacity(inp.requests() * h * hd);
    let (k_pool, v_pool) = (pool_f64(inp.k_pool, s), pool_f64(inp.v_pool, s));
    for (r, &len) in inp.context_lens.iter().enumerate() {
        let len = len as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let gather = |pool: &[f64]| {
            Array3::from_shape_fn((s.kv_heads, len, hd), |(kv, pos, d)| {
                pool[s.index(table[pos / s.block_size] as usize, kv, pos % s.block_size, d)]
            })
        };
        let q = Array2::from_shape_fn((h, hd), |(head, d)| inp.q[(r * h + head) * hd + d] as f64);
        out.extend(decode_attention_f64(&q, &gather(&k_pool), &gather(&v_pool)).iter());
    }
    out
}
