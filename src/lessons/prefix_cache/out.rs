//! Lesson 7's output: one frame per event of the replay, and what the views, export and verification
//! read from it.

use crate::cache::{PagedShape, RequestId};
use crate::compute::CheckReport;
use crate::figure::BlockGridData;
use crate::lessons::Output;
use crate::lessons::export::{ArrayData, NamedArray};
use std::collections::BTreeMap;

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
    /// The hash → blocks map: duplicates in the order they were cached (a lookup returns the first).
    pub map: BTreeMap<u64, Vec<u32>>,
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
                    "hash_to_blocks": f.map.iter().map(|(h, v)| (format!("{h:016x}"), v.clone())).collect::<BTreeMap<_, _>>(),
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
