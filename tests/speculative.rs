//! Lesson 12's speculative decoding on the trained model: with greedy sampling the output equals the
//! target's plain greedy output (one target pass per byte, through the same paged path) byte for byte,
//! for every k from 1 to 8 and both proposers; rejected drafts are cut from the cache, and a draft that
//! is accepted saves target passes.

use kvscope::compute::CpuBackend;
use kvscope::model::spec::{Drafter, SpecConfig};

fn cfg(drafter: Drafter<'_>, k: usize) -> SpecConfig<'_> {
    SpecConfig {
        drafter,
        k,
        temperature: 0.0,
        seed: 0,
        block_size: 4,
    }
}

#[test]
fn greedy_speculation_equals_plain_greedy_decode() {
    let m = kvscope::model::shared().unwrap();
    let d = kvscope::model::draft().unwrap();
    // A held-out piece with repeats (so prompt lookup finds matches) and a Chinese line.
    let prompt = &kvscope::model::HELDOUT[..96];
    let n = 48;
    let plain = m.speculative(prompt, n, &cfg(Drafter::None, 4), &CpuBackend).unwrap();
    assert_eq!(plain.output.len(), n);
    assert_eq!(
        plain.steps.len(),
        n - 1,
        "plain decode: one pass per byte after the prefill"
    );
    assert!((plain.passes_per_byte() - 1.0).abs() < 1e-12);
    let mut saved = 0;
    for k in 1..=8 {
        for drafter in [Drafter::Ngram { min_n: 1, max_n: 3 }, Drafter::Model(d)] {
            let run = m.speculative(prompt, n, &cfg(drafter, k), &CpuBackend).unwrap();
            assert_eq!(
                run.output,
                plain.output,
                "k = {k}, {}: {:?} vs {:?}",
                drafter.name(),
                String::from_utf8_lossy(&run.output),
                String::from_utf8_lossy(&plain.output)
            );
            let emitted: usize = run.steps.iter().map(|s| s.emitted.len()).sum();
            assert!(emitted + 1 >= n);
            for s in &run.steps {
                assert!(s.proposed.len() <= k && s.accepted <= s.proposed.len());
                assert_eq!(s.emitted.len(), s.accepted + 1);
                assert_eq!(&s.emitted[..s.accepted], &s.proposed[..s.accepted]);
            }
            // α counts: reached at i + 1 never exceeds accepted at i.
            for i in 1..k {
                assert!(run.reached_at[i] <= run.accepted_at[i - 1]);
            }
            if run.steps.iter().any(|s| s.accepted > 0) {
                assert!(run.passes_per_byte() < 1.0);
                saved += 1;
            }
            // The verified slots stand on top of plain decode's cache: never less memory.
            let (spec_bytes, plain_bytes) = run.kv_bytes();
            assert!(spec_bytes >= plain_bytes);
        }
    }
    assert!(saved > 0, "some draft must be accepted somewhere");
}

/// A rejected draft's slots are cut: a block that held only rejected slots is freed, and the cache ends
/// at exactly the prompt plus the bytes it holds.
#[test]
fn rejected_drafts_free_their_blocks() {
    let m = kvscope::model::shared().unwrap();
    // Prompt lookup on a text that repeats "ab" proposes "ab…" drafts the model will partly reject.
    let prompt = b"The cache keeps keys and values. The cache keeps keys and values. The cache";
    let run = m
        .speculative(prompt, 24, &cfg(Drafter::Ngram { min_n: 1, max_n: 3 }, 8), &CpuBackend)
        .unwrap();
    assert!(
        run.steps.iter().any(|s| s.accepted < s.proposed.len()),
        "some rejection"
    );
    assert!(
        run.steps.iter().any(|s| !s.freed.is_empty()),
        "some block freed (block size 4, k = 8)"
    );
}
