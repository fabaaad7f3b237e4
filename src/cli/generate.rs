//! `kvscope generate`: text from the tiny trained model, token by token through a KV cache on a backend.

use std::io::Write;

use anyhow::{Result, anyhow};
use clap::Args;
use kvscope::compute::BackendKind;
use kvscope::model::ModelName;
use kvscope::model::decode::{CacheKind, Sampler};

use super::backend;

/// Which cache `generate` decodes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CacheArg {
    /// One `max_seq_len` slab per layer.
    Static,
    /// Blocks from a pool through a block table.
    Paged,
}

/// The arguments of `kvscope generate`.
#[derive(Args)]
pub struct GenerateArgs {
    /// The prompt (bytes of its UTF-8 text).
    #[arg(long)]
    prompt: String,
    /// Bytes to generate.
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long, value_enum, default_value = "static")]
    cache: CacheArg,
    /// Tokens per block of the paged cache.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// 0: greedy; otherwise sample with this temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Sample among the k most likely bytes (0: all).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    model: super::ModelArgs,
    /// Speculative decoding (lesson 12) through the paged cache: ngram (prompt lookup) or draft (the
    /// shipped draft model). Sampling is the temperature's full softmax (no top-k), with rejection
    /// sampling; prints acceptance by position, passes per byte and bytes/s against plain decode.
    #[arg(long, value_enum)]
    speculative: Option<kvscope::lessons::serving::cli::SpecArg>,
    /// Bytes drafted per step.
    #[arg(long, default_value_t = 4)]
    k: usize,
}

/// Run `kvscope generate`.
pub fn run(a: GenerateArgs) -> Result<()> {
    let model = a.model.load()?;
    let b = backend(a.backend)?;
    if a.speculative == Some(kvscope::lessons::serving::cli::SpecArg::Draft) && model.name != ModelName::Tiny {
        return Err(anyhow!(
            "the shipped draft model is byte-level and cannot draft SmolLM2's BPE tokens: use --speculative ngram (prompt lookup)"
        ));
    }
    let ids = model.tokenizer.encode(&a.prompt).map_err(|e| anyhow!(e))?;
    let unit = if model.name == ModelName::Tiny {
        "bytes"
    } else {
        "tokens"
    };
    let (total, trained) = (ids.len() + a.tokens, model.config.context);
    if total > trained {
        // Generation goes on past the trained context (the RoPE tables reach further); say so, as lesson 8
        // does on screen, since what the model writes there is what lesson 8 measures as breaking down.
        eprintln!(
            "note: {} prompt {unit} + {} new = {total}, past the {trained} {unit} of context {} was trained on: \
             from {} {trained} on it attends over distances it never saw (lesson 8 measures what that does)",
            ids.len(),
            a.tokens,
            model.name.id(),
            unit.trim_end_matches('s'),
        );
    }
    if let Some(spec) = a.speculative {
        use kvscope::drivers::spec::{Drafter, SpecConfig};
        let cfg = |drafter| SpecConfig {
            drafter,
            k: a.k,
            temperature: a.temperature,
            seed: a.seed,
            block_size: a.block_size,
        };
        let run = model
            .speculative(
                &ids,
                a.tokens,
                &cfg(kvscope::lessons::serving::cli::drafter(spec)?),
                b.as_ref(),
            )
            .map_err(|e| anyhow!(e))?;
        let plain = model
            .speculative(&ids, a.tokens, &cfg(Drafter::None), b.as_ref())
            .map_err(|e| anyhow!(e))?;
        outln!("{}{}", a.prompt, model.tokenizer.decode(&run.output));
        kvscope::lessons::serving::cli::print_spec(&kvscope::lessons::serving::cli::spec_report(
            &run,
            &plain,
            a.temperature <= 0.0,
            &model,
        ));
        return Ok(());
    }
    let cache = match a.cache {
        CacheArg::Static => CacheKind::Static,
        CacheArg::Paged => CacheKind::Paged {
            block_size: a.block_size,
        },
    };
    let mut sampler = if a.temperature > 0.0 {
        Sampler::new(a.temperature, a.top_k, a.seed)
    } else {
        Sampler::greedy()
    };
    let g = model
        .generate(&ids, a.tokens, cache, &mut sampler, b.as_ref())
        .map_err(|e| anyhow!(e))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}{}", a.prompt, model.tokenizer.decode(&g.tokens))?;
    let decoded = g.tokens.len().saturating_sub(1);
    writeln!(
        out,
        "-- {} {unit} of {} on {} ({}), {:?} cache: prefill {} {unit} in {:.1} ms; decode {:.1} tokens/s ({decoded} tokens in {:.1} ms)",
        g.tokens.len(),
        model.name.id(),
        a.backend.name(),
        b.device(),
        a.cache,
        ids.len(),
        g.prefill_s * 1e3,
        decoded as f64 / g.decode_s.max(1e-9),
        g.decode_s * 1e3
    )?;
    Ok(())
}
