//! Lesson 12's serving on the trained model: every schedule computes attention with `paged_prefill`
//! over the f16 paged cache, so chunked prefill under any token budget generates exactly the bytes that
//! whole-prompt scheduling generates (greedy), with and without preemption.

use kvscope::cache::{KvDtype, PagedShape};
use kvscope::compute::CpuBackend;
use kvscope::kv::{ChunkedPrefill, SchedulePolicy, WholePrompt};
use kvscope::model::HELDOUT;
use kvscope::model::serve::ServedRequest;

fn requests() -> Vec<ServedRequest> {
    let at = |from: usize, len: usize| HELDOUT[from..from + len].to_vec();
    vec![
        ServedRequest {
            arrive: 0,
            prompt: at(0, 40),
            generate: 10,
        },
        ServedRequest {
            arrive: 1,
            prompt: at(300, 23),
            generate: 12,
        },
        ServedRequest {
            arrive: 3,
            prompt: at(700, 61),
            generate: 8,
        },
    ]
}

fn shape(num_blocks: usize, block_size: usize) -> PagedShape {
    PagedShape {
        num_blocks,
        block_size,
        kv_heads: 1,
        head_dim: 1,
        dtype: KvDtype::F16,
    }
}

#[test]
fn chunked_prefill_generates_the_bytes_of_whole_prompts() {
    let m = kvscope::model::shared().unwrap();
    let reqs = requests();
    for (blocks, bs) in [(64, 4), (20, 4)] {
        let whole = m
            .serve(shape(blocks, bs), &reqs, Box::new(WholePrompt), &CpuBackend)
            .unwrap();
        for (r, out) in reqs.iter().zip(&whole.outputs) {
            assert_eq!(out.len(), r.generate);
        }
        for (budget, chunk) in [(8, 0), (16, 5), (3, 0)] {
            let policy: Box<dyn SchedulePolicy> = Box::new(ChunkedPrefill { budget, chunk });
            let run = m.serve(shape(blocks, bs), &reqs, policy, &CpuBackend).unwrap();
            assert_eq!(
                run.outputs, whole.outputs,
                "budget {budget}, chunk {chunk}, {blocks} blocks of {bs}"
            );
            // Chunk tokens plus decodes never exceed the budget in any step.
            for e in &run.steps {
                let tokens = e.chunks.iter().map(|c| c.2).sum::<usize>() + e.decoded.len();
                assert!(tokens <= budget, "step {}: {tokens} > {budget}", e.step);
            }
        }
        if blocks == 20 {
            // 80 slots for 154 tokens: someone is preempted and recomputed, and the bytes still agree.
            assert!(whole.steps.iter().any(|e| !e.preempted.is_empty()));
        }
    }
}

/// Without chunking under a token budget, a prompt longer than the budget is refused before anything
/// runs; with a budget that holds every prompt the bytes are those of whole prompts, and the long
/// prompt's arrival step computes all of it at once, while chunking spreads it over steps within the
/// budget. Latencies are counted from each request's arrival to each byte's first sampling.
#[test]
fn a_budget_with_and_without_chunking() {
    use kvscope::kv::WholeUnderBudget;
    use kvscope::model::serve::{DEFAULT_SCENARIO, scenario};
    let m = kvscope::model::shared().unwrap();
    let reqs = scenario(&DEFAULT_SCENARIO).unwrap();
    let long = reqs.len() - 1;
    let err = m
        .serve(
            shape(128, 16),
            &reqs,
            Box::new(WholeUnderBudget { budget: 64 }),
            &CpuBackend,
        )
        .unwrap_err();
    assert!(err.contains("token budget of 64"), "{err}");
    let whole = m
        .serve(
            shape(128, 16),
            &reqs,
            Box::new(WholeUnderBudget { budget: 256 }),
            &CpuBackend,
        )
        .unwrap();
    let chunked = m
        .serve(
            shape(128, 16),
            &reqs,
            Box::new(ChunkedPrefill { budget: 16, chunk: 0 }),
            &CpuBackend,
        )
        .unwrap();
    assert_eq!(whole.outputs, chunked.outputs);
    let arrivals: Vec<usize> = reqs.iter().map(|r| r.arrive).collect();
    for run in [&whole, &chunked] {
        for (i, (lat, r)) in run.latencies(&arrivals).iter().zip(&reqs).enumerate() {
            let lat = lat.as_ref().expect("every request emits");
            assert_eq!(run.emit_steps[i].len(), r.generate);
            assert_eq!(lat.itl_steps.len(), r.generate - 1);
            assert!(lat.ttft_steps >= 1 && lat.ttft_seconds > 0.0);
            assert!(lat.itl_seconds.iter().all(|&s| s > 0.0));
        }
    }
    let tokens = |e: &kvscope::kv::StepEvents| e.chunks.iter().map(|c| c.2).sum::<usize>() + e.decoded.len();
    // Whole: the long prompt is one step's work, next to the running decodes, and its first byte comes
    // in the step it arrives.
    let arrive = reqs[long].arrive;
    assert_eq!(
        whole.steps[arrive]
            .chunks
            .iter()
            .find(|c| c.0 == long as u32)
            .map(|c| c.2),
        Some(192)
    );
    assert!(tokens(&whole.steps[arrive]) > 192);
    assert_eq!(whole.latencies(&arrivals)[long].as_ref().unwrap().ttft_steps, 1);
    // Chunked at 16: never more than 16 tokens a step, so the long prompt takes at least 12 steps.
    assert!(chunked.steps.iter().all(|e| tokens(e) <= 16));
    assert!(chunked.latencies(&arrivals)[long].as_ref().unwrap().ttft_steps >= 12);
}
