//! The CPU backend: f32 math on the rayon pool (both cores).
//!
//! Attention uses the GEMM-based f32 path of `math` (heads in parallel). Paged decode runs one task
//! per (request, run of KV heads): like the CUDA kernel, it serves the whole GQA group from one read of
//! each K/V row (f16, converted in registers), and it walks the block table with an online softmax, so
//! nothing is gathered into a contiguous copy.

use half::f16;
use half::slice::HalfFloatSliceExt;
use ndarray::Array3;
use rayon::prelude::*;

use super::{AttnInput, Backend, BackendError, BackendKind, PagedAppendInput, PagedDecodeInput, StaticAppendInput};
use crate::cache::PagedShape;
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

/// The CPU backend's row of the backend table: always ready.
pub fn probe() -> Result<std::sync::Arc<dyn Backend>, String> {
    Ok(std::sync::Arc::new(CpuBackend))
}

/// Eight f16 values as f32 (one `vcvtph2ps` with F16C).
#[inline(always)]
fn f32x8(h: &[f16]) -> [f32; 8] {
    let mut out = [0f32; 8];
    h[..8].convert_to_f32_slice(&mut out);
    out
}

/// `scores[t] = q · k[t]` for the `k.len() / hd` rows of `k`, read straight from the f16 pool and
/// converted 8 values at a time in registers (`vcvtph2ps`), so pool loads interleave with the FMAs
/// instead of stalling a separate conversion pass. Four tokens are scored together: each 8-wide
/// slice of `q` is loaded once for four FMAs, and the four accumulators are independent chains.
fn scores_block_f16(q: &[f32], k: &[f16], scores: &mut [f32]) {
    let hd = q.len();
    let ntok = scores.len();
    let mut t0 = 0;
    if hd.is_multiple_of(8) {
        while t0 + 4 <= ntok {
            let mut acc = [[0f32; 8]; 4];
            for c in (0..hd).step_by(8) {
                let qv: &[f32; 8] = q[c..c + 8].try_into().expect("8 lanes");
                for (tt, a) in acc.iter_mut().enumerate() {
                    let kv = f32x8(&k[(t0 + tt) * hd + c..]);
                    for l in 0..8 {
                        a[l] = qv[l].mul_add(kv[l], a[l]);
                    }
                }
            }
            for (tt, a) in acc.iter().enumerate() {
                scores[t0 + tt] = a.iter().sum();
            }
            t0 += 4;
        }
    }
    for t in t0..ntok {
        scores[t] = k[t * hd..(t + 1) * hd].iter().zip(q).map(|(a, b)| a.to_f32() * b).sum();
    }
}

/// `out += Σ_t p[t] · v[t]` over `W` lanes starting at `c`, with `W/8` independent accumulator
/// registers (enough chains to keep the FMA units busy while V loads arrive).
#[inline(always)]
fn pv_lanes<const W: usize>(p: &[f32], v: &[f16], out: &mut [f32], c: usize) {
    let hd = out.len();
    let mut acc: [f32; W] = out[c..c + W].try_into().expect("W lanes");
    for (t, &pt) in p.iter().enumerate() {
        for j in 0..W / 8 {
            let vv = f32x8(&v[t * hd + c + 8 * j..]);
            for l in 0..8 {
                acc[8 * j + l] = pt.mul_add(vv[l], acc[8 * j + l]);
            }
        }
    }
    out[c..c + W].copy_from_slice(&acc);
}

