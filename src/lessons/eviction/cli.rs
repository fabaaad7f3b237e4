//! This lesson kind's `kvscope export` subcommands (found through the registry: `LessonKind::exports`).
//! Desktop build only.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::command::{Sub, backend};
use crate::compute::BackendKind;
use crate::lessons::export;

/// Eviction by importance (lesson 9): the tiny model reads a text one decode step per byte while a
/// policy keeps at most K tokens per KV head per layer: tokens.npy, kept.npy `[step, layer, kv_head,
/// width]`, scores.npy `[step, layer, kv_head, T]`, nll.npy and a manifest that defines each.
#[derive(clap::Args)]
pub struct EvictionArgs {
    /// full | window | sinks | h2o | snapkv | random
    #[arg(long, value_parser = parse_evict_policy)]
    policy: crate::drivers::evict::EvictPolicy,
    /// K: tokens kept per KV head per layer (the one a step reads included).
    #[arg(long)]
    budget: usize,
    /// R: recent tokens H2O and random never evict (default K/2).
    #[arg(long)]
    recent: Option<usize>,
    /// w: SnapKV's observation window (default min(32, K/2)).
    #[arg(long)]
    obs_window: Option<usize>,
    /// k: SnapKV's average-pooling kernel (odd).
    #[arg(long, default_value_t = 5)]
    pool_kernel: usize,
    /// The random policy's seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tokens per block of the paged cache.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// The text to read (its bytes; at most the model's context of 256).
    #[arg(long, conflicts_with = "heldout", required_unless_present = "heldout")]
    prompt: Option<String>,
    /// Read the held-out text's first 256 tokens instead (the tiny model's file's bytes; SmolLM2's
    /// assets/texts/heldout-en.txt): a 128-token prompt, then 128 tokens decoded.
    #[arg(long)]
    heldout: bool,
    /// Tokens of `--prompt` that are the prompt (SnapKV compresses after them; default: all but the
    /// last quarter).
    #[arg(long)]
    prompt_len: Option<usize>,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_eviction(a: EvictionArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let EvictionArgs {
        policy,
        budget,
        recent,
        obs_window,
        pool_kernel,
        seed,
        block_size,
        prompt,
        heldout,
        prompt_len,
        model,
        backend: kind,
        out,
    } = a;
    let cfg = crate::drivers::evict::EvictConfig {
        policy,
        budget,
        recent,
        obs_window,
        pool_kernel,
        seed,
        block_size,
    };
    let m = model.load()?;
    let (text, source, plen) = match prompt {
        Some(p) if !heldout => {
            let t = m.tokenizer.encode(&p).map_err(anyhow::Error::msg)?;
            let plen = prompt_len.unwrap_or(t.len() - t.len() / 4);
            (t, "--prompt".to_string(), plen)
        }
        _ => {
            let (t, source) = m.heldout_tokens(256).map_err(anyhow::Error::msg)?;
            (t, source, prompt_len.unwrap_or(128))
        }
    };
    let b = backend(kind)?;
    let (arrays, extra) = crate::lessons::eviction::export::eviction(b.as_ref(), cfg, &text, plen, &source, &m)?;
    let params = serde_json::json!({
        "policy": policy.name(), "budget": budget, "recent": cfg.recent_tokens(),
        "obs_window": cfg.window_tokens(), "pool_kernel": pool_kernel, "seed": seed,
        "block_size": block_size, "prompt_length": plen, "bytes": text.len(), "model": m.name.id(),
    });
    let e = extra["eviction"].clone();
    export::write_export_with(&out, "eviction", params, 0, b.as_ref(), &[], &arrays, extra)?;
    outln!(
        "{} at K = {budget} tokens per KV head per layer ({}): {:.4} bits per byte after the {plen}-token prompt, \
             dead fraction {:.3}; wrote {}",
        policy.name(),
        m.name.id(),
        e["bits_per_byte_after_prompt"].as_f64().unwrap_or(f64::NAN),
        e["dead_fraction"].as_f64().unwrap_or(f64::NAN),
        out.display()
    );
    Ok(())
}

/// `kvscope export eviction`.
pub static EVICTION: Sub<EvictionArgs> = Sub {
    name: "eviction",
    about: "Eviction by importance (lesson 9): the tiny model reads a text one decode step per byte while a policy keeps at most K tokens per KV head per layer: tokens.npy, kept.npy `[step, layer, kv_head, width]`, scores.npy `[step, layer, kv_head, T]`, nll.npy and a manifest that defines each.",
    run: run_eviction,
};

/// Lesson 9's quality table: every eviction policy at budgets 16, 32, 64 and 128 tokens per KV head
/// per layer, bits per byte over the held-out windows (128-token prompt, 128 tokens scored), the
/// recall of a repeated 12-letter needle, the dead-slot fractions and the concentration of attention,
/// as `eviction.json` (the lesson's stored copy is `assets/measurements/eviction.json`).
#[derive(clap::Args)]
pub struct EvictionTableArgs {
    /// Held-out 256-token windows (at most 64 for tiny; SmolLM2's held-out text holds 2).
    #[arg(long, default_value_t = 64)]
    windows: usize,
    /// Recall trials.
    #[arg(long, default_value_t = 100)]
    trials: usize,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_eviction_table(a: EvictionTableArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let EvictionTableArgs {
        windows,
        trials,
        model,
        backend: kind,
        out,
    } = a;
    let b = backend(kind)?;
    let m = model.load()?;
    let t0 = std::time::Instant::now();
    let table = m
        .eviction_table(b.as_ref(), windows, trials)
        .map_err(|e| anyhow::anyhow!(e))?;
    std::fs::create_dir_all(&out)?;
    let path = out.join("eviction.json");
    std::fs::write(&path, serde_json::to_string_pretty(&table)? + "\n")?;
    outln!(
        "{:<8} {:>4} {:>8} {:>7} {:>6}",
        "policy",
        "K",
        "bits/B",
        "recall",
        "dead"
    );
    for c in &table.cells {
        outln!(
            "{:<8} {:>4} {:>8.4} {:>7.3} {:>6.3}",
            c.policy,
            c.budget,
            c.bits_per_byte,
            c.recall,
            c.dead_fraction
        );
    }
    outln!(
        "{} ({}), {} windows, {} trials on {}, {:.0} s; wrote {}",
        table.model,
        table.text,
        table.windows,
        table.trials,
        table.backend,
        t0.elapsed().as_secs_f64(),
        path.display()
    );
    Ok(())
}

/// `kvscope export eviction-table`.
pub static EVICTION_TABLE: Sub<EvictionTableArgs> = Sub {
    name: "eviction-table",
    about: "Lesson 9's quality table: every eviction policy at budgets 16, 32, 64 and 128 tokens per KV head per layer, bits per byte over the held-out windows (128-token prompt, 128 tokens scored), the recall of a repeated 12-letter needle, the dead-slot fractions and the concentration of attention, as `eviction.json` (the lesson's stored copy is `assets/measurements/eviction.json`).",
    run: run_eviction_table,
};

fn parse_evict_policy(s: &str) -> Result<crate::drivers::evict::EvictPolicy, String> {
    crate::drivers::evict::EvictPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: full, window, sinks, h2o, snapkv or random"))
}
