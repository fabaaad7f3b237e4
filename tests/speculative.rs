//! Lesson 12's speculative decoding on the trained model: with greedy sampling the output equals the
//! target's plain greedy output (one target pass per byte, through the same paged path) byte for byte,
//! for every k from 1 to 8 and both proposers; rejected drafts are cut from the cache, and a draft that
//! is accepted saves target passes.

use kvscope::compute::CpuBackend;
use kvscope::drivers::spec::{Drafter, SpecConfig};

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

/// The χ² upper critical value at p = 0.001 for `df` degrees of freedom (Wilson–Hilferty).
fn chi2_critical(df: usize) -> f64 {
    let d = df as f64;
    let z = 3.090_232; // the standard normal's 0.999 quantile
    d * (1.0 - 2.0 / (9.0 * d) + z * (2.0 / (9.0 * d)).sqrt()).powi(3)
}

/// The two-sample χ² statistic of two histograms of equal totals over the 256 bytes, with the bytes whose
/// pooled count is under 10 merged into one bin; and its degrees of freedom.
fn chi2_two_sample(a: &[usize; 256], b: &[usize; 256]) -> (f64, usize) {
    let (mut bins, mut rest) = (Vec::new(), (0usize, 0usize));
    for i in 0..256 {
        if a[i] + b[i] >= 10 {
            bins.push((a[i], b[i]));
        } else {
            rest.0 += a[i];
            rest.1 += b[i];
        }
    }
    if rest.0 + rest.1 > 0 {
        bins.push(rest);
    }
    let x: f64 = bins
        .iter()
        .map(|&(x, y)| {
            let (x, y) = (x as f64, y as f64);
            (x - y).powi(2) / (x + y)
        })
        .sum();
    (x, bins.len() - 1)
}

/// At temperature 1, the first byte speculative sampling emits (the draft model's byte, kept with
/// probability min(1, p/q), else a byte from norm(max(0, p − q))) is distributed as the target's own
/// sampling: 20,000 seeded first bytes of each pass a two-sample χ² test on the 256-way histogram at
/// p > 0.001. p and q are the trained target's and draft's distributions after a held-out context (the
/// models are deterministic, so they are computed once). Accepting every draft (the rule broken on
/// purpose) emits the draft's distribution instead, and fails the same test.
#[test]
fn speculative_sampling_keeps_the_target_distribution_on_the_trained_models() {
    use kvscope::drivers::spec::{distribution, draw, verify};
    use kvscope::math::Rng;
    let m = kvscope::model::shared().unwrap();
    let d = kvscope::model::draft().unwrap();
    let ctx = &kvscope::model::HELDOUT[..40];
    let last = |model: &kvscope::model::Model| {
        let out = model.prefill(ctx, &CpuBackend, false).unwrap();
        distribution(&out.logits.row(ctx.len() - 1).to_vec(), 1.0)
    };
    let (p, q) = (last(m), last(d));
    let n = 20_000;
    let (mut spec, mut plain, mut broken) = ([0usize; 256], [0usize; 256], [0usize; 256]);
    let mut rng = Rng::new(11);
    let bonus = p.clone();
    for _ in 0..n {
        let x = draw(&q, &mut rng);
        let (acc, next) = verify(&[x], std::slice::from_ref(&q), &[p.clone(), bonus.clone()], &mut rng);
        spec[if acc == 1 { x } else { next } as usize] += 1;
        plain[draw(&p, &mut rng) as usize] += 1;
        broken[draw(&q, &mut rng) as usize] += 1;
    }
    let (x, df) = chi2_two_sample(&spec, &plain);
    let crit = chi2_critical(df);
    eprintln!("speculative vs plain: χ² = {x:.1}, df {df}, critical {crit:.1}");
    assert!(x < crit, "χ² = {x:.1} ≥ {crit:.1} (df {df})");
    let (xb, dfb) = chi2_two_sample(&broken, &plain);
    eprintln!(
        "accept-always vs plain: χ² = {xb:.1}, df {dfb}, critical {:.1}",
        chi2_critical(dfb)
    );
    assert!(xb > chi2_critical(dfb), "the broken rule must fail: χ² = {xb:.1}");
}
