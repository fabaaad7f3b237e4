//! Lesson 7, prefix caching and copy-on-write (kind `prefix`): a scripted session replayed on the real
//! [`PagedKvCache`] with its prefix cache (`cache::prefix`): requests sharing a system prompt, a
//! finished chat turn whose blocks stay cached for the next turn, parallel sampling by fork, the
//! copy-on-write of a shared partial block, and eviction under memory pressure. Every prefill writes
//! its K/V through the backend's `paged_append` kernel, every copy-on-write runs the backend's
//! `copy_blocks` kernel, and after every event paged decode of the live requests, through their
//! (shared) block tables, is checked against contiguous attention on each request's own tokens. The
//! timeline has one frame per event.


use std::collections::BTreeMap;

use super::{LessonKind, Output, Params, get};
use crate::cache::prefix::prefix_kv;
use crate::cache::{PagedError, PagedKvCache, PagedShape, RequestId};
use crate::kv::{EngineError, KvEngine, KvEvent};

use crate::compute::{Backend, CheckReport, Kernel};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::math::Rng;
use crate::render::blocks::BlockGridData;

crate::views! {
    /// The views of lesson 7.
    pub enum View {
        /// The pool: owners, reference counts and short hashes.
        Pool = "pool",
        /// One request's hash chain, block by block.
        Chain = "chain",
        /// The hash → block map.
        Map = "map",
        /// The block tables, shared entries marked.
        Tables = "tables",
        /// The free list and the evictor.
        Lists = "lists",
        /// Hit rate, prefill saved and memory against no sharing.
        Stats = "stats",
        /// What happened at this event.
        Events = "events",
        /// Paged decode through the shared tables, checked.
        Check = "check",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 7.
pub struct PrefixCache;

/// KV heads and head_dim of the lesson's pool (small: the lesson is about blocks, not arithmetic).
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 8;
/// Query heads of the decode check.
const HEADS: usize = 4;
/// Tokens of each request's own user message after the shared system prompt.
const SUFFIX: usize = 3;
/// Tokens of the reply that ends the first chat turn.
const REPLY: u32 = 4;

impl Schema for PrefixCache {
    fn name(&self) -> &'static str {
        "prefix"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["block_size", "token_slots", "sharing", "prompt_len", "samples", "seed"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        POINTS
    }
}

impl LessonKind for PrefixCache {
    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::CopyBlocks, Kernel::PagedAppend, Kernel::PagedDecode]
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        Ok(Box::new(replay(p, backend)?))
    }
}

/// The named points of the replay a step's `at` may open at.
const POINTS: &[&str] = &["shared", "finished", "turn2", "fork", "cow", "probe_before", "evict", "probe_after"];

/// The numbers lesson 7's narration may show, all from the replay (`—` when it did not happen).
const PLACEHOLDERS: &[&str] = &[
    "block_size",
    "sharing",
    "prompt_len",
    "prompt_full_blocks",
    "shared_hits",
    "saved_tokens",
    "computed_tokens",
    "blocks_used",
    "blocks_unshared",
    "to_evictor",
    "to_free",
    "turn2_prompt",
    "turn2_hits",
    "turn2_saved",
    "samples",
    "fork_blocks",
    "cow_copies",
    "cow_slots",
    "cow_bytes",
    "probe_before_hits",
    "evicted",
    "probe_after_hits",
    "steps",
];

