//! The KV engine takes policies it does not know: a scheduling policy with a token budget (chunked
//! prefill) and an eviction policy that keeps the newest K tokens are defined here, in the test, and
//! plug into `kvscope::kv` unchanged. So does a one-pool (latent) layout, and the validity mask of
//! tokens a policy drops inside blocks that stay.

use half::f16;
use ndarray::{Array2, Array3};

use kvscope::cache::{KvDtype, PagedKvCache, PagedShape, RequestId};
use kvscope::compute::CpuBackend;
use kvscope::kv::{
    EngineError, EvictionPolicy, KvEngine, KvEvent, Live, PoolLayout, Queues, Request, SchedulePolicy, Scheduler,
    StepEvents,
};
use kvscope::math::{Rng, decode_attention_f64};

fn shape(num_blocks: usize, block_size: usize) -> PagedShape {
    PagedShape {
        num_blocks,
        block_size,
        kv_heads: 2,
        head_dim: 8,
        dtype: KvDtype::F16,
    }
}

/// Seeded K/V rows of one token (`[kv_heads, head_dim]` each).
fn token_kv(req: RequestId, pos: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::stream(u64::from(req) * 1000 + pos as u64, 5);
    (rng.normal_vec(16, 1.0), rng.normal_vec(16, 1.0))
}

/// Chunked prefill under a token budget (vLLM's `max_num_scheduled_tokens`): running requests decode
/// first, one token each; then prompts are prefilled in chunks, the running ones first, then the
/// waiting ones in arrival order, while the budget lasts. No preemption: the test's pool fits everyone.
#[derive(Debug, Clone)]
struct TokenBudget {
    budget: usize,
}

impl SchedulePolicy for TokenBudget {
    fn name(&self) -> &'static str {
        "token budget (test)"
    }

    fn schedule(&mut self, q: &mut Queues, cache: &mut PagedKvCache, ev: &mut StepEvents) {
        let mut left = self.budget;
        for live in q.running.iter_mut().filter(|l| l.prefilled >= l.req.prompt) {
            if left == 0 {
                break;
            }
            if cache.append_slots(live.id, 1).is_ok() {
                ev.decoded.push((live.id, cache.len(live.id) - 1));
                live.generated += 1;
                left -= 1;
            }
        }
        let chunk = |live: &mut Live, left: &mut usize, cache: &mut PagedKvCache, ev: &mut StepEvents| {
            let n = (live.req.prompt - live.prefilled).min(*left);
            if n > 0 && cache.append_slots(live.id, n).is_ok() {
                ev.chunks.push((live.id, live.prefilled, n));
                live.prefilled += n;
                *left -= n;
            }
        };
        for live in q.running.iter_mut().filter(|l| l.prefilled < l.req.prompt) {
            chunk(live, &mut left, cache, ev);
        }
        while left > 0 {
            let Some(mut live) = q.waiting.pop_front() else {
                break;
            };
            chunk(&mut live, &mut left, cache, ev);
            ev.admitted.push((live.id, live.prefilled));
            q.running.push(live);
        }
    }

    fn finished(&self, live: &Live) -> bool {
        live.prefilled >= live.req.prompt && live.generated >= live.req.generate
    }

    fn boxed_clone(&self) -> Box<dyn SchedulePolicy> {
        Box::new(self.clone())
    }
}

#[test]
fn a_token_budget_policy_defined_in_a_test_schedules_chunked_prefill() {
    let specs = vec![
        Request {
            arrive: 0,
            prompt: 13,
            generate: 4,
        },
        Request {
            arrive: 0,
            prompt: 3,
            generate: 6,
        },
        Request {
            arrive: 2,
            prompt: 9,
            generate: 2,
        },
    ];
    let budget = 5;
    let engine = KvEngine::new(shape(32, 4), 1);
    let mut s = Scheduler::with_engine(engine, specs.clone(), Box::new(TokenBudget { budget })).unwrap();
    assert_eq!(s.policy().name(), "token budget (test)");
    let b = CpuBackend::new();
    let mut chunked = 0;
    let mut prefilled = [0usize; 3];
    while !s.is_done() {
        let ev = s.step();
        let scheduled: usize = ev.decoded.len() + ev.chunks.iter().map(|c| c.2).sum::<usize>();
        assert!(
            scheduled <= budget,
            "step {}: {scheduled} tokens over a budget of {budget}",
            ev.step
        );
        for &(r, from, n) in &ev.chunks {
            assert_eq!(
                from, prefilled[r as usize],
                "chunks continue where the last one stopped"
            );
            prefilled[r as usize] += n;
            chunked += usize::from(n < specs[r as usize].prompt);
        }
        // The step's tokens go through the engine's paged append, and decode through its tables matches
        // the reference.
        let mut writes: Vec<(RequestId, usize)> = ev
            .chunks
            .iter()
            .flat_map(|&(r, from, n)| (from..from + n).map(move |p| (r, p)))
            .collect();
        writes.extend(ev.decoded.iter().copied());
        s.engine_mut().write_positions(&b, 0, &writes, token_kv).unwrap();
        s.cache().check_invariants().unwrap();
        let running: Vec<RequestId> = s.running().into_iter().filter(|&r| s.cache().len(r) > 0).collect();
        if !running.is_empty() {
            let e = s.engine();
            let tables = e.tables(&running);
            let q = Rng::new(ev.step as u64).normal_vec(running.len() * 4 * 8, 1.0);
            let (_, report) = e.decode_checked(&b, 0, &tables, &q, 4).unwrap();
            assert!(report.passed(), "step {}: {report}", ev.step);
        }
        assert!(ev.step < 100);
    }
    assert!(chunked > 0, "some prompt was split into chunks");
    assert_eq!(prefilled, [13, 3, 9]);
    assert!(s.cache().is_empty());
}