/// `out += Σ_t p[t] · v[t]`, V read straight from the f16 pool.
fn accumulate_pv_f16(p: &[f32], v: &[f16], out: &mut [f32]) {
    let hd = out.len();
    if hd.is_multiple_of(64) {
        for c in (0..hd).step_by(64) {
            pv_lanes::<64>(p, v, out, c);
        }
    } else if hd.is_multiple_of(32) {
        for c in (0..hd).step_by(32) {
            pv_lanes::<32>(p, v, out, c);
        }
    } else {
        for (t, &pt) in p.iter().enumerate() {
            for (a, vv) in out.iter_mut().zip(&v[t * hd..(t + 1) * hd]) {
                *a += pt * vv.to_f32();
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
/// one 4 KB page per (block, head). For each (block, head): score its K rows against every query of
/// the GQA group, update the running max and sum, and accumulate P·V, converting f16 in registers.
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
    let mut p = vec![0f32; group * bs];
    out.fill(0.0);
    for (logical, &phys) in table.iter().enumerate().take(len.div_ceil(bs)) {
        let ntok = bs.min(len - logical * bs);
        for (i, st) in states.iter_mut().enumerate() {
            // Within one (block, KV head) the block's tokens are contiguous: [block_size, hd].
            let base = s.index(phys as usize, kv0 + i, 0, 0);
            let (kh, vh) = (&k_pool[base..base + ntok * hd], &v_pool[base..base + ntok * hd]);
            let acc = &mut out[i * group * hd..(i + 1) * group * hd];
            for g in 0..group {
                let pg = &mut p[g * bs..g * bs + ntok];
                scores_block_f16(&st.q[g * hd..(g + 1) * hd], kh, pg);
                let bmax = pg.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let m_new = st.m[g].max(bmax);
                let corr = exp_f32(st.m[g] - m_new); // 0 on the first block (m = −∞)
                st.l[g] = st.l[g] * corr + <f32 as Real>::exp_shifted_sum(pg, m_new);
                st.m[g] = m_new;
                let ag = &mut acc[g * hd..(g + 1) * hd];
                if corr != 1.0 {
                    ag.iter_mut().for_each(|a| *a *= corr);
                }
                accumulate_pv_f16(pg, vh, ag);
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

    fn run_static_cache_append(&self, inp: StaticAppendInput) -> Result<(), BackendError> {
        let StaticAppendInput {
            shape: s,
            k_cache,
            v_cache,
            layer,
            pos,
            k_new,
            v_new,
        } = inp;
        for bh in 0..s.batch * s.kv_heads {
            let (b, h) = (bh / s.kv_heads, bh % s.kv_heads);
            let dst = s.index(layer, b, h, pos, 0);
            let src = bh * s.head_dim;
            k_cache[dst..dst + s.head_dim].convert_from_f32_slice(&k_new[src..src + s.head_dim]);
            v_cache[dst..dst + s.head_dim].convert_from_f32_slice(&v_new[src..src + s.head_dim]);
        }
        Ok(())
    }

    fn run_paged_append(&self, inp: PagedAppendInput) -> Result<(), BackendError> {
        let PagedAppendInput {
            shape: s,
            k_pool,
            v_pool,
            slot_mapping,
            k,
            v,
        } = inp;
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
    fn f16_block_kernels_match_plain_loops_for_every_shape() {
        let mut rng = crate::math::Rng::new(11);
        for hd in [1, 7, 8, 13, 32, 64, 96, 128] {
            for ntok in [1, 3, 4, 5, 16] {
                let q = rng.normal_vec(hd, 1.0);
                let kv: Vec<f16> = rng.normal_vec(ntok * hd, 1.0).into_iter().map(f16::from_f32).collect();
                let mut got = vec![0f32; ntok];
                scores_block_f16(&q, &kv, &mut got);
                for (t, g) in got.iter().enumerate() {
                    let want: f32 = (0..hd).map(|d| q[d] * kv[t * hd + d].to_f32()).sum();
                    assert!((g - want).abs() < 1e-4, "scores hd{hd} ntok{ntok}");
                }
                let p = rng.normal_vec(ntok, 1.0);
                let mut out = rng.normal_vec(hd, 1.0);
                let start = out.clone();
                accumulate_pv_f16(&p, &kv, &mut out);
                for d in 0..hd {
                    let want = start[d] + (0..ntok).map(|t| p[t] * kv[t * hd + d].to_f32()).sum::<f32>();
                    assert!((out[d] - want).abs() < 1e-4, "pv hd{hd} ntok{ntok}");
                }
            }
        }
    }
}
