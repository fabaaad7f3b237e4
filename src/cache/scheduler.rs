//! A scripted serving scenario on the paged cache, as a continuous-batching engine (vLLM-style) runs
//! it: the engine for lesson 5's step-by-step views.
//!
//! How it works: requests arrive at given steps with a prompt length and a number of tokens to
//! generate. Each [`Scheduler::step`]:
//! 1. admits waiting requests in arrival order while the pool has blocks for their whole prompt
//!    (prefill); a request that does not fit keeps waiting (and so do those behind it);
//! 2. appends one decoded token to every running request, oldest first; when the pool is empty the
//!    newest running request is **preempted** — its blocks are freed and it goes back to the front of
//!    the queue, to be prefilled again later (recompute), as vLLM does;
//! 3. finishes requests that generated all their tokens and returns their blocks to the free list.
//!
//! Every step reports what happened, so a lesson can show it; the cache's invariants hold throughout.

use std::collections::VecDeque;

use super::{PagedKvCache, PagedShape, RequestId};

/// One request of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct RequestSpec {
    /// Step at which it arrives.
    pub arrive: usize,
    /// Prompt tokens (prefilled in one step).
    pub prompt: usize,
    /// Tokens to generate.
    pub generate: usize,
}

/// What one step did.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct StepEvents {
    /// The step number (0-based).
    pub step: usize,
    /// Requests that arrived.
    pub arrived: Vec<RequestId>,
    /// Requests admitted and prefilled, with their prompt length.
    pub admitted: Vec<(RequestId, usize)>,
    /// Requests that got one decoded token, with the position written.
    pub decoded: Vec<(RequestId, usize)>,
    /// Requests preempted for lack of blocks, with the blocks they gave back.
    pub preempted: Vec<(RequestId, Vec<u32>)>,
    /// Requests that could not be admitted (OOM for their prompt).
    pub waiting: Vec<RequestId>,
    /// Requests that finished, with the blocks they returned.
    pub finished: Vec<(RequestId, Vec<u32>)>,
}

impl StepEvents {
    /// Whether the pool ran out this step (a preemption or a request left waiting).
    pub fn oom(&self) -> bool {
        !self.preempted.is_empty() || !self.waiting.is_empty()
    }
}

/// A request's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Live {
    id: RequestId,
    spec: RequestSpec,
    generated: usize,
}

/// Why a scenario cannot run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// A request could never fit, even in an empty pool.
    #[error(
        "request {id} needs {need} blocks for its {tokens} tokens but the pool has only {total}: it could never run"
    )]
    NeverFits {
        /// The request.
        id: RequestId,
        /// Blocks it needs at its longest.
        need: usize,
        /// Its longest length.
        tokens: usize,
        /// Blocks in the pool.
        total: usize,
    },
    /// A request with nothing to do.
    #[error("request {0} has an empty prompt")]
    EmptyPrompt(RequestId),
}

/// Runs a scenario step by step.
#[derive(Debug, Clone)]
pub struct Scheduler {
    cache: PagedKvCache,
    specs: Vec<RequestSpec>,
    waiting: VecDeque<Live>,
    running: Vec<Live>,
    done: Vec<RequestId>,
    step: usize,
}

impl Scheduler {
    /// A scheduler over an empty pool of `shape`; request ids are the indices of `specs`.
    pub fn new(shape: PagedShape, specs: Vec<RequestSpec>) -> Result<Self, ScenarioError> {
        for (i, s) in specs.iter().enumerate() {
            let id = i as RequestId;
            if s.prompt == 0 {
                return Err(ScenarioError::EmptyPrompt(id));
            }
            let tokens = s.prompt + s.generate;
            let need = shape.blocks_for(tokens);
            if need > shape.num_blocks {
                return Err(ScenarioError::NeverFits {
                    id,
                    need,
                    tokens,
                    total: shape.num_blocks,
                });
            }
        }
        Ok(Self {
            cache: PagedKvCache::new(shape),
            specs,
            waiting: VecDeque::new(),
            running: Vec::new(),
            done: Vec::new(),
            step: 0,
        })
    }

    /// The cache as it is now.
    pub fn cache(&self) -> &PagedKvCache {
        &self.cache
    }

    /// Requests running now, oldest first.
    pub fn running(&self) -> Vec<RequestId> {
        self.running.iter().map(|l| l.id).collect()
    }

    /// Requests waiting now, in admission order.
    pub fn waiting(&self) -> Vec<RequestId> {
        self.waiting.iter().map(|l| l.id).collect()
    }

    /// Whether every request finished.
    pub fn is_done(&self) -> bool {
        self.done.len() == self.specs.len()
    }

