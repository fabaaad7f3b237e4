//! The f64 oracle of RoPE.

use crate::compute::ops::rope::RopeInput;

/// The rotated rows in f64, from the same f32 rows and table values.
pub fn rope(inp: &RopeInput) -> Vec<f64> {
    let (h, hd) = (inp.n_heads, inp.head_dim);
    let half = hd / 2;
    let mut out = vec![0f64; inp.x.len()];
    for (r, &p) in inp.positions.iter().enumerate() {
        let cs = &inp.cos_sin[p as usize * hd..][..hd];
        for head in 0..h {
            let base = (r * h + head) * hd;
            for d in 0..half {
                let (x1, x2) = (f64::from(inp.x[base + d]), f64::from(inp.x[base + d + half]));
                let (c, s) = (f64::from(cs[d]), f64::from(cs[half + d]));
                out[base + d] = x1 * c - x2 * s;
                out[base + d + half] = x2 * c + x1 * s;
            }
        }
    }
    out
}
