//! MLA decode on the CPU backend: one task per (request, head), in parallel; the rows read once as f32
//! per request, scores over the whole row (latent and RoPE key), softmax, and the latent-space output.

use rayon::prelude::*;

use super::MlaDecodeInput;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&MlaDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(p.n_heads, p.requests())]);
    let lat = crate::compute::f16_pool(p.latent, "cpu")?;
    let (h, dc, dr) = (p.n_heads, p.d_c, p.d_r);
    let dim = dc + dr;
    let rows: Vec<Vec<f32>> = (0..p.requests())
        .map(|r| {
            let len = p.context_lens[r].max(0) as usize;
            (0..len)
                .flat_map(|t| lat[p.row(r, t) * dim..][..dim].iter().map(|x| x.to_f32()))
                .collect()
        })
        .collect();
    let tasks: Vec<(usize, usize)> = (0..p.requests()).flat_map(|r| (0..h).map(move |hh| (r, hh))).collect();
    let outs: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&(r, hh)| {
            let q: Vec<f32> = p.q_abs[(r * h + hh) * dc..][..dc]
                .iter()
                .chain(&p.q_rope[(r * h + hh) * dr..][..dr])
                .map(|x| x * p.scale)
                .collect();
            let mut w: Vec<f32> = rows[r]
                .chunks_exact(dim)
                .map(|row| row.iter().zip(&q).map(|(a, b)| a * b).sum())
                .collect();
            let m = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut z = 0.0;
            for x in &mut w {
                *x = (*x - m).exp();
                z += *x;
            }
            let mut o = vec![0f32; dc];
            for (wt, row) in w.iter().zip(rows[r].chunks_exact(dim)) {
                let pw = wt / z;
                o.iter_mut().zip(&row[..dc]).for_each(|(o, c)| *o += pw * c);
            }
            o
        })
        .collect();
    Ok(outs.concat())
}
