//! Lesson 5, the paged KV cache (kind `paged`, vLLM's PagedAttention): the lesson file's scripted
//! requests replayed on a real [`crate::cache::PagedKvCache`] by the [`Scheduler`] (admit, decode,
//! preempt the newest on OOM, finish). Every token's K/V is written through the backend's paged-append
//! kernel at the slot the block table gives, and after every step paged decode of the running requests
//! is checked against contiguous attention over the same tokens. The timeline has one frame per
//! scheduler step.

mod view;
mod view_stats;

use std::collections::BTreeMap;

use half::f16;

use super::{LessonKind, Output, Params, get};
use crate::cache::{PagedShape, PagedStats, RequestId, RequestSpec, Scheduler, StepEvents};
use crate::compute::cuda::launch::{self, LaunchDims};
use crate::compute::suite::paged_equals_contiguous;
use crate::compute::{Backend, CheckReport, Op, PagedAppendInput, PagedDecodeInput};
use crate::export::{ArrayData, NamedArray};
use crate::lesson::Lesson;
use crate::math::Rng;
use crate::render::blocks::BlockGridData;

crate::views! {
    /// The views of lesson 5.
    pub enum View {
        /// The physical block pool, coloured by owner.
        Pool = "pool",
        /// The block tables: logical block → physical block.
        Tables = "tables",
        /// The allocator's free list.
        FreeList = "free_list",
        /// Tokens stored, slots allocated, the static reservation and the pool, as bars.
        Occupancy = "occupancy",
        /// What the scheduler did this step.
        Events = "events",
        /// Paged decode checked against contiguous attention.
        Check = "check",
        /// Block size against waste and table length.
        Tradeoff = "tradeoff",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 5.
pub struct PagedCache;

impl LessonKind for PagedCache {
    fn name(&self) -> &'static str {
        "paged"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn ops(&self) -> &'static [Op] {
        &[Op::PagedAppend, Op::PagedDecode]
    }

    fn compute(&self, lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        Ok(Box::new(paged(lesson, p, backend)?))
    }
}

/// Lesson 5: the scenario replayed on the paged cache.
pub struct PagedOut {
    /// The pool.
    pub shape: PagedShape,
    /// The static reservation compared against.
    pub max_seq_len: usize,
    /// The requests.
    pub specs: Vec<RequestSpec>,
    /// Why the scenario cannot run, if it cannot.
    pub error: Option<String>,
    /// One frame per scheduler step.
    pub frames: Vec<PagedFrame>,
}

/// The state after one scheduler step.
pub struct PagedFrame {
    /// What happened.
    pub events: StepEvents,
    /// The pool for the block-grid renderer.
    pub grid: BlockGridData,
    /// Block tables.
    pub tables: BTreeMap<RequestId, Vec<u32>>,
    /// Tokens per request.
    pub lens: BTreeMap<RequestId, usize>,
    /// The free list (the allocator pops from its end).
    pub free: Vec<u32>,
    /// Accounting.
    pub stats: PagedStats,
    /// Running and waiting requests.
    pub running: Vec<RequestId>,
    /// Waiting.
    pub waiting: Vec<RequestId>,
    /// The (request, pos) the highlighted write went to.
    pub write: Option<(RequestId, usize)>,
    /// Paged decode of every running request checked against contiguous attention.
    pub check: Option<CheckReport>,
    /// K/V bytes the decode read through the block tables.
    pub decode_bytes: usize,
    /// The allocator invariants after this step.
    pub invariants: Result<(), String>,
}

/// The K/V values of token `pos` of `req` (the same every time, so a preempted request's recompute
/// writes what it wrote before).
fn token_kv(seed: u64, req: RequestId, pos: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::stream(seed, 1_000_000 + ((req as u64) << 20) + pos as u64);
    (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0))
}

/// Heads and head_dim of lesson 5's small pool.
pub const PAGED_KV_HEADS: usize = 2;
/// Query heads of lesson 5's decode (GQA group of 2).
pub const PAGED_HEADS: usize = 4;
/// Head dim of lesson 5's pool.
pub const PAGED_HEAD_DIM: usize = 8;

/// The lesson's scripted requests, the first `requests` of them.
pub fn scenario(lesson: &Lesson, p: &Params) -> Vec<RequestSpec> {
    let n = get(p, "requests", lesson.file.requests.len() as i64).max(0) as usize;
    lesson
        .file
        .requests
        .iter()
        .take(n)
        .map(|r| {
            let r = r.get_ref();
            RequestSpec {
                arrive: r.arrive as usize,
                prompt: r.prompt as usize,
                generate: r.generate as usize,
            }
        })
        .collect()
}

/// Most scheduler steps one replay runs.
pub const MAX_STEPS: usize = 4096;

