//! `kvscope export serving`: the trained model served under a scheduling policy (lesson 12), written as
//! `serving.json`: each step's schedule (who ran, how many prefill and decode tokens, its wall-clock
//! seconds) and each request's TTFT and inter-token latencies, in steps and in seconds.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use kvscope::cache::{KvDtype, PagedShape};
use kvscope::compute::BackendKind;
use kvscope::kv::{ChunkedPrefill, SchedulePolicy, WholeUnderBudget};
use kvscope::model::serve::{self, ServeRun};

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