/// One event of the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A request admitted: its leading full blocks found in the cache, the tokens it had to prefill,
    /// and the cached blocks evicted to make room.
    Admit {
        /// The request.
        req: RequestId,
        /// Prompt tokens.
        prompt: usize,
        /// Blocks hit.
        hits: usize,
        /// Tokens whose prefill was skipped.
        saved: usize,
        /// Tokens prefilled.
        computed: usize,
        /// Cached blocks evicted for it.
        evicted: Vec<u32>,
    },
    /// A request refused: not enough free or evictable blocks.
    Oom {
        /// The request.
        req: RequestId,
    },
    /// A request finished: its blocks lost a reference; those nobody else uses went to the evictor
    /// (cached full blocks) or the free list.
    Finish {
        /// The request.
        req: RequestId,
        /// Blocks now in the evictor.
        to_evictor: Vec<u32>,
        /// Blocks now free.
        to_free: Vec<u32>,
    },
    /// A request forked for parallel sampling.
    Fork {
        /// The parent.
        parent: RequestId,
        /// The child.
        child: RequestId,
        /// Blocks now shared.
        blocks: usize,
    },
    /// One generated token appended.
    Append {
        /// The request.
        req: RequestId,
        /// A copy-on-write `(src, dst)` and the filled slots it copied.
        cow: Option<(u32, u32, usize)>,
        /// A new block for a full last block.
        new_block: Option<u32>,
    },
}

/// The state after one event.
pub struct PrefixFrame {
    /// What happened.
    pub event: Event,
    /// The pool for the block-grid renderer (a shared block is drawn in its first owner's colour).
    pub grid: BlockGridData,
    /// Reference count of every block.
    pub refs: Vec<u32>,
    /// Per block: its hash and parent hash and tokens, if it is a cached full block.
    pub cached: Vec<Option<(u64, u64, Vec<u32>)>>,
    /// Block tables.
    pub tables: BTreeMap<RequestId, Vec<u32>>,
    /// Token ids per request.
    pub tokens: BTreeMap<RequestId, Vec<u32>>,
    /// The free list (the allocator pops from its end).
    pub free: Vec<u32>,
    /// The evictor, next to be evicted first.
    pub evictor: Vec<u32>,
    /// Blocks looked up and hit so far.
    pub lookups: u64,
    /// Blocks hit so far.
    pub hits: u64,
    /// Prompt tokens prefilled and skipped so far.
    pub computed: usize,
    /// Prompt tokens whose K/V came from the cache so far.
    pub saved: usize,
    /// Distinct blocks in use.
    pub blocks_used: usize,
    /// Blocks the same tables would take without sharing (the sum of table lengths).
    pub blocks_unshared: usize,
    /// The (block, slot) written last, if any.
    pub written: Option<(usize, usize)>,
    /// Paged decode of the live requests through their tables, against contiguous attention.
    pub check: Option<CheckReport>,
    /// The cache's invariants after the event.
    pub invariants: Result<(), String>,
}

/// Lesson 7's output: the pool and one frame per event.
pub struct PrefixOut {
    /// The pool.
    pub shape: PagedShape,
    /// The system prompt's tokens.
    pub system_prompt: Vec<u32>,
    /// Why the replay stopped early, if it did.
    pub error: Option<String>,
    /// One frame per event.
    pub frames: Vec<PrefixFrame>,
    /// Where each named point is.
    pub points: BTreeMap<&'static str, usize>,
    /// The narration's numbers.
    pub numbers: Vec<(&'static str, String)>,
}

/// The replay in progress: the script's operations on a one-layer KV engine, a frame after each.
struct Replay<'a> {
    engine: KvEngine,
    backend: &'a dyn Backend,
    frames: Vec<PrefixFrame>,
    computed: usize,
    saved: usize,
    seed: u64,
    /// A kernel the backend could not run: the lesson reports it instead of the replay.
    backend_error: Option<String>,
}

