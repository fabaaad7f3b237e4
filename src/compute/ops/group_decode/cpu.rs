//! The group decode on the CPU backend: one task per (request, KV head), in parallel. K is dequantised
//! a tile of tokens at a time (codes unpacked, then each channel's scale and zero applied, or the ring's
//! f16 converted) and scored against the head group's queries; the scores go through a softmax; V is
//! dequantised tile by tile the same way and accumulated. Each value is what [`GroupCache::at`] returns
//! (the reference's reader), computed in f32.

use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use super::GroupDecodeInput;
use crate::cache::{GroupCache, GroupShape};
use crate::compute::{BackendError, CpuBackend, Valid};

/// Tokens dequantised at a time (a tile of K or V stays in the L1/L2 cache).
const TILE: usize = 64;

pub(crate) fn run(_b: &CpuBackend, inp: Valid<&GroupDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let p = *inp;
    crate::compute::launch::would_run_cuda(&[super::launch::cuda(p.shape.kv_heads, p.requests())]);
    let s = p.shape;
    let (h, kvh, hd) = (p.n_heads, s.kv_heads, s.head_dim);
    let qg = h / kvh;
    let tasks: Vec<(usize, usize)> = (0..p.requests())
        .flat_map(|r| (0..kvh).map(move |kv| (r, kv)))
        .collect();
    let parts: Vec<Vec<f32>> = tasks.par_iter().map(|&(r, kv)| head_group(p, r, kv)).collect();
    let mut out = vec![0f32; p.requests() * h * hd];
    for (&(r, kv), part) in tasks.iter().zip(parts) {
        out[(r * h + kv * qg) * hd..][..qg * hd].copy_from_slice(&part);
    }
    Ok(out)
}

/// Rows `t0..t0 + n` of one KV head of K (`v` false) or V as the cache holds them, into `dst` (`[n, hd]`).
#[allow(clippy::too_many_arguments)]
fn tile(
    s: &GroupShape,
    c: &GroupCache,
    v: bool,
    table: &[i32],
    ring: usize,
    quantised: usize,
    kv: usize,
    t0: usize,
    dst: &mut [f32],
) {
    let (hd, g, rb) = (s.head_dim, s.fmt.group, s.row_bytes());
    let (codes, scale, zero, rbuf) = if v {
        (&c.v_codes, &c.v_scale, &c.v_zero, &c.v_ring)
    } else {
        (&c.k_codes, &c.k_scale, &c.k_zero, &c.k_ring)
    };
    for (i, o) in dst.chunks_exact_mut(hd).enumerate() {
        let t = t0 + i;
        if t >= quantised {
            let at = s.ring_index(ring, t, kv);
            bytemuck::cast_slice::<u16, half::f16>(&rbuf[at..at + hd]).convert_to_f32_slice(o);
            continue;
        }
        let blk = table[t / g] as usize;
        let row = (blk * s.kv_heads + kv) * g + t % g;
        let bytes = &codes[row * rb..(row + 1) * rb];
        match (s.fmt.bits, s.fmt.symmetric) {
            (8, true) => o.iter_mut().zip(bytes).for_each(|(x, &b)| *x = f32::from(b as i8)),
            (8, false) => o.iter_mut().zip(bytes).for_each(|(x, &b)| *x = f32::from(b)),
            (4, _) => {
                for (x, &b) in o.chunks_exact_mut(2).zip(bytes) {
                    x[0] = f32::from(b & 15);
                    x[1] = f32::from(b >> 4);
                }
            }
            _ => {
                for (x, &b) in o.chunks_exact_mut(4).zip(bytes) {
                    x[0] = f32::from(b & 3);
                    x[1] = f32::from((b >> 2) & 3);
                    x[2] = f32::from((b >> 4) & 3);
                    x[3] = f32::from(b >> 6);
                }
            }
        }
        if v && s.fmt.v_per_token {
            let vg = s.v_groups();
            for (gi, x) in o.chunks_mut(g).enumerate() {
                let (sc, z) = (scale[row * vg + gi], zero[row * vg + gi]);
                x.iter_mut().for_each(|x| *x = *x * sc + z);
            }
        } else {
            let pb = (blk * s.kv_heads + kv) * hd;
            let (sc, z) = (&scale[pb..pb + hd], &zero[pb..pb + hd]);
            for ((x, &sc), &z) in o.iter_mut().zip(sc).zip(z) {
                *x = *x * sc + z;
            }
        }
    }
}

/// The outputs `[G, hd]` of request `r`'s query heads on KV head `kv`.
fn head_group(p: &GroupDecodeInput, r: usize, kv: usize) -> Vec<f32> {
    let s = p.shape;
    let (h, hd) = (p.n_heads, s.head_dim);
    let qg = h / s.kv_heads;
    let len = p.context_lens[r].max(0) as usize;
    let table = &p.block_tables[r * p.max_blocks..(r + 1) * p.max_blocks];
    let ring = p.rings[r] as usize;
    let (kq, vq) = (p.k_quantised[r] as usize, p.v_quantised[r] as usize);
    let scale = 1.0 / (hd as f32).sqrt();
    let q: Vec<f32> = p.q[(r * h + kv * qg) * hd..][..qg * hd]
        .iter()
        .map(|x| x * scale)
        .collect();
    let mut buf = vec![0f32; TILE * hd];
    // Scores `[G, len]`.
    let mut w = vec![0f32; qg * len];
    for t0 in (0..len).step_by(TILE) {
        let n = TILE.min(len - t0);
        tile(&s, p.cache, false, table, ring, kq, kv, t0, &mut buf[..n * hd]);
        for (gi, qh) in q.chunks_exact(hd).enumerate() {
            for (i, k) in buf[..n * hd].chunks_exact(hd).enumerate() {
                w[gi * len + t0 + i] = dot(k, qh);
            }
        }
    }
    for row in w.chunks_mut(len.max(1)) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for x in row.iter_mut() {
            *x = (*x - m).exp();
            sum += *x;
        }
        let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
        row.iter_mut().for_each(|x| *x *= inv);
    }
    let mut out = vec![0f32; qg * hd];
    for t0 in (0..len).step_by(TILE) {
        let n = TILE.min(len - t0);
        tile(&s, p.cache, true, table, ring, vq, kv, t0, &mut buf[..n * hd]);
        for (gi, o) in out.chunks_exact_mut(hd).enumerate() {
            for (i, vr) in buf[..n * hd].chunks_exact(hd).enumerate() {
                let wt = w[gi * len + t0 + i];
                o.iter_mut().zip(vr).for_each(|(o, &x)| *o += wt * x);
            }
        }
    }
    out
}

/// `a · b` with eight running sums (so the compiler vectorises it; a single sum is a serial chain).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}
