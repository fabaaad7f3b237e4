//! `kvscope export serving`: the trained model served under a scheduling policy (lesson 12), written as
//! `serving.json`: each step's schedule (who ran, how many prefill and decode tokens, its wall-clock
//! seconds) and each request's TTFT and inter-token latencies, in steps and in seconds.

use std::path::{Path, PathBuf};

use crate::cache::{KvDtype, PagedShape};
use crate::command::{Sub, backend};
use crate::compute::BackendKind;
use crate::drivers::serve::{self, ServeRun};
use crate::kv::{ChunkedPrefill, SchedulePolicy, WholeUnderBudget};
use anyhow::{Context, Result, anyhow, bail};

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
    /// The model served.
    pub model: crate::command::ModelArgs,
}

/// The JSON of a run: the schedule, per step, and the latencies, per request.
pub fn report<T: crate::model::TokenId + serde::Serialize>(
    run: &ServeRun<T>,
    requests: &[serve::ServedRequest<T>],
    params: serde_json::Value,
    m: &crate::model::Model,
) -> serde_json::Value {
    // The tiny model's tokens are bytes: its keys say so, as they always have.
    let unit = if m.name == crate::model::ModelName::Tiny {
        "bytes"
    } else {
        "tokens"
    };
    let ids = |t: &[T]| -> Vec<u32> { t.iter().map(|x| x.index() as u32).collect() };
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
            let mut o = serde_json::json!({
                "id": i,
                "arrive": r.arrive,
                "generate": r.generate,
                "output": m.tokenizer.decode(&ids(&run.outputs[i])),
                "emit_steps": run.emit_steps[i],
                "ttft_steps": l.map(|l| l.ttft_steps),
                "ttft_seconds": l.map(|l| l.ttft_seconds),
                "itl_steps": l.map(|l| l.itl_steps.clone()),
                "itl_seconds": l.map(|l| l.itl_seconds.clone()),
                "max_itl_steps": l.map(|l| l.max_itl_steps()),
                "max_itl_seconds": l.map(|l| l.max_itl_seconds()),
                "mean_itl_seconds": l.map(|l| l.mean_itl_seconds()),
            });
            o[format!("prompt_{unit}")] = serde_json::json!(r.prompt.len());
            o[format!("output_{unit}")] = serde_json::json!(run.outputs[i]);
            o
        })
        .collect();
    serde_json::json!({
        "params": params,
        "policy": run.policy,
        "steps": steps,
        "requests": reqs,
        "total_seconds": run.step_seconds.iter().sum::<f64>(),
        format!("generated_{unit}_per_second"): run.bytes_per_second(),
        "model": m.describe(),
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
    let m = a.model.load()?;
    if m.name == crate::model::ModelName::Tiny {
        let requests = serve::scenario(a.requests).map_err(|e| anyhow!(e))?;
        return export_with(&a, &m, &requests);
    }
    let (text, _) = m.heldout_tokens(usize::MAX).map_err(|e| anyhow!(e))?;
    let requests = serve::scenario_from(&text, a.requests).map_err(|e| anyhow!(e))?;
    export_with(&a, &m, &requests)
}

fn export_with<T: crate::model::TokenId + serde::Serialize>(
    a: &ServingArgs,
    model: &crate::model::Model,
    requests: &[serve::ServedRequest<T>],
) -> Result<()> {
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
    let b = crate::command::backend(a.backend)?;
    let run = model
        .serve(shape, requests, policy, b.as_ref())
        .map_err(|e| anyhow!("{e}"))?;
    let params = serde_json::json!({
        "policy": format!("{:?}", a.policy).to_lowercase(), "budget": a.budget, "chunk": a.chunk,
        "requests": a.requests.iter().map(|r| format!("{}:{}:{}", r.0, r.1, r.2)).collect::<Vec<_>>(),
        "blocks": a.blocks, "block_size": a.block_size, "backend": b.kind().name(), "device": b.device(),
        "prompts": "held-out text, request i from byte 997·i (wrapped)",
    });
    let json = report(&run, requests, params, model);
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
            if r["prompt_bytes"].is_null() {
                &r["prompt_tokens"]
            } else {
                &r["prompt_bytes"]
            },
            r["ttft_steps"],
            ms("ttft_seconds"),
            ms("mean_itl_seconds"),
            r["max_itl_steps"],
            ms("max_itl_seconds")
        );
    }
    outln!(
        "{:.1} generated {}/s ({}); wrote {}",
        run.bytes_per_second(),
        if model.name == crate::model::ModelName::Tiny {
            "bytes"
        } else {
            "tokens"
        },
        model.name.id(),
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
pub fn drafter(arg: SpecArg) -> Result<crate::drivers::spec::Drafter<'static>> {
    use crate::drivers::spec::Drafter;
    Ok(match arg {
        SpecArg::Ngram => Drafter::Ngram { min_n: 1, max_n: 3 },
        SpecArg::Draft => Drafter::Model(crate::model::draft().map_err(|e| anyhow!("{e}"))?),
    })
}