/// StreamingLLM's window without sinks: keep the newest `k` tokens.
struct KeepNewest {
    k: usize,
}

impl EvictionPolicy for KeepNewest {
    fn name(&self) -> &'static str {
        "keep the newest k (test)"
    }

    fn keep(&mut self, _req: RequestId, len: usize) -> Option<Vec<bool>> {
        Some((0..len).map(|p| p + self.k >= len).collect())
    }
}

/// Request 0 with `len` tokens written through the engine (and request 1 with 5, so tables interleave).
fn filled(len: usize) -> (KvEngine, CpuBackend) {
    let b = CpuBackend::new();
    let mut e = KvEngine::new(shape(16, 4), 1);
    for pos in 0..len {
        for (r, n) in [(0u32, len), (1, 5)] {
            if pos < n {
                let slots = e.reserve(r, 1).unwrap();
                let (k, v) = token_kv(r, pos);
                e.write(&b, 0, &slots, &k, &v).unwrap();
            }
        }
    }
    (e, b)
}

#[test]
fn a_keep_newest_policy_defined_in_a_test_frees_old_blocks_and_decode_reads_the_window() {
    let (mut e, b) = filled(23);
    let free_before = e.cache().allocator().num_free();
    let dropped = e.evict(&mut KeepNewest { k: 8 }, 0).unwrap();
    // 23 tokens in blocks of 4: tokens 15..23 stay, so blocks 0, 1 and 2 (tokens 0..12) go; block 3
    // (12..16) keeps 15 and masks 12..15.
    assert_eq!(dropped, vec![0, 1, 2]);
    assert_eq!(e.cache().allocator().num_free(), free_before + 3);
    assert_eq!(e.cache().live_len(0), 11);
    e.cache().check_invariants().unwrap();
    let Some(KvEvent::Evicted { masked, policy, .. }) = e.events().last() else {
        panic!("an eviction event")
    };
    assert_eq!(
        (masked.clone(), *policy),
        (vec![12, 13, 14], "keep the newest k (test)")
    );
    let slot = |p| e.cache().slot(0, p).unwrap();
    assert!(!e.is_valid(0, 1, slot(13)) && e.is_valid(0, 1, slot(15)));
    assert_eq!(e.cache().slot(0, 5), None, "a dropped block has no slot");
    // Masked tokens are in the table: the engine refuses a decode that would read them.
    let q = Rng::new(3).normal_vec(4 * 8, 1.0);
    let err = e.decode(&b, 0, &e.tables(&[0]), &q, 4).unwrap_err();
    assert!(
        matches!(err, EngineError::Layout(ref m) if m.contains("masked")),
        "{err}"
    );

    // A window of whole blocks: decode reads exactly the newest 12 tokens, equal to attention over them.
    let (mut e, b) = filled(24);
    assert_eq!(e.evict(&mut KeepNewest { k: 12 }, 0).unwrap(), vec![0, 1, 2]);
    let (got, report) = e.decode_checked(&b, 0, &e.tables(&[0]), &q, 4).unwrap();
    assert!(report.passed(), "{report}");
    let rounded = |x: f32| f64::from(f16::from_f32(x).to_f32());
    let kv = |which: usize| {
        Array3::from_shape_fn((2, 12, 8), |(h, t, d)| {
            let (k, v) = token_kv(0, 12 + t);
            rounded([k, v][which][h * 8 + d])
        })
    };
    let qa = Array2::from_shape_fn((4, 8), |(h, d)| f64::from(q[h * 8 + d]));
    let want = decode_attention_f64(&qa, &kv(0), &kv(1));
    for (g, w) in got.iter().zip(want.iter()) {
        assert!((f64::from(*g) - w).abs() < 1e-4, "{g} vs {w}");
    }
    // The other request is untouched, and freeing returns everything.
    assert_eq!(e.cache().live_len(1), 5);
    e.free(0).unwrap();
    e.free(1).unwrap();
    assert_eq!(e.cache().allocator().num_free(), 16);
    e.cache().check_invariants().unwrap();
}

#[test]
fn rejected_draft_tokens_are_trimmed() {
    let (mut e, _) = filled(6);
    // Three draft tokens reserved for verification, two rejected.
    e.reserve(0, 3).unwrap();
    assert_eq!(e.cache().table(0).unwrap().len(), 3);
    let freed = e.truncate(0, 7).unwrap();
    assert_eq!((e.cache().len(0), freed.len()), (7, 1));
    e.cache().check_invariants().unwrap();
}

