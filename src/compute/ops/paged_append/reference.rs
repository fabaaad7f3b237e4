//! The f64 oracle of the paged append.

use crate::compute::PagedAppendInput;
use crate::compute::reference::{pool_f64, round_row};

/// The pools after a paged append, as f64 (each row as the pools' dtype keeps it).
pub fn paged_append(inp: &PagedAppendInput) -> (Vec<f64>, Vec<f64>) {
    let (s, slots, k, v) = (inp.shape, inp.slot_mapping, inp.k, inp.v);
    let mut kp = pool_f64(inp.k_pool.as_ref(), s);
    let mut vp = pool_f64(inp.v_pool.as_ref(), s);
    for (t, &slot) in slots.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let (block, off) = (slot as usize / s.block_size, slot as usize % s.block_size);
        for h in 0..s.kv_heads {
            let src = (t * s.kv_heads + h) * s.head_dim..(t * s.kv_heads + h + 1) * s.head_dim;
            let dst = s.index(block, h, off, 0);
            kp[dst..dst + s.head_dim].copy_from_slice(&round_row(s.dtype, &k[src.clone()]));
            vp[dst..dst + s.head_dim].copy_from_slice(&round_row(s.dtype, &v[src]));
        }
    }
    (kp, vp)
}
