//! Paged decode on the CPU backend: one task per (request, run of KV heads). Like the CUDA kernel, it
//! serves the whole GQA group from one read of each K/V row (f16, converted in registers), and it walks
//! the block table with an online softmax, reading blocks in place (only blocks under 16 tokens have
//! their V rows gathered into a run).

use half::f16;
use rayon::prelude::*;

use crate::cache::{PagedShape, PoolRef};
use crate::compute::{BackendError, CpuBackend, PagedDecodeInput, Valid};
use crate::simd;

/// How far ahead of its reads the decode prefetches, in K+V bytes: the block tables scatter blocks over
/// the pool, hardware prefetchers stop at 4 KiB pages, and one unit ahead (8 KiB) was too close to hide
/// DRAM latency (measured on a 2-core EPYC: 12.2 GB/s at one unit, 17–19 GB/s at 64 KiB, no better at 128).
const PREFETCH_BYTES: usize = 64 << 10;

/// Blocks smaller than this many tokens are attended in runs of this many (K scored in place as a row
/// list, V gathered into one buffer).
const MIN_RUN: usize = 16;

/// Larger blocks are attended this many tokens at a time (several blocks per call when they are
/// smaller), read in place: one online-softmax update per run, and the P·V accumulators stay in
/// registers across the run's blocks.
const RUN_TOKENS: usize = 64;

/// Decode attention for one request over the KV heads `kv0..kv0 + heads`: `q` holds those heads'
/// query groups (`[heads·group, hd]`, already scaled by 1/√hd) and `out` receives `[heads·group, hd]`.
///
/// The pool layout `[block, kv_head, slot, hd]` puts every KV head of one physical block side by side,
/// so walking the block table a run of blocks at a time and, inside each run, the KV heads in order
/// reads every byte of the run's blocks while they are in cache. For each (run, head): score its K rows
/// against every query of the GQA group, update the running max and sum once, and accumulate P·V,
/// converting f16 in registers; software prefetch runs PREFETCH_BYTES ahead along that order.
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
    let mut groups = Groups::new(q, hd, heads, out);
    let nblocks = len.div_ceil(bs);
    // One (run of blocks, KV head i) step of the head's query group.
    let mut attend = |i: usize, k: &[&[f16]], v: &[&[f16]], next: simd::Next| {
        let (mut st, scratch) = groups.state(i);
        simd::attend_blocks(&mut st, k, v, hd, next, scratch);
    };
    if bs < MIN_RUN {
        // Small blocks: MIN_RUN tokens of one KV head from consecutive blocks per step, so the online
        // softmax rescales once per run instead of once per block. K is scored in place (the score
        // tiles take a list of rows, so a tile spans blocks); V is gathered into an L1-resident run
        // first (as a GPU kernel stages tiles in shared memory), since P·V re-reads each row once per
        // 16 lanes and the rows of scattered one-token blocks can alias in L1. The blocks
        // PREFETCH_BYTES ahead are prefetched.
        let per_run = MIN_RUN.div_ceil(bs);
        let block_bytes = heads * 2 * bs * hd * std::mem::size_of::<f16>();
        let ahead = PREFETCH_BYTES.div_ceil(block_bytes);
        let (mut krows, mut vbuf) = (Vec::with_capacity(MIN_RUN), Vec::with_capacity(MIN_RUN * hd));
        for run in (0..nblocks).step_by(per_run) {
            let run = run..(run + per_run).min(nblocks);
            for i in 0..heads {
                krows.clear();
                vbuf.clear();
                for lb in run.clone() {
                    let ntok = bs.min(len - lb * bs);
                    let base = s.index(table[lb] as usize, kv0 + i, 0, 0);
                    krows.push(&k_pool[base..base + ntok * hd]);
                    vbuf.extend_from_slice(&v_pool[base..base + ntok * hd]);
                    if let Some(&far) = table.get(lb + ahead).filter(|_| lb + ahead < nblocks) {
                        let fb = s.index(far as usize, kv0 + i, 0, 0);
                        simd::prefetch(&k_pool[fb..fb + bs * hd]);
                        simd::prefetch(&v_pool[fb..fb + bs * hd]);
                    }
                }
                attend(i, &krows, &[&vbuf], simd::Next::default());
            }
        }
    } else {
        // Runs of RUN_TOKENS / bs consecutive logical blocks; for each run, every KV head in order, each
        // (run, head) unit one call: its blocks' rows in place (within one block and head the tokens are
        // contiguous, `[block_size, hd]`), one softmax update for the run. `ks`/`vs` list the units'
        // blocks back to back; each unit prefetches the one PREFETCH_BYTES ahead.
        let per_run = (RUN_TOKENS / bs).max(1);
        let (mut ks, mut vs, mut units) = (Vec::new(), Vec::new(), Vec::new());
        for run in (0..nblocks).step_by(per_run) {
            let run = run..(run + per_run).min(nblocks);
            for i in 0..heads {
                let first = ks.len();
                let mut bytes = 0;
                for lb in run.clone() {
                    let ntok = bs.min(len - lb * bs);
                    let base = s.index(table[lb] as usize, kv0 + i, 0, 0);
                    ks.push(&k_pool[base..base + ntok * hd]);
                    vs.push(&v_pool[base..base + ntok * hd]);
                    bytes += 2 * ntok * hd * std::mem::size_of::<f16>();
                }
                units.push((i, first..ks.len(), bytes));
            }
        }
        let (mut ahead, mut gap) = (0, 0);
        for (i, blocks, bytes) in &units {
            // `gap`: the K+V bytes from this unit to unit `ahead`, which this one prefetches.
            while ahead < units.len() && gap < PREFETCH_BYTES {
                gap += units[ahead].2;
                ahead += 1;
            }
            let next = units.get(ahead).map_or(simd::Next::default(), |(_, r, _)| simd::Next {
                k: &ks[r.clone()],
                v: &vs[r.clone()],
            });
            gap -= bytes;
            attend(*i, &ks[blocks.clone()], &vs[blocks.clone()], next);
        }
    }
    groups.finish();
}

