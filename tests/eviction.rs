//! Lesson 9's eviction by importance (issue #32): H2O, SnapKV and the window policies on the trained
//! model, every step through the score-returning decode.

mod common;

use kvscope::compute::{Backend, BackendKind, CpuBackend, probe};
use kvscope::drivers::evict::{EvictConfig, EvictOptions, EvictPolicy, EvictRun, SINKS, snapkv_select};
use kvscope::model::{HELDOUT, shared};

fn run(text: &[u8], prompt: usize, cfg: EvictConfig, b: &dyn Backend, opt: EvictOptions) -> EvictRun {
    shared().unwrap().evict_run(text, prompt, cfg, b, opt).unwrap()
}

fn recorded() -> EvictOptions {
    EvictOptions {
        record: true,
        ..Default::default()
    }
}

/// At a budget of at least the sequence length nothing is evicted, so every policy is full, bit for bit
/// (the same kernel reads the same tokens with the same mask).
#[test]
fn a_budget_covering_the_text_equals_full_bit_for_bit() {
    let text = &HELDOUT[..60];
    let full = run(
        text,
        40,
        EvictConfig::new(EvictPolicy::Full, 60),
        &CpuBackend,
        recorded(),
    );
    for policy in EvictPolicy::ALL {
        for k in [60, 75] {
            let r = run(text, 40, EvictConfig::new(policy, k), &CpuBackend, recorded());
            assert_eq!(r.nll, full.nll, "{} K={k}", policy.name());
            assert_eq!(r.final_scores, full.final_scores, "{} K={k}", policy.name());
            assert_eq!(r.dead_fraction(), 0.0);
        }
    }
    // And a smaller budget does change something.
    let h2o = run(
        text,
        40,
        EvictConfig::new(EvictPolicy::H2o, 16),
        &CpuBackend,
        recorded(),
    );
    assert_ne!(h2o.nll, full.nll);
}

/// The keep sets never exceed the budget (SnapKV's at the end of the prompt, after which it grows by one
/// per byte), every step keeps the byte it reads, and the window policies keep exactly what they say.
#[test]
fn keep_sets_hold_the_budget_and_the_window_policies_keep_what_they_say() {
    let text = &HELDOUT[..200];
    let (prompt, k) = (120, 24);
    for policy in EvictPolicy::ALL {
        let mut cfg = EvictConfig::new(policy, k);
        cfg.seed = 7;
        let r = run(text, prompt, cfg, &CpuBackend, recorded());
        for (t, step) in r.kept.iter().enumerate() {
            for set in step {
                assert_eq!(set.last(), Some(&(t as u32)), "{} step {t}", policy.name());
                let bound = match policy {
                    EvictPolicy::Full => t + 1,
                    EvictPolicy::SnapKv if t < prompt => t + 1,
                    EvictPolicy::SnapKv => k + 1 + (t - prompt),
                    _ => k,
                };
                assert!(
                    set.len() <= bound,
                    "{} step {t}: {} > {bound}",
                    policy.name(),
                    set.len()
                );
                if t + 1 >= k && policy != EvictPolicy::Full && policy != EvictPolicy::SnapKv {
                    assert_eq!(set.len(), k, "{} step {t}", policy.name());
                }
                let want: Option<Vec<u32>> = match policy {
                    EvictPolicy::Window => Some(((t + 1).saturating_sub(k)..=t).map(|i| i as u32).collect()),
                    EvictPolicy::Sinks => Some(
                        (0..=t)
                            .filter(|&i| i < SINKS || i + (k - SINKS) > t)
                            .map(|i| i as u32)
                            .collect(),
                    ),
                    _ => None,
                };
                if let Some(w) = want {
                    assert_eq!(set, &w, "{} step {t}", policy.name());
                }
            }
        }
        if policy == EvictPolicy::SnapKv {
            assert!(r.kept[prompt].iter().all(|s| s.len() == k + 1));
        }
    }
}

/// H2O's accumulated scores are the sums of the f64 reference's group mass over the steps (every step's
/// launches checked against the reference on the same inputs, keep sets and holes included), and the
/// token H2O evicts is the lowest-scored outside the recent R.
#[test]
fn h2o_scores_are_the_reference_sums_and_it_evicts_the_lowest() {
    let text = &HELDOUT[..120];
    let cfg = EvictConfig::new(EvictPolicy::H2o, 20);
    let r = run(
        text,
        120,
        cfg,
        &CpuBackend,
        EvictOptions {
            record: true,
            every: 1,
            probs: false,
        },
    );
    let c = r.check.as_ref().unwrap();
    assert!(c.passed(), "{c}");
    assert_eq!(r.checked_steps, 120);
    let want = r.reference_scores.as_ref().unwrap();
    let worst = r
        .final_scores
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max);
    assert!(worst < 1e-4, "{worst}");
    assert!(r.dead_fraction() > 0.0, "token-level eviction leaves holes");
    let (rows, n, recent) = (r.layers * r.kv_heads, text.len(), cfg.recent_tokens());
    for t in 1..n {
        for row in 0..rows {
            let (before, now) = (&r.kept[t - 1][row], &r.kept[t][row]);
            let gone: Vec<u32> = before.iter().filter(|i| !now.contains(i)).copied().collect();
            if before.len() < cfg.budget {
                assert!(gone.is_empty());
                continue;
            }
            assert_eq!(gone.len(), 1, "step {t} row {row}");
            let scores = &r.scores[t - 1][row * n..][..n];
            let candidates = before.iter().filter(|&&i| (i as usize) + recent <= t);
            let lowest = candidates
                .min_by(|&&a, &&b| scores[a as usize].total_cmp(&scores[b as usize]).then(a.cmp(&b)))
                .unwrap();
            assert_eq!(gone[0], *lowest, "step {t} row {row}");
        }
    }
}

