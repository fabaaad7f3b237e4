//! Lesson 12, serving (kind `serving`): the trained model served by a scheduler that mixes prefill and
//! decode under a token budget, with and without chunked prefill; the `paged_prefill` kernel that attends
//! a chunk over the paged cache; a preempted request's KV swapped to a host pool against recomputed; and
//! speculative decoding, drafted by prompt lookup or a small draft model and verified in one
//! `paged_prefill` pass. Every count on screen (steps, tokens, blocks, acceptances, bytes) is computed
//! here on each slider change; wall-clock figures come from [`measure`]'s stored file, labelled with its
//! machine and date; device figures are quoted facts.

#[cfg(feature = "native")]
pub mod cli;
pub mod measure;

use crate::calc::{self, Format, ModelSpec};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, LessonKind, Output, Params, Schema, format_bytes, get};
use crate::drivers::serve::{DEFAULT_SCENARIO, ServeRun, scenario};
use crate::drivers::spec::{Drafter, SpecConfig, SpecRun};

crate::views! {
    /// The views of lesson 12.
    pub enum View {
        /// Each scheduler step's tokens, by request and kind, under the budget.
        Schedule = "schedule",
        /// TTFT and inter-token latency per request (live, in steps) and across budgets (stored, in ms).
        Latency = "latency",
        /// One chunk's rows against the cached positions: the prefix, and the causal triangle inside it.
        Chunk = "chunk",
        /// Swap against recompute: measured here, and from device facts against context length.
        Offload = "offload",
        /// Each verification pass: drafts accepted and rejected, the target's byte, the cache rolled back.
        Speculative = "speculative",
        /// Acceptance by position, passes per byte, bytes per second and memory.
        SpecStats = "spec_stats",
        /// The same measurements on SmolLM2-135M (stored) beside the tiny model's.
        Real = "real",
        /// The kernel that ran.
        Kernel = "kernel",
    }
}

/// Lesson 12.
pub struct Serving;

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "budget",
    "policy",
    "policy_zh",
    "steps",
    "requests",
    "long_prompt",
    "long_arrive",
    "busy_step",
    "busy_prefill",
    "busy_decode",
    "long_ttft_steps",
    "long_chunks",
    "refused",
    "refused_zh",
    "whole_budget",
    "whole_ttft",
    "small_budget",
    "small_ttft",
    "whole_stall",
    "small_stall",
    "stored_on",
    "chunk_rows",
    "chunk_first",
    "chunk_ctx",
    "chunk_prefix",
    "tiny_bpt",
    "swap_tokens",
    "swap_bytes",
    "swap_ms",
    "recompute_ms",
    "recompute_ratio",
    "mha_model",
    "mha_cross",
    "mha_cross_note",
    "mha_cross_note_zh",
    "gqa_model",
    "gqa_swap_us",
    "gqa_recompute_us",
    "drafter",
    "drafter_zh",
    "k",
    "passes",
    "spec_bytes",
    "first_proposed",
    "first_accepted",
    "freed_blocks",
    "alpha1",
    "mean_accepted",
    "passes_per_byte",
    "spec_kv",
    "plain_kv",
    "draft_weights",
    "spec_speed",
    "equal",
    "equal_zh",
    "check_err",
    "real_stored_on",
    "real_k",
    "real_speedup",
    "real_accepted",
    "real_passes",
    "tiny_speedup",
    "tiny_accepted",
    "real_pass_decodes",
    "tiny_pass_decodes",
];

/// The two models of the device-fact comparison: MHA (no KV sharing) and GQA.
pub const FACT_MODELS: [&str; 2] = ["Llama-2-7B", "Llama-3-8B"];


/// Swap (out and back in over PCIe) and recompute (a prefill at peak FLOP/s) seconds for a request of
/// `n` tokens of `m`, from device facts: `pcie` bytes/s one way, `flops` FLOP/s. Recompute counts
/// 2 FLOPs per parameter per token plus causal attention (QKᵀ and PV: 2 · layers · heads · head_dim ·
/// n² FLOPs); both are the best case (peak rates, no overlap).
pub fn fact_costs(m: &ModelSpec, n: usize, pcie: f64, flops: f64) -> (f64, f64) {
    let bf16 = Format::parse("bf16").expect("bf16 is a format");
    let kv = calc::request_bytes(m, &bf16, n);
    let swap = 2.0 * kv / pcie;
    let (params, _) = m.parameters();
    let nf = n as f64;
    let attn = 2.0 * m.layers as f64 * (m.heads * m.head_dim) as f64 * nf * nf;
    let recompute = (2.0 * params as f64 * nf + attn) / flops;
    (swap, recompute)
}

