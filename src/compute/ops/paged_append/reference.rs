//! The f64 oracle of the paged append.

use crate::compute::PagedAppendInput;
use crate::compute::reference::round_f16;

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
