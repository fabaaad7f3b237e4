//! Lesson 9's narration numbers: what its placeholders are filled with, from the lesson's own run
//! ([`numbers`]) and from SmolLM2's stored table ([`real_numbers`]).

use super::*;

impl EvictOut {
    /// The values of the lesson's placeholders, from this result.
    pub(super) fn narration_numbers(&self) -> Vec<(&'static str, String)> {
        numbers(self)
    }
}

fn numbers(o: &EvictOut) -> Vec<(&'static str, String)> {
    let full = o.run(EvictPolicy::Full);
    let h2o = o.run(EvictPolicy::H2o);
    let snap = o.run(EvictPolicy::SnapKv);
    let (n, prompt) = (o.len(), o.prompt());
    let k = o.config.budget;
    let heads = full.heads;
    let shares = &full.top10_share;
    let arg = |better: fn(f64, f64) -> bool| {
        let mut best = 0;
        for (i, &s) in shares.iter().enumerate() {
            if better(s, shares[best]) {
                best = i;
            }
        }
        best
    };
    let (hi, lo) = (arg(|a, b| a > b), arg(|a, b| a < b));
    let head_name = |i: usize| format!("L{} H{}", i / heads, i % heads);
    let bpb = |p: EvictPolicy| fmt_bpb(o.run(p).bits_per_byte_in(prompt.saturating_sub(1)..n));
    let last_ev = o.last_eviction(n - 1);
    let (ev_steps, ev_leaving) = o.eviction_agreement();
    let share = |a: usize| {
        if ev_steps == 0 {
            "0%".to_string()
        } else {
            pct(a as f64 / ev_steps as f64)
        }
    };
    let (div_step, div_n) = o.most_divergent().unwrap_or((0, 0));
    let mut v = vec![
        ("evict_steps", ev_steps.to_string()),
        ("evict_leaving_share", share(ev_leaving)),
        ("diverge_step", div_step.to_string()),
        ("diverge_bytes", div_n.to_string()),
        ("rows", (h2o.layers * h2o.kv_heads).to_string()),
        ("budget", k.to_string()),
        ("recent", o.config.recent_tokens().min(k).to_string()),
        ("heavy", (k - o.config.recent_tokens().min(k)).to_string()),
        ("obs_window", o.config.window_tokens().to_string()),
        ("pool_kernel", o.config.pool_kernel.to_string()),
        ("prompt", prompt.to_string()),
        ("decoded", (n - prompt).to_string()),
        ("text_from", (o.text_index * TEXT).to_string()),
        ("top10_max", pct(shares.get(hi).copied().unwrap_or(0.0))),
        ("top10_max_head", head_name(hi)),
        ("top10_min", pct(shares.get(lo).copied().unwrap_or(0.0))),
        ("top10_min_head", head_name(lo)),
        ("bpb_full", bpb(EvictPolicy::Full)),
        ("bpb_window", bpb(EvictPolicy::Window)),
        ("bpb_sinks", bpb(EvictPolicy::Sinks)),
        ("bpb_h2o", bpb(EvictPolicy::H2o)),
        ("bpb_snapkv", bpb(EvictPolicy::SnapKv)),
        ("bpb_random", bpb(EvictPolicy::Random)),
        ("dead_h2o", pct(h2o.dead_fraction())),
        ("dead_window", pct(o.run(EvictPolicy::Window).dead_fraction())),
        ("dead_random", pct(o.run(EvictPolicy::Random).dead_fraction())),
        ("dead_snapkv", pct(snap.dead_fraction())),
        {
            let (w, kept) = (o.config.window_tokens(), k - o.config.window_tokens());
            if prompt > k {
                (
                    "snap_selection",
                    format!("the top {kept} are kept together with the window"),
                )
            } else {
                (
                    "snap_selection",
                    format!(
                        "nothing is selected here: the prompt of {prompt} bytes fits in the budget (the window is {w})"
                    ),
                )
            }
        },
        if prompt > k {
            (
                "snap_selection_zh",
                format!("保留得票最高的 {} 个，再加上窗口本身", k - o.config.window_tokens()),
            )
        } else {
            (
                "snap_selection_zh",
                format!("这里什么也不选：{prompt} 字节的提示词放得进预算"),
            )
        },
        ("snap_grown", snap.attended.last().copied().unwrap_or(0).to_string()),
        (
            "score_bytes",
            crate::lessons::format_bytes(h2o.score_bytes as f64 / n as f64),
        ),
        (
            "read_bytes",
            crate::lessons::format_bytes(h2o.read_bytes as f64 / n as f64),
        ),
        (
            "score_share",
            format!("{:.1}%", 100.0 * h2o.score_bytes as f64 / h2o.read_bytes.max(1) as f64),
        ),
    ];
    match last_ev.and_then(|s| Some((s, o.evicted_at(s)?))) {
        Some((step, e)) => {
            let s = h2o.scores.get(step - 1).map_or(0.0, |sc| sc[o.row() * n + e]);
            v.push((
                "last_eviction",
                format!("At step {step} byte {e} left with a score of {s:.3}."),
            ));
            v.push((
                "last_eviction_zh",
                format!("第 {step} 步，字节 {e} 以 {s:.3} 的分数被驱逐。"),
            ));
        }
        None => {
            v.push((
                "last_eviction",
                "At this budget the text never outgrows the cache: nothing is evicted.".into(),
            ));
            v.push((
                "last_eviction_zh",
                "在这个预算下文本从未超出缓存：没有任何驱逐。".into(),
            ));
        }
    }
    if let Some(s) = stored::embedded() {
        v.push(("stored_windows", s.windows.to_string()));
        v.push(("stored_trials", s.trials.to_string()));
        if let Some(c) = s.cell("full", 32) {
            // Copying: top-1 on the repeat at least twice chance (1 in 26).
            let copies = c.recall >= 2.0 / 26.0;
            v.push((
                "copy_verdict",
                if copies {
                    "copies"
                } else {
                    "does not copy at this distance"
                }
                .into(),
            ));
            v.push((
                "copy_verdict_zh",
                if copies {
                    "会复制"
                } else {
                    "在这个距离上不会复制"
                }
                .into(),
            ));
            v.push((
                "copy_consequence",
                if copies {
                    "Below full budget, the recall chart shows which policies kept the letters."
                } else {
                    "So the recall chart measures nothing about eviction here: it would take a model with induction \
                     heads, and this one, trained briefly on short windows, has none that reach this far."
                }
                .into(),
            ));
            v.push((
                "copy_consequence_zh",
                if copies {
                    "低于全量预算时，回忆图显示哪些策略保留了这些字母。"
                } else {
                    "所以回忆图在这里测不出驱逐的影响：需要一个有归纳头（induction head）的模型，而这个只在短窗口上\
                     短暂训练过的模型没有能看这么远的归纳头。"
                }
                .into(),
            ));
            v.push(("stored_recall_full", pct(c.recall)));
            v.push(("stored_bpb_full", fmt_bpb(c.bits_per_byte)));
        }
        if let Some(best) = s
            .cells
            .iter()
            .filter(|c| c.budget == 32 && c.policy != "full")
            .min_by(|a, b| a.bits_per_byte.total_cmp(&b.bits_per_byte))
        {
            let (en, zh) = match EvictPolicy::parse(&best.policy) {
                Some(EvictPolicy::Window) => ("the sliding window", "滑动窗口"),
                Some(EvictPolicy::Sinks) => ("sinks + window", " sink + 窗口"),
                Some(EvictPolicy::H2o) => ("H2O", " H2O"),
                Some(EvictPolicy::SnapKv) => ("SnapKV", " SnapKV"),
                Some(EvictPolicy::Random) => ("random eviction", "随机驱逐"),
                _ => ("full", "全量"),
            };
            v.push(("stored_best", en.into()));
            v.push(("stored_best_zh", zh.into()));
            v.push(("stored_best_bpb", fmt_bpb(best.bits_per_byte)));
        }
        if let Some(c) = s.cell("h2o", 16) {
            v.push(("stored_h2o_small", fmt_bpb(c.bits_per_byte)));
        }
        if let Some(c) = s.cell("window", 16) {
            v.push(("stored_window_small", fmt_bpb(c.bits_per_byte)));
        }
        if let Some(c) = s.cell("random", 16) {
            v.push(("stored_random_small", fmt_bpb(c.bits_per_byte)));
        }
        // How H2O fares against the plain window at the same budget, over the stored budgets.
        let bpb_at = |p: &str, k: usize| s.cell(p, k).map_or(f64::NAN, |c| c.bits_per_byte);
        let loses = crate::drivers::evict::BUDGETS
            .iter()
            .filter(|&&k| bpb_at("h2o", k) > bpb_at("window", k))
            .count();
        let all = crate::drivers::evict::BUDGETS.len();
        let (en, zh, c_en, c_zh) = if loses == all {
            (
                "H2O scores worse than the plain window at every budget measured",
                "H2O 在测量的每个预算下都比单纯的窗口差",
                "That contradicts the H2O paper's finding on large models. A likely reason, not tested here: \
                 this model's heads read mostly the last few bytes, while an accumulated score favours old \
                 tokens, which have simply been read by more queries.",
                "这与 H2O 论文在大模型上的发现相反。一个可能的原因（这里没有检验）：这个模型的头主要读取最近的几个字节，\
                 而累计分数偏爱较早的 token：它们只是被更多的查询读过而已。",
            )
        } else if loses == 0 {
            (
                "H2O scores better than the plain window at every budget measured",
                "H2O 在测量的每个预算下都比单纯的窗口好",
                "That agrees with the H2O paper's finding on large models.",
                "这与 H2O 论文在大模型上的发现一致。",
            )
        } else {
            (
                "H2O beats the plain window at some budgets and loses at others",
                "H2O 在一些预算下胜过单纯的窗口，在另一些预算下落后",
                "The H2O paper finds it close to the full cache on large models; here the gain depends on the budget.",
                "H2O 论文发现它在大模型上接近全量缓存；在这里收益取决于预算。",
            )
        };
        v.push(("h2o_verdict", en.into()));
        v.push(("h2o_verdict_zh", zh.into()));
        v.push(("h2o_comment", c_en.into()));
        v.push(("h2o_comment_zh", c_zh.into()));
    }
    v.extend(real_numbers());
    v
}

