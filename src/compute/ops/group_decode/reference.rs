//! The f64 oracle of `group_decode`.

use super::*;

/// The f64 reference: each request's K and V as the cache holds them, exact attention.
pub fn reference(inp: &GroupDecodeInput) -> Vec<f64> {
    let s = inp.shape;
    let (h, kvh, hd) = (inp.n_heads, s.kv_heads, s.head_dim);
    let mut out = Vec::with_capacity(inp.q.len());
    for r in 0..inp.requests() {
        let len = inp.context_lens[r] as usize;
        let table = &inp.block_tables[r * inp.max_blocks..(r + 1) * inp.max_blocks];
        let ring = inp.rings[r] as usize;
        let tensor = |v: bool, quantised: i32| {
            ndarray::Array3::from_shape_fn((kvh, len, hd), |(kv, t, d)| {
                f64::from(inp.cache.at(&s, v, table, ring, quantised as usize, t, kv, d).0)
            })
        };
        let k = tensor(false, inp.k_quantised[r]);
        let v = tensor(true, inp.v_quantised[r]);
        let q = ndarray::Array2::from_shape_fn((h, hd), |(hh, d)| f64::from(inp.q[(r * h + hh) * hd + d]));
        if len == 0 {
            out.extend(std::iter::repeat_n(0.0, h * hd));
        } else {
            out.extend(crate::math::decode_attention_f64(&q, &k, &v));
        }
    }
    out
}
