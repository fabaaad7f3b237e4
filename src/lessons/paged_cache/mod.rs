//! Lesson 5, the paged KV cache (kind `paged`, vLLM's PagedAttention): the lesson file's scripted
//! requests replayed on a real [`crate::cache::PagedKvCache`] by the [`Scheduler`] (admit, decode,
//! preempt the newest on OOM, finish). Every token's K/V is written through the backend's paged-append
//! kernel at the slot the block table gives, and after every step paged decode of the running requests
//! is checked against contiguous attention over the same tokens. The timeline has one frame per
//! scheduler step.

#[cfg(feature = "native")]
pub mod cli;
pub mod out;
pub mod serve;

pub use out::{PagedFrame, PagedOut};

use super::{LessonKind, Output, Params, get};
use crate::cache::{PagedShape, RequestId};
use crate::kv::{KvEngine, Request, Scheduler, StepEvents, WholePrompt};

use crate::compute::{Backend, CheckReport, Kernel};
use crate::figure::BlockGridData;
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::math::Rng;

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
        /// The trained model's requests: prompts and the bytes emitted so far.
        Outputs = "outputs",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 5.
pub struct PagedCache;

impl Schema for PagedCache {
    fn name(&self) -> &'static str {
        "paged"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["block_size", "token_slots", "requests", "max_seq_len", "seed", "model"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        POINTS
    }
}

impl LessonKind for PagedCache {
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::SCHEDULE]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::PagedAppend, Kernel::PagedDecode]
    }

    fn compute(&self, lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        Ok(Box::new(paged(lesson, p, backend)?))
    }
}

/// The K/V values of token `pos` of `req` (the same every time, so a preempted request's recompute
/// writes what it wrote before).
fn token_kv(seed: u64, req: RequestId, pos: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::stream(seed, 1_000_000 + ((req as u64) << 20) + pos as u64);
    (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0))
}

/// The numbers lesson 5's narration may show, all from the replay (unfilled, `…`, when it did not happen).
const PLACEHOLDERS: &[&str] = &[
    "block_size",
    "num_blocks",
    "token_slots",
    "requested_slots",
    "busiest_step",
    "busiest_running",
    "first_wait_step",
    "first_wait",
    "preempt_step",
    "preempted",
    "first_finish_step",
    "first_finished",
    "recompute_step",
    "recomputed",
    "recompute_tokens",
    "recompute_blocks",
    "first_block",
    "recompute_prompt",
    "recompute_generated",
    "served_bytes",
    "served_recomputes",
    "served_agree",
];

/// Named timeline points: the step with the most running requests, the first step where a request
/// could not be admitted, the first preemption, the first finish, and the first recompute.
const POINTS: &[&str] = &["busiest", "first_wait", "preempt", "first_finish", "recompute"];

/// Heads and head_dim of lesson 5's small pool.
pub const PAGED_KV_HEADS: usize = 2;
/// Query heads of lesson 5's decode (GQA group of 2).
pub const PAGED_HEADS: usize = 4;
/// Head dim of lesson 5's pool.
pub const PAGED_HEAD_DIM: usize = 8;

/// The lesson's scripted requests, the first `requests` of them.
pub fn scenario(lesson: &Lesson, p: &Params) -> Vec<Request> {
    let n = get(p, "requests", lesson.file.requests.len() as i64).max(0) as usize;
    lesson
        .file
        .requests
        .iter()
        .take(n)
        .map(|r| {
            let r = r.get_ref();
            Request {
                arrive: r.arrive as usize,
                prompt: r.prompt as usize,
                generate: r.generate as usize,
            }
        })
        .collect()
}

/// Most scheduler steps one replay runs.
pub const MAX_STEPS: usize = 4096;