#[test]
fn a_latent_layout_runs_through_the_engine() {
    let latent = PagedShape {
        num_blocks: 6,
        block_size: 4,
        kv_heads: 1,
        head_dim: 12,
        dtype: KvDtype::F16,
    };
    let mut e = KvEngine::with_layout(latent, 2, PoolLayout::Latent);
    assert_eq!((e.layers(), e.layout()), (2, PoolLayout::Latent));
    let (k, v) = e.pools(1).unwrap();
    assert_eq!((k.len(), v.len()), (latent.numel(), 0), "one pool per layer, no V");
    let slots = e.reserve(7, 6).unwrap();
    let c: Vec<f32> = (0..6 * 12).map(|i| i as f32 / 8.0).collect();
    e.write_latent(1, &slots, &c).unwrap();
    let (k, _) = e.pools(1).unwrap();
    let mut row = vec![0f32; 12];
    let s5 = slots[5] as usize;
    k.read(latent.index(s5 / 4, 0, s5 % 4, 0), 12, &[], &mut row);
    assert_eq!(row, c[60..72].to_vec());
    let b = CpuBackend::new();
    assert!(matches!(e.write(&b, 0, &slots, &c, &c), Err(EngineError::Layout(_))));
    assert_eq!(e.evict(&mut KeepNewest { k: 2 }, 7).unwrap(), vec![0]);
    e.free(7).unwrap();
    e.cache().check_invariants().unwrap();
}

/// The engine owns the cache quantised in groups too: two requests of KIVI-2 (G = 4, R = 8) written
/// token by token, interleaved, through `write_tokens`; their decode through `decode_groups` against the
/// f64 reference on the same codes; a truncation into quantised tokens refused (and one above them
/// allowed); a swap out to another engine and back leaves the decode bit for bit the same; a third
/// writer finds every ring held.
#[test]
fn the_engine_writes_decodes_truncates_and_swaps_a_cache_quantised_in_groups() {
    use kvscope::cache::GroupFormat;
    use kvscope::compute::{Tolerance, check};
    let b = CpuBackend::new();
    let fmt = GroupFormat::kivi(2, 4, 8);
    let (kvh, hd, layers) = (2, 16, 2);
    let mut e = KvEngine::grouped(fmt, 12, kvh, hd, 2, layers).unwrap();
    assert_eq!(e.layers(), layers);
    let mut rng = Rng::stream(7, 1);
    let lens = [19usize, 11];
    for t in 0..lens[0] {
        for (req, &len) in lens.iter().enumerate() {
            if t >= len {
                continue;
            }
            let req = req as RequestId;
            e.reserve(req, 1).unwrap();
            for l in 0..layers {
                let (k, v) = (rng.normal_vec(kvh * hd, 1.0), rng.normal_vec(kvh * hd, 1.0));
                e.write_tokens(&b, l, &[(req, t)], &k, &v).unwrap();
            }
        }
    }
    let q = rng.normal_vec(2 * 4 * hd, 1.0);
    let tables = e.group_tables(&[0, 1]).unwrap();
    assert_eq!(tables.k_quantised, [16, 8]);
    assert_eq!(tables.v_quantised, [11, 3]);
    let got = e.decode_groups(&b, 1, &tables, &q, 4).unwrap();
    let want = kvscope::compute::ops::group_decode::reference(&e.group_input(1, &tables, &q, 4).unwrap());
    let r = check("engine group decode", &[2, 4, hd], &got, &want, Tolerance::F32);
    assert!(r.passed(), "{r:?}");

    // Request 0 has K quantised up to 16 and V up to 11: 12 tokens may stay, 10 may not.
    let err = e.truncate(0, 10).unwrap_err().to_string();
    assert!(err.contains("quantised in groups"), "{err}");
    e.truncate(0, 17).unwrap();
    let tables = e.group_tables(&[0, 1]).unwrap();
    let before = e.decode_groups(&b, 0, &tables, &q, 4).unwrap();

    let mut host = KvEngine::grouped(fmt, 12, kvh, hd, 2, layers).unwrap();
    let moved = e.swap_out(0, &mut host).unwrap();
    assert!(moved > 0);
    assert!(e.ring_of(0).is_none(), "the ring goes with the request");
    e.swap_in(0, &mut host).unwrap();
    let tables = e.group_tables(&[0, 1]).unwrap();
    let after = e.decode_groups(&b, 0, &tables, &q, 4).unwrap();
    assert_eq!(before, after, "a swap out and back changes nothing");

    e.reserve(2, 1).unwrap();
    let (k, v) = (vec![0.0; kvh * hd], vec![0.0; kvh * hd]);
    let err = e.write_tokens(&b, 0, &[(2, 0)], &k, &v).unwrap_err().to_string();
    assert!(err.contains("rings is held"), "{err}");
    // A pool engine refuses the grouped calls, and a grouped one the pool calls.
    let pools = KvEngine::new(shape(4, 4), 1);
    assert!(pools.group_tables(&[0]).is_err());
    assert!(matches!(e.write(&b, 0, &[0], &k, &v), Err(EngineError::Layout(_))));
}
