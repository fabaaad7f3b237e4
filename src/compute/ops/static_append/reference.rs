//! The f64 oracle of the static-cache append.

use crate::compute::StaticAppendInput;
use crate::compute::reference::round_f16;

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