/// The JSON of a speculative run, next to plain decode of the same bytes.
pub fn spec_report<T: crate::model::TokenId + serde::Serialize>(
    run: &crate::drivers::spec::SpecRun<T>,
    plain: &crate::drivers::spec::SpecRun<T>,
    greedy: bool,
    m: &crate::model::Model,
) -> serde_json::Value {
    let (kv, plain_kv) = run.kv_bytes();
    let ids: Vec<u32> = run.output.iter().map(|t| t.index() as u32).collect();
    let mut json = serde_json::json!({
        "drafter": run.drafter,
        "k": run.k,
        "output": m.tokenizer.decode(&ids),
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
    });
    // SmolLM2's tokens are not bytes: its counts are named for tokens (KV and weight bytes stay bytes).
    if m.name != crate::model::ModelName::Tiny
        && let Some(o) = json.as_object_mut()
    {
        for (from, to) in [
            ("output_bytes", "output_tokens"),
            ("passes_per_byte", "passes_per_token"),
            ("bytes_per_second", "tokens_per_second"),
            ("plain_bytes_per_second", "plain_tokens_per_second"),
        ] {
            if let Some(v) = o.remove(from) {
                o.insert(to.into(), v);
            }
        }
        o.insert("model".into(), serde_json::json!(m.describe()));
    }
    json
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
    let unit = if json.get("tokens_per_second").is_some() {
        "token"
    } else {
        "byte"
    };
    outln!(
        "-- {}, k = {}: α by position [{}], {:.2} accepted per pass, {} target passes, {:.3} passes per {unit}",
        json["drafter"].as_str().unwrap_or(""),
        json["k"],
        alpha.join(", "),
        json["mean_accepted"].as_f64().unwrap_or(0.0),
        json["target_passes"],
        json["passes_per_byte"]
            .as_f64()
            .or(json["passes_per_token"].as_f64())
            .unwrap_or(0.0)
    );
    outln!(
        "-- {:.1} {unit}s/s against {:.1} for plain decode on this backend ({:.2}×); output equals plain decode: {}",
        json["bytes_per_second"]
            .as_f64()
            .or(json["tokens_per_second"].as_f64())
            .unwrap_or(0.0),
        json["plain_bytes_per_second"]
            .as_f64()
            .or(json["plain_tokens_per_second"].as_f64())
            .unwrap_or(0.0),
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

/// Speculative decoding of the trained model (lesson 12): speculative.json with each verification
/// pass's proposals, accepted length and emitted bytes (enough to replay it), acceptance by position,
/// passes per byte, bytes/s against plain decode, and the memory it does not save.
#[derive(clap::Args)]
pub struct SpeculativeArgs {
    /// ngram (prompt lookup) | draft (the shipped draft model)
    #[arg(long, value_enum, default_value = "ngram")]
    speculative: crate::lessons::serving::cli::SpecArg,
    /// Bytes drafted per step.
    #[arg(long, default_value_t = 4)]
    k: usize,
    /// The prompt (default: the first 128 bytes of the held-out text).
    #[arg(long)]
    prompt: Option<String>,
    /// Bytes to generate.
    #[arg(long, default_value_t = 128)]
    tokens: usize,
    /// 0: greedy; otherwise rejection sampling at this temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tokens per block of the paged caches.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_speculative(a: SpeculativeArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let SpeculativeArgs {
        speculative,
        k,
        prompt,
        tokens,
        temperature,
        seed,
        block_size,
        model,
        backend: kind,
        out,
    } = a;
    use crate::drivers::spec::{Drafter, SpecConfig};
    let b = backend(kind)?;
    let model = model.load()?;
    let tiny = model.name == crate::model::ModelName::Tiny;
    if !tiny && speculative == crate::lessons::serving::cli::SpecArg::Draft {
        anyhow::bail!(
            "the shipped draft model is byte-level and cannot draft SmolLM2's BPE tokens: use --speculative ngram (prompt lookup)"
        );
    }
    let (text, source) = match prompt {
        Some(p) => (
            model.tokenizer.encode(&p).map_err(anyhow::Error::msg)?,
            "--prompt".to_string(),
        ),
        None => model.heldout_tokens(128).map_err(anyhow::Error::msg)?,
    };
    let cfg = |drafter| SpecConfig {
        drafter,
        k,
        temperature,
        seed,
        block_size,
    };
    let drafter = if tiny {
        crate::lessons::serving::cli::drafter(speculative)?
    } else {
        Drafter::Ngram { min_n: 1, max_n: 3 }
    };
    let run = model
        .speculative(&text, tokens, &cfg(drafter), b.as_ref())
        .map_err(|e| anyhow::anyhow!(e))?;
    let plain = model
        .speculative(&text, tokens, &cfg(Drafter::None), b.as_ref())
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut json = crate::lessons::serving::cli::spec_report(&run, &plain, temperature <= 0.0, &model);
    json["params"] = serde_json::json!({
        "k": k, "tokens": tokens, "temperature": temperature, "seed": seed, "block_size": block_size,
        "backend": kind.name(), "device": b.device(), "prompt": model.tokenizer.decode(&text),
        "prompt_source": source,
    });
    json["params"][if tiny { "prompt_bytes" } else { "prompt_tokens" }] = serde_json::json!(text);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join("speculative.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    crate::lessons::serving::cli::print_spec(&json);
    outln!("wrote {}", path.display());
    Ok(())
}

/// `kvscope export speculative`.
pub static SPECULATIVE: Sub<SpeculativeArgs> = Sub {
    name: "speculative",
    about: "Speculative decoding of the trained model (lesson 12): speculative.json with each verification pass's proposals, accepted length and emitted bytes (enough to replay it), acceptance by position, passes per byte, bytes/s against plain decode, and the memory it does not save.",
    run: run_speculative,
};

/// The trained model served under a token budget (lesson 12): serving.json with each step's schedule
/// (prefill and decode tokens, who ran, its seconds) and each request's TTFT and inter-token
/// latencies, in steps and in seconds on the backend. Outputs are greedy, and equal under every policy.
#[derive(clap::Args)]
pub struct ServingCmdArgs {
    /// whole (no chunking: a prompt must fit in one step's budget) | chunked
    #[arg(long, value_enum, default_value = "chunked")]
    policy: crate::lessons::serving::cli::ServePolicy,
    /// Tokens one step may schedule (vLLM's max_num_batched_tokens).
    #[arg(long, default_value_t = 32)]
    budget: usize,
    /// The most prefill tokens one request gets in a step (vLLM's long_prefill_token_threshold; 0: no cap).
    #[arg(long, default_value_t = 0)]
    chunk: usize,
    /// Requests as arrival_step:prompt_bytes:generated_bytes (prompts are pieces of the held-out text);
    /// default: 0:24:40 0:16:40 2:32:40 6:192:8.
    #[arg(long, num_args = 1.., value_parser = crate::lessons::serving::cli::parse_request)]
    requests: Vec<(usize, usize, usize)>,
    /// Blocks in the pool.
    #[arg(long, default_value_t = 128)]
    blocks: usize,
    /// Tokens per block.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_serving(a: ServingCmdArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let ServingCmdArgs {
        policy,
        budget,
        chunk,
        requests,
        blocks,
        block_size,
        model,
        backend: kind,
        out,
    } = a;
    let requests = if requests.is_empty() {
        crate::drivers::serve::DEFAULT_SCENARIO.to_vec()
    } else {
        requests
    };
    crate::lessons::serving::cli::export(crate::lessons::serving::cli::ServingArgs {
        policy,
        budget,
        chunk,
        requests: &requests,
        blocks,
        block_size,
        backend: kind,
        out: &out,
        model,
    })?;
    Ok(())
}

/// `kvscope export serving`.
pub static SERVING: Sub<ServingCmdArgs> = Sub {
    name: "serving",
    about: "The trained model served under a token budget (lesson 12): serving.json with each step's schedule (prefill and decode tokens, who ran, its seconds) and each request's TTFT and inter-token latencies, in steps and in seconds on the backend. Outputs are greedy, and equal under every policy.",
    run: run_serving,
};

/// Lesson 12's timings on a model (--model; the trained tiny one by default): TTFT/ITL of the default scenario under each token budget
/// (chunked, and whole prompts), swapping a request's KV out and back against recomputing it, by
/// context length, and speculative decoding's bytes/s against plain decode, printed.
#[derive(clap::Args)]
pub struct ServingBenchArgs {
    /// Backend to measure.
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    /// Also write them, with the date and the machine, as the stored measurement lesson 12 draws
    /// (assets/measurements/serving.json).
    #[arg(long, value_name = "FILE")]
    store: Option<std::path::PathBuf>,
    #[command(flatten)]
    model: crate::command::ModelArgs,
}

/// Lesson 12's measurements, printed and optionally stored.
fn run_bench_serving(a: ServingBenchArgs, _lessons: Option<&Path>) -> Result<()> {
    let ServingBenchArgs {
        backend: kind,
        store,
        model,
    } = a;
    use crate::lessons::serving::measure;
    let b = backend(kind)?;
    let err = |e: String| anyhow::anyhow!(e);
    let model = model.load()?;
    let model = &model;
    let tiny = model.name == crate::model::ModelName::Tiny;
    // The tiny model's text is its held-out bytes and its draft model drafts for it; SmolLM2's is its
    // tokens of the English held-out text, and only prompt lookup can draft BPE tokens.
    let (held, source) = model.heldout_tokens(usize::MAX).map_err(err)?;
    let draft = if tiny {
        Some(crate::model::draft().map_err(|e| anyhow::anyhow!("{e}"))?)
    } else {
        None
    };
    let unit = if tiny { "bytes" } else { "tokens" };
    let latency = measure::measure_latency(model, b.as_ref(), &held).map_err(err)?;
    outln!(
        "{}: default scenario (requests arrival:prompt:generated {:?} {unit}, cut from {source}) on {}",
        model.name.id(),
        crate::drivers::serve::DEFAULT_SCENARIO,
        kind.name()
    );
    outln!("policy   budget  TTFT ms per request            worst ITL ms per request       {unit}/s");
    let ms = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:6.1}", x * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for r in &latency {
        outln!(
            "{:7}  {:6}  {}  {}  {:7.1}",
            r.policy,
            r.budget,
            ms(&r.ttft),
            ms(&r.max_itl),
            r.bytes_per_second
        );
    }
    let offload = measure::measure_offload(model, b.as_ref(), &held).map_err(err)?;
    outln!("tokens  swap bytes (one way)  swap out+in ms  GB/s (both ways)  recompute ms  recompute/swap");
    for r in &offload {
        outln!(
            "{:6}  {:20}  {:14.3}  {:16.2}  {:12.3}  {:14.1}",
            r.tokens,
            r.bytes,
            r.swap_seconds * 1e3,
            2.0 * r.bytes as f64 / r.swap_seconds / 1e9,
            r.recompute_seconds * 1e3,
            r.recompute_seconds / r.swap_seconds
        );
    }
    let prompt = &held[..held.len().min(measure::spec_prompt().len())];
    let speculative = measure::measure_spec(model, draft, b.as_ref(), prompt).map_err(err)?;
    if !tiny {
        outln!("(no draft model: the byte-level draft model cannot draft BPE tokens)");
    }
    outln!(
        "drafter  k  {unit}/s  plain {unit}/s  ratio  accepted/pass  passes per output {}",
        unit.trim_end_matches('s')
    );
    for r in &speculative {
        outln!(
            "{:7}  {}  {:7.1}  {:13.1}  {:5.2}  {:13.2}  {:10.3}",
            r.drafter,
            r.k,
            r.bytes_per_second,
            r.plain_bytes_per_second,
            r.bytes_per_second / r.plain_bytes_per_second,
            r.accepted_per_pass.unwrap_or(f64::NAN),
            r.passes_per_token.unwrap_or(f64::NAN)
        );
    }
    if let Some(path) = store {
        let s = measure::StoredServing {
            model: model.name.id().to_string(),
            machine: crate::command::machine_name(
                b.as_ref(),
                !matches!(b.kind(), BackendKind::Wgpu | BackendKind::Cuda),
            ),
            date: crate::command::utc_date(),
            backend: kind.name().to_string(),
            command: format!(
                "kvscope bench serving --backend {}{} --store {}",
                kind.name(),
                if tiny { "" } else { " --model smollm2" },
                path.display()
            ),
            latency,
            offload,
            speculative,
        };
        std::fs::write(&path, serde_json::to_string_pretty(&s)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("stored in {}", path.display());
    }
    Ok(())
}

/// `kvscope bench serving`.
pub static BENCH_SERVING: Sub<ServingBenchArgs> = Sub {
    name: "serving",
    about: "Lesson 12's timings on a model (--model; the trained tiny one by default): TTFT/ITL of the default scenario under each token budget (chunked, and whole prompts), swapping a request's KV out and back against recomputing it, by context length, and speculative decoding's bytes/s against plain decode, printed.",
    run: run_bench_serving,
};
