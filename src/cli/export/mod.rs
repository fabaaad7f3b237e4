//! `kvscope export speculative|serving|attention|paged-decode|logits|model-attention|streaming|eviction|eviction-table|quant|fp8-table|quant-table|schedule|prefix-schedule`: the tensors of one computation as `.npy` files plus
//! `manifest.json`, checked against the f64 reference; or a paged-cache lesson's scheduler replay as
//! `schedule.json`, or a prefix-caching lesson's replay as `prefix-schedule.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kvscope::compute::BackendKind;
use kvscope::lessons::Output;
use kvscope::lessons::attention_layer::AttnOut;
use kvscope::lessons::export::{self, PagedDecodeParams};
use kvscope::lessons::paged_cache::PagedOut;
use kvscope::lessons::prefix_cache::PrefixOut;
use kvscope::math::{AttnShape, Rng};

use super::backend;

mod args;
pub use args::{ExportCmd, Kernel};

/// Compute lesson `lesson` with the `set` sliders on backend `kind` and write its replay, which
/// `replay` reads from the output (or names the kind of lesson it needs), as `out/file`.
fn write_replay(
    lesson: &str,
    set: Vec<super::SetArg>,
    kind: BackendKind,
    out: &Path,
    lessons: Option<&Path>,
    file: &str,
    replay: impl Fn(&dyn Output) -> Result<(serde_json::Value, String), &'static str>,
) -> Result<()> {
    let all = super::load_lessons(lessons)?;
    let Some(l) = all.iter().find(|l| l.id() == lesson) else {
        let ids: Vec<&str> = all.iter().map(|l| l.id()).collect();
        bail!("no lesson `{lesson}` (lessons: {})", ids.join(", "));
    };
    let set = super::check_sets(&[l], &set)?;
    let mut params = kvscope::lessons::Params::new();
    kvscope::lessons::apply_set(l, &mut params, &set).map_err(|e| anyhow::anyhow!(e))?;
    let b = backend(kind)?;
    let computed = kvscope::lessons::compute(l, &params, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
    let (json, what) = match replay(computed.as_ref()) {
        Ok(r) => r,
        Err(needed) => bail!("lesson `{lesson}` is of kind `{}`, not {needed}", l.kind.name()),
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    outln!("wrote {} ({what})", path.display());
    Ok(())
}

/// The arrays and manifest entries of the tiny model on `prompt`.
type ModelArrays = (Vec<export::NamedArray>, serde_json::Map<String, serde_json::Value>);

/// `export logits` / `export model-attention`: run `arrays` on backend `kind` and write them as `kind_name`.
fn model_export(
    kind: BackendKind,
    prompt: &str,
    out: &Path,
    kind_name: &str,
    model: &crate::cli::ModelArgs,
    arrays: fn(&dyn kvscope::compute::Backend, &kvscope::model::Model, &str) -> Result<ModelArrays>,
) -> Result<()> {
    let m = model.load()?;
    let b = backend(kind)?;
    let (arrays, extra) = arrays(b.as_ref(), &m, prompt)?;
    let params = serde_json::json!({ "prompt": prompt, "model": m.name.id() });
    export::write_export_with(out, kind_name, params, 0, b.as_ref(), &[], &arrays, extra)?;
    outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
    Ok(())
}

pub(super) fn parse_policy(s: &str) -> Result<kvscope::drivers::stream::StreamPolicy, String> {
    kvscope::drivers::stream::StreamPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: dense, window, sinks or recompute"))
}

pub(super) fn parse_evict_policy(s: &str) -> Result<kvscope::drivers::evict::EvictPolicy, String> {
    kvscope::drivers::evict::EvictPolicy::parse(s)
        .ok_or_else(|| format!("`{s}` is not a policy: full, window, sinks, h2o, snapkv or random"))
}

pub(super) fn parse_positions(s: &str) -> Result<kvscope::drivers::stream::Positions, String> {
    kvscope::drivers::stream::Positions::parse(s)
        .ok_or_else(|| format!("`{s}` is not a position scheme: cache or text"))
}

/// Run `kvscope export …`.
pub fn run(cmd: ExportCmd, lessons: Option<PathBuf>) -> Result<()> {
    match cmd {
        ExportCmd::Schedule {
            lesson,
            set,
            backend: kind,
            out,
        } => write_replay(&lesson, set, kind, &out, lessons.as_deref(), "schedule.json", |o| {
            o.downcast_ref::<PagedOut>()
                .map(|r| (r.schedule(), format!("{} steps", r.frames.len())))
                .ok_or("a paged-cache lesson")
        })?,
        ExportCmd::PrefixSchedule {
            lesson,
            set,
            backend: kind,
            out,
        } => write_replay(
            &lesson,
            set,
            kind,
            &out,
            lessons.as_deref(),
            "prefix-schedule.json",
            |o| {
                o.downcast_ref::<PrefixOut>()
                    .map(|r| (r.schedule(), format!("{} events", r.frames.len())))
                    .ok_or("a prefix-caching lesson")
            },
        )?,
        ExportCmd::Quant {
            format,
            group,
            residual,
            prompt,
            requests,
            context_lens,
            max_context,
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
            model,
            backend: kind,
            out,
        } => {
            use kvscope::cache::CacheFormat;
            let fmt = CacheFormat::parse(&format, group, residual).ok_or_else(|| {
                let known: Vec<String> = CacheFormat::all(group, residual)
                    .iter()
                    .map(CacheFormat::name)
                    .collect();
                anyhow::anyhow!("unknown format `{format}` (known: {})", known.join(", "))
            })?;
            if requests.is_some() || context_lens.is_some() || max_context.is_some() {
                let lens = match (context_lens, max_context) {
                    (Some(l), _) => {
                        if requests.is_some_and(|r| r != l.len()) {
                            bail!(
                                "--context-lens has {} values but --requests is {}",
                                l.len(),
                                requests.unwrap_or(0)
                            );
                        }
                        l
                    }
                    (None, Some(n)) if n >= 1 => {
                        let mut rng = Rng::stream(seed, 3);
                        (0..requests.unwrap_or(2)).map(|_| 1 + rng.below(n)).collect()
                    }
                    _ => bail!("shape mode needs --context-lens or --max-context N (N >= 1)"),
                };
                let sp = kvscope::lessons::quant::export::QuantShapes {
                    lens: lens.clone(),
                    block_size,
                    num_blocks,
                    heads,
                    kv_heads,
                    head_dim,
                    seed,
                };
                let b = backend(kind)?;
                let (arrays, extra) = kvscope::lessons::quant::export::quant_shapes(b.as_ref(), fmt, &sp)?;
                let chk = extra["quant"]["check"].clone();
                let params = serde_json::json!({
                    "format": format, "group": group, "residual": residual, "context_lens": lens,
                    "block_size": block_size, "num_blocks": num_blocks, "heads": heads, "kv_heads": kv_heads,
                    "head_dim": head_dim, "seed": seed,
                });
                export::write_export_with(&out, "quant", params, seed, b.as_ref(), &[], &arrays, extra)?;
                outln!(
                    "{format}: {} requests ({lens:?} tokens); decode against the f64 reference: max abs error {}; wrote {}",
                    lens.len(),
                    chk["max_abs_err"],
                    out.display()
                );
                return Ok(());
            }
            let m = model.load()?;
            let (text, source) = match prompt {
                Some(p) => (
                    m.tokenizer.encode(&p).map_err(anyhow::Error::msg)?,
                    "--prompt".to_string(),
                ),
                None => m.heldout_tokens(256).map_err(anyhow::Error::msg)?,
            };
            let b = backend(kind)?;
            let (arrays, extra) = kvscope::lessons::quant::export::quant(b.as_ref(), fmt, &text, &source, &m)?;
            let q = extra["quant"].clone();
            let params = serde_json::json!({"format": format, "group": group, "residual": residual, "bytes": text.len(),
                "model": m.name.id()});
            export::write_export_with(&out, "quant", params, 0, b.as_ref(), &[], &arrays, extra)?;
            outln!(
                "{format}: {:.4} bits per byte over {} tokens of {}; attention output error (RMS over RMS) {}; wrote {}",
                q["bits_per_byte"].as_f64().unwrap_or(f64::NAN),
                text.len(),
                m.name.id(),
                q["out_rel_rms_per_layer"],
                out.display()
            );
        }
        ExportCmd::Fp8Table { format, out } => {
            use kvscope::cache::dtype::quant::{E4M3, E5M2};
            let f = match format.as_str() {
                "e4m3" => E4M3,
                "e5m2" => E5M2,
                other => bail!("unknown FP8 format `{other}` (known: e4m3, e5m2)"),
            };
            let arrays = kvscope::lessons::quant::export::fp8_table(f);
            let mut extra = serde_json::Map::new();
            extra.insert(
                "fp8".into(),
                serde_json::json!({
                    "format": f.name, "exponent_bits": f.ebits, "mantissa_bits": f.mbits, "bias": f.bias,
                    "max": f.max(), "max_code": f.max_code, "nan_code": kvscope::cache::dtype::quant::FP8_NAN,
                    "infinities": f.ieee,
                    "codes": "codes[b] = the code chosen for the f16 value with bit pattern b, scale 1: round to nearest, ties to even (subnormals included), finite values beyond +-max and +-Inf saturate to +-max, NaN -> nan_code",
                    "values": "values[c] = the value of code c (NaN where c is a NaN code; +-Inf for E5M2's 0x7C/0xFC)",
                }),
            );
            export::write_export_with(
                &out,
                "fp8-table",
                serde_json::json!({"format": format}),
                0,
                &kvscope::compute::CpuBackend,
                &[],
                &arrays,
                extra,
            )?;
            outln!("{}: 65536 codes and 256 values; wrote {}", f.name, out.display());
        }
        ExportCmd::QuantTable {
            windows,
            group,
            residual,
            model,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let m = model.load()?;
            let t0 = std::time::Instant::now();
            let mut table = m
                .quant_table(b.as_ref(), windows, group, residual)
                .map_err(|e| anyhow::anyhow!(e))?;
            // The decode speed per 8-bit format against f16, in one run (kvscope bench's p3-* lines).
            let (pools, groups) = kvscope::cache::CacheFormat::decode_bench(group, residual);
            let groups: Vec<(&str, kvscope::cache::GroupFormat)> =
                groups.iter().map(|(n, g)| (n.as_str(), *g)).collect();
            let lines = kvscope::lessons::quant::bench::p3_quant(b.as_ref(), 8, 8192, &pools, &groups, 9)?;
            table.bench = Some(kvscope::drivers::quant::QuantBench {
                backend: b.kind().name().to_string(),
                machine: b.device(),
                requests: 8,
                context: 8192,
                lines: lines
                    .iter()
                    .map(|l| kvscope::drivers::quant::QuantBenchLine {
                        format: l.format.clone(),
                        tokens_per_s: l.tokens_per_s,
                        bytes_read: l.bytes_read,
                        speedup: l.speedup,
                    })
                    .collect(),
            });
            std::fs::create_dir_all(&out)?;
            let path = out.join("quant.json");
            std::fs::write(&path, serde_json::to_string_pretty(&table)? + "\n")?;
            outln!("{:<16} {:>8} {:>10} {:>7}", "format", "bits/B", "out err", "kernel");
            for c in &table.cells {
                outln!(
                    "{:<16} {:>8.4} {:>10.5} {:>7}",
                    c.format,
                    c.bits_per_byte,
                    c.out_rel_rms,
                    c.kernel
                );
            }
            outln!(
                "{} ({}), {} windows on {}, {:.0} s; wrote {}",
                table.model,
                table.text,
                table.windows,
                table.backend,
                t0.elapsed().as_secs_f64(),
                path.display()
            );
        }
        ExportCmd::EvictionTable {
            windows,
            trials,
            model,
            backend: kind,
            out,
        } => {
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
        }
        ExportCmd::Eviction {
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
        } => {
            let cfg = kvscope::drivers::evict::EvictConfig {
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
            let (arrays, extra) =
                kvscope::lessons::eviction::export::eviction(b.as_ref(), cfg, &text, plen, &source, &m)?;
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
        }
        ExportCmd::Speculative {
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
        } => {
            use kvscope::drivers::spec::{Drafter, SpecConfig};
            let b = backend(kind)?;
            let model = model.load()?;
            let tiny = model.name == kvscope::model::ModelName::Tiny;
            if !tiny && speculative == super::serving::SpecArg::Draft {
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
                super::serving::drafter(speculative)?
            } else {
                Drafter::Ngram { min_n: 1, max_n: 3 }
            };
            let run = model
                .speculative(&text, tokens, &cfg(drafter), b.as_ref())
                .map_err(|e| anyhow::anyhow!(e))?;
            let plain = model
                .speculative(&text, tokens, &cfg(Drafter::None), b.as_ref())
                .map_err(|e| anyhow::anyhow!(e))?;
            let mut json = super::serving::spec_report(&run, &plain, temperature <= 0.0, &model);
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
            super::serving::print_spec(&json);
            outln!("wrote {}", path.display());
        }
        ExportCmd::Serving {
            policy,
            budget,
            chunk,
            requests,
            blocks,
            block_size,
            model,
            backend: kind,
            out,
        } => {
            let requests = if requests.is_empty() {
                kvscope::drivers::serve::DEFAULT_SCENARIO.to_vec()
            } else {
                requests
            };
            super::serving::export(super::serving::ServingArgs {
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
        }
        ExportCmd::Streaming {
            policy,
            positions,
            window,
            sinks,
            block_size,
            bytes,
            model,
            backend: kind,
            out,
        } => {
            let cfg = kvscope::drivers::stream::StreamConfig {
                policy,
                positions,
                window,
                sinks,
                block_size,
            };
            let m = model.load()?;
            let b = backend(kind)?;
            let (arrays, extra) = kvscope::lessons::streaming::export::streaming(b.as_ref(), cfg, bytes, &m)?;
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
        }
        ExportCmd::Logits {
            prompt,
            model,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "logits", &model, export::model_logits)?,
        ExportCmd::ModelAttention {
            prompt,
            model,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "model-attention", &model, export::model_attention)?,
        ExportCmd::Attention {
            seq,
            d_model,
            heads,
            kv_heads,
            mask,
            seed,
            kernel,
            block_q,
            block_k,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let shape = AttnShape {
                seq,
                d_model,
                n_heads: heads,
                n_kv_heads: kv_heads,
            };
            let layer = AttnOut::compute(shape, mask, seed, false, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
            let (mut arrays, mut checks) = (layer.arrays(), layer.verify());
            let mut params = serde_json::json!({"seq": seq, "d_model": d_model, "heads": heads, "kv_heads": kv_heads,
                "head_dim": d_model / heads, "mask": mask.to_string(), "seed": seed});
            let mut extra = serde_json::Map::new();
            if kernel == Kernel::Flash {
                let (a, c, io) = export::flash_arrays(
                    b.as_ref(),
                    &layer.qkv.q,
                    &layer.qkv.k,
                    &layer.qkv.v,
                    mask,
                    block_q,
                    block_k,
                )?;
                arrays.push(a);
                checks.push(c);
                params["kernel"] = "flash".into();
                params["block_q"] = block_q.into();
                params["block_k"] = block_k.into();
                extra.insert("io".into(), io);
            }
            export::write_export_with(&out, "attention", params, seed, b.as_ref(), &checks, &arrays, extra)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
        ExportCmd::PagedDecode {
            requests,
            context_lens,
            max_context,
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let lens = match (context_lens, max_context) {
                (Some(l), _) => {
                    if l.len() != requests {
                        bail!("--context-lens has {} values but --requests is {requests}", l.len());
                    }
                    l
                }
                (None, Some(n)) if n >= 1 => {
                    let mut rng = Rng::stream(seed, 3);
                    (0..requests).map(|_| 1 + rng.below(n)).collect()
                }
                (None, Some(_)) => bail!("--max-context must be at least 1"),
                (None, None) => bail!("give --context-lens a,b,... or --max-context N"),
            };
            let p = PagedDecodeParams {
                context_lens: lens,
                block_size,
                num_blocks,
                heads,
                kv_heads,
                head_dim,
            };
            let (arrays, checks) = export::paged_decode_arrays(b.as_ref(), &p, seed)?;
            let mut params = serde_json::to_value(&p)?;
            params["requests"] = requests.into();
            params["seed"] = seed.into();
            export::write_export(&out, "paged-decode", params, seed, b.as_ref(), &checks, &arrays)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
    }
    Ok(())
}
