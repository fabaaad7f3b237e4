//! `kvscope calc`: lesson 11's memory calculator on a bundled config or a user's `config.json`.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use kvscope::calc::{Format, ModelSpec, Query, Report, calculate, configs, gpu_memory};

/// `kvscope calc`.
#[derive(Args)]
pub struct CalcArgs {
    /// A bundled model (`all` for every one, a table), or see --config.
    #[arg(long, conflicts_with = "config")]
    model: Option<String>,
    /// A Hugging Face config.json.
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, default_value = "bf16", help = dtype_help())]
    dtype: String,
    /// Weights dtype (f32, bf16, f16, fp8, int8, int4). Default: the config's torch_dtype.
    #[arg(long)]
    weights_dtype: Option<String>,
    /// Tokens per request.
    #[arg(long, default_value_t = 8192)]
    context: usize,
    /// Requests.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// GPU memory: 80GB, 80GiB, h100 (80 GB) or h200 (141 GB).
    #[arg(long, default_value = "h100")]
    gpu_mem: String,
    /// Tokens per block.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// The fraction of GPU memory the engine claims (vLLM's --gpu-memory-utilization defaults to 0.9;
    /// 1: all of it, no reserve).
    #[arg(long, default_value_t = 1.0)]
    gpu_memory_utilization: f64,
    /// Memory kept back besides the weights, in GB: the activation peak and CUDA-graph memory, which
    /// vLLM profiles at start-up and a calculator can only be told.
    #[arg(long, default_value_t = 0.0)]
    reserve_gb: f64,
    /// Print JSON (every field with its unit in its name).
    #[arg(long)]
    json: bool,
}

fn gb(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} GB", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2} MB", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.2} kB", x / 1e3)
    } else {
        format!("{x:.0} B")
    }
}

fn print(r: &Report) {
    outln!("{} ({})", r.model, r.source);
    outln!(
        "  KV per token: {} values per layer, {} per layer, {} over all layers ({})",
        r.values_per_token_per_layer,
        gb(r.kv_bytes_per_token_per_layer),
        gb(r.kv_bytes_per_token),
        r.kv_format
    );
    for g in &r.groups {
        outln!(
            "  {} layers {}: store {} tokens of a request; block of {} tokens = {}; {} blocks per request",
            g.layers,
            g.window.map_or("with full attention".to_string(), |w| format!(
                "with a {w}-token window"
            )),
            g.tokens_stored,
            r.block_size,
            gb(g.block_bytes),
            g.blocks_per_request
        );
    }
    outln!(
        "  one request of {} tokens: {}; a batch of {}: {}",
        r.context_tokens,
        gb(r.kv_bytes_per_request),
        r.batch,
        gb(r.kv_bytes_batch)
    );
    let mtp = if r.mtp_parameters > 0 {
        format!(
            " (+{:.2} B in the multi-token-prediction layers, not counted)",
            r.mtp_parameters as f64 / 1e9
        )
    } else {
        String::new()
    };
    outln!(
        "  weights: {:.2} B parameters{mtp} × {} = {}",
        r.parameters as f64 / 1e9,
        r.weights_dtype,
        gb(r.weights_bytes)
    );
    let claim = if r.gpu_memory_utilization < 1.0 || r.reserve_bytes > 0.0 {
        format!(
            " × {} claimed, minus a reserve of {}",
            r.gpu_memory_utilization,
            gb(r.reserve_bytes)
        )
    } else {
        " (no other reserve)".to_string()
    };
    outln!(
        "  GPU memory {} ({}){claim}; left for KV after the weights: {}",
        gb(r.gpu_memory_bytes as f64),
        r.gpu_memory_source,
        gb(r.kv_budget_bytes)
    );
    outln!(
        "  fits: {} requests of {} tokens ({} tokens), {} blocks each",
        r.requests_fit,
        r.context_tokens,
        r.tokens_fit,
        r.blocks_per_request
    );
    for w in &r.wrong {
        outln!(
            "  wrong formula: {}: {} per request, {:.2}× the right figure",
            w.formula,
            gb(w.kv_bytes_per_request),
            w.ratio
        );
    }
}

pub fn run(a: CalcArgs) -> Result<bool> {
    let format = Format::parse(&a.dtype).map_err(|e| anyhow!(e))?;
    let q = Query {
        format,
        weights_dtype: a.weights_dtype.clone(),
        context: a.context,
        batch: a.batch,
        gpu: gpu_memory(&a.gpu_mem).map_err(|e| anyhow!(e))?,
        block_size: a.block_size,
        utilization: a.gpu_memory_utilization,
        reserve_bytes: a.reserve_gb * 1e9,
    };
    let models: Vec<ModelSpec> = match (&a.model, &a.config) {
        (Some(m), None) if m.eq_ignore_ascii_case("all") => configs::all().map_err(|e| anyhow!(e))?,
        (Some(m), None) => vec![configs::bundled(m).map_err(|e| anyhow!(e))?],
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let json: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            let name = path.display().to_string();
            vec![ModelSpec::from_hf(&name, &json).map_err(|e| anyhow!(e))?]
        }
        _ => bail!("give --model NAME (or all) or --config FILE"),
    };
    let reports: Vec<Report> = models
        .iter()
        .map(|m| calculate(m, &q))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!(e))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&reports)?);
    } else if reports.len() > 1 {
        outln!(
            "{:<16} {:>6} {:>5} {:>4} {:>5} {:>7} {:>12} {:>12} {:>10} {:>8}",
            "model",
            "layers",
            "heads",
            "kv",
            "hd",
            "values",
            "KV/token",
            "KV/request",
            "weights",
            "fit"
        );
        for (m, r) in models.iter().zip(&reports) {
            outln!(
                "{:<16} {:>6} {:>5} {:>4} {:>5} {:>7} {:>12} {:>12} {:>10} {:>8}",
                m.name,
                m.layers,
                m.heads,
                m.kv_heads,
                if matches!(m.attention, kvscope::calc::Attention::Standard) {
                    m.head_dim.to_string()
                } else {
                    "MLA".to_string()
                },
                r.values_per_token_per_layer,
                gb(r.kv_bytes_per_token),
                gb(r.kv_bytes_per_request),
                gb(r.weights_bytes),
                r.requests_fit
            );
        }
        outln!(
            "KV in {} at {} tokens per request; {} ({}); KV/token over all layers, no window",
            reports[0].kv_format,
            q.context,
            gb(q.gpu.0 as f64),
            q.gpu.1
        );
    } else {
        for r in &reports {
            print(r);
        }
    }
    Ok(true)
}

/// `--dtype`'s help: the calculator's formats, from the one list (`cache::formats`).
fn dtype_help() -> String {
    let names: Vec<String> = kvscope::calc::Format::all().into_iter().map(|f| f.name).collect();
    format!("KV format: {} (KIVI at G = R = 32)", names.join(", "))
}