/// The pool of the sliders: `token_slots` of capacity cut into blocks of `block_size` tokens, so the
/// capacity stays (as nearly as whole blocks allow) the same while the block size changes.
pub fn pool_shape(p: &Params) -> PagedShape {
    let block_size = get(p, "block_size", 4).clamp(1, 1024) as usize;
    let token_slots = get(p, "token_slots", 64).clamp(1, 1 << 20) as usize;
    PagedShape {
        num_blocks: (token_slots / block_size).clamp(1, 8192),
        block_size,
        kv_heads: PAGED_KV_HEADS,
        head_dim: PAGED_HEAD_DIM,
        dtype: crate::cache::KvDtype::F16,
    }
}

fn paged(lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<PagedOut, String> {
    let shape = pool_shape(p);
    let max_seq_len = get(p, "max_seq_len", 32).max(1) as usize;
    let seed = get(p, "seed", 0).max(0) as u64;
    let specs = scenario(lesson, p);
    let mut out = PagedOut {
        shape,
        token_slots: get(p, "token_slots", 64).max(1) as usize,
        max_seq_len,
        specs: specs.clone(),
        error: None,
        frames: Vec::new(),
        served: None,
    };
    // With a model chosen (the file offers the tiny one), it serves the requests: the engine's pools are
    // the model's, one pair per layer, addressed through the same allocator and block tables. With random
    // weights every token gets seeded random K/V in one layer of the lesson's shape.
    let mut server = match crate::model::choice::Choice::from_value(get(p, "model", 0)).model() {
        Some(m) => Some(serve::Server::new(
            m?,
            shape.num_blocks,
            shape.block_size,
            &out.specs,
            seed,
        )),
        None => None,
    };
    let engine = match &server {
        Some(s) => KvEngine::new(s.shape(), s.layers()),
        None => KvEngine::new(shape, 1),
    };
    let mut sched = match Scheduler::with_engine(engine, specs, Box::new(WholePrompt)) {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e.to_string());
            return Ok(out);
        }
    };
    let per_token = shape.kv_heads * shape.head_dim;
    let err = |e: crate::kv::EngineError| e.to_string();
    while !sched.is_done() && out.frames.len() < MAX_STEPS {
        let ev = sched.step();
        let (mut check_report, mut decode_bytes) = (None, 0);
        if let Some(server) = server.as_mut() {
            // The tables after the step, and those of the requests that finished in it: their blocks
            // are free but not reused before the next step, so their last decode can still read them.
            let mut tables = sched.cache().tables().clone();
            tables.extend(ev.finished.iter().map(|(r, b)| (*r, b.clone())));
            server.step(&ev, &tables, sched.engine_mut(), backend)?;
            if let Some(st) = server.last() {
                check_report = st.check.clone();
                decode_bytes = st.decode_bytes;
            }
        } else {
            // Write the K/V of every token stored this step (the prompts admitted, the tokens decoded)
            // through the engine's paged append; a request that finished this step has no slots left.
            let mut writes: Vec<(RequestId, usize)> = Vec::new();
            for &(r, n) in &ev.admitted {
                writes.extend((0..n).map(|pos| (r, pos)));
            }
            writes.extend(ev.decoded.iter().copied());
            sched
                .engine_mut()
                .write_positions(backend, 0, &writes, |r, pos| token_kv(seed, r, pos, per_token))
                .map_err(err)?;
            let engine = sched.engine();
            let running: Vec<RequestId> = sched
                .running()
                .into_iter()
                .filter(|&r| engine.cache().len(r) > 0)
                .collect();
            if !running.is_empty() {
                let tables = engine.tables(&running);
                let q = Rng::stream(seed, 77 + ev.step as u64)
                    .normal_vec(running.len() * PAGED_HEADS * shape.head_dim, 1.0);
                check_report = Some(
                    engine
                        .decode_checked(backend, 0, &tables, &q, PAGED_HEADS)
                        .map_err(err)?
                        .1,
                );
                decode_bytes = engine.decode_bytes(&tables);
            }
        }
        let cache = sched.cache();
        // The slot this step wrote that the pool still shows: the first decoded token, else the last
        // prompt token of the first admitted request, of a request that still holds its blocks (one that
        // finished this step has returned them, and its slot is free again).
        let slot = |(r, pos): (RequestId, usize)| {
            let b = *cache.table(r)?.get(pos / shape.block_size)?;
            Some((b as usize, pos % shape.block_size))
        };
        let write = ev
            .decoded
            .iter()
            .copied()
            .chain(ev.admitted.iter().map(|&(r, n)| (r, n.saturating_sub(1))))
            .find(|&w| slot(w).is_some());
        let written = write.and_then(slot);
        out.frames.push(PagedFrame {
            grid: BlockGridData::from_cache(cache, written),
            tables: cache.tables().clone(),
            lens: cache.tables().keys().map(|&r| (r, cache.len(r))).collect(),
            free: cache.allocator().free_list().to_vec(),
            stats: cache.stats(max_seq_len),
            running: sched.running(),
            waiting: sched.waiting(),
            write,
            check: check_report,
            decode_bytes,
            invariants: cache.check_invariants(),
            events: ev,
        });
    }
    if !sched.is_done() {
        out.error = Some(format!("the scenario did not finish within {MAX_STEPS} steps"));
    }
    out.served = server.map(serve::Server::finish);
    Ok(out)
}

