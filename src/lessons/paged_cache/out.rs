//! Lesson 5's output: the scenario replayed on the paged cache, one frame per scheduler step, and the
//! replay as data (`kvscope export schedule`).

use std::collections::BTreeMap;

use crate::cache::{PagedShape, PagedStats, RequestId};
use crate::compute::CheckReport;
use crate::figure::BlockGridData;
use crate::kv::{Request, StepEvents};

use super::serve;

/// Lesson 5: the scenario replayed on the paged cache.
pub struct PagedOut {
    /// The pool.
    pub shape: PagedShape,
    /// The capacity the slider asked for (the pool holds as many whole blocks as fit in it).
    pub token_slots: usize,
    /// The static reservation compared against.
    pub max_seq_len: usize,
    /// The requests.
    pub specs: Vec<Request>,
    /// Why the scenario cannot run, if it cannot.
    pub error: Option<String>,
    /// One frame per scheduler step.
    pub frames: Vec<PagedFrame>,
    /// With the tiny model chosen under "Model served": the model's side of every step (aligned with `frames`).
    pub served: Option<serve::Served>,
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

impl PagedOut {
    /// The replay as data (`kvscope export schedule`): the pool, then per step what the scheduler did,
    /// who runs and waits, the free blocks and the block tables.
    pub fn schedule(&self) -> serde_json::Value {
        let steps: Vec<serde_json::Value> = self
            .frames
            .iter()
            .map(|f| {
                let e = &f.events;
                serde_json::json!({
                    "step": e.step,
                    "arrived": e.arrived,
                    "admitted": e.admitted,
                    "recomputed": e.recomputed,
                    "decoded": e.decoded,
                    "preempted": e.preempted.iter().map(|(r, _)| r).collect::<Vec<_>>(),
                    "finished": e.finished.iter().map(|(r, _)| r).collect::<Vec<_>>(),
                    "running": f.running,
                    "waiting": f.waiting,
                    "free_blocks": f.free.len(),
                    "block_tables": f.tables.iter().map(|(r, t)| (r.to_string(), t.clone())).collect::<BTreeMap<_, _>>(),
                })
            })
            .collect();
        serde_json::json!({
            "block_size": self.shape.block_size,
            "num_blocks": self.shape.num_blocks,
            "token_slots": self.token_slots,
            "requests": self.specs,
            "error": self.error,
            "steps": steps,
        })
    }
}