/// The English and Chinese names of a policy in a sentence.
fn policy_words(p: &str) -> (&'static str, &'static str) {
    match EvictPolicy::parse(p) {
        Some(EvictPolicy::Window) => ("the sliding window", "滑动窗口"),
        Some(EvictPolicy::Sinks) => ("sinks + window", "sink + 窗口"),
        Some(EvictPolicy::H2o) => ("H2O", "H2O"),
        Some(EvictPolicy::SnapKv) => ("SnapKV", "SnapKV"),
        Some(EvictPolicy::Random) => ("random eviction", "随机驱逐"),
        _ => ("the full cache", "全量缓存"),
    }
}

/// The narration's figures from SmolLM2's stored table (`assets/measurements/smollm2/eviction.json`).
fn real_numbers() -> Vec<(&'static str, String)> {
    use crate::drivers::evict::BUDGETS;
    let mut v = Vec::new();
    let Some(s) = stored::embedded_smollm2() else {
        return v;
    };
    let (k, k_max) = (BUDGETS[1], BUDGETS[BUDGETS.len() - 1]);
    let bpb_at = |p: &str, k: usize| s.cell(p, k).map_or(f64::NAN, |c| c.bits_per_byte);
    v.push(("stored_real_windows", s.windows.to_string()));
    v.push(("stored_real_window_tokens", "256".to_string()));
    v.push(("stored_real_trials", s.trials.to_string()));
    v.push(("stored_real_k", k.to_string()));
    v.push(("stored_real_k_max", k_max.to_string()));
    v.push(("stored_real_bpb_full", fmt_bpb(bpb_at("full", k))));
    for (name, p) in [
        ("stored_real_window_k", "window"),
        ("stored_real_sinks_k", "sinks"),
        ("stored_real_h2o_k", "h2o"),
        ("stored_real_snapkv_k", "snapkv"),
        ("stored_real_random_k", "random"),
    ] {
        v.push((name, fmt_bpb(bpb_at(p, k))));
    }
    let beats = BUDGETS
        .iter()
        .filter(|&&b| bpb_at("h2o", b) < bpb_at("window", b))
        .count();
    let (en, zh) = if beats == BUDGETS.len() {
        (
            "H2O beats the plain window at every budget measured, as the H2O paper found on large models",
            "H2O 在测量的每个预算下都胜过单纯的窗口，与 H2O 论文在大模型上的发现一致",
        )
    } else if beats == 0 {
        (
            "H2O does not beat the plain window at any budget measured, unlike the H2O paper's large models",
            "H2O 在测量的任何预算下都没有胜过单纯的窗口，与 H2O 论文在大模型上的发现不同",
        )
    } else {
        (
            "H2O beats the plain window at some budgets and not at others",
            "H2O 在一些预算下胜过单纯的窗口，在另一些预算下没有",
        )
    };
    v.push(("stored_real_h2o_verdict", en.into()));
    v.push(("stored_real_h2o_verdict_zh", zh.into()));
    let full = s.cell("full", k_max).map_or(0.0, |c| c.recall);
    v.push(("stored_real_recall_full", pct(full)));
    if let Some(best) = s
        .cells
        .iter()
        .filter(|c| c.budget == k_max && c.policy != "full")
        .max_by(|a, b| a.recall.total_cmp(&b.recall))
    {
        let (en, zh) = policy_words(&best.policy);
        v.push(("stored_real_recall_best", pct(best.recall)));
        v.push(("stored_real_recall_best_policy", en.into()));
        v.push(("stored_real_recall_best_policy_zh", zh.into()));
        // Kept "reliably": at least half of the full cache's recall.
        let (en, zh) = if best.recall >= 0.5 * full {
            (
                "some policy below the full budget keeps the needle",
                "低于全量预算的策略中有能保留这根针的",
            )
        } else {
            (
                "no policy below the full budget keeps the needle reliably",
                "低于全量预算的策略都不能可靠地保留这根针",
            )
        };
        v.push(("stored_real_recall_verdict", en.into()));
        v.push(("stored_real_recall_verdict_zh", zh.into()));
    }
    v
}
