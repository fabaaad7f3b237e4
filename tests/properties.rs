//! Property tests: paged decode equals contiguous attention, and the allocator invariants hold under
//! random operation sequences.
//!
//! The allocator test runs `KVSCOPE_ALLOC_OPS` operations in total (default 100 000, which CI runs).
//! For the long run: `KVSCOPE_ALLOC_OPS=1000000 cargo test --release --test properties`.

use proptest::prelude::*;

use kvscope::cache::{PagedKvCache, PagedShape};
use kvscope::compute::{Backend, CpuBackend, DecodeTables, suite};
use kvscope::math::Rng;

fn total_alloc_ops() -> usize {
    std::env::var("KVSCOPE_ALLOC_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000)
}

const OPS_PER_CASE: usize = 1000;

#[derive(Debug, Clone)]
enum Op {
    Append { req: u32, tokens: usize },
    Free { req: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..6, 1usize..20).prop_map(|(req, tokens)| Op::Append { req, tokens }),
        1 => (0u32..6).prop_map(|req| Op::Free { req }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: (total_alloc_ops() / OPS_PER_CASE).max(1) as u32, ..ProptestConfig::default() })]

    #[test]
    fn allocator_invariants_hold_after_every_op(
        block_size in 1usize..9,
        num_blocks in 1usize..40,
        ops in proptest::collection::vec(op(), OPS_PER_CASE),
    ) {
        let mut c = PagedKvCache::new(PagedShape { num_blocks, block_size, kv_heads: 1, head_dim: 1, dtype: kvscope::cache::KvDtype::F16 });
        for op in ops {
            match op {
                Op::Append { req, tokens } => {
                    let before = c.stats(0);
                    match c.append_slots(req, tokens) {
                        Ok(slots) => {
                            prop_assert_eq!(slots.len(), tokens);
                            prop_assert_eq!(c.stats(0).tokens_stored, before.tokens_stored + tokens);
                        }
                        // OOM must leave everything as it was.
                        Err(e) => {
                            prop_assert!(e.needed > e.free);
                            prop_assert_eq!(c.stats(0), before);
                        }
                    }
                }
                Op::Free { req } => {
                    let had = c.table(req).map(|t| t.len());
                    let free_before = c.allocator().num_free();
                    match c.free_request(req) {
                        Ok(blocks) => {
                            prop_assert_eq!(Some(blocks.len()), had);
                            prop_assert_eq!(c.allocator().num_free(), free_before + blocks.len());
                        }
                        Err(_) => prop_assert!(had.is_none()),
                    }
                }
            }
            if let Err(msg) = c.check_invariants() {
                return Err(TestCaseError::fail(msg));
            }
            let st = c.stats(0);
            prop_assert_eq!(st.blocks_used + st.blocks_free, st.total_blocks);
            prop_assert!(st.internal_fragmentation < block_size * st.requests.max(1));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn paged_decode_equals_contiguous_attention(
        lens in proptest::collection::vec(0usize..70, 1..5),
        block_size in 1usize..20,
        kv_heads in 1usize..4,
        group in 1usize..4,
        head_dim in 1usize..40,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng::new(seed);
        let blocks: usize = lens.iter().map(|l| l.div_ceil(block_size)).sum::<usize>() * 2 + 2;
        let shape = PagedShape { num_blocks: blocks, block_size, kv_heads, head_dim, dtype: kvscope::cache::KvDtype::F16 };
        let cache = suite::scattered_cache(shape, &lens, &mut rng);
        cache.check_invariants().map_err(TestCaseError::fail)?;
        let reqs: Vec<u32> = (0..lens.len() as u32).collect();
        let dt = DecodeTables::new(&cache, &reqs);
        let heads = kv_heads * group;
        let q = rng.normal_vec(lens.len() * heads * head_dim, 1.0);
        let inp = dt.input(&cache, &q, heads);
        let report = suite::paged_equals_contiguous(&CpuBackend::new(), &inp).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(report.passed(), "{}", report);
        // A request with no tokens attends to nothing: zeros, never NaN.
        let out = CpuBackend::new().paged_decode(&inp).unwrap();
        prop_assert!(out.iter().all(|x| x.is_finite()));
    }
}

#[test]
fn cpu_backend_passes_the_full_suite() {
    let reports = suite::run(&CpuBackend::new(), 42);
    let failed: Vec<String> = reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(reports.len() > 40);
}

#[test]
fn cuda_kernels_on_the_cpu_shim_pass_the_full_suite() {
    // The real kernels/*.cu sources, compiled as C++ with kernels/shim and run on CPU threads.
    let b = kvscope::compute::cuda::SimBackend;
    let reports = suite::run(&b, 7);
    let failed: Vec<String> = reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn paged_decode_kernel_on_the_shim_equals_contiguous(
        lens in proptest::collection::vec(0usize..700, 1..4),
        block_size in 1usize..33,
        kv_heads in 1usize..3,
        group in 1usize..5,
        head_dim in 1usize..70,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng::new(seed);
        let blocks: usize = lens.iter().map(|l| l.div_ceil(block_size)).sum::<usize>() * 2 + 2;
        let shape = PagedShape { num_blocks: blocks, block_size, kv_heads, head_dim, dtype: kvscope::cache::KvDtype::F16 };
        let cache = suite::scattered_cache(shape, &lens, &mut rng);
        let reqs: Vec<u32> = (0..lens.len() as u32).collect();
        let dt = DecodeTables::new(&cache, &reqs);
        let heads = kv_heads * group;
        let q = rng.normal_vec(lens.len() * heads * head_dim, 1.0);
        let inp = dt.input(&cache, &q, heads);
        let report = suite::paged_equals_contiguous(&kvscope::compute::cuda::SimBackend, &inp).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(report.passed(), "{}", report);
    }
}
