//! A scripted serving scenario on the KV engine, as a continuous-batching engine (vLLM-style) runs
//! it: the scheduler of lesson 5's step-by-step views, with the policy pluggable.
//!
//! How today's policy ([`WholePrompt`]) works: requests arrive at given steps with a prompt length and
//! a number of tokens to generate. Each [`Scheduler::step`] follows the policy of vLLM's V1 scheduler
//! (`vllm/v1/core/sched/scheduler.py`), reduced to whole prompts and one token per decode:
//! 1. the **running** requests are served first, in arrival order: each appends one decoded token. When
//!    one needs a block and none is free, the newest running request is **preempted**: its blocks are
//!    freed and it goes back to the front of the waiting queue, to be prefilled again later
//!    (recompute: its prompt plus every token it had generated);
//! 2. only in a step without preemption, **waiting** requests are admitted in arrival order while their
//!    whole prompt fits (prefill); the first that does not fit waits, and so does everyone behind it.
//!    A request admitted in a step decodes from the next step on;
//! 3. requests that generated all their tokens finish and return their blocks to the free list.
//!
//! Real engines differ in ways the lesson names: vLLM also keeps a watermark of free blocks, schedules
//! by a token budget (chunked prefill), and vLLM V0 could swap a preempted request's blocks to CPU
//! memory instead of recomputing them. A [`SchedulePolicy`] decides steps 1 and 2; a step's events
//! have room for prefill chunks and draft tokens, so a token budget or speculative decoding is another
//! policy, not another scheduler.
//!
//! Every step reports what happened, so a lesson can show it; the cache's invariants hold throughout.

use std::collections::VecDeque;

use super::KvEngine;
use crate::cache::{PagedKvCache, PagedShape, RequestId};

/// One request of a scenario: the one request type of the engine's users (lesson 7's prompts are its
/// token ids, given to [`KvEngine::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Request {
    /// Step at which it arrives.
    pub arrive: usize,
    /// Prompt tokens.
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
    /// Admitted requests that had been preempted, with the tokens they prefill again (prompt plus the
    /// tokens they had generated): the cost of recompute.
    pub recomputed: Vec<(RequestId, usize)>,
    /// Requests that finished, with the blocks they returned.
    pub finished: Vec<(RequestId, Vec<u32>)>,
    /// Prefill chunks `(request, first position, tokens)` of a policy that splits prompts (a token
    /// budget); whole-prompt admissions are in `admitted`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<(RequestId, usize, usize)>,
    /// Draft tokens `(request, first position, tokens)` reserved for verification (speculative decoding).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drafted: Vec<(RequestId, usize, usize)>,
}

impl StepEvents {
    /// The step's prefill work `(request, first position, tokens)`: the policy's chunks, or whole prompts
    /// (admissions) for a policy that records none.
    pub fn prefill_work(&self) -> Vec<(RequestId, usize, usize)> {
        let mut work = self.chunks.clone();
        for &(id, len) in &self.admitted {
            if !work.iter().any(|w| w.0 == id) {
                work.push((id, 0, len));
            }
        }
        work
    }

    /// Whether the pool ran out this step (a preemption or a request left waiting).
    pub fn oom(&self) -> bool {
        !self.preempted.is_empty() || !self.waiting.is_empty()
    }
}

/// A request's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// Its id.
    pub id: RequestId,
    /// The request.
    pub req: Request,
    /// Tokens it generated.
    pub generated: usize,
    /// Tokens of its prompt (plus recomputed ones) prefilled so far, for a policy that prefills in
    /// chunks ([`WholePrompt`] prefills all at once and leaves it 0).
    pub prefilled: usize,
}

/// The scheduler's queues, as a policy sees them.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    /// Waiting, in admission order (a preempted request goes to the front).
    pub waiting: VecDeque<Live>,
    /// Running, oldest first.
    pub running: Vec<Live>,
}

/// How a step is scheduled: which running requests compute how many tokens, who is preempted, who is
/// admitted. A policy reserves the slots of what it schedules in `cache` (the engine's block manager)
/// and records it in `ev`; arrivals and finishing are the scheduler's.
pub trait SchedulePolicy: std::fmt::Debug + Send + Sync {
    /// Its name, for views.
    fn name(&self) -> &'static str;
    /// Schedule one step.
    fn schedule(&mut self, q: &mut Queues, cache: &mut PagedKvCache, ev: &mut StepEvents);
    /// Whether `live` is done (today: it generated all its tokens).
    fn finished(&self, live: &Live) -> bool {
        live.generated >= live.req.generate
    }
    /// A copy of the policy in its current state.
    fn boxed_clone(&self) -> Box<dyn SchedulePolicy>;
    /// Whether request `id` can ever be scheduled by this policy (checked when a scenario starts).
    fn validate(&self, _id: RequestId, _req: &Request) -> Result<(), ScenarioError> {
        Ok(())
    }
}

