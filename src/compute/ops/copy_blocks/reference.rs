//! The f64 oracle of whole-block copies.

use crate::compute::CopyBlocksInput;
use crate::compute::reference::pool_f64;

/// The pools after whole-block copies, as f64 (read through their dtype).
pub fn copy_blocks(inp: &CopyBlocksInput) -> (Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let per = s.kv_heads * s.block_size * s.head_dim;
    let (k0, v0) = (pool_f64(inp.k_pool.as_ref(), s), pool_f64(inp.v_pool.as_ref(), s));
    let (mut kp, mut vp) = (k0.clone(), v0.clone());
    for p in inp.block_mapping.chunks_exact(2) {
        let (src, dst) = (p[0] as usize * per, p[1] as usize * per);
        kp[dst..dst + per].copy_from_slice(&k0[src..src + per]);
        vp[dst..dst + per].copy_from_slice(&v0[src..src + per]);
    }
    (kp, vp)
}
