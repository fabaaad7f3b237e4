//! RoPE on the CPU backend: each row's pairs turned by its position's table row, in f32.

use crate::compute::ops::rope::RopeInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&RopeInput>) -> Result<Vec<f32>, BackendError> {
    let (h, hd) = (inp.n_heads, inp.head_dim);
    let half = hd / 2;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(inp.rows())]);
    let mut out = vec![0f32; inp.x.len()];
    for (r, &p) in inp.positions.iter().enumerate() {
        let (cos, sin) = inp.cos_sin[p as usize * hd..][..hd].split_at(half);
        for head in 0..h {
            let base = (r * h + head) * hd;
            let (x1, x2) = inp.x[base..base + hd].split_at(half);
            let (o1, o2) = out[base..base + hd].split_at_mut(half);
            for d in 0..half {
                o1[d] = x1[d] * cos[d] - x2[d] * sin[d];
                o2[d] = x2[d] * cos[d] + x1[d] * sin[d];
            }
        }
    }
    Ok(out)
}