fn paged(lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<PagedOut, String> {
    let shape = PagedShape {
        num_blocks: get(p, "num_blocks", 16).clamp(1, 8192) as usize,
        block_size: get(p, "block_size", 4).clamp(1, 1024) as usize,
        kv_heads: PAGED_KV_HEADS,
        head_dim: PAGED_HEAD_DIM,
    };
    let max_seq_len = get(p, "max_seq_len", 32).max(1) as usize;
    let seed = get(p, "seed", 0).max(0) as u64;
    let specs = scenario(lesson, p);
    let mut out = PagedOut {
        shape,
        max_seq_len,
        specs: specs.clone(),
        error: None,
        frames: Vec::new(),
    };
    let mut sched = match Scheduler::new(shape, specs) {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e.to_string());
            return Ok(out);
        }
    };
    let mut k_pool = vec![f16::ZERO; shape.numel()];
    let mut v_pool = vec![f16::ZERO; shape.numel()];
    let per_token = shape.kv_heads * shape.head_dim;
    let err = |e: crate::compute::BackendError| e.to_string();
    while !sched.is_done() && out.frames.len() < MAX_STEPS {
        let ev = sched.step();
        let cache = sched.cache();
        // Write the K/V of every token stored this step through the paged-append kernel.
        let mut writes: Vec<(RequestId, usize)> = Vec::new();
        for &(r, n) in &ev.admitted {
            writes.extend((0..n).map(|pos| (r, pos)));
        }
        writes.extend(ev.decoded.iter().copied());
        let live: Vec<(RequestId, usize)> = writes
            .into_iter()
            .filter(|&(r, pos)| cache.slot(r, pos).is_some())
            .collect();
        if !live.is_empty() {
            let slots: Vec<i32> = live
                .iter()
                .map(|&(r, pos)| cache.slot(r, pos).map_or(-1, |s| s as i32))
                .collect();
            let mut k = Vec::with_capacity(live.len() * per_token);
            let mut v = Vec::with_capacity(live.len() * per_token);
            for &(r, pos) in &live {
                let (kk, vv) = token_kv(seed, r, pos, per_token);
                k.extend(kk);
                v.extend(vv);
            }
            backend
                .paged_append(PagedAppendInput {
                    shape,
                    k_pool: &mut k_pool,
                    v_pool: &mut v_pool,
                    slot_mapping: &slots,
                    k: &k,
                    v: &v,
                })
                .map_err(err)?;
        }
        let running: Vec<RequestId> = sched.running().into_iter().filter(|&r| cache.len(r) > 0).collect();
        let (check_report, decode_bytes) = if running.is_empty() {
            (None, 0)
        } else {
            let (tables, max_blocks, lens) = cache.block_table_matrix(&running);
            let q =
                Rng::stream(seed, 77 + ev.step as u64).normal_vec(running.len() * PAGED_HEADS * shape.head_dim, 1.0);
            let inp = PagedDecodeInput {
                q: &q,
                n_heads: PAGED_HEADS,
                shape,
                k_pool: &k_pool,
                v_pool: &v_pool,
                block_tables: &tables,
                max_blocks,
                context_lens: &lens,
            };
            (
                Some(paged_equals_contiguous(backend, &inp).map_err(err)?),
                inp.kv_bytes(),
            )
        };
        let write = ev
            .decoded
            .first()
            .copied()
            .or_else(|| ev.admitted.first().map(|&(r, n)| (r, n.saturating_sub(1))));
        let written = write.and_then(|(r, pos)| {
            let b = *cache.table(r)?.get(pos / shape.block_size)?;
            Some((b as usize, pos % shape.block_size))
        });
        out.frames.push(PagedFrame {
            grid: BlockGridData::from_cache(cache, written),
            tables: cache.tables().clone(),
            lens: cache.tables().keys().map(|&r| (r, cache.len(r))).collect(),
            free: cache.allocator().free_list().to_vec(),
            stats: cache.stats(max_seq_len),
            running: sched.running(),
            waiting: sched.waiting(),
            write: write.filter(|&(r, _)| cache.table(r).is_some()),
            check: check_report,
            decode_bytes,
            invariants: cache.check_invariants(),
            events: ev,
        });
    }
    if !sched.is_done() {
        out.error = Some(format!("the scenario did not finish within {MAX_STEPS} steps"));
    }
    Ok(out)
}

impl Output for PagedOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.frames.iter().filter_map(|f| f.check.as_ref()).collect()
    }

    fn has_nan(&self) -> bool {
        self.frames
            .iter()
            .any(|f| f.check.as_ref().is_some_and(|c| c.max_abs.is_nan()))
    }

    fn launches(&self, op: Op) -> Vec<LaunchDims> {
        match op {
            Op::PagedAppend => vec![launch::paged_append(1)],
            Op::PagedDecode => {
                let longest = self.specs.iter().map(|s| s.prompt + s.generate).max().unwrap_or(1);
                let reqs = self.specs.len().max(1);
                vec![
                    launch::paged_decode(self.shape.kv_heads, reqs, launch::num_partitions(longest)),
                    launch::paged_reduce(PAGED_HEADS, reqs),
                ]
            }
            _ => Vec::new(),
        }
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let Some(fr) = self.frames.get(cursor.min(self.frames.len().saturating_sub(1))) else {
            return (Vec::new(), Vec::new());
        };
        let reqs: Vec<u32> = fr.tables.keys().copied().collect();
        let maxb = fr.tables.values().map(|t| t.len()).max().unwrap_or(0).max(1);
        let mut tab = vec![-1i32; reqs.len() * maxb];
        for (r, t) in fr.tables.values().enumerate() {
            for (j, &b) in t.iter().enumerate() {
                tab[r * maxb + j] = b as i32;
            }
        }
        let v = vec![
            NamedArray::new("block_tables", &[reqs.len(), maxb], ArrayData::I32(tab)),
            NamedArray::new(
                "context_lens",
                &[reqs.len()],
                ArrayData::I32(fr.lens.values().map(|&x| x as i32).collect()),
            ),
            NamedArray::new(
                "block_owner",
                &[fr.grid.owners.len()],
                ArrayData::I32(fr.grid.owners.clone()),
            ),
            NamedArray::new(
                "free_list",
                &[fr.free.len()],
                ArrayData::I32(fr.free.iter().map(|&x| x as i32).collect()),
            ),
        ];
        (v, fr.check.iter().cloned().collect())
    }

    fn frames(&self) -> usize {
        self.frames.len()
    }
}
