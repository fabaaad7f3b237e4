//! `kvscope export serving`: the trained model served under a scheduling policy (lesson 12), written as
//! `serving.json`: each step's schedule (who ran, how many prefill and decode tokens, its wall-clock
//! seconds) and each request's TTFT and inter-token latencies, in steps and in seconds.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use kvscope::cache::{KvDtype, PagedShape};
use kvscope::compute::BackendKind;
use kvscope::drivers::serve::{self, ServeRun};
use kvscope::kv::{ChunkedPrefill, SchedulePolicy, WholeUnderBudget};

/// Whole prompts or chunks, under the token budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServePolicy {
    /// No chunking: a whole prompt must fit in one step's budget.
    Whole,
    /// Chunked prefill: prompts split across steps to fill the budget.
    Chunked,
}

/// One `arrival:prompt:generated` request.
pub fn parse_request(s: &str) -> Result<(usize, usize, usize), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let nums: Result<Vec<usize>, _> = parts.iter().map(|p| p.trim().parse::<usize>()).collect();
    match nums {
        Ok(n) if n.len() == 3 => Ok((n[0], n[1], n[2])),
        _ => Err(format!(
            "`{s}` is not arrival_step:prompt_bytes:generated_bytes (three whole numbers, e.g. 0:24:40)"
        )),
    }
}

/// What `export serving` runs.
pub struct ServingArgs<'a> {
    /// Whole prompts or chunks.
    pub policy: ServePolicy,
    /// Tokens per step.
    pub budget: usize,
    /// The chunk cap (0: none).
    pub chunk: usize,
    /// The requests.
    pub requests: &'a [(usize, usize, usize)],
    /// Blocks in the pool.
    pub blocks: usize,
    /// Tokens per block.
    pub block_size: usize,
    /// The backend.
    pub backend: BackendKind,
    /// The output folder.
    pub out: &'a Path,
}

/// The JSON of a run: the schedule, per step, and the latencies, per request.
pub fn report(run: &ServeRun, requests: &[serve::ServedRequest], params: serde_json::Value) -> serde_json::Value {
    let arrivals: Vec<usize> = requests.iter().map(|r| r.arrive).collect();
    let lat = run.latencies(&arrivals);
    let steps: Vec<serde_json::Value> = run
        .steps
        .iter()
        .zip(&run.step_seconds)
        .map(|(e, secs)| {
            let prefill: usize = e.chunks.iter().map(|c| c.2).sum::<usize>()
                + e.admitted
                    .iter()
                    .filter(|a| !e.chunks.iter().any(|c| c.0 == a.0))
                    .map(|a| a.1)
                    .sum::<usize>();
            serde_json::json!({
                "step": e.step,
                "seconds": secs,
                "prefill_tokens": prefill,
                "decode_tokens": e.decoded.len(),
                "events": e,
            })
        })
        .collect();
    let reqs: Vec<serde_json::Value> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let l = lat[i].as_ref();
            serde_json::json!({
                "id": i,
                "arrive": r.arrive,
                "prompt_bytes": r.prompt.len(),
                "generate": r.generate,
                "output": String::from_utf8_lossy(&run.outputs[i]),
                "output_bytes": run.outputs[i],
                "emit_steps": run.emit_steps[i],
                "ttft_steps": l.map(|l| l.ttft_steps),
                "ttft_seconds": l.map(|l| l.ttft_seconds),
                "itl_steps": l.map(|l| l.itl_steps.clone()),
                "itl_seconds": l.map(|l| l.itl_seconds.clone()),
                "max_itl_steps": l.map(|l| l.max_itl_steps()),
                "max_itl_seconds": l.map(|l| l.max_itl_seconds()),
                "mean_itl_seconds": l.map(|l| l.mean_itl_seconds()),
            })
        })
        .collect();
    serde_json::json!({
        "params": params,
        "policy": run.policy,
        "steps": steps,
        "requests": reqs,
        "total_seconds": run.step_seconds.iter().sum::<f64>(),
        "generated_bytes_per_second": run.bytes_per_second(),
    })
}