/// The online-softmax state of one request's query groups over `heads` KV heads: queries `[heads·group,
/// hd]`, running max and sum per query, and the output rows `out` accumulate into.
struct Groups<'a> {
    q: &'a [f32],
    hd: usize,
    group: usize,
    m: Vec<f32>,
    l: Vec<f32>,
    out: &'a mut [f32],
    scratch: simd::Scratch,
}

impl<'a> Groups<'a> {
    fn new(q: &'a [f32], hd: usize, heads: usize, out: &'a mut [f32]) -> Self {
        let group = q.len() / hd / heads;
        out.fill(0.0);
        Self {
            q,
            hd,
            group,
            m: vec![f32::NEG_INFINITY; heads * group],
            l: vec![0f32; heads * group],
            out,
            scratch: simd::Scratch::default(),
        }
    }

    /// KV head `i`'s query group, and the scratch its step may use.
    fn state(&mut self, i: usize) -> (simd::GroupState<'_>, &mut simd::Scratch) {
        let (hd, rows) = (self.hd, i * self.group..(i + 1) * self.group);
        let st = simd::GroupState {
            q: &self.q[rows.start * hd..rows.end * hd],
            m: &mut self.m[rows.clone()],
            l: &mut self.l[rows.clone()],
            acc: &mut self.out[rows.start * hd..rows.end * hd],
        };
        (st, &mut self.scratch)
    }

    /// Divide each query's accumulated output by its softmax sum.
    fn finish(self) {
        let hd = self.hd;
        for (row, &sum) in self.l.iter().enumerate() {
            let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
            self.out[row * hd..(row + 1) * hd].iter_mut().for_each(|a| *a *= inv);
        }
    }
}

/// [`decode_request`] for 8-bit pools (INT8 per token, FP8): each run of RUN_TOKENS tokens of a KV head has
/// its codes converted exactly to f16 (`simd::codes_to_f16`: INT8 as integers, E5M2 as the high byte, E4M3
/// as its value / 256), and the f16 SIMD step attends them with each token's K scale applied to its score
/// and its V scale to its weight (`simd::Scratch::set_token_scales`), the codes read once from memory at
/// one byte a value.
#[allow(clippy::too_many_arguments)]
fn decode_request_q8(
    s: PagedShape,
    quant: crate::cache::dtype::quant::Quant,
    kv0: usize,
    q: &[f32],
    k_pool: PoolRef,
    v_pool: PoolRef,
    table: &[i32],
    len: usize,
    out: &mut [f32],
    heads: usize,
) {
    use crate::cache::dtype::quant::Quant;
    let (hd, bs) = (s.head_dim, s.block_size);
    let (codes, factor) = match quant {
        Quant::Int8Token => (simd::Codes::Int8, 1.0),
        Quant::Fp8(f) if f.ieee => (simd::Codes::E5m2, 1.0),
        Quant::Fp8(_) => (simd::Codes::E4m3, 256.0),
    };
    let mut groups = Groups::new(q, hd, heads, out);
    let nblocks = len.div_ceil(bs);
    let per_run = (RUN_TOKENS / bs).max(1);
    let (mut kh, mut vh) = (Vec::<f16>::new(), Vec::<f16>::new());
    let (mut ksc, mut vsc) = (Vec::new(), Vec::new());
    for i in 0..heads {
        for run in (0..nblocks).step_by(per_run) {
            let last = (run + per_run).min(nblocks);
            let ntok: usize = (run..last).map(|lb| bs.min(len - lb * bs)).sum();
            kh.resize(ntok * hd, f16::ZERO);
            vh.resize(ntok * hd, f16::ZERO);
            ksc.clear();
            vsc.clear();
            // The next run's blocks of this KV head, toward the core while this run converts and attends
            // (block tables scatter blocks; hardware prefetchers stop at 4 KiB pages).
            for &b in table.iter().take((last + per_run).min(nblocks)).skip(last) {
                let start = s.index(b as usize, kv0 + i, 0, 0);
                for p in [k_pool.bytes, v_pool.bytes] {
                    if let Ok(h) = bytemuck::try_cast_slice::<u8, f16>(&p[start..start + bs * hd]) {
                        simd::prefetch(h);
                    }
                }
            }
            let mut at = 0;
            for (lb, &b) in table.iter().enumerate().take(last).skip(run) {
                let (b, n) = (b as usize, bs.min(len - lb * bs));
                // A block's rows of one KV head are contiguous: n·hd codes.
                let start = s.index(b, kv0 + i, 0, 0);
                simd::codes_to_f16(
                    codes,
                    &k_pool.bytes[start..start + n * hd],
                    &mut kh[at * hd..(at + n) * hd],
                );
                simd::codes_to_f16(
                    codes,
                    &v_pool.bytes[start..start + n * hd],
                    &mut vh[at * hd..(at + n) * hd],
                );
                for o in 0..n {
                    let sc = s.row_scales(b, kv0 + i, o).start;
                    ksc.push(k_pool.scales[sc] * factor);
                    vsc.push(v_pool.scales[sc] * factor);
                }
                at += n;
            }
            let (mut st, scratch) = groups.state(i);
            scratch.set_token_scales(ksc.iter().copied(), vsc.iter().copied());
            simd::attend_blocks(&mut st, &[&kh], &[&vh], hd, simd::Next::default(), scratch);
            scratch.set_token_scales([], []);
        }
    }
    groups.finish();
}