impl Clone for Box<dyn SchedulePolicy> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

/// vLLM V1's policy reduced to whole prompts and one token per decode (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct WholePrompt;

impl SchedulePolicy for WholePrompt {
    fn name(&self) -> &'static str {
        "vLLM V1, whole prompts"
    }

    fn schedule(&mut self, q: &mut Queues, cache: &mut PagedKvCache, ev: &mut StepEvents) {
        // 1. The running requests first, oldest first: one decoded token each. When one needs a block
        //    and none is free, the newest running request is preempted (its blocks are freed and it
        //    goes back to the front of the queue, to be recomputed), until the block is found or the
        //    request needing it was itself the newest.
        let mut i = 0;
        while i < q.running.len() {
            let live = q.running[i];
            match cache.append_slots(live.id, 1) {
                Ok(_) => {
                    ev.decoded.push((live.id, cache.len(live.id) - 1));
                    q.running[i].generated += 1;
                    i += 1;
                }
                Err(_) => {
                    let victim = q.running.pop().expect("running is not empty");
                    let blocks = cache.free_request(victim.id).expect("a running request has a table");
                    ev.preempted.push((victim.id, blocks));
                    q.waiting.push_front(victim);
                }
            }
        }
        // 2. Admission (prefill), in arrival order, only in a step without preemption, while the whole
        //    prompt fits; a preempted request recomputes its prompt plus the tokens it had generated.
        if ev.preempted.is_empty() {
            while let Some(front) = q.waiting.front().copied() {
                let len = front.req.prompt + front.generated;
                if cache.append_slots(front.id, len).is_err() {
                    ev.waiting.extend(q.waiting.iter().map(|l| l.id));
                    break;
                }
                q.waiting.pop_front();
                ev.admitted.push((front.id, len));
                if front.generated > 0 {
                    ev.recomputed.push((front.id, len));
                }
                q.running.push(front);
            }
        }
    }

    fn boxed_clone(&self) -> Box<dyn SchedulePolicy> {
        Box::new(*self)
    }
}

/// vLLM V1's policy with a token budget (chunked prefill): each step schedules at most `budget` tokens.
/// 1. The **running** requests first, oldest first, while budget is left: a request still prefilling
///    (its prompt, plus what it had generated when it was preempted) gets its next chunk, at most
///    `chunk` tokens (vLLM's `long_prefill_token_threshold`; 0: no cap) and at most the budget left; a
///    decoding request gets one token. A request that needs a block when none is free preempts the
///    newest running request, as [`WholePrompt`] does (its progress is lost: it recomputes).
/// 2. Only in a step without preemption, **waiting** requests are admitted in arrival order while
///    budget is left, each with its first chunk (the same caps); the first whose chunk does not fit in
///    the free blocks waits, and so does everyone behind it.
///
/// A chunk that completes a request's prefill makes it decode from the next step on, as a whole prompt
/// does under [`WholePrompt`]; so with a budget at least as large as every prompt and no cap, the two
/// policies schedule the same steps. Chunks are recorded in `StepEvents::chunks` (and the first chunk's
/// admission in `admitted`, with the chunk's length).
#[derive(Debug, Clone, Copy)]
pub struct ChunkedPrefill {
    /// Tokens one step may schedule (vLLM's `max_num_batched_tokens`), at least 1.
    pub budget: usize,
    /// The most prefill tokens one request gets in a step (0: no cap).
    pub chunk: usize,
}

impl ChunkedPrefill {
    /// The prefill tokens `live` gets now with `left` budget: what remains of its prompt (plus the
    /// tokens to recompute), capped by the chunk size and the budget.
    fn next_chunk(&self, live: &Live, left: usize) -> usize {
        let remaining = (live.req.prompt + live.generated).saturating_sub(live.prefilled);
        let capped = if self.chunk > 0 {
            remaining.min(self.chunk)
        } else {
            remaining
        };
        capped.min(left)
    }
}

impl SchedulePolicy for ChunkedPrefill {
    fn name(&self) -> &'static str {
        "vLLM V1, token budget (chunked prefill)"
    }

    fn schedule(&mut self, q: &mut Queues, cache: &mut PagedKvCache, ev: &mut StepEvents) {
        budget_schedule(self.budget, |live, left| self.next_chunk(live, left), q, cache, ev);
    }

    fn boxed_clone(&self) -> Box<dyn SchedulePolicy> {
        Box::new(*self)
    }
}

