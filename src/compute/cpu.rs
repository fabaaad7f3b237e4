//! The CPU backend: f32 math on the rayon pool (both cores).
//!
//! Attention uses the GEMM-based f32 path of `math` (heads in parallel). Paged decode runs one task
//! per (request, KV head): like the CUDA kernel, a task serves the whole GQA group so each K/V block is
//! converted from f16 once, and it walks the block table with an online softmax, so nothing is gathered
//! into a contiguous copy.

use half::f16;
use half::slice::HalfFloatSliceExt;
use ndarray::Array3;
use rayon::prelude::*;

use super::{AttnInput, Backend, BackendError, BackendKind, PagedDecodeInput};
use crate::cache::{PagedShape, StaticShape};
use crate::math::{AttnCore, Real, attention_core, attention_fused, exp_f32};

/// The CPU backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend on the global rayon pool.
    pub fn new() -> Self {
        Self
    }
}

/// Dot product written so that LLVM vectorises it (eight independent partial sums).
#[inline]
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

/// Decode attention for one (request, KV head): the `group` query heads `q` (`[group, hd]`, already
/// scaled by 1/√hd) over `len` tokens reached through `table`. Writes `[group, hd]` into `out`.
///
/// Block by block: convert the block's K and V rows from f16 once, score them against every query
/// of the group, update the running max and sum (online softmax), and accumulate P·V.
#[allow(clippy::too_many_arguments)]
fn decode_group(
    s: PagedShape,
    kvh: usize,
    q: &[f32],
    k_pool: &[f16],
    v_pool: &[f16],
    table: &[i32],
    len: usize,
    out: &mut [f32],
) {
    let (hd, bs) = (s.head_dim, s.block_size);
    let group = q.len() / hd;
    let mut kbuf = vec![0f32; bs * hd];
    let mut vbuf = vec![0f32; bs * hd];
    let mut p = vec![0f32; group * bs];
    let mut m = vec![f32::NEG_INFINITY; group];
    let mut l = vec![0f32; group];
    out.fill(0.0);
    let nblocks = len.div_ceil(bs);
    let mut touched = 0u16;
    for (logical, &phys) in table.iter().enumerate().take(nblocks) {
        let ntok = bs.min(len - logical * bs);
        // Within one (block, KV head) the block's tokens are contiguous: [block_size, hd].
        let base = s.index(phys as usize, kvh, 0, 0);
        // Blocks are scattered, so the hardware prefetcher cannot guess the next one: touch one value
        // per cache line of the next block now, so its misses overlap with this block's work.
        if logical + 1 < nblocks {
            let next = s.index(table[logical + 1] as usize, kvh, 0, 0);
            let n = bs.min(len - (logical + 1) * bs) * hd;
            for i in (0..n).step_by(32) {
                touched ^= k_pool[next + i].to_bits() ^ v_pool[next + i].to_bits();
            }
        }
        k_pool[base..base + ntok * hd].convert_to_f32_slice(&mut kbuf[..ntok * hd]);
        v_pool[base..base + ntok * hd].convert_to_f32_slice(&mut vbuf[..ntok * hd]);
        for g in 0..group {
            let qg = &q[g * hd..(g + 1) * hd];
            let pg = &mut p[g * bs..g * bs + ntok];
            let mut bmax = f32::NEG_INFINITY;
            for (t, sc) in pg.iter_mut().enumerate() {
                *sc = dot(qg, &kbuf[t * hd..(t + 1) * hd]);
                bmax = bmax.max(*sc);
            }
            let m_new = m[g].max(bmax);
            let corr = exp_f32(m[g] - m_new); // 0 on the first block (m = −∞)
            l[g] = l[g] * corr + <f32 as Real>::exp_shifted_sum(pg, m_new);
            m[g] = m_new;
            if corr != 1.0 {
                out[g * hd..(g + 1) * hd].iter_mut().for_each(|a| *a *= corr);
            }
        }
        for t in 0..ntok {
            let vt = &vbuf[t * hd..(t + 1) * hd];
            for g in 0..group {
                let pt = p[g * bs + t];
                for (a, vv) in out[g * hd..(g + 1) * hd].iter_mut().zip(vt) {
                    *a += pt * vv;
                }
            }
        }
    }
    std::hint::black_box(touched);
    for g in 0..group {
        let inv = if l[g] > 0.0 { 1.0 / l[g] } else { 0.0 };
        out[g * hd..(g + 1) * hd].iter_mut().for_each(|a| *a *= inv);
    }
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        format!("CPU, {} threads", rayon::current_num_threads())
    }

    fn run_attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError> {
        Ok(attention_core(inp.q, inp.k, inp.v, inp.mask))
    }

    fn run_attention_fused(&self, inp: &AttnInput) -> Result<Array3<f32>, BackendError> {
        Ok(attention_fused(inp.q, inp.k, inp.v, inp.mask))
    }

    fn run_static_cache_append(
        &self,
        s: StaticShape,
        k_cache: &mut [f16],
        v_cache: &mut [f16],
        layer: usize,
        pos: usize,
        k_new: &[f32],
        v_new: &[f32],
    ) -> Result<(), BackendError> {
        for bh in 0..s.batch * s.kv_heads {
            let (b, h) = (bh / s.kv_heads, bh % s.kv_heads);
            let dst = s.index(layer, b, h, pos, 0);
            let src = bh * s.head_dim;
            k_cache[dst..dst + s.head_dim].convert_from_f32_slice(&k_new[src..src + s.head_dim]);
            v_cache[dst..dst + s.head_dim].convert_from_f32_slice(&v_new[src..src + s.head_dim]);
        }
        Ok(())
    }

    fn run_paged_append(
        &self,
        s: PagedShape,
        k_pool: &mut [f16],
        v_pool: &mut [f16],
        slot_mapping: &[i32],
        k: &[f32],
        v: &[f32],
    ) -> Result<(), BackendError> {
        let row = s.kv_heads * s.head_dim;
        for (t, &slot) in slot_mapping.iter().enumerate() {
            if slot < 0 {
                continue;
            }
            let (block, off) = (slot as usize / s.block_size, slot as usize % s.block_size);
            for h in 0..s.kv_heads {
                let dst = s.index(block, h, off, 0);
                let src = t * row + h * s.head_dim;
                k_pool[dst..dst + s.head_dim].convert_from_f32_slice(&k[src..src + s.head_dim]);
                v_pool[dst..dst + s.head_dim].convert_from_f32_slice(&v[src..src + s.head_dim]);
            }
        }
        Ok(())
    }

    fn run_paged_decode(&self, inp: &PagedDecodeInput) -> Result<Vec<f32>, BackendError> {
        let s = inp.shape;
        let (h, hd, kvh) = (inp.n_heads, s.head_dim, s.kv_heads);
        let group = h / kvh;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut out = vec![0f32; inp.requests() * h * hd];
        // [R, H, hd] splits into R·KVH contiguous chunks of [group, hd], one per task.
        out.par_chunks_mut(group * hd).enumerate().for_each(|(task, o)| {
            let (r, kv) = (task / kvh, task % kvh);
            let q: Vec<f32> = inp.q[(r * h + kv * group) * hd..][..group * hd]
                .iter()
                .map(|x| x * scale)
                .collect();
            let table = &inp.block_tables[r * inp.max_blocks..(r + 1) * inp.max_blocks];
            decode_group(
                s,
                kv,
                &q,
                inp.k_pool,
                inp.v_pool,
                table,
                inp.context_lens[r] as usize,
                o,
            );
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_tails() {
        let a: Vec<f32> = (0..13).map(|i| i as f32).collect();
        assert_eq!(dot(&a, &a), (0..13).map(|i| (i * i) as f32).sum::<f32>());
        assert_eq!(dot(&[], &[]), 0.0);
    }
}