/// The smallest context (searched by doubling, then bisection, up to 1M tokens) at which recomputing
/// costs more than swapping, or `None` when recompute is cheaper throughout, or more costly from the
/// first token.
pub fn crossover(m: &ModelSpec, pcie: f64, flops: f64) -> Option<usize> {
    let worse = |n: usize| {
        let (s, r) = fact_costs(m, n, pcie, flops);
        r > s
    };
    if worse(1) {
        return None;
    }
    let mut hi = 2;
    while !worse(hi) {
        hi *= 2;
        if hi > 1 << 20 {
            return None;
        }
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if worse(mid) { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// The device facts the comparison uses: PCIe Gen5 x16 one way, H100 SXM dense BF16, in bytes/s and
/// FLOP/s.
pub fn device_rates() -> (f64, f64) {
    let pcie = crate::facts::fact("pcie5_x16_one_way").number() * 1e9;
    let flops = crate::facts::fact("h100_sxm_bf16_dense").number() * 1e12;
    (pcie, flops)
}

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
    /// SmolLM2-135M's stored measurement (the real-model step).
    pub real: measure::StoredServing,
    /// The tiny model's prompt-lookup runs at each stored k, live: (k, drafts accepted per pass, target
    /// passes per byte).
    pub tiny_ngram: Vec<(usize, f64, f64)>,
    numbers: Vec<(&'static str, String)>,
}

impl Schema for Serving {
    fn name(&self) -> &'static str {
        "serving"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["budget", "chunked", "drafter", "k", "block_size"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["busiest", "last_pass"]
    }
}

fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1e3)
}

fn us(s: f64) -> String {
    format!("{:.1} µs", s * 1e6)
}

impl LessonKind for Serving {
    #[cfg(feature = "native")]
    fn benches(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::BENCH_SERVING]
    }

    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::SPECULATIVE, &cli::SERVING]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::PagedPrefill]
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        let mut v = Vec::new();
        let serving = views.iter().any(|x| ["schedule", "latency", "chunk"].contains(x));
        if !serving {
            for id in ["budget", "chunked"] {
                v.push((id, ["The token budget: steps 1 to 3.", "token 预算：第 1 到 3 步。"]));
            }
        }
        let spec = views.iter().any(|x| ["speculative", "spec_stats", "kernel"].contains(x));
        if !spec {
            for id in ["drafter", "k", "block_size"] {
                v.push((id, ["Speculative decoding: steps 5 to 7.", "投机解码：第 5 到 7 步。"]));
            }
        }
        v
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let model = crate::model::shared().map_err(|e| e.to_string())?;
        let draft = crate::model::draft().map_err(|e| e.to_string())?;
        let budget = get(p, "budget", 32).clamp(1, 4096) as usize;
        let chunked = get(p, "chunked", 1) != 0;
        let k = get(p, "k", 4).clamp(1, 16) as usize;
        let block_size = get(p, "block_size", 4).clamp(1, 64) as usize;
        let use_draft = get(p, "drafter", 2) >= 2;
        let requests = DEFAULT_SCENARIO.to_vec();
        let reqs = scenario(&requests)?;
        let run = model.serve(measure::serve_shape(), &reqs, measure::policy(chunked, budget), backend);
        let drafter = if use_draft {
            Drafter::Model(draft)
        } else {
            Drafter::Ngram { min_n: 1, max_n: 3 }
        };
        let cfg = |d| SpecConfig {
            drafter: d,
            k,
            temperature: 0.0,
            seed: 0,
            block_size,
        };
        let prompt = measure::spec_prompt();
        let spec = model.speculative(prompt, measure::SPEC_BYTES, &cfg(drafter), backend)?;
        let plain = model.speculative(prompt, measure::SPEC_BYTES, &cfg(Drafter::None), backend)?;
        // The kernel check: the first verification pass with drafts (or the first pass), again, checked.
        let first = spec.steps.iter().position(|s| !s.proposed.is_empty()).unwrap_or(0);
        let (check, chunk) = match spec.steps.get(first) {
            Some(s) => {
                let mut seq = prompt.to_vec();
                seq.extend_from_slice(&spec.output[..s.pos + 1 - prompt.len()]);
                let mut chunk = vec![seq[s.pos]];
                chunk.extend_from_slice(&s.proposed);
                let r = crate::drivers::spec::verify_pass_checked(
                    model,
                    backend,
                    &seq[..s.pos],
                    &chunk,
                    block_size,
                    model.config.n_layers - 1,
                )?;
                (r, (s.pos, chunk.len(), block_size))
            }
            None => (CheckReport::failed("paged_prefill", "no verification pass ran"), (0, 0, block_size)),
        };
        // The chunk the kernel step draws: the long request's second chunk (its first has no cached
        // prefix), or its only one; the verification pass when the policy refused the scenario.
        let chunk = match &run {
            Ok(r) => {
                let long = requests.len() - 1;
                let mine: Vec<(usize, usize)> = r
                    .steps
                    .iter()
                    .flat_map(|e| e.chunks.iter().filter(|c| c.0 as usize == long).map(|c| (c.1, c.2)))
                    .collect();
                mine.get(1)
                    .or(mine.first())
                    .map_or(chunk, |&(p, n)| (p, n, measure::serve_shape().block_size))
            }
            Err(_) => chunk,
        };
        let stored = measure::stored()?;
        let real = measure::stored_smollm2()?;
        // Prompt lookup on the tiny model at each k the stored files time: counts (greedy), so computed
        // here, on the CPU backend whatever the lesson's (a few milliseconds each; on a simulated GPU
        // they would multiply the lesson's launches), and outside the launch capture: the kernel step
        // shows the lesson's verification pass, not these.
        let tiny_ngram = crate::compute::launch::uncaptured(|| {
            measure::SPEC_KS
            .iter()
            .map(|&k| {
                let c = SpecConfig {
                    drafter: Drafter::Ngram { min_n: 1, max_n: 3 },
                    k,
                    temperature: 0.0,
                    seed: 0,
                    block_size,
                };
                model
                    .speculative(prompt, measure::SPEC_BYTES, &c, &crate::compute::CpuBackend)
                    .map(|r| (k, r.mean_accepted(), r.passes_per_byte()))
            })
            .collect::<Result<Vec<_>, _>>()
        })?;
        let fact_models = FACT_MODELS
            .iter()
            .map(|n| calc::configs::bundled(n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut o = ServingOut {
            requests,
            budget,
            chunked,
            run,
            spec,
            plain,
            drafter: if use_draft { "draft" } else { "ngram" },
            block_size,
            check,
            chunk,
            stored,
            fact_models,
            real,
            tiny_ngram,
            numbers: Vec::new(),
        };
        o.numbers = numbers(&o);
        Ok(Box::new(o))
    }
}