/// vLLM V1's policy with a token budget and chunked prefill switched off: each step schedules at most
/// `budget` tokens, running requests first (one decoded token each), then waiting requests in arrival
/// order while their **whole** prompt fits in what is left of the budget; the first that does not fit
/// waits for a later step, and so does everyone behind it. A prompt longer than the budget could never
/// run, so the scenario is rejected when it starts ([`ScenarioError::OverBudget`]), as vLLM refuses a
/// `max_num_batched_tokens` smaller than `max_model_len` when chunked prefill is off. A preempted request
/// recomputes its prompt plus what it had generated in one step, so that must fit too.
#[derive(Debug, Clone, Copy)]
pub struct WholeUnderBudget {
    /// Tokens one step may schedule (vLLM's `max_num_batched_tokens`), at least 1.
    pub budget: usize,
}

impl SchedulePolicy for WholeUnderBudget {
    fn name(&self) -> &'static str {
        "vLLM V1, token budget, no chunking"
    }

    fn schedule(&mut self, q: &mut Queues, cache: &mut PagedKvCache, ev: &mut StepEvents) {
        let whole = |live: &Live, left: usize| {
            let remaining = (live.req.prompt + live.generated).saturating_sub(live.prefilled);
            if remaining <= left { remaining } else { 0 }
        };
        budget_schedule(self.budget, whole, q, cache, ev);
    }

    fn boxed_clone(&self) -> Box<dyn SchedulePolicy> {
        Box::new(*self)
    }

    fn validate(&self, id: RequestId, req: &Request) -> Result<(), ScenarioError> {
        // The longest prefill: the prompt, plus all but the last generated token after a preemption.
        let longest = req.prompt + req.generate.saturating_sub(1);
        if longest > self.budget.max(1) {
            return Err(ScenarioError::OverBudget {
                id,
                prompt: req.prompt,
                longest,
                budget: self.budget,
            });
        }
        Ok(())
    }
}

/// One step under a token budget: running requests first (a prefilling one gets `chunk(live, left)`
/// tokens, a decoding one a token), preempting the newest when a block is missing; then, in a step
/// without preemption, waiting requests in arrival order with their first chunk while budget is left. A
/// chunk of 0 tokens means "not now": the request waits, and so does everyone behind it.
fn budget_schedule(
    budget: usize,
    chunk: impl Fn(&Live, usize) -> usize,
    q: &mut Queues,
    cache: &mut PagedKvCache,
    ev: &mut StepEvents,
) {
    let mut left = budget.max(1);
    // 1. Running requests, oldest first, while budget is left.
    let mut i = 0;
    while i < q.running.len() && left > 0 {
        let live = q.running[i];
        let prefilling = live.prefilled < live.req.prompt + live.generated;
        let n = if prefilling { chunk(&live, left) } else { 1 };
        if n == 0 {
            break;
        }
        match cache.append_slots(live.id, n) {
            Ok(_) => {
                if prefilling {
                    ev.chunks.push((live.id, live.prefilled, n));
                    q.running[i].prefilled += n;
                } else {
                    ev.decoded.push((live.id, cache.len(live.id) - 1));
                    q.running[i].generated += 1;
                    q.running[i].prefilled += 1;
                }
                left -= n;
                i += 1;
            }
            Err(_) => {
                let mut victim = q.running.pop().expect("running is not empty");
                let blocks = cache.free_request(victim.id).expect("a running request has a table");
                ev.preempted.push((victim.id, blocks));
                // Recompute: its prompt and what it generated are prefilled again.
                victim.prefilled = 0;
                q.waiting.push_front(victim);
            }
        }
    }
    // 2. Admission with the budget left, in arrival order, only in a step without preemption.
    if ev.preempted.is_empty() {
        while left > 0 {
            let Some(front) = q.waiting.front().copied() else { break };
            let n = chunk(&front, left);
            if n == 0 {
                break;
            }
            if cache.append_slots(front.id, n).is_err() {
                ev.waiting.extend(q.waiting.iter().map(|l| l.id));
                break;
            }
            q.waiting.pop_front();
            ev.admitted.push((front.id, n));
            ev.chunks.push((front.id, 0, n));
            if front.generated > 0 {
                ev.recomputed.push((front.id, front.req.prompt + front.generated));
            }
            let mut live = front;
            live.prefilled = n;
            q.running.push(live);
            left -= n;
        }
    }
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
    /// A prompt that one step's token budget cannot hold, under a policy that does not chunk.
    #[error(
        "request {id}: without chunked prefill a request's prefill must fit in one step's token budget of {budget}, but its longest prefill is {longest} tokens (its prompt of {prompt}, plus what it recomputes after a preemption); raise the budget or use chunked prefill"
    )]
    OverBudget {
        /// The request.
        id: RequestId,
        /// Its prompt tokens.
        prompt: usize,
        /// Its longest prefill (prompt plus all but one generated token).
        longest: usize,
        /// The budget.
        budget: usize,
    },
}