/// `export serving`.
pub fn export(a: ServingArgs) -> Result<()> {
    if a.budget == 0 {
        bail!("--budget must be at least 1");
    }
    if a.blocks == 0 || a.block_size == 0 {
        bail!("--blocks and --block-size must be at least 1");
    }
    let requests = serve::scenario(a.requests).map_err(|e| anyhow!(e))?;
    let policy: Box<dyn SchedulePolicy> = match a.policy {
        ServePolicy::Whole => Box::new(WholeUnderBudget { budget: a.budget }),
        ServePolicy::Chunked => Box::new(ChunkedPrefill {
            budget: a.budget,
            chunk: a.chunk,
        }),
    };
    let shape = PagedShape {
        num_blocks: a.blocks,
        block_size: a.block_size,
        kv_heads: 1,
        head_dim: 1,
        dtype: KvDtype::F16,
    };
    let b = super::backend(a.backend)?;
    let model = kvscope::model::shared().map_err(|e| anyhow!(e))?;
    let run = model
        .serve(shape, &requests, policy, b.as_ref())
        .map_err(|e| anyhow!("{e}"))?;
    let params = serde_json::json!({
        "policy": format!("{:?}", a.policy).to_lowercase(), "budget": a.budget, "chunk": a.chunk,
        "requests": a.requests.iter().map(|r| format!("{}:{}:{}", r.0, r.1, r.2)).collect::<Vec<_>>(),
        "blocks": a.blocks, "block_size": a.block_size, "backend": b.kind().name(), "device": b.device(),
        "prompts": "held-out text, request i from byte 997·i (wrapped)",
    });
    let json = report(&run, &requests, params);
    std::fs::create_dir_all(a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let path = a.out.join("serving.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    outln!(
        "{} on {}, budget {}, chunk {}: {} steps, {:.3} s",
        run.policy,
        b.kind().name(),
        a.budget,
        a.chunk,
        run.steps.len(),
        json["total_seconds"].as_f64().unwrap_or(0.0)
    );
    outln!("request  arrive  prompt  TTFT steps  TTFT ms  mean ITL ms  worst ITL steps  worst ITL ms");
    for r in json["requests"].as_array().into_iter().flatten() {
        let ms = |k: &str| r[k].as_f64().map_or("-".to_string(), |s| format!("{:.1}", s * 1e3));
        outln!(
            "{:>7}  {:>6}  {:>6}  {:>10}  {:>7}  {:>11}  {:>15}  {:>12}",
            r["id"],
            r["arrive"],
            r["prompt_bytes"],
            r["ttft_steps"],
            ms("ttft_seconds"),
            ms("mean_itl_seconds"),
            r["max_itl_steps"],
            ms("max_itl_seconds")
        );
    }
    outln!(
        "{:.1} generated bytes/s; wrote {}",
        run.bytes_per_second(),
        path.display()
    );
    Ok(())
}

/// Which proposer `--speculative` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SpecArg {
    /// Prompt lookup: n-grams of 3 down to 1 bytes (vLLM's `ngram` method).
    Ngram,
    /// The shipped draft model (assets/models/kvscope-draft.safetensors).
    Draft,
}

/// The drafter of `arg`.
pub fn drafter(arg: SpecArg) -> Result<kvscope::drivers::spec::Drafter<'static>> {
    use kvscope::drivers::spec::Drafter;
    Ok(match arg {
        SpecArg::Ngram => Drafter::Ngram { min_n: 1, max_n: 3 },
        SpecArg::Draft => Drafter::Model(kvscope::model::draft().map_err(|e| anyhow!("{e}"))?),
    })
}

/// The JSON of a speculative run, next to plain decode of the same bytes.
pub fn spec_report(
    run: &kvscope::drivers::spec::SpecRun,
    plain: &kvscope::drivers::spec::SpecRun,
    greedy: bool,
) -> serde_json::Value {
    let (kv, plain_kv) = run.kv_bytes();
    serde_json::json!({
        "drafter": run.drafter,
        "k": run.k,
        "output": String::from_utf8_lossy(&run.output),
        "output_bytes": run.output,
        // Sampled runs draw other random numbers than plain decode: only greedy output is comparable.
        "equals_plain_output": greedy.then_some(run.output == plain.output),
        "alpha": run.alpha(),
        "accepted_at": run.accepted_at,
        "reached_at": run.reached_at,
        "mean_accepted": run.mean_accepted(),
        "target_passes": 1 + run.steps.len(),
        "passes_per_byte": run.passes_per_byte(),
        "bytes_per_second": run.bytes_per_second(),
        "plain_bytes_per_second": plain.bytes_per_second(),
        "speedup": run.bytes_per_second() / plain.bytes_per_second().max(1e-12),
        "seconds": run.seconds(),
        "plain_seconds": plain.seconds(),
        "memory": {
            "target_peak_blocks": run.target_peak_blocks,
            "target_block_bytes": run.target_block_bytes,
            "draft_peak_blocks": run.draft_peak_blocks,
            "draft_block_bytes": run.draft_block_bytes,
            "draft_weight_bytes": run.draft_weight_bytes,
            "kv_bytes_peak": kv,
            "plain_kv_bytes": plain_kv,
        },
        "steps": run.steps,
    })
}

/// Print a speculative run's summary lines.
pub fn print_spec(json: &serde_json::Value) {
    let alpha: Vec<String> = json["alpha"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a.as_f64().map_or("-".into(), |a| format!("{a:.2}")))
        .collect();
    let m = &json["memory"];
    outln!(
        "-- {}, k = {}: α by position [{}], {:.2} accepted per pass, {} target passes, {:.3} passes per byte",
        json["drafter"].as_str().unwrap_or(""),
        json["k"],
        alpha.join(", "),
        json["mean_accepted"].as_f64().unwrap_or(0.0),
        json["target_passes"],
        json["passes_per_byte"].as_f64().unwrap_or(0.0)
    );
    outln!(
        "-- {:.1} bytes/s against {:.1} for plain decode on this backend ({:.2}×); output equals plain decode: {}",
        json["bytes_per_second"].as_f64().unwrap_or(0.0),
        json["plain_bytes_per_second"].as_f64().unwrap_or(0.0),
        json["speedup"].as_f64().unwrap_or(0.0),
        json["equals_plain_output"].as_bool().map_or(
            "not compared (sampled; rejection sampling keeps the target's distribution)".to_string(),
            |b| b.to_string()
        )
    );
    outln!(
        "-- memory: KV peak {} B (target {} blocks + draft {} blocks) against {} B for plain decode; draft weights {} B",
        m["kv_bytes_peak"],
        m["target_peak_blocks"],
        m["draft_peak_blocks"],
        m["plain_kv_bytes"],
        m["draft_weight_bytes"]
    );
}
