//! The scheduler's unit tests.

use super::*;

fn shape(num_blocks: usize, block_size: usize) -> PagedShape {
    PagedShape {
        num_blocks,
        block_size,
        kv_heads: 1,
        head_dim: 1,
        dtype: crate::cache::KvDtype::F16,
    }
}

const SCENARIO: [Request; 5] = [
    Request {
        arrive: 0,
        prompt: 7,
        generate: 6,
    },
    Request {
        arrive: 0,
        prompt: 3,
        generate: 9,
    },
    Request {
        arrive: 2,
        prompt: 12,
        generate: 4,
    },
    Request {
        arrive: 3,
        prompt: 5,
        generate: 10,
    },
    Request {
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
    assert!(
        log.iter().any(|e| !e.recomputed.is_empty()),
        "a preempted request is recomputed"
    );
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

/// The policy of vLLM's V1 scheduler, checked step by step at every block size: running requests
/// decode first in arrival order; only the newest running request is preempted, and only when a
/// block is missing; nothing is admitted in a step that preempts; admission is in arrival order and
/// stops at the first request whose prompt does not fit; an admitted request does not also decode in
/// that step; a recomputed request prefills its prompt plus what it had generated.
#[test]
fn steps_follow_the_v1_policy_at_every_block_size() {
    for bs in [1, 2, 3, 4, 8, 16, 64] {
        let blocks = (28usize).div_ceil(bs).max(4);
        let mut s = Scheduler::new(shape(blocks, bs), SCENARIO.to_vec()).unwrap();
        let mut generated = [0usize; 5];
        while !s.is_done() {
            let running_before = s.running();
            let waiting_before = s.waiting();
            let free_before = s.cache().allocator().num_free();
            let ev = s.step();
            let arrived: Vec<u32> = ev.arrived.clone();
            // decode order: the running requests of the step, oldest first, minus the preempted tail
            let decoded: Vec<u32> = ev.decoded.iter().map(|d| d.0).collect();
            let preempted: Vec<u32> = ev.preempted.iter().map(|p| p.0).collect();
            let kept: Vec<u32> = running_before
                .iter()
                .copied()
                .filter(|r| !preempted.contains(r))
                .collect();
            assert_eq!(
                decoded, kept,
                "bs {bs} step {}: running decode first, in order",
                ev.step
            );
            // only the newest are preempted, newest first
            let tail: Vec<u32> = running_before.iter().rev().take(preempted.len()).copied().collect();
            assert_eq!(preempted, tail, "bs {bs} step {}: newest preempted first", ev.step);
            if !preempted.is_empty() {
                assert!(
                    ev.admitted.is_empty(),
                    "bs {bs} step {}: no admission with preemption",
                    ev.step
                );
                assert!(
                    free_before < running_before.len(),
                    "bs {bs} step {}: preempted only when short",
                    ev.step
                );
            }
            // admission: a prefix of the queue (preempted first, then waiting, then new arrivals)
            let queue: Vec<u32> = waiting_before.iter().chain(&arrived).copied().collect();
            let admitted: Vec<u32> = ev.admitted.iter().map(|a| a.0).collect();
            assert_eq!(
                admitted,
                queue[..admitted.len()].to_vec(),
                "bs {bs} step {}: FCFS",
                ev.step
            );
            for &(id, len) in &ev.admitted {
                assert!(
                    !decoded.contains(&id),
                    "bs {bs} step {}: r{id} prefilled and decoded",
                    ev.step
                );
                assert_eq!(len, SCENARIO[id as usize].prompt + generated[id as usize]);
                if generated[id as usize] > 0 {
                    assert!(ev.recomputed.contains(&(id, len)));
                }
            }
            for &id in &decoded {
                generated[id as usize] += 1;
            }
            assert!(ev.step < 500);
        }
        assert_eq!(generated, SCENARIO.map(|r| r.generate), "bs {bs}");
    }
}

fn replay_with(num_blocks: usize, block_size: usize, policy: Box<dyn SchedulePolicy>) -> Vec<StepEvents> {
    let engine = KvEngine::new(shape(num_blocks, block_size), 1);
    let mut s = Scheduler::with_engine(engine, SCENARIO.to_vec(), policy).unwrap();
    let mut log = Vec::new();
    while !s.is_done() {
        let ev = s.step();
        s.cache()
            .check_invariants()
            .unwrap_or_else(|e| panic!("bs {block_size} step {}: {e}", ev.step));
        log.push(ev);
        assert!(log.len() < 1000, "the scenario must finish");
    }
    assert!(s.cache().is_empty());
    log
}

/// The token budget is never exceeded, a long prompt spans several steps, every request generates
/// all its tokens, and every decoded position follows the request's prefilled ones.
#[test]
fn chunked_prefill_keeps_its_budget_and_finishes() {
    for (budget, chunk) in [(4, 0), (5, 2), (8, 3), (16, 0), (1, 0)] {
        for bs in [1, 2, 4, 16] {
            let blocks = 64usize.div_ceil(bs) + 2;
            let log = replay_with(blocks, bs, Box::new(ChunkedPrefill { budget, chunk }));
            let mut generated = [0usize; 5];
            let mut cached = [0usize; 5];
            for e in &log {
                let tokens: usize = e.chunks.iter().map(|c| c.2).sum::<usize>() + e.decoded.len();
                assert!(
                    tokens <= budget,
                    "budget {budget} bs {bs} step {}: {tokens} tokens",
                    e.step
                );
                for &(id, _) in &e.preempted {
                    cached[id as usize] = 0;
                }
                for &(id, first, n) in &e.chunks {
                    assert_eq!(first, cached[id as usize], "chunks are consecutive");
                    assert!(chunk == 0 || n <= chunk);
                    cached[id as usize] += n;
                }
                for &(id, pos) in &e.decoded {
                    assert_eq!(pos, cached[id as usize]);
                    cached[id as usize] += 1;
                    generated[id as usize] += 1;
                }
            }
            let finished: usize = log.iter().map(|e| e.finished.len()).sum();
            assert_eq!(finished, SCENARIO.len());
            if budget < 12 {
                // Request 2's 12-token prompt cannot be one step's chunk.
                let steps = log.iter().filter(|e| e.chunks.iter().any(|c| c.0 == 2)).count();
                assert!(steps > 1, "budget {budget}: the long prompt spans steps");
            }
        }
    }
}

/// With a budget at least as large as every prompt, no chunk cap and a pool that never runs out,
/// the chunked policy schedules exactly the steps of the whole-prompt one.
#[test]
fn a_large_budget_schedules_as_whole_prompts() {
    let whole = replay_with(64, 4, Box::new(WholePrompt));
    let chunked = replay_with(64, 4, Box::new(ChunkedPrefill { budget: 1000, chunk: 0 }));
    assert_eq!(whole.len(), chunked.len());
    for (w, c) in whole.iter().zip(&chunked) {
        assert_eq!(w.admitted, c.admitted);
        assert_eq!(w.decoded, c.decoded);
        assert_eq!(w.finished, c.finished);
    }
}

/// Without chunking, a whole prompt is admitted only when it fits in what is left of the budget: no
/// prompt is ever split, the budget holds, and a large budget schedules as [`WholePrompt`]; a prompt
/// longer than the budget is refused when the scenario starts, with the numbers.
#[test]
fn whole_prompts_under_a_budget() {
    let whole = replay_with(64, 4, Box::new(WholePrompt));
    let big = replay_with(64, 4, Box::new(WholeUnderBudget { budget: 1000 }));
    assert_eq!(whole.len(), big.len());
    for (w, b) in whole.iter().zip(&big) {
        assert_eq!(
            (&w.admitted, &w.decoded, &w.finished),
            (&b.admitted, &b.decoded, &b.finished)
        );
    }
    // Request 2 (12 + 4 tokens) needs a budget of 15; 15 makes it wait for a quiet step.
    let log = replay_with(64, 4, Box::new(WholeUnderBudget { budget: 15 }));
    for e in &log {
        let tokens: usize = e.chunks.iter().map(|c| c.2).sum::<usize>() + e.decoded.len();
        assert!(tokens <= 15, "step {}: {tokens}", e.step);
        for &(id, first, n) in &e.chunks {
            assert_eq!(first, 0);
            assert_eq!(n, SCENARIO[id as usize].prompt, "whole prompts only");
        }
    }
    let engine = KvEngine::new(shape(64, 4), 1);
    let e = Scheduler::with_engine(engine, SCENARIO.to_vec(), Box::new(WholeUnderBudget { budget: 14 })).unwrap_err();
    assert_eq!(
        e,
        ScenarioError::OverBudget {
            id: 2,
            prompt: 12,
            longest: 15,
            budget: 14
        }
    );
    assert!(
        e.to_string()
            .contains("token budget of 14, but its longest prefill is 15 tokens"),
        "{e}"
    );
}

#[test]
fn impossible_requests_are_refused_up_front() {
    let e = Scheduler::new(
        shape(2, 4),
        vec![Request {
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
            vec![Request {
                arrive: 0,
                prompt: 0,
                generate: 1
            }]
        )
        .is_err()
    );
}
