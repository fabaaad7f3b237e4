//! Lesson 12's serving on the trained model: every schedule computes attention with `paged_prefill`
//! over the f16 paged cache, so chunked prefill under any token budget generates exactly the bytes that
//! whole-prompt scheduling generates (greedy), with and without preemption.

use kvscope::cache::{KvDtype, PagedShape};
use kvscope::compute::CpuBackend;
use kvscope::drivers::serve::ServedRequest;
use kvscope::kv::{ChunkedPrefill, SchedulePolicy, WholePrompt};
use kvscope::model::HELDOUT;

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
    use kvscope::drivers::serve::{DEFAULT_SCENARIO, scenario};
    use kvscope::kv::WholeUnderBudget;
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

/// The bytes (and scales) of every row of `req` in every layer, K then V, in position order.
fn rows(e: &kvscope::kv::KvEngine, req: u32) -> Vec<(Vec<u8>, Vec<f32>)> {
    let s = e.shape();
    let mut out = Vec::new();
    for l in 0..e.layers() {
        let (k, v) = e.pools(l).unwrap();
        for pool in [k, v] {
            let per = pool.bytes.len() / s.numel();
            for pos in 0..e.cache().len(req) {
                let slot = e.cache().slot(req, pos).unwrap();
                let (b, o) = (slot / s.block_size, slot % s.block_size);
                for h in 0..s.kv_heads {
                    let at = s.index(b, h, o, 0) * per;
                    out.push((
                        pool.bytes[at..at + s.head_dim * per].to_vec(),
                        pool.scales[s.row_scales(b, h, o)].to_vec(),
                    ));
                }
            }
        }
    }
    out
}

/// Swapping a request out to a host pool and back restores its K/V bit for bit (values and scales, every
/// layer, every dtype), in other blocks than it left; the blocks it held are free meanwhile.
#[test]
fn swap_out_and_back_restores_the_blocks_bit_for_bit() {
    use kvscope::kv::KvEngine;
    use kvscope::math::Rng;
    for dtype in KvDtype::BUILTIN {
        let shape = |num_blocks| PagedShape {
            num_blocks,
            block_size: 4,
            kv_heads: 2,
            head_dim: 8,
            dtype,
        };
        let mut gpu = KvEngine::new(shape(16), 3);
        let mut host = KvEngine::new(shape(8), 3);
        let mut rng = Rng::new(5);
        let slots = gpu.reserve(0, 10).unwrap();
        for l in 0..3 {
            let k = rng.normal_vec(10 * 2 * 8, 1.0);
            let v = rng.normal_vec(10 * 2 * 8, 1.0);
            gpu.write(&CpuBackend, l, &slots, &k, &v).unwrap();
        }
        let before = rows(&gpu, 0);
        let table = gpu.cache().table(0).unwrap().to_vec();
        host.reserve(7, 3).unwrap(); // the host pool is not empty: other block ids
        let free = gpu.cache().allocator().num_free();
        let out = gpu.swap_out(0, &mut host).unwrap();
        assert_eq!(
            out,
            3 * 2 * 3 * 4 * 2 * 8 * dtype.bytes_per_value() as usize,
            "{}",
            dtype.name()
        );
        assert!(gpu.cache().table(0).is_none());
        assert_eq!(gpu.cache().allocator().num_free(), free + 3);
        assert_eq!(rows(&host, 0), before, "{}: host copy", dtype.name());
        gpu.reserve(1, 5).unwrap(); // someone else takes the freed blocks
        gpu.swap_in(0, &mut host).unwrap();
        assert!(host.cache().table(0).is_none());
        assert_ne!(gpu.cache().table(0).unwrap(), table.as_slice(), "new blocks");
        assert_eq!(gpu.cache().len(0), 10);
        assert_eq!(rows(&gpu, 0), before, "{}: swapped back", dtype.name());
        assert!(gpu.swap_in(0, &mut host).is_err(), "nothing left to swap in");
    }
}

/// The stored latencies time whole prompts and chunked prefill at the largest budget (lesson 12 step 2
/// says their two points timed the same schedule there): at 256 the 192-byte prompt fits in one step, so
/// chunking never splits it and the steps are equal; at 32 they are not (whole prompts refuse the
/// scenario, chunks split it).
#[test]
fn whole_prompts_and_chunks_schedule_alike_only_where_no_prompt_is_split() {
    use kvscope::lessons::serving::measure::{BUDGETS, default_schedule};
    let top = BUDGETS[BUDGETS.len() - 1];
    let whole = default_schedule(false, top).unwrap();
    let chunked = default_schedule(true, top).unwrap();
    assert_eq!(whole, chunked);
    assert!(
        whole.iter().any(|(work, _)| work.iter().any(|&(_, n)| n == 192)),
        "the long prompt in one step"
    );
    let small = default_schedule(true, 32).unwrap();
    assert_ne!(small, chunked);
    assert!(small.iter().all(|(work, _)| work.iter().all(|&(_, n)| n <= 32)));
    assert!(
        default_schedule(false, 32).is_err(),
        "whole prompts refuse a 192-byte prompt at 32"
    );
}
