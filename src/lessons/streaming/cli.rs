//! This lesson kind's `kvscope export` subcommands (found through the registry: `LessonKind::exports`).
//! Desktop build only.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::command::{Sub, backend};
use crate::compute::BackendKind;
use crate::lessons::export;

/// The tiny model streaming the held-out file byte by byte past its 256-byte context through a
/// bounded paged cache (lesson 8): tokens.npy, nll.npy, blocks_in_use.npy, sink_mass.npy and a
/// manifest that defines each and gives the bits per byte.
#[derive(clap::Args)]
pub struct StreamingArgs {
    /// dense | window | sinks | recompute
    #[arg(long, value_parser = parse_policy)]
    policy: crate::drivers::stream::StreamPolicy,
    /// cache (positions by slot in the cache, StreamingLLM) | text (each byte keeps its own)
    #[arg(long, value_parser = parse_positions, default_value = "cache")]
    positions: crate::drivers::stream::Positions,
    /// W: recent bytes each step attends to, the byte it reads included.
    #[arg(long, default_value_t = 64)]
    window: usize,
    /// S: bytes from the start kept by the sinks policy; the sink mass is measured on them under every
    /// policy.
    #[arg(long, default_value_t = 4)]
    sinks: usize,
    /// Tokens per block of the paged cache.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// Tokens of the held-out text to stream (default: all of it; the tiny model's are the 16384 bytes of
    /// its held-out file, SmolLM2's the 577 tokens of assets/texts/heldout-en.txt).
    #[arg(long)]
    bytes: Option<usize>,
    /// --model-file takes a tiny-model variant too: `scripts/train-tiny-model.py --start-byte 2` writes
    /// lesson 8's (a model trained with a start byte reads it first).
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_streaming(a: StreamingArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let StreamingArgs {
        policy,
        positions,
        window,
        sinks,
        block_size,
        bytes,
        model,
        backend: kind,
        out,
    } = a;
    let cfg = crate::drivers::stream::StreamConfig {
        policy,
        positions,
        window,
        sinks,
        block_size,
    };
    let m = model.load()?;
    let b = backend(kind)?;
    let (arrays, extra) = crate::lessons::streaming::export::streaming(b.as_ref(), cfg, bytes, &m)?;
    let params = serde_json::json!({
        "policy": policy.name(), "positions": positions.name(), "window": window, "sinks": sinks,
        "block_size": block_size, "bytes": extra["streaming"]["heldout_bytes"], "model": m.name.id(),
    });
    let s = extra["streaming"].clone();
    export::write_export_with(&out, "streaming", params, 0, b.as_ref(), &[], &arrays, extra)?;
    outln!(
        "{} ({} positions), W = {window}, S = {sinks}, B = {block_size}: {:.4} bits per byte over {} bytes \
             ({} tokens of {}), at most {} blocks in use, {:.1} s; wrote {}",
        policy.name(),
        positions.name(),
        s["bits_per_byte"].as_f64().unwrap_or(f64::NAN),
        s["bytes"],
        s["tokens"],
        m.name.id(),
        s["max_blocks_in_use"],
        s["seconds"].as_f64().unwrap_or(0.0),
        out.display()
    );
    Ok(())
}

/// `kvscope export streaming`.
pub static STREAMING: Sub<StreamingArgs> = Sub {
    name: "streaming",
    about: "The tiny model streaming the held-out file byte by byte past its 256-byte context through a bounded paged cache (lesson 8): tokens.npy, nll.npy, blocks_in_use.npy, sink_mass.npy and a manifest that defines each and gives the bits per byte.",
    run: run_streaming,
};

fn parse_policy(s: &str) -> Result<crate::drivers::stream::StreamPolicy, String> {
    crate::drivers::stream::StreamPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: dense, window, sinks or recompute"))
}

fn parse_positions(s: &str) -> Result<crate::drivers::stream::Positions, String> {
    crate::drivers::stream::Positions::parse(s).ok_or_else(|| format!("`{s}` is not a position scheme: cache or text"))
}
