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