/// Runs a scenario step by step on a [`KvEngine`].
#[derive(Debug, Clone)]
pub struct Scheduler {
    engine: KvEngine,
    policy: Box<dyn SchedulePolicy>,
    specs: Vec<Request>,
    q: Queues,
    done: Vec<RequestId>,
    step: usize,
}

impl Scheduler {
    /// A scheduler over an empty one-layer engine of `shape`, with today's policy; request ids are the
    /// indices of `specs`.
    pub fn new(shape: PagedShape, specs: Vec<Request>) -> Result<Self, ScenarioError> {
        Self::with_engine(KvEngine::new(shape, 1), specs, Box::new(WholePrompt))
    }

    /// A scheduler over `engine` (empty) with `policy`.
    pub fn with_engine(
        engine: KvEngine,
        specs: Vec<Request>,
        policy: Box<dyn SchedulePolicy>,
    ) -> Result<Self, ScenarioError> {
        let shape = engine.shape();
        for (i, s) in specs.iter().enumerate() {
            let id = i as RequestId;
            if s.prompt == 0 {
                return Err(ScenarioError::EmptyPrompt(id));
            }
            policy.validate(id, s)?;
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
            engine,
            policy,
            specs,
            q: Queues::default(),
            done: Vec::new(),
            step: 0,
        })
    }

    /// The cache as it is now.
    pub fn cache(&self) -> &PagedKvCache {
        self.engine.cache()
    }

    /// The engine (its pools, to write and decode).
    pub fn engine(&self) -> &KvEngine {
        &self.engine
    }

    /// The engine, to write K/V of the step's tokens.
    pub fn engine_mut(&mut self) -> &mut KvEngine {
        &mut self.engine
    }

    /// The policy.
    pub fn policy(&self) -> &dyn SchedulePolicy {
        self.policy.as_ref()
    }

    /// Requests running now, oldest first.
    pub fn running(&self) -> Vec<RequestId> {
        self.q.running.iter().map(|l| l.id).collect()
    }

    /// Requests waiting now, in admission order.
    pub fn waiting(&self) -> Vec<RequestId> {
        self.q.waiting.iter().map(|l| l.id).collect()
    }

    /// Whether every request finished.
    pub fn is_done(&self) -> bool {
        self.done.len() == self.specs.len()
    }

    /// Run one step: arrivals, the policy's schedule, then finishing.
    pub fn step(&mut self) -> StepEvents {
        match self.step_with(|_, _| Ok::<(), std::convert::Infallible>(())) {
            Ok(ev) => ev,
            Err(never) => match never {},
        }
    }

    /// [`Self::step`], with `run` called between the schedule and finishing: the step's slots are
    /// reserved and no finished request has returned its blocks yet, so `run` can write the K/V of what
    /// was scheduled and attend (lesson 12 runs the model there). An error from `run` ends the step
    /// before finishing.
    pub fn step_with<E>(
        &mut self,
        run: impl FnOnce(&mut KvEngine, &StepEvents) -> Result<(), E>,
    ) -> Result<StepEvents, E> {
        let mut ev = StepEvents {
            step: self.step,
            ..Default::default()
        };
        for (i, s) in self.specs.iter().enumerate() {
            if s.arrive == self.step {
                ev.arrived.push(i as RequestId);
                self.q.waiting.push_back(Live {
                    id: i as RequestId,
                    req: *s,
                    generated: 0,
                    prefilled: 0,
                });
            }
        }
        self.policy.schedule(&mut self.q, self.engine.cache_mut(), &mut ev);
        run(&mut self.engine, &ev)?;
        // 3. finish
        let mut k = 0;
        while k < self.q.running.len() {
            let live = self.q.running[k];
            if self.policy.finished(&live) {
                let blocks = self.engine.free(live.id).expect("a running request has a table");
                ev.finished.push((live.id, blocks));
                self.done.push(live.id);
                self.q.running.remove(k);
            } else {
                k += 1;
            }
        }
        self.step += 1;
        Ok(ev)
    }
}

#[cfg(test)]
mod tests;