/// SnapKV's kept set is a direct top-k of the pooled attention of the prompt's last w queries, computed
/// here from the model's prefill (another path: whole-sequence attention through `Backend::attention`
/// over f16-rounded K/V), summed over each KV head's query group.
#[test]
fn snapkv_keeps_the_top_k_of_the_pooled_prefill_attention() {
    let m = shared().unwrap();
    let (prompt, k) = (128, 32);
    let text = &HELDOUT[256..256 + 160];
    let cfg = EvictConfig::new(EvictPolicy::SnapKv, k);
    let w = cfg.window_tokens();
    assert_eq!(w, 16);
    let r = run(text, prompt, cfg, &CpuBackend, recorded());
    let pre = m.prefill(&text[..prompt], &CpuBackend, true).unwrap();
    let (h, kvh) = (m.config.n_heads, m.config.n_kv_heads);
    let g = h / kvh;
    let prefix = prompt - w;
    for l in 0..m.config.n_layers {
        for kv in 0..kvh {
            let votes: Vec<f64> = (0..prefix)
                .map(|i| {
                    (prompt - w..prompt)
                        .flat_map(|row| (kv * g..(kv + 1) * g).map(move |hh| (hh, row)))
                        .map(|(hh, row)| f64::from(pre.probs[l][[hh, row, i]]))
                        .sum()
                })
                .collect();
            let (_, chosen) = snapkv_select(&votes, cfg.pool_kernel, k - w);
            let got: Vec<usize> = r.kept[prompt][l * kvh + kv]
                .iter()
                .map(|&i| i as usize)
                .filter(|&i| i < prefix)
                .collect();
            assert_eq!(got, chosen, "layer {l} KV head {kv}");
        }
    }
    // After the prompt the cache grows by one token per byte.
    assert_eq!(r.attended[prompt..].first(), Some(&(k as u32 + 1)));
    assert_eq!(r.attended.last(), Some(&((k + text.len() - prompt) as u32)));
}

/// The score-returning decode agrees with the f64 reference inside a real H2O run on every backend that
/// runs here (CPU, the CUDA source on the CPU shim, WGSL on the software GPU), and the runs agree.
#[test]
fn the_score_op_agrees_with_the_reference_on_every_backend_in_a_real_run() {
    let text = &HELDOUT[..80];
    let cfg = EvictConfig::new(EvictPolicy::H2o, 24);
    let opt = EvictOptions {
        every: 5,
        ..Default::default()
    };
    let mut backends: Vec<(String, std::sync::Arc<dyn Backend>)> = vec![
        ("cpu".into(), std::sync::Arc::new(CpuBackend)),
        ("cuda-sim".into(), probe(BackendKind::CudaSim).backend.unwrap()),
    ];
    if let Some(w) = common::wgpu() {
        backends.push(("wgpu".into(), w));
    }
    let base = run(text, 80, cfg, &CpuBackend, opt);
    for (name, b) in backends {
        let r = run(text, 80, cfg, b.as_ref(), opt);
        let c = r.check.as_ref().unwrap();
        assert!(c.passed(), "{name}: {c}");
        assert_eq!(r.checked_steps, 16, "{name}");
        let worst = r
            .nll
            .iter()
            .zip(&base.nll)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-3, "{name}: {worst}");
    }
}

/// Bad settings are refused with the reason.
#[test]
fn bad_settings_are_refused_with_the_reason() {
    let m = shared().unwrap();
    let text = &HELDOUT[..50];
    let bad = |cfg: EvictConfig, prompt: usize| {
        m.evict_run(text, prompt, cfg, &CpuBackend, EvictOptions::default())
            .unwrap_err()
    };
    assert!(bad(EvictConfig::new(EvictPolicy::H2o, 1), 10).contains("budget is 1"));
    assert!(bad(EvictConfig::new(EvictPolicy::Sinks, 4), 10).contains("above 4"));
    let mut c = EvictConfig::new(EvictPolicy::H2o, 16);
    c.recent = Some(20);
    assert!(bad(c, 10).contains("R = 20"));
    let mut c = EvictConfig::new(EvictPolicy::SnapKv, 16);
    c.pool_kernel = 4;
    assert!(bad(c, 10).contains("odd"));
    assert!(bad(EvictConfig::new(EvictPolicy::Full, 16), 0).contains("prompt length"));
    let long = vec![b'a'; 300];
    let e = m
        .evict_run(
            &long,
            10,
            EvictConfig::new(EvictPolicy::Full, 16),
            &CpuBackend,
            EvictOptions::default(),
        )
        .unwrap_err();
    assert!(e.contains("context of 256"), "{e}");
}