impl Output for PagedOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.frames.iter().filter_map(|f| f.check.as_ref()).collect()
    }

    fn has_nan(&self) -> bool {
        self.frames
            .iter()
            .any(|f| f.check.as_ref().is_some_and(|c| c.nan_count > 0))
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

    fn values(&self) -> Vec<(&'static str, String)> {
        self.named_values()
    }

    fn point(&self, name: &str) -> Option<usize> {
        self.locate(name)
    }

    /// The pool's blocks, numbered as the pool view numbers them, for a pick.
    fn pick_surface(&self, view: &str) -> Option<crate::lessons::questions::PickSurface> {
        (view == "pool").then(|| crate::lessons::questions::PickSurface::pool(self.shape.num_blocks, 16))
    }
}

impl PagedOut {
    /// The first step whose events satisfy `f`.
    fn first(&self, f: impl Fn(&StepEvents) -> bool) -> Option<usize> {
        self.frames.iter().position(|fr| f(&fr.events))
    }

    /// The step with the most running requests (the first of them).
    fn busiest(&self) -> Option<usize> {
        let most = self.frames.iter().map(|f| f.running.len()).max()?;
        self.frames.iter().position(|f| f.running.len() == most)
    }

    fn locate(&self, name: &str) -> Option<usize> {
        match name {
            "busiest" => self.busiest(),
            "first_wait" => self.first(|e| !e.waiting.is_empty()),
            "preempt" => self.first(|e| !e.preempted.is_empty()),
            "first_finish" => self.first(|e| !e.finished.is_empty()),
            "recompute" => self.first(|e| !e.recomputed.is_empty()),
            _ => None,
        }
    }

