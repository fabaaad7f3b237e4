//! What lesson 12 computed ([`ServingOut`]), and the narration numbers it fills: every placeholder of the
//! serving steps, from the live runs and the stored measurements.

use super::costs::{crossover, device_rates, fact_costs};
use super::measure;
use crate::calc::{self, ModelSpec};
use crate::compute::CheckReport;
use crate::drivers::serve::ServeRun;
use crate::drivers::spec::SpecRun;
use crate::lessons::format_bytes;

/// What lesson 12 computed.
#[derive(Debug, Clone)]
pub struct ServingOut {
    /// The scenario's requests `(arrive, prompt, generate)`.
    pub requests: Vec<(usize, usize, usize)>,
    /// The token budget.
    pub budget: usize,
    /// Chunked prefill on.
    pub chunked: bool,
    /// The served run, or why the policy refused the scenario.
    pub run: Result<ServeRun, String>,
    /// The speculative run and plain decode of the same bytes.
    pub spec: SpecRun,
    /// Plain decode.
    pub plain: SpecRun,
    /// The drafter's name (`ngram` or `draft`), for the stored table.
    pub drafter: &'static str,
    /// Block size of the speculative caches.
    pub block_size: usize,
    /// The checked verification pass.
    pub check: CheckReport,
    /// The chunk the kernel view draws: (first position, rows, block size).
    pub chunk: (usize, usize, usize),
    /// Stored wall-clock measurements.
    pub stored: measure::StoredServing,
    /// The device-fact models.
    pub fact_models: Vec<ModelSpec>,
    /// The default scenario's steps when whole prompts and chunked prefill schedule it step for step alike
    /// at the largest measured budget (where the stored file times both); `None` when they differ.
    pub same_at_top: Option<usize>,
    /// SmolLM2-135M's stored measurement (the real-model step).
    pub real: measure::StoredServing,
    /// The tiny model's prompt-lookup runs at each stored k, live: (k, drafts accepted per pass, target
    /// passes per byte).
    pub tiny_ngram: Vec<(usize, f64, f64)>,
    pub(super) numbers: Vec<(&'static str, String)>,
}

pub(super) fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1e3)
}

pub(super) fn us(s: f64) -> String {
    format!("{:.1} µs", s * 1e6)
}