    /// Run one step.
    pub fn step(&mut self) -> StepEvents {
        let mut ev = StepEvents {
            step: self.step,
            ..Default::default()
        };
        for (i, s) in self.specs.iter().enumerate() {
            if s.arrive == self.step {
                ev.arrived.push(i as RequestId);
                self.waiting.push_back(Live {
                    id: i as RequestId,
                    spec: *s,
                    generated: 0,
                });
            }
        }
        // 1. admission (prefill), strictly in order
        while let Some(front) = self.waiting.front().copied() {
            let len = front.spec.prompt + front.generated; // a preempted request recomputes what it had
            match self.cache.append_slots(front.id, len) {
                Ok(_) => {
                    self.waiting.pop_front();
                    ev.admitted.push((front.id, len));
                    self.running.push(front);
                }
                Err(_) => {
                    ev.waiting.extend(self.waiting.iter().map(|l| l.id));
                    break;
                }
            }
        }
        // 2. one decode token per running request that still has tokens to generate, oldest first
        let mut i = 0;
        while i < self.running.len() {
            let live = self.running[i];
            if live.generated >= live.spec.generate {
                i += 1;
                continue;
            }
            match self.cache.append_slots(live.id, 1) {
                Ok(_) => {
                    ev.decoded.push((live.id, self.cache.len(live.id) - 1));
                    self.running[i].generated += 1;
                    i += 1;
                }
                Err(_) => {
                    // Preempt the newest running request and retry this one (unless it is the newest).
                    let victim = self.running.pop().expect("running is not empty");
                    let blocks = self
                        .cache
                        .free_request(victim.id)
                        .expect("a running request has a table");
                    ev.preempted.push((victim.id, blocks));
                    self.waiting.push_front(victim);
                }
            }
        }
        // 3. finish
        let mut k = 0;
        while k < self.running.len() {
            let live = self.running[k];
            if live.generated >= live.spec.generate {
                let blocks = self.cache.free_request(live.id).expect("a running request has a table");
                ev.finished.push((live.id, blocks));
                self.done.push(live.id);
                self.running.remove(k);
            } else {
                k += 1;
            }
        }
        self.step += 1;
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(num_blocks: usize, block_size: usize) -> PagedShape {
        PagedShape {
            num_blocks,
            block_size,
            kv_heads: 1,
            head_dim: 1,
        }
    }

    const SCENARIO: [RequestSpec; 5] = [
        RequestSpec {
            arrive: 0,
            prompt: 7,
            generate: 6,
        },
        RequestSpec {
            arrive: 0,
            prompt: 3,
            generate: 9,
        },
        RequestSpec {
            arrive: 2,
            prompt: 12,
            generate: 4,
        },
        RequestSpec {
            arrive: 3,
            prompt: 5,
            generate: 10,
        },
        RequestSpec {
            arrive: 6,
            prompt: 2,
            generate: 3,
        },
    ];

    fn replay(num_blocks: usize, block_size: usize) -> (Vec<StepEvents>, Scheduler) {
        let mut s = Scheduler::new(shape(num_blocks, block_size), SCENARIO.to_vec()).unwrap();
        let mut log = Vec::new();
        while !s.is_done() {
            let ev = s.step();
            s.cache()
                .check_invariants()
                .unwrap_or_else(|e| panic!("bs {block_size} step {}: {e}", ev.step));
            // a request's tokens never exceed prompt + generate
            for &id in s.cache().tables().keys() {
                let sp = SCENARIO[id as usize];
                assert!(s.cache().len(id) <= sp.prompt + sp.generate);
            }
            log.push(ev);
            assert!(log.len() < 500, "the scenario must finish");
        }
        (log, s)
    }

    #[test]
    fn scenario_finishes_with_invariants_at_every_block_size() {
        for bs in [1, 2, 3, 4, 8, 16, 64] {
            let blocks = (40usize).div_ceil(bs).max(1) + 2;
            let (log, s) = replay(blocks, bs);
            assert!(s.cache().is_empty(), "every block returned at the end");
            assert_eq!(s.cache().allocator().num_free(), blocks);
            let finished: usize = log.iter().map(|e| e.finished.len()).sum();
            assert_eq!(finished, SCENARIO.len());
        }
    }

    #[test]
    fn a_small_pool_reaches_oom_then_preempts_and_still_finishes() {
        let (log, s) = replay(6, 4); // 24 slots: far less than the 68 tokens requested
        assert!(
            log.iter().any(|e| !e.preempted.is_empty()),
            "the newest request is preempted"
        );
        assert!(log.iter().any(|e| !e.waiting.is_empty()), "a request waits for blocks");
        assert!(s.is_done());
        // every decoded position is the next one of its request
        let mut next = [0usize; 5];
        for e in &log {
            for &(id, len) in &e.admitted {
                next[id as usize] = len;
            }
            for &(id, pos) in &e.decoded {
                assert_eq!(pos, next[id as usize]);
                next[id as usize] += 1;
            }
        }
    }

    #[test]
    fn impossible_requests_are_refused_up_front() {
        let e = Scheduler::new(
            shape(2, 4),
            vec![RequestSpec {
                arrive: 0,
                prompt: 7,
                generate: 5,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("could never run"));
        assert!(
            Scheduler::new(
                shape(2, 4),
                vec![RequestSpec {
                    arrive: 0,
                    prompt: 0,
                    generate: 1
                }]
            )
            .is_err()
        );
    }
}