    fn named_values(&self) -> Vec<(&'static str, String)> {
        // Only what the replay reached: a value it did not reach stays unfilled ("…" on screen, which
        // the narration test catches at the defaults), never a dash that reads like an answer.
        let step = |p: Option<usize>| p.map(|s| s.to_string());
        let ids = |v: Vec<RequestId>| {
            (!v.is_empty()).then(|| v.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(", "))
        };
        let at = |p: Option<usize>| p.and_then(|s| self.frames.get(s)).map(|f| &f.events);
        let rec = at(self.locate("recompute")).and_then(|e| e.recomputed.first().copied());
        let rec_prompt = rec.and_then(|(r, _)| self.specs.get(r as usize)).map(|s| s.prompt);
        let values: Vec<(&'static str, Option<String>)> = vec![
            ("block_size", Some(self.shape.block_size.to_string())),
            ("num_blocks", Some(self.shape.num_blocks.to_string())),
            (
                "token_slots",
                Some((self.shape.num_blocks * self.shape.block_size).to_string()),
            ),
            ("requested_slots", Some(self.token_slots.to_string())),
            ("busiest_step", step(self.busiest())),
            (
                "busiest_running",
                self.busiest().map(|s| self.frames[s].running.len().to_string()),
            ),
            ("first_wait_step", step(self.locate("first_wait"))),
            (
                "first_wait",
                ids(at(self.locate("first_wait"))
                    .map(|e| e.waiting.clone())
                    .unwrap_or_default()),
            ),
            ("preempt_step", step(self.locate("preempt"))),
            (
                "preempted",
                ids(at(self.locate("preempt"))
                    .map(|e| e.preempted.iter().map(|p| p.0).collect())
                    .unwrap_or_default()),
            ),
            ("first_finish_step", step(self.locate("first_finish"))),
            (
                "first_finished",
                ids(at(self.locate("first_finish"))
                    .map(|e| e.finished.iter().map(|p| p.0).collect())
                    .unwrap_or_default()),
            ),
            ("recompute_step", step(self.locate("recompute"))),
            ("recomputed", ids(rec.map(|(r, _)| vec![r]).unwrap_or_default())),
            ("recompute_tokens", rec.map(|(_, n)| n.to_string())),
            // The blocks that prefill takes again: whole blocks, the last one partly filled.
            (
                "recompute_blocks",
                rec.map(|(_, n)| n.div_ceil(self.shape.block_size).to_string()),
            ),
            // The first block the allocator handed out in the run: the first request's first block.
            (
                "first_block",
                self.frames
                    .iter()
                    .find_map(|f| f.tables.values().find_map(|t| t.first()))
                    .map(u32::to_string),
            ),
            ("recompute_prompt", rec_prompt.map(|p| p.to_string())),
            (
                "recompute_generated",
                rec.zip(rec_prompt).map(|((_, n), p)| (n - p).to_string()),
            ),
            (
                "served_bytes",
                self.served
                    .as_ref()
                    .map(|s| s.outputs.iter().map(Vec::len).sum::<usize>().to_string()),
            ),
            (
                "served_recomputes",
                self.served.as_ref().map(|s| s.recompute_agrees.len().to_string()),
            ),
            (
                "served_agree",
                self.served
                    .as_ref()
                    .map(|s| s.recompute_agrees.iter().filter(|x| x.2).count().to_string()),
            ),
        ];
        values.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{CpuBackend, Tolerance, check};

    /// A NaN in a step's decode is a NaN of the lesson.
    #[test]
    fn a_nan_in_a_steps_decode_is_a_nan_of_the_lesson() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.id() == "paged-cache").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let mut out = paged(l, &p, &CpuBackend::new()).unwrap();
        assert!(!out.has_nan());
        let f = out.frames.iter_mut().find(|f| f.check.is_some()).unwrap();
        f.check = Some(check("decode", &[1], &[f32::NAN], &[0.25f64], Tolerance::F32));
        assert!(out.has_nan());
    }

    /// The capacity the block-size step states is the pool's own at every block size the slider offers:
    /// whole blocks, at least one, slots / block size of them rounded down, and the slots they hold.
    #[test]
    fn the_stated_capacity_is_the_pools_at_every_block_size() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.id() == "paged-cache").unwrap();
        let slider = l.file.params.iter().find(|p| p.id.get_ref() == "block_size").unwrap();
        let value = |values: &[(&str, String)], name: &str| -> usize {
            values.iter().find(|(n, _)| *n == name).unwrap().1.parse().unwrap()
        };
        for bs in slider.lo()..=slider.hi() {
            let mut p = Params::new();
            p.insert("block_size".into(), bs);
            crate::lessons::normalize(l, &mut p);
            let out = paged(l, &p, &CpuBackend::new()).unwrap();
            let v = out.values();
            let (asked, blocks, slots) = (
                value(&v, "requested_slots"),
                value(&v, "num_blocks"),
                value(&v, "token_slots"),
            );
            let bs = bs as usize;
            assert_eq!(blocks, (asked / bs).max(1), "block size {bs}");
            assert_eq!(slots, blocks * bs, "block size {bs}");
            assert_eq!(blocks, out.shape.num_blocks, "block size {bs}");
        }
    }
}