/// The real-model step's numbers: SmolLM2's stored file beside the tiny model's (stored rates, live
/// acceptance counts).
pub(super) fn real_numbers(o: &ServingOut, v: &mut Vec<(&'static str, String)>) {
    let ratio = |r: &measure::SpecRow| r.bytes_per_second / r.plain_bytes_per_second;
    let best = o
        .real
        .speculative
        .iter()
        .filter(|r| r.drafter == "ngram")
        .max_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    let dash = || "-".to_string();
    v.push((
        "real_stored_on",
        format!("{}, {}, {}", o.real.machine, o.real.backend, o.real.date),
    ));
    v.push(("real_k", best.map_or_else(dash, |r| r.k.to_string())));
    v.push(("real_speedup", best.map_or_else(dash, |r| format!("{:.2}×", ratio(r)))));
    v.push((
        "real_accepted",
        best.and_then(|r| r.accepted_per_pass)
            .map_or_else(dash, |a| format!("{a:.2}")),
    ));
    v.push((
        "real_passes",
        best.and_then(|r| r.passes_per_token)
            .map_or_else(dash, |a| format!("{a:.2}")),
    ));
    let k = best.map_or(0, |r| r.k);
    let tiny = o.stored.speculative.iter().find(|r| r.drafter == "ngram" && r.k == k);
    v.push(("tiny_speedup", tiny.map_or_else(dash, |r| format!("{:.2}×", ratio(r)))));
    v.push((
        "tiny_accepted",
        o.tiny_ngram
            .iter()
            .find(|t| t.0 == k)
            .map_or_else(dash, |t| format!("{:.2}", t.1)),
    ));
    // What one verification pass costs, drafting included, in plain decode steps of the same model:
    // a token takes 1 / speed-up steps, and a pass yields 1 / (passes per token) tokens.
    let pass_decodes = |speedup: f64, passes: f64| 1.0 / (speedup * passes);
    v.push((
        "real_pass_decodes",
        best.and_then(|r| Some(pass_decodes(ratio(r), r.passes_per_token?)))
            .map_or_else(dash, |x| format!("{x:.1}")),
    ));
    let tiny_passes = o.tiny_ngram.iter().find(|t| t.0 == k).map(|t| t.2);
    v.push((
        "tiny_pass_decodes",
        tiny.zip(tiny_passes)
            .map(|(r, p)| pass_decodes(ratio(r), p))
            .map_or_else(dash, |x| format!("{x:.1}")),
    ));
}

pub(crate) fn numbers(o: &ServingOut) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> = Vec::new();
    let long = o.long();
    v.push(("budget", o.budget.to_string()));
    v.push((
        "policy",
        if o.chunked { "chunked prefill" } else { "whole prompts" }.to_string(),
    ));
    v.push((
        "policy_zh",
        if o.chunked { "分块预填充" } else { "整段 prompt" }.to_string(),
    ));
    v.push(("requests", o.requests.len().to_string()));
    v.push(("long_prompt", o.requests[long].1.to_string()));
    v.push(("long_arrive", o.requests[long].0.to_string()));
    let whole_min = o.requests.iter().map(|r| r.1 + r.2 - 1).max().unwrap_or(0);
    match &o.run {
        Ok(run) => {
            v.push(("steps", run.steps.len().to_string()));
            let tokens = o.step_tokens();
            let busy = o.busiest_step().unwrap_or(0);
            let (pf, dc): (usize, usize) = tokens
                .get(busy)
                .map(|t| t.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1)))
                .unwrap_or((0, 0));
            v.push(("busy_step", busy.to_string()));
            v.push(("busy_prefill", pf.to_string()));
            v.push(("busy_decode", dc.to_string()));
            let arrivals: Vec<usize> = o.requests.iter().map(|r| r.0).collect();
            let lat = run.latencies(&arrivals);
            v.push((
                "long_ttft_steps",
                lat[long].as_ref().map_or("-".into(), |l| l.ttft_steps.to_string()),
            ));
            let chunks = run
                .steps
                .iter()
                .filter(|e| e.chunks.iter().any(|c| c.0 as usize == long))
                .count();
            v.push(("long_chunks", chunks.to_string()));
            v.push(("refused", String::new()));
            v.push(("refused_zh", String::new()));
        }
        Err(e) => {
            for id in [
                "steps",
                "busy_step",
                "busy_prefill",
                "busy_decode",
                "long_ttft_steps",
                "long_chunks",
            ] {
                v.push((id, "-".into()));
            }
            v.push((
                "refused",
                format!("With this budget the whole-prompt policy refuses the scenario: {e}."),
            ));
            v.push((
                "refused_zh",
                format!("在这个预算下，整段 prompt 策略拒绝了这个场景：需要的预算至少为 {whole_min} 个 token。"),
            ));
        }
    }
    // Stored latencies: whole prompts at the largest budget against chunks at the smallest.
    let (wb, sb) = (measure::BUDGETS[measure::BUDGETS.len() - 1], measure::BUDGETS[0]);
    v.push(("whole_budget", wb.to_string()));
    v.push(("small_budget", sb.to_string()));
    let w = o.stored_latency("whole", wb);
    let s = o.stored_latency("chunked", sb);
    let stall = |r: Option<&measure::LatencyRow>| {
        r.map_or("-".into(), |r| {
            ms(r.max_itl[..long].iter().copied().fold(0.0, f64::max))
        })
    };
    v.push(("whole_ttft", w.map_or("-".into(), |r| ms(r.ttft[long]))));
    v.push(("small_ttft", s.map_or("-".into(), |r| ms(r.ttft[long]))));
    v.push(("whole_stall", stall(w)));
    v.push(("small_stall", stall(s)));
    // Chunked prefill at the same budget: when it schedules the same steps, the two stored runs timed the
    // same work, and their gap is the run's.
    let c = o.stored_latency("chunked", wb);
    let (en, zh) = match (o.same_at_top, w, c) {
        (Some(n), Some(w), Some(c)) => (
            format!(
                "At {wb}, chunked prefill never splits it and runs the same {} steps; its stored TTFT of {} against {} is the run-to-run spread of timing the same work on this machine.",
                n,
                ms(c.ttft[long]),
                ms(w.ttft[long])
            ),
            format!(
                "预算 {wb} 时，分块预填充从不切开它，跑的是同样的 {} 步；它存储的 TTFT 为 {}，对比 {}，这是本机上把同样的工作计时两次的波动。",
                n,
                ms(c.ttft[long]),
                ms(w.ttft[long])
            ),
        ),
        _ => (String::new(), String::new()),
    };
    v.push(("top_same", en));
    v.push(("top_same_zh", zh));
    v.push((
        "stored_on",
        format!("{} ({}, {})", o.stored.machine, o.stored.backend, o.stored.date),
    ));
    real_numbers(o, &mut v);
    // The chunk of the verification pass.
    let (pos, rows, _) = o.chunk;
    v.push(("chunk_rows", rows.to_string()));
    v.push(("chunk_first", pos.to_string()));
    v.push(("chunk_ctx", (pos + rows).to_string()));
    v.push(("chunk_prefix", pos.to_string()));
    // Offload.
    let m = crate::model::shared().map(|m| m.config);
    let tiny_bpt = m.map_or(0, |c| 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2);
    v.push(("tiny_bpt", format_bytes(tiny_bpt as f64)));
    let row = o.stored.offload.last();
    v.push(("swap_tokens", row.map_or("-".into(), |r| r.tokens.to_string())));
    v.push(("swap_bytes", row.map_or("-".into(), |r| format_bytes(r.bytes as f64))));
    v.push((
        "swap_ms",
        row.map_or("-".into(), |r| format!("{:.3} ms", r.swap_seconds * 1e3)),
    ));
    v.push(("recompute_ms", row.map_or("-".into(), |r| ms(r.recompute_seconds))));
    v.push((
        "recompute_ratio",
        row.map_or("-".into(), |r| format!("{:.0}", r.recompute_seconds / r.swap_seconds)),
    ));
    let (pcie, flops) = device_rates();
    let (mha, gqa) = (&o.fact_models[0], &o.fact_models[1]);
    v.push(("mha_model", mha.name.clone()));
    let cross = crossover(mha, pcie, flops);
    v.push(("mha_cross", cross.map_or("-".into(), |n| n.to_string())));
    let limit = calc::context_limit(mha);
    // Whether the crossover falls inside the context the MHA model serves.
    let (note, note_zh) = match (cross, limit) {
        (Some(c), Some(l)) if c > l => (
            format!("beyond the {l} tokens it serves, so within them recomputing is cheaper"),
            format!("超出了它能服务的 {l} 个 token，所以在这之内重算更便宜"),
        ),
        (_, Some(l)) => (
            format!("inside the {l} tokens it serves"),
            format!("在它能服务的 {l} 个 token 之内"),
        ),
        (_, None) => (String::new(), String::new()),
    };
    v.push(("mha_cross_note", note));
    v.push(("mha_cross_note_zh", note_zh));
    v.push(("gqa_model", gqa.name.clone()));
    let (gs, gr) = fact_costs(gqa, 1, pcie, flops);
    v.push(("gqa_swap_us", us(gs)));
    v.push(("gqa_recompute_us", us(gr)));
    // Speculative decoding.
    let sp = &o.spec;
    v.push(("drafter", sp.drafter.to_string()));
    v.push((
        "drafter_zh",
        if o.drafter == "draft" {
            "草稿模型"
        } else {
            "提示查找（n-gram）"
        }
        .to_string(),
    ));
    v.push(("k", sp.k.to_string()));
    v.push(("passes", (1 + sp.steps.len()).to_string()));
    v.push(("spec_bytes", sp.output.len().to_string()));
    let fs = sp.steps.iter().find(|s| !s.proposed.is_empty());
    v.push((
        "first_proposed",
        fs.map_or("0".into(), |s| s.proposed.len().to_string()),
    ));
    v.push(("first_accepted", fs.map_or("0".into(), |s| s.accepted.to_string())));
    v.push((
        "freed_blocks",
        sp.steps.iter().map(|s| s.freed.len()).sum::<usize>().to_string(),
    ));
    let alpha = sp.alpha();
    v.push((
        "alpha1",
        alpha
            .first()
            .copied()
            .flatten()
            .map_or("-".into(), |a| format!("{a:.2}")),
    ));
    v.push(("mean_accepted", format!("{:.2}", sp.mean_accepted())));
    v.push(("passes_per_byte", format!("{:.2}", sp.passes_per_byte())));
    let (kv, plain_kv) = sp.kv_bytes();
    v.push(("spec_kv", format_bytes(kv as f64)));
    v.push(("plain_kv", format_bytes(plain_kv as f64)));
    v.push(("draft_weights", format_bytes(sp.draft_weight_bytes as f64)));
    v.push((
        "spec_speed",
        o.stored_spec().map_or("-".into(), |r| {
            format!("{:.2}×", r.bytes_per_second / r.plain_bytes_per_second.max(1e-12))
        }),
    ));
    v.push((
        "equal",
        if sp.output == o.plain.output {
            "equal"
        } else {
            "NOT equal"
        }
        .to_string(),
    ));
    v.push((
        "equal_zh",
        if sp.output == o.plain.output {
            "相同"
        } else {
            "不相同"
        }
        .to_string(),
    ));
    v.push(("check_err", format!("{:.1e}", o.check.max_abs)));
    v
}