impl Replay<'_> {
    /// The engine's block manager.
    fn cache(&self) -> &PagedKvCache {
        self.engine.cache()
    }

    /// `e` as the script's error, remembering a kernel failure.
    fn engine_error(&mut self, e: EngineError) -> String {
        if let EngineError::Backend(b) = &e {
            self.backend_error = Some(b.to_string());
        }
        e.to_string()
    }

    /// Write the K/V of `tokens[from..]` (a function of the prefix) at `slots` through the engine (the
    /// backend's `paged_append` kernel).
    fn write(&mut self, tokens: &[u32], from: usize, slots: &[i32]) -> Result<(), String> {
        if slots.is_empty() {
            return Ok(());
        }
        let w = KV_HEADS * HEAD_DIM;
        let (mut k, mut v) = (Vec::with_capacity(slots.len() * w), Vec::with_capacity(slots.len() * w));
        for pos in from..from + slots.len() {
            let (kk, vv) = prefix_kv(tokens, pos, w);
            k.extend(kk);
            v.extend(vv);
        }
        let r = self.engine.write(self.backend, 0, slots, &k, &v);
        r.map_err(|e| self.engine_error(e))
    }

    fn admit(&mut self, req: RequestId, prompt: &[u32]) -> Result<bool, String> {
        match self.engine.admit(req, prompt) {
            Ok(a) => {
                let evicted = match self.engine.events().last() {
                    Some(KvEvent::Admitted { evicted, .. }) => evicted.clone(),
                    _ => Vec::new(),
                };
                self.write(prompt, a.cached_tokens, &a.slots)?;
                self.computed += a.slots.len();
                self.saved += a.cached_tokens;
                let written = a.slots.last().map(|&s| self.block_slot(s));
                self.frame(
                    Event::Admit {
                        req,
                        prompt: prompt.len(),
                        hits: a.hit_blocks.len(),
                        saved: a.cached_tokens,
                        computed: a.slots.len(),
                        evicted,
                    },
                    written,
                );
                Ok(true)
            }
            Err(PagedError::Oom(_)) => {
                self.frame(Event::Oom { req }, None);
                Ok(false)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn finish(&mut self, req: RequestId) -> Result<(), String> {
        self.engine.free(req).map_err(|e| e.to_string())?;
        let Some(KvEvent::Freed { to_evictor, to_free, .. }) = self.engine.events().last().cloned() else {
            return Err("the engine recorded no free".into());
        };
        self.frame(Event::Finish { req, to_evictor, to_free }, None);
        Ok(())
    }

    fn fork(&mut self, parent: RequestId, child: RequestId) -> Result<(), String> {
        self.engine.fork(parent, child).map_err(|e| e.to_string())?;
        let blocks = self.cache().table(child).map_or(0, <[u32]>::len);
        self.frame(Event::Fork { parent, child, blocks }, None);
        Ok(())
    }

    fn append(&mut self, req: RequestId, token: u32) -> Result<(), String> {
        let filled = self.cache().len(req) % self.cache().shape().block_size;
        // The engine runs the copy-on-write through the backend's `copy_blocks` before the slot is
        // returned.
        let a = match self.engine.append_token(self.backend, req, token) {
            Ok(a) => a,
            Err(e) => return Err(self.engine_error(e)),
        };
        let tokens = self.cache().tokens(req).unwrap_or_default().to_vec();
        self.write(&tokens, tokens.len() - 1, &[a.slot])?;
        let written = Some(self.block_slot(a.slot));
        self.frame(
            Event::Append {
                req,
                cow: a.cow.map(|(s, d)| (s, d, filled)),
                new_block: a.new_block.filter(|_| a.cow.is_none()),
            },
            written,
        );
        Ok(())
    }

    fn block_slot(&self, slot: i32) -> (usize, usize) {
        let bs = self.cache().shape().block_size;
        (slot as usize / bs, slot as usize % bs)
    }

    /// Record the cache after `event`, with paged decode of the live requests checked on the backend.
    fn frame(&mut self, event: Event, written: Option<(usize, usize)>) {
        let c = self.engine.cache();
        let s = c.shape();
        let mut grid = BlockGridData::from_cache(c, written);
        // A shared block in its first (lowest) owner's colour.
        for (&req, table) in c.tables().iter().rev() {
            for &b in table {
                grid.owners[b as usize] = req as i32;
            }
        }
        let reqs: Vec<RequestId> = c.tables().keys().copied().filter(|&r| c.len(r) > 0).collect();
        let check = (!reqs.is_empty()).then(|| {
            let tables = self.engine.tables(&reqs);
            let q = Rng::stream(self.seed, 700 + self.frames.len() as u64).normal_vec(reqs.len() * HEADS * HEAD_DIM, 1.0);
            match self.engine.decode_checked(self.backend, 0, &tables, &q, HEADS) {
                Ok((_, mut r)) => {
                    r.label = "paged decode through the shared tables == contiguous".into();
                    r
                }
                Err(e) => CheckReport::failed("paged decode through the shared tables", e),
            }
        });
        let (lookups, hits) = c.prefix().hit_counts();
        self.frames.push(PrefixFrame {
            event,
            grid,
            refs: (0..s.num_blocks as u32).map(|b| c.ref_count(b)).collect(),
            cached: (0..s.num_blocks as u32)
                .map(|b| c.prefix().cached(b).map(|m| (m.hash, m.parent, m.tokens.clone())))
                .collect(),
            tables: c.tables().clone(),
            tokens: c
                .tables()
                .keys()
                .map(|&r| (r, c.tokens(r).unwrap_or_default().to_vec()))
                .collect(),
            free: c.allocator().free_list().to_vec(),
            evictor: c.prefix().evictor_blocks().collect(),
            lookups,
            hits,
            computed: self.computed,
            saved: self.saved,
            blocks_used: c.stats(0).blocks_used,
            blocks_unshared: c.tables().values().map(Vec::len).sum(),
            written,
            check,
            invariants: c.check_invariants(),
        });
    }
}

/// Run the scripted session.
fn replay(p: &Params, backend: &dyn Backend) -> Result<PrefixOut, String> {
    let bs = get(p, "block_size", 4).max(1) as usize;
    let slots = get(p, "token_slots", 96).max(1) as usize;
    let sharing = get(p, "sharing", 3).max(1) as u32;
    let plen = get(p, "prompt_len", 10).max(1) as usize;
    let samples = get(p, "samples", 2).max(1) as u32;
    let seed = get(p, "seed", 0) as u64;
    let shape = PagedShape {
        num_blocks: (slots / bs).max(1),
        block_size: bs,
        kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        dtype: crate::cache::KvDtype::F16,
    };
    let mut rng = Rng::stream(seed, 7);
    // Token ids: the system prompt from 10..100, each request's own message from 1000 up (distinct).
    let system: Vec<u32> = (0..plen).map(|_| 10 + rng.below(90) as u32).collect();
    let own = |r: u32| (0..SUFFIX as u32).map(move |i| 1000 + r * 16 + i);
    let prompt_of = |r: u32| system.iter().copied().chain(own(r)).collect::<Vec<u32>>();
    let mut rp = Replay {
        engine: KvEngine::new(shape, 1),
        backend,
        frames: Vec::new(),
        computed: 0,
        saved: 0,
        seed,
        backend_error: None,
    };
    let mut points = BTreeMap::new();
    let mut numbers: BTreeMap<&'static str, String> = BTreeMap::new();
    let error = script(&mut rp, sharing, samples, &system, &prompt_of, &mut points, &mut numbers, &mut rng).err();
    if let Some(e) = rp.backend_error {
        return Err(e);
    }
    let full = plen / bs;
    let put = |n: &mut BTreeMap<&'static str, String>, k: &'static str, v: String| {
        n.entry(k).or_insert(v);
    };
    put(&mut numbers, "block_size", bs.to_string());
    put(&mut numbers, "sharing", sharing.to_string());
    put(&mut numbers, "prompt_len", plen.to_string());
    put(&mut numbers, "prompt_full_blocks", full.to_string());
    put(&mut numbers, "samples", samples.to_string());
    put(&mut numbers, "steps", rp.frames.len().to_string());
    // Only what the replay computed: a placeholder it did not reach stays unfilled (`…` on screen), which
    // the narration test catches, instead of a dash that reads like an answer.
    let numbers = PLACEHOLDERS
        .iter()
        .filter_map(|&k| Some((k, numbers.get(k)?.clone())))
        .collect();
    Ok(PrefixOut {
        shape,
        system_prompt: system,
        error,
        frames: rp.frames,
        points,
        numbers,
    })
}

/// The session: shared prompt, a finished turn and the next one, fork and copy-on-write, then
/// eviction under pressure between two probes of the system prompt.
#[allow(clippy::too_many_arguments)]
fn script(
    rp: &mut Replay,
    sharing: u32,
    samples: u32,
    system: &[u32],
    prompt_of: &dyn Fn(u32) -> Vec<u32>,
    points: &mut BTreeMap<&'static str, usize>,
    n: &mut BTreeMap<&'static str, String>,
    rng: &mut Rng,
) -> Result<(), String> {
    let bs = rp.cache().shape().block_size;
    let last = |rp: &Replay| rp.frames.len().saturating_sub(1);
    let mut next: RequestId = 0;
    let mut live: Vec<RequestId> = Vec::new();
    // 1. Requests sharing the system prompt.
    for _ in 0..sharing {
        if rp.admit(next, &prompt_of(next))? {
            live.push(next);
        }
        next += 1;
    }
    points.insert("shared", last(rp));
    if let Some(f) = rp.frames.last() {
        let hits: usize = rp
            .frames
            .iter()
            .map(|f| match f.event {
                Event::Admit { hits, .. } => hits,
                _ => 0,
            })
            .sum();
        n.insert("shared_hits", hits.to_string());
        n.insert("saved_tokens", f.saved.to_string());
        n.insert("computed_tokens", f.computed.to_string());
        n.insert("blocks_used", f.blocks_used.to_string());
        n.insert("blocks_unshared", f.blocks_unshared.to_string());
    }
    // 2. The first request's chat turn ends; its next turn arrives (its whole previous prompt, the
    // model's reply and a new message).
    let Some(&first) = live.first() else {
        return Err("no request could be admitted: the pool is too small for the prompt".into());
    };
    // Turn 1 ends with the model's reply, decoded token by token into the cache.
    for i in 0..REPLY {
        rp.append(first, 2000 + i)?;
    }
    let mut turn2 = rp.cache().tokens(first).unwrap_or_default().to_vec();
    turn2.extend((0..SUFFIX as u32).map(|i| 3000 + i));
    rp.finish(first)?;
    live.retain(|&r| r != first);
    points.insert("finished", last(rp));
    if let Some(Event::Finish { to_evictor, to_free, .. }) = rp.frames.last().map(|f| &f.event) {
        n.insert("to_evictor", to_evictor.len().to_string());
        n.insert("to_free", to_free.len().to_string());
    }
    let saved_before = rp.saved;
    if rp.admit(next, &turn2)? {
        live.push(next);
        points.insert("turn2", last(rp));
        if let Some(Event::Admit { hits, .. }) = rp.frames.last().map(|f| &f.event) {
            n.insert("turn2_hits", hits.to_string());
        }
        n.insert("turn2_prompt", turn2.len().to_string());
        n.insert("turn2_saved", (rp.saved - saved_before).to_string());
    }
    next += 1;
    // 3. Parallel sampling: one request, forked into `samples` sequences.
    let parent = next;
    next += 1;
    // Its prompt ends inside a block (one more token if it would end on a block boundary), so the samples'
    // first tokens land in a shared, partly filled block.
    let mut parent_prompt = prompt_of(parent);
    if parent_prompt.len().is_multiple_of(bs) {
        parent_prompt.push(1999);
    }
    let mut admitted = rp.admit(parent, &parent_prompt)?;
    if !admitted {
        // The pool cannot hold it next to the live requests (small pools): they finish first, as a
        // scheduler would make it wait for them, and it is admitted then.
        for r in std::mem::take(&mut live) {
            rp.finish(r)?;
        }
        admitted = rp.admit(parent, &parent_prompt)?;
    }
    if admitted {
        live.push(parent);
        let mut children = Vec::new();
        for _ in 1..samples {
            rp.fork(parent, next)?;
            if children.is_empty() {
                points.insert("fork", last(rp));
                n.insert("fork_blocks", rp.cache().table(parent).map_or(0, <[u32]>::len).to_string());
            }
            children.push(next);
            live.push(next);
            next += 1;
        }
        // 4. Each sample appends its own first token; the parent appends last.
        let (mut copies, mut slots) = (0, 0);
        for (i, &c) in children.iter().chain(std::iter::once(&parent)).enumerate() {
            rp.append(c, 4000 + i as u32)?;
            if let Some(Event::Append { cow: Some((_, _, filled)), .. }) = rp.frames.last().map(|f| &f.event) {
                if copies == 0 {
                    points.insert("cow", last(rp));
                    slots = *filled;
                }
                copies += 1;
            }
        }
        n.insert("cow_copies", copies.to_string());
        n.insert("cow_slots", slots.to_string());
        let s = rp.cache().shape();
        n.insert("cow_bytes", (2 * s.kv_heads * s.block_size * s.head_dim * 2).to_string());
    }
    // 5. Everyone finishes; a probe with the system prompt hits; pressure evicts; the probe again.
    for r in std::mem::take(&mut live) {
        rp.finish(r)?;
    }
    let probe = |rp: &mut Replay, id: RequestId| -> Result<Option<usize>, String> {
        if !rp.admit(id, &prompt_of(id))? {
            return Ok(None);
        }
        let hits = match rp.frames.last().map(|f| &f.event) {
            Some(Event::Admit { hits, .. }) => *hits,
            _ => 0,
        };
        rp.finish(id)?;
        Ok(Some(hits))
    };
    if let Some(h) = probe(rp, next)? {
        n.insert("probe_before_hits", h.to_string());
        points.insert("probe_before", last(rp).saturating_sub(1));
    }
    next += 1;
    // Unrelated requests of two blocks each until the system prompt's first block is evicted (or the
    // pool is full of live requests).
    let first_hash = crate::cache::prefix::chain_hashes(system, bs).first().copied();
    let mut evicted = 0;
    let mut pressure = Vec::new();
    for _ in 0..rp.cache().shape().num_blocks {
        if first_hash.is_none_or(|h| rp.cache().prefix().lookup(h).is_none()) {
            break;
        }
        let prompt: Vec<u32> = (0..2 * bs).map(|_| 5000 + rng.below(1000) as u32).collect();
        if !rp.admit(next, &prompt)? {
            break;
        }
        if let Some(Event::Admit { evicted: e, .. }) = rp.frames.last().map(|f| &f.event) {
            if !e.is_empty() && !points.contains_key("evict") {
                points.insert("evict", last(rp));
            }
            evicted += e.len();
        }
        pressure.push(next);
        next += 1;
    }
    n.insert("evicted", evicted.to_string());
    for r in pressure {
        rp.finish(r)?;
    }
    if let Some(h) = probe(rp, next)? {
        n.insert("probe_after_hits", h.to_string());
        points.insert("probe_after", last(rp).saturating_sub(1));
    }
    Ok(())
}

impl Output for PrefixOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.frames.iter().filter_map(|f| f.check.as_ref()).collect()
    }

    /// The lesson draws counts and block ids; its only computed floats are the decode outputs of each
    /// frame's check (paged decode through the shared tables), so a NaN there is a NaN of the lesson.
    fn has_nan(&self) -> bool {
        self.frames
            .iter()
            .any(|f| f.check.as_ref().is_some_and(|c| c.nan_count > 0))
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let Some(fr) = self.frames.get(cursor.min(self.frames.len().saturating_sub(1))) else {
            return (Vec::new(), Vec::new());
        };
        let maxb = fr.tables.values().map(Vec::len).max().unwrap_or(0).max(1);
        let mut tab = vec![-1i32; fr.tables.len() * maxb];
        for (r, t) in fr.tables.values().enumerate() {
            for (j, &b) in t.iter().enumerate() {
                tab[r * maxb + j] = b as i32;
            }
        }
        let v = vec![
            NamedArray::new("block_tables", &[fr.tables.len(), maxb], ArrayData::I32(tab)),
            NamedArray::new(
                "ref_counts",
                &[fr.refs.len()],
                ArrayData::I32(fr.refs.iter().map(|&x| x as i32).collect()),
            ),
            NamedArray::new(
                "free_list",
                &[fr.free.len()],
                ArrayData::I32(fr.free.iter().map(|&x| x as i32).collect()),
            ),
            NamedArray::new(
                "evictor",
                &[fr.evictor.len()],
                ArrayData::I32(fr.evictor.iter().map(|&x| x as i32).collect()),
            ),
        ];
        (v, fr.check.iter().cloned().collect())
    }

    fn frames(&self) -> usize {
        self.frames.len()
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    fn point(&self, name: &str) -> Option<usize> {
        self.points.get(name).copied()
    }
}

impl PrefixOut {
    /// The replay as data (`kvscope export prefix-schedule`): per event the block tables, the counts,
    /// the block hashes, the hits and misses, the copy-on-write copies, the free list and the evictor.
    pub fn schedule(&self) -> serde_json::Value {
        let steps: Vec<serde_json::Value> = self
            .frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let event = match &f.event {
                    Event::Admit { req, prompt, hits, saved, computed, evicted } => serde_json::json!({
                        "admit": req, "prompt": prompt, "hit_blocks": hits,
                        "miss_blocks": prompt.div_ceil(self.shape.block_size) - hits,
                        "cached_tokens": saved, "prefilled_tokens": computed, "evicted": evicted,
                    }),
                    Event::Oom { req } => serde_json::json!({ "oom": req }),
                    Event::Finish { req, to_evictor, to_free } => {
                        serde_json::json!({ "finish": req, "to_evictor": to_evictor, "to_free": to_free })
                    }
                    Event::Fork { parent, child, blocks } => {
                        serde_json::json!({ "fork": parent, "child": child, "shared_blocks": blocks })
                    }
                    Event::Append { req, cow, new_block } => serde_json::json!({
                        "append": req,
                        "copy_on_write": cow.map(|(s, d, slots)| serde_json::json!({ "src": s, "dst": d, "filled_slots": slots })),
                        "new_block": new_block,
                    }),
                };
                let hashes: BTreeMap<String, String> = f
                    .cached
                    .iter()
                    .enumerate()
                    .filter_map(|(b, m)| m.as_ref().map(|(h, _, _)| (b.to_string(), format!("{h:016x}"))))
                    .collect();
                serde_json::json!({
                    "step": i,
                    "event": event,
                    "block_tables": f.tables.iter().map(|(r, t)| (r.to_string(), t.clone())).collect::<BTreeMap<_, _>>(),
                    "ref_counts": f.refs,
                    "block_hashes": hashes,
                    "free_list": f.free,
                    "evictor": f.evictor,
                    "lookups": f.lookups,
                    "hits": f.hits,
                })
            })
            .collect();
        serde_json::json!({
            "block_size": self.shape.block_size,
            "num_blocks": self.shape.num_blocks,
            "system_prompt": self.system_prompt,
            "error": self.error,
            "steps": steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{CpuBackend, Tolerance, check};

    /// A NaN in a frame's decode (the lesson's computed floats) is a NaN of the lesson.
    #[test]
    fn a_nan_in_a_frames_decode_is_a_nan_of_the_lesson() {
        let mut out = replay(&Params::new(), &CpuBackend::new()).unwrap();
        assert!(!out.has_nan());
        let f = out.frames.iter_mut().find(|f| f.check.is_some()).unwrap();
        f.check = Some(check("decode", &[2], &[0.5f32, f32::NAN], &[0.5f64, 0.25], Tolerance::F32));
        assert!(out.has_nan());
    }
}