impl ServingOut {
    /// Index of the long request (the last of the scenario).
    pub fn long(&self) -> usize {
        self.requests.len() - 1
    }

    /// The stored latency row of `policy` at `budget`.
    pub fn stored_latency(&self, policy: &str, budget: usize) -> Option<&measure::LatencyRow> {
        self.stored
            .latency
            .iter()
            .find(|r| r.policy == policy && r.budget == budget)
    }

    /// The stored speculative row of this drafter and k.
    pub fn stored_spec(&self) -> Option<&measure::SpecRow> {
        self.stored
            .speculative
            .iter()
            .find(|r| r.drafter == self.drafter && r.k == self.spec.k)
    }

    /// The step the first step's narration calls the busiest (`{busy_step}`), none when the policy refused.
    pub fn busiest_step(&self) -> Option<usize> {
        // The busiest step that mixes prefill and decode (or the busiest step when none does).
        self.step_tokens()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (pf, dc) = t.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
                (i, (pf > 0 && dc > 0, pf + dc))
            })
            .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)))
            .map(|(i, _)| i)
    }

    /// Prefill tokens and decode tokens of each step, by request: `[step][request] = (prefill, decode)`.
    pub fn step_tokens(&self) -> Vec<Vec<(usize, usize)>> {
        let Ok(run) = &self.run else { return Vec::new() };
        run.steps
            .iter()
            .map(|e| {
                let mut t = vec![(0, 0); self.requests.len()];
                for c in &e.chunks {
                    t[c.0 as usize].0 += c.2;
                }
                for d in &e.decoded {
                    t[d.0 as usize].1 += 1;
                }
                t
            })
            .collect()
    }
}

