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
            acc[i] = x[i].mul_add(y[i], acc[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `scores[t] = q · k[t]` for the `k.len() / hd` rows of `k`. When hd is a multiple of 8, eight tokens
/// are scored together so each 8-wide slice of `q` is loaded once for eight FMAs (two loads per FMA
/// would otherwise cap the core at half its FMA rate).
fn scores_block(q: &[f32], k: &[f32], scores: &mut [f32]) {
    let hd = q.len();
    let ntok = scores.len();
    let mut t0 = 0;
    if hd.is_multiple_of(8) {
        while t0 + 8 <= ntok {
            let mut acc = [[0f32; 8]; 8];
            for c in (0..hd).step_by(8) {
                let qv: &[f32; 8] = q[c..c + 8].try_into().expect("8 lanes");
                for (tt, a) in acc.iter_mut().enumerate() {
                    let kv: &[f32; 8] = k[(t0 + tt) * hd + c..][..8].try_into().expect("8 lanes");
                    for l in 0..8 {
                        a[l] = qv[l].mul_add(kv[l], a[l]);
                    }
                }
            }
            for (tt, a) in acc.iter().enumerate() {
                scores[t0 + tt] = a.iter().sum();
            }
            t0 += 8;
        }
    }
    for t in t0..ntok {
        scores[t] = dot(q, &k[t * hd..(t + 1) * hd]);
    }
}

/// `out += Σ_t p[t] · v[t]`. When hd is a multiple of 32, a 32-wide slice of `out` stays in registers
/// across all tokens instead of being loaded and stored once per token.
fn accumulate_pv(p: &[f32], v: &[f32], out: &mut [f32]) {
    let hd = out.len();
    if hd.is_multiple_of(32) {
        for c in (0..hd).step_by(32) {
            let mut acc: [f32; 32] = out[c..c + 32].try_into().expect("32 lanes");
            for (t, &pt) in p.iter().enumerate() {
                let vv: &[f32; 32] = v[t * hd + c..][..32].try_into().expect("32 lanes");
                for l in 0..32 {
                    acc[l] = pt.mul_add(vv[l], acc[l]);
                }
            }
            out[c..c + 32].copy_from_slice(&acc);
        }
    } else {
        for (t, &pt) in p.iter().enumerate() {
            for (a, vv) in out.iter_mut().zip(&v[t * hd..(t + 1) * hd]) {
                *a += pt * vv;
            }
        }
    }
}

/// Online-softmax state of one KV head's query group during a decode.
struct GroupState {
    /// Scaled queries `[group, hd]`.
    q: Vec<f32>,
    /// Running max per query.
    m: Vec<f32>,
    /// Running sum of exp(s − m) per query.
    l: Vec<f32>,
}

/// Decode attention for one request over the KV heads `kv0..kv0 + heads`: `q` holds those heads'
/// query groups (`[heads·group, hd]`, already scaled by 1/√hd) and `out` receives `[heads·group, hd]`.
///
/// The pool layout `[block, kv_head, slot, hd]` puts every KV head of one physical block side by side,
/// so walking the block table and, inside each block, the KV heads in order reads one contiguous
/// `heads × block_size × hd` run per block — long enough for the hardware prefetcher — instead of
/// one 4 KB page per (block, head). For each (block, head): convert its K and V rows from f16 once,
/// score them against the whole GQA group, update the running max and sum, accumulate P·V.
#[allow(clippy::too_many_arguments)]
fn decode_request(
    s: PagedShape,
    kv0: usize,
    q: &[f32],
    k_pool: &[f16],
    v_pool: &[f16],
    table: &[i32],
    len: usize,
    out: &mut [f32],
    heads: usize,
) {
    let (hd, bs) = (s.head_dim, s.block_size);
    let group = q.len() / hd / heads;
    let mut states: Vec<GroupState> = (0..heads)
        .map(|i| GroupState {
            q: q[i * group * hd..(i + 1) * group * hd].to_vec(),
            m: vec![f32::NEG_INFINITY; group],
            l: vec![0f32; group],
        })
        .collect();
    let mut kbuf = vec![0f32; bs * hd];
    let mut vbuf = vec![0f32; bs * hd];
    let mut p = vec![0f32; group * bs];
    out.fill(0.0);
    for (logical, &phys) in table.iter().enumerate().take(len.div_ceil(bs)) {
        let ntok = bs.min(len - logical * bs);
        for (i, st) in states.iter_mut().enumerate() {
            // Within one (block, KV head) the block's tokens are contiguous: [block_size, hd].
            let base = s.index(phys as usize, kv0 + i, 0, 0);
            k_pool[base..base + ntok * hd].convert_to_f32_slice(&mut kbuf[..ntok * hd]);
            v_pool[base..base + ntok * hd].convert_to_f32_slice(&mut vbuf[..ntok * hd]);
            let acc = &mut out[i * group * hd..(i + 1) * group * hd];
            for g in 0..group {
                let pg = &mut p[g * bs..g * bs + ntok];
                scores_block(&st.q[g * hd..(g + 1) * hd], &kbuf[..ntok * hd], pg);
                let bmax = pg.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let m_new = st.m[g].max(bmax);
                let corr = exp_f32(st.m[g] - m_new); // 0 on the first block (m = −∞)
                st.l[g] = st.l[g] * corr + <f32 as Real>::exp_shifted_sum(pg, m_new);
                st.m[g] = m_new;
                let ag = &mut acc[g * hd..(g + 1) * hd];
                if corr != 1.0 {
                    ag.iter_mut().for_each(|a| *a *= corr);
                }
                accumulate_pv(pg, &vbuf[..ntok * hd], ag);
            }
        }
    }
    for (i, st) in states.iter().enumerate() {
        for g in 0..group {
            let inv = if st.l[g] > 0.0 { 1.0 / st.l[g] } else { 0.0 };
            out[(i * group + g) * hd..(i * group + g + 1) * hd]
                .iter_mut()
                .for_each(|a| *a *= inv);
        }
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
        let (h, hd, kvh, r) = (inp.n_heads, s.head_dim, s.kv_heads, inp.requests());
        let group = h / kvh;
        let scale = 1.0 / (hd as f32).sqrt();
        // Tasks are (request, run of KV heads): whole requests when there are enough of them to keep
        // every thread busy, otherwise fewer heads per task.
        let want_tasks = 4 * rayon::current_num_threads();
        let tasks_per_req = want_tasks.div_ceil(r.max(1)).clamp(1, kvh);
        let heads_per_task = kvh.div_ceil(tasks_per_req);
        let mut out = vec![0f32; r * h * hd];
        // [R, H, hd]: the query heads of KV heads kv0..kv0+n of request r are contiguous.
        let mut chunks: Vec<(usize, usize, &mut [f32])> = Vec::new();
        for (req, o) in out.chunks_mut(h * hd).enumerate() {
            let mut rest = o;
            for kv0 in (0..kvh).step_by(heads_per_task) {
                let n = heads_per_task.min(kvh - kv0);
                let (head, tail) = rest.split_at_mut(n * group * hd);
                chunks.push((req, kv0, head));
                rest = tail;
            }
        }
        chunks.into_par_iter().for_each(|(req, kv0, o)| {
            let rows = o.len() / hd;
            let q: Vec<f32> = inp.q[(req * h + kv0 * group) * hd..][..rows * hd]
                .iter()
                .map(|x| x * scale)
                .collect();
            let table = &inp.block_tables[req * inp.max_blocks..(req + 1) * inp.max_blocks];
            decode_request(
                s,
                kv0,
                &q,
                inp.k_pool,
                inp.v_pool,
                table,
                inp.context_lens[req] as usize,
                o,
                rows / group,
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