/// [`decode_request`] for pools of any dtype: each run of RUN_TOKENS tokens of a KV head is read into
/// f32 through the dtype's `read` (its rows with their scales), then attended on the portable step.
/// Every dtype without its own SIMD path (all but f16) decodes here.
#[allow(clippy::too_many_arguments)]
fn decode_request_read(
    s: PagedShape,
    kv0: usize,
    q: &[f32],
    k_pool: PoolRef,
    v_pool: PoolRef,
    table: &[i32],
    len: usize,
    out: &mut [f32],
    heads: usize,
) {
    let (hd, bs) = (s.head_dim, s.block_size);
    let mut groups = Groups::new(q, hd, heads, out);
    let nblocks = len.div_ceil(bs);
    let per_run = (RUN_TOKENS / bs).max(1);
    let (mut kf, mut vf) = (Vec::new(), Vec::new());
    for i in 0..heads {
        for run in (0..nblocks).step_by(per_run) {
            let (mut kr, mut vr) = (Vec::new(), Vec::new());
            let last = (run + per_run).min(nblocks);
            for (lb, &b) in table.iter().enumerate().take(last).skip(run) {
                let b = b as usize;
                for o in 0..bs.min(len - lb * bs) {
                    let (start, sc) = (s.index(b, kv0 + i, o, 0), s.row_scales(b, kv0 + i, o));
                    kf.resize(hd, 0.0);
                    vf.resize(hd, 0.0);
                    k_pool.read(start, hd, &k_pool.scales[sc.clone()], &mut kf);
                    v_pool.read(start, hd, &v_pool.scales[sc], &mut vf);
                    kr.extend_from_slice(&kf);
                    vr.extend_from_slice(&vf);
                }
            }
            let (mut st, scratch) = groups.state(i);
            simd::attend_blocks_f32(&mut st, &[&kr], &[&vr], hd, scratch);
        }
    }
    groups.finish();
}

pub(crate) fn run(b: &CpuBackend, inp: Valid<&PagedDecodeInput>) -> Result<Vec<f32>, BackendError> {
    let parts = super::launch::cuda_num_partitions(inp.max_context());
    crate::compute::launch::would_run_cuda(&[
        super::launch::cuda_decode(inp.shape.kv_heads, inp.requests(), parts),
        super::launch::cuda_reduce(inp.n_heads, inp.requests()),
    ]);
    Ok(decode(b, inp))
}

/// The decode itself (shared with `quant_decode`, which reports its own launch).
pub(crate) fn decode(_b: &CpuBackend, inp: Valid<&PagedDecodeInput>) -> Vec<f32> {
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
        let len = inp.context_lens[req] as usize;
        // f16 pools take the SIMD path that converts in registers; any other dtype reads through its format.
        match (inp.k_pool.as_f16(), inp.v_pool.as_f16(), s.dtype.format().quant) {
            (Some(k), Some(v), _) => decode_request(s, kv0, &q, k, v, table, len, o, rows / group),
            (_, _, Some(quant)) => {
                decode_request_q8(s, quant, kv0, &q, inp.k_pool, inp.v_pool, table, len, o, rows / group)
            }
            _ => decode_request_read(s, kv0, &q, inp.k_pool, inp.v_pool, table, len, o, rows / group),
        }
    });
    out
}