/// The real-model step's numbers: SmolLM2's stored file beside the tiny model's (stored rates, live
/// acceptance counts).
fn real_numbers(o: &ServingOut, v: &mut Vec<(&'static str, String)>) {
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
        best.and_then(|r| r.accepted_per_pass).map_or_else(dash, |a| format!("{a:.2}")),
    ));
    v.push((
        "real_passes",
        best.and_then(|r| r.passes_per_token).map_or_else(dash, |a| format!("{a:.2}")),
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

fn numbers(o: &ServingOut) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> = Vec::new();
    let long = o.long();
    v.push(("budget", o.budget.to_string()));
    v.push((
        "policy",
        if o.chunked { "chunked prefill" } else { "whole prompts" }.to_string(),
    ));
    v.push(("policy_zh", if o.chunked { "分块预填充" } else { "整段 prompt" }.to_string()));
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
            for id in ["steps", "busy_step", "busy_prefill", "busy_decode", "long_ttft_steps", "long_chunks"] {
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
        r.map_or("-".into(), |r| ms(r.max_itl[..long].iter().copied().fold(0.0, f64::max)))
    };
    v.push(("whole_ttft", w.map_or("-".into(), |r| ms(r.ttft[long]))));
    v.push(("small_ttft", s.map_or("-".into(), |r| ms(r.ttft[long]))));
    v.push(("whole_stall", stall(w)));
    v.push(("small_stall", stall(s)));
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
    v.push(("swap_ms", row.map_or("-".into(), |r| format!("{:.3} ms", r.swap_seconds * 1e3))));
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
        if o.drafter == "draft" { "草稿模型" } else { "提示查找（n-gram）" }.to_string(),
    ));
    v.push(("k", sp.k.to_string()));
    v.push(("passes", (1 + sp.steps.len()).to_string()));
    v.push(("spec_bytes", sp.output.len().to_string()));
    let fs = sp.steps.iter().find(|s| !s.proposed.is_empty());
    v.push(("first_proposed", fs.map_or("0".into(), |s| s.proposed.len().to_string())));
    v.push(("first_accepted", fs.map_or("0".into(), |s| s.accepted.to_string())));
    v.push((
        "freed_blocks",
        sp.steps.iter().map(|s| s.freed.len()).sum::<usize>().to_string(),
    ));
    let alpha = sp.alpha();
    v.push((
        "alpha1",
        alpha.first().copied().flatten().map_or("-".into(), |a| format!("{a:.2}")),
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
        if sp.output == o.plain.output { "equal" } else { "NOT equal" }.to_string(),
    ));
    v.push((
        "equal_zh",
        if sp.output == o.plain.output { "相同" } else { "不相同" }.to_string(),
    ));
    v.push(("check_err", format!("{:.1e}", o.check.max_abs)));
    v
}

impl Output for ServingOut {
    fn reports(&self) -> Vec<&CheckReport> {
        vec![&self.check]
    }

    fn has_nan(&self) -> bool {
        false
    }

    fn export_arrays(&self, _cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let tokens = self.step_tokens();
        let n = self.requests.len();
        let flat: Vec<f32> = tokens
            .iter()
            .flat_map(|t| t.iter().flat_map(|&(a, b)| [a as f32, b as f32]))
            .collect();
        let accepted: Vec<f32> = self.spec.steps.iter().map(|s| s.accepted as f32).collect();
        let proposed: Vec<f32> = self.spec.steps.iter().map(|s| s.proposed.len() as f32).collect();
        let v = vec![
            NamedArray::new("step_tokens", &[tokens.len(), n, 2], ArrayData::F32(flat)),
            NamedArray::new("spec_proposed", &[proposed.len()], ArrayData::F32(proposed)),
            NamedArray::new("spec_accepted", &[accepted.len()], ArrayData::F32(accepted)),
        ];
        (v, vec![self.check.clone()])
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    /// `busiest`: the scheduler step of `{busy_step}`; `last_pass`: the speculative run's last pass that
    /// had drafts to verify (a pass at the end of the budget may have none).
    fn point(&self, name: &str) -> Option<usize> {
        match name {
            "busiest" => self.busiest_step(),
            "last_pass" => self.spec.steps.iter().rposition(|s| !s.proposed.is_empty()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device-fact comparison: MHA's KV per token makes a swap cost more than recomputing short
    /// requests, with a crossover where attention's quadratic term catches up; GQA's swap is cheaper
    /// from the first token.
    #[test]
    fn swap_against_recompute_from_device_facts() {
        let (pcie, flops) = device_rates();
        let mha = calc::configs::bundled("Llama-2-7B").unwrap();
        let gqa = calc::configs::bundled("Llama-3-8B").unwrap();
        let cross = crossover(&mha, pcie, flops).expect("an MHA model crosses over");
        let (s, r) = fact_costs(&mha, cross - 1, pcie, flops);
        assert!(r <= s);
        let (s, r) = fact_costs(&mha, cross, pcie, flops);
        assert!(r > s);
        // 128 KiB per token both ways at 64 GB/s: 4.1 µs; 2 · 8.03 B FLOPs at 989 TFLOP/s: 16.2 µs.
        let (s, r) = fact_costs(&gqa, 1, pcie, flops);
        assert!((s * 1e6 - 4.096).abs() < 0.01, "{s}");
        assert!(r > s);
        assert_eq!(crossover(&gqa, pcie, flops), None);
        // The offload step says the MHA crossover lies past the 4096 tokens Llama-2-7B serves.
        assert_eq!((cross, calc::context_limit(&mha)), (10403, Some(4096)));
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "serving").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let o = l.kind.compute(l, &p, &crate::compute::CpuBackend).unwrap();
        let note = o.values().into_iter().find(|(n, _)| *n == "mha_cross_note").unwrap().1;
        assert_eq!(note, "beyond the 4096 tokens it serves, so within them recomputing is cheaper");
    }
}
