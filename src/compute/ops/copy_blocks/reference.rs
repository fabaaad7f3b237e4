//! The f64 oracle of whole-block copies.

use crate::compute::CopyBlocksInput;

/// The pools after whole-block copies, as f64.
pub fn copy_blocks(inp: &CopyBlocksInput) -> (Vec<f64>, Vec<f64>) {
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
