//! Lesson 7's scripted session, replayed on a one-layer KV engine: the script's operations (admit,
//! finish, fork, append, probe), a frame after each, and the narration's numbers.

use super::out::{Event, PrefixFrame, PrefixOut};
use crate::cache::prefix::prefix_kv;
use crate::cache::{PagedError, PagedKvCache, PagedShape, RequestId};
use crate::compute::{Backend, CheckReport, Tolerance, check};
use crate::figure::BlockGridData;
use crate::kv::{EngineError, KvEngine, KvEvent};
use crate::lessons::{Params, get};
use crate::math::Rng;
use std::collections::BTreeMap;

/// KV heads and head_dim of the lesson's pool (small: the lesson is about blocks, not arithmetic).
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 8;
/// Query heads of the decode check.
const HEADS: usize = 4;
/// Tokens of each request's own user message after the shared system prompt.
const SUFFIX: usize = 3;
/// Tokens of the reply that ends the first chat turn.
const REPLY: u32 = 4;

/// The numbers lesson 7's narration may show, all from the replay (one the replay did not reach stays unfilled).
pub(super) const PLACEHOLDERS: &[&str] = &[
    "block_size",
    "sharing",
    "prompt_len",
    "prompt_full_blocks",
    "shared_hits",
    "saved_tokens",
    "computed_tokens",
    "blocks_used",
    "blocks_unshared",
    "repeat_len",
    "repeat_full",
    "repeat_max_hit",
    "repeat_hits",
    "repeat_prefilled",
    "repeat_duplicates",
    "to_evictor",
    "to_free",
    "turn2_prompt",
    "turn2_hits",
    "turn2_from_evictor",
    "turn2_still_live",
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
        let Some(KvEvent::Freed {
            to_evictor, to_free, ..
        }) = self.engine.events().last().cloned()
        else {
            return Err("the engine recorded no free".into());
        };
        self.frame(
            Event::Finish {
                req,
                to_evictor,
                to_free,
            },
            None,
        );
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
            let q =
                Rng::stream(self.seed, 700 + self.frames.len() as u64).normal_vec(reqs.len() * HEADS * HEAD_DIM, 1.0);
            match self.engine.decode(self.backend, 0, &tables, &q, HEADS) {
                Ok(got) => check_against_own_tokens(c, &reqs, &q, &got),
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
            map: c.prefix().map().clone(),
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
pub(super) fn replay(p: &Params, backend: &dyn Backend) -> Result<PrefixOut, String> {
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
    let error = script(
        &mut rp,
        sharing,
        samples,
        &system,
        &prompt_of,
        &mut points,
        &mut numbers,
        &mut rng,
    )
    .err();
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
    // 1b. A prompt cached in full: request 0's prompt cut to whole blocks (all of it when it is shorter
    // than one block). Its hits stop at its length minus one token, so its last block is prefilled again
    // and cached as a duplicate; it finishes at once.
    let p0 = prompt_of(0);
    let whole = p0.len() / bs * bs;
    let repeat = if whole > 0 { p0[..whole].to_vec() } else { p0 };
    let duplicates_before = rp.cache().prefix().duplicates();
    if rp.admit(next, &repeat)? {
        points.insert("repeat", last(rp));
        if let Some(Event::Admit { hits, computed, .. }) = rp.frames.last().map(|f| &f.event) {
            n.insert("repeat_hits", hits.to_string());
            n.insert("repeat_prefilled", computed.to_string());
        }
        n.insert("repeat_len", repeat.len().to_string());
        n.insert("repeat_full", (repeat.len() / bs).to_string());
        n.insert("repeat_max_hit", (repeat.len().saturating_sub(1) / bs).to_string());
        let dups = rp.cache().prefix().duplicates() - duplicates_before;
        n.insert("repeat_duplicates", dups.to_string());
        rp.finish(next)?;
    }
    next += 1;
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
    if let Some(Event::Finish {
        to_evictor, to_free, ..
    }) = rp.frames.last().map(|f| &f.event)
    {
        n.insert("to_evictor", to_evictor.len().to_string());
        n.insert("to_free", to_free.len().to_string());
    }
    let saved_before = rp.saved;
    let evictor_before: Vec<u32> = rp.cache().prefix().evictor_blocks().collect();
    if rp.admit(next, &turn2)? {
        live.push(next);
        points.insert("turn2", last(rp));
        if let Some(Event::Admit { hits, .. }) = rp.frames.last().map(|f| &f.event) {
            n.insert("turn2_hits", hits.to_string());
            // Of the blocks hit, those taken back out of the evictor (turn 1's own); the others were
            // still in use (the system prompt's, shared with the live requests).
            let table = rp.cache().table(next).unwrap_or_default();
            let from_evictor = table.iter().take(*hits).filter(|b| evictor_before.contains(b)).count();
            n.insert("turn2_from_evictor", from_evictor.to_string());
            n.insert("turn2_still_live", (hits - from_evictor).to_string());
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
                n.insert(
                    "fork_blocks",
                    rp.cache().table(parent).map_or(0, <[u32]>::len).to_string(),
                );
            }
            children.push(next);
            live.push(next);
            next += 1;
        }
        // 4. Each sample appends its own first token; the parent appends last.
        let (mut copies, mut slots) = (0, 0);
        for (i, &c) in children.iter().chain(std::iter::once(&parent)).enumerate() {
            rp.append(c, 4000 + i as u32)?;
            if let Some(Event::Append {
                cow: Some((_, _, filled)),
                ..
            }) = rp.frames.last().map(|f| &f.event)
            {
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
        n.insert(
            "cow_bytes",
            (2 * s.kv_heads * s.block_size * s.head_dim * 2).to_string(),
        );
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

/// Paged decode of `reqs` (`got`, `[R, HEADS, HEAD_DIM]`, queries `q`) against attention in f64 over K/V
/// that this check builds from each request's own token sequence (`prefix_kv` of its tokens, rounded to
/// the pool's f16), never read from the pool: a prefix hit that pointed a table at the wrong block, or a
/// copy-on-write that was skipped, changes what the kernel reads through the table but not this
/// reference, so the check fails. (Comparing with a reference gathered through the same tables from the
/// same pools would pass either way.)
pub(super) fn check_against_own_tokens(c: &PagedKvCache, reqs: &[RequestId], q: &[f32], got: &[f32]) -> CheckReport {
    let w = KV_HEADS * HEAD_DIM;
    let group = HEADS / KV_HEADS;
    let scale = 1.0 / (HEAD_DIM as f64).sqrt();
    let round = |x: f32| f64::from(half::f16::from_f32(x));
    let mut want = Vec::with_capacity(reqs.len() * HEADS * HEAD_DIM);
    for (r, &req) in reqs.iter().enumerate() {
        let tokens = c.tokens(req).unwrap_or_default();
        let len = c.len(req).min(tokens.len());
        let kv: Vec<(Vec<f64>, Vec<f64>)> = (0..len)
            .map(|pos| {
                let (k, v) = prefix_kv(tokens, pos, w);
                (k.into_iter().map(round).collect(), v.into_iter().map(round).collect())
            })
            .collect();
        for h in 0..HEADS {
            let kvh = h / group;
            let qh: Vec<f64> = q[(r * HEADS + h) * HEAD_DIM..][..HEAD_DIM]
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            let scores: Vec<f64> = kv
                .iter()
                .map(|(k, _)| (0..HEAD_DIM).map(|d| qh[d] * k[kvh * HEAD_DIM + d]).sum::<f64>() * scale)
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..HEAD_DIM {
                want.push(
                    kv.iter()
                        .zip(&e)
                        .map(|((_, v), p)| p * v[kvh * HEAD_DIM + d])
                        .sum::<f64>()
                        / sum,
                );
            }
        }
    }
    check(
        "paged decode through the shared tables == attention over each request's own tokens",
        &[reqs.len(), HEADS, HEAD_DIM],
        got,
        &want,
        Tolerance::F32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    /// K/V of `tokens[from..from + slots.len()]` written at `slots`, as the replay writes them.
    fn write(e: &mut KvEngine, tokens: &[u32], from: usize, slots: &[i32]) {
        let w = KV_HEADS * HEAD_DIM;
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for pos in from..from + slots.len() {
            let (kk, vv) = prefix_kv(tokens, pos, w);
            k.extend(kk);
            v.extend(vv);
        }
        e.write(&CpuBackend::new(), 0, slots, &k, &v).unwrap();
    }

    /// The check builds its reference from each request's own tokens: it passes on an honest prefix
    /// hit, and fails when the shared block holds another prompt's K/V (a corrupted hit), which a
    /// reference gathered through the same tables from the same pool does not notice.
    #[test]
    fn a_corrupted_prefix_hit_fails_the_check() {
        let shape = PagedShape {
            block_size: 4,
            num_blocks: 8,
            kv_heads: KV_HEADS,
            head_dim: HEAD_DIM,
            dtype: crate::cache::KvDtype::F16,
        };
        let mut e = KvEngine::new(shape, 1);
        let a: Vec<u32> = (10..19).collect(); // 9 tokens: two full blocks and one more
        let mut b = a[..8].to_vec();
        b.extend([90, 91, 92]); // the same two full blocks, then its own
        let adm = e.admit(0, &a).unwrap();
        write(&mut e, &a, adm.cached_tokens, &adm.slots);
        let adm = e.admit(1, &b).unwrap();
        assert_eq!(adm.hit_blocks.len(), 2, "{adm:?}");
        write(&mut e, &b, adm.cached_tokens, &adm.slots);
        let reqs = [0, 1];
        let tables = e.tables(&reqs);
        let q = Rng::new(7).normal_vec(reqs.len() * HEADS * HEAD_DIM, 1.0);
        let cpu = CpuBackend::new();
        let got = e.decode(&cpu, 0, &tables, &q, HEADS).unwrap();
        let honest = check_against_own_tokens(e.cache(), &reqs, &q, &got);
        assert!(honest.passed(), "{honest}");
        // Corrupt the first shared block: it now holds the K/V of other tokens.
        let shared = adm.hit_blocks[0] as i32 * 4;
        let other: Vec<u32> = (50..54).collect();
        write(&mut e, &other, 0, &[shared, shared + 1, shared + 2, shared + 3]);
        let got = e.decode(&cpu, 0, &tables, &q, HEADS).unwrap();
        let caught = check_against_own_tokens(e.cache(), &reqs, &q, &got);
        assert!(!caught.passed(), "{caught}");
        let (_, through_pool) = e.decode_checked(&cpu, 0, &tables, &q, HEADS).unwrap();
        assert!(
            through_pool.passed(),
            "the pool-gathered reference cannot see it: {through_pool}"
        );
    }
}
