//! This lesson kind's `kvscope export` subcommands (found through the registry: `LessonKind::exports`).
//! Desktop build only.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::command::{Sub, backend};
use crate::compute::BackendKind;
use crate::lessons::export;
use crate::math::Rng;

/// KV-cache quantisation (lesson 10): the tiny model reads a text byte by byte from an empty cache in
/// one format: k.npy, v.npy (f32), k_codes.npy, v_codes.npy (uint8, unpacked), k_scales.npy,
/// v_scales.npy (and k_zeros.npy, v_zeros.npy for KIVI), k_deq.npy, v_deq.npy, out.npy, nll.npy and a
/// manifest that defines each.
#[derive(clap::Args)]
pub struct QuantArgs {
    #[arg(long, help = crate::cache::CacheFormat::names().join(" | "))]
    format: String,
    /// KIVI's group size G.
    #[arg(long, default_value_t = 32)]
    group: usize,
    /// KIVI's residual R (a multiple of G).
    #[arg(long, default_value_t = 32)]
    residual: usize,
    /// The text to read (at most the model's context). Default: the held-out text's first 256 tokens
    /// (the tiny model's file's bytes; SmolLM2's assets/texts/heldout-en.txt).
    #[arg(long, conflicts_with_all = ["requests", "context_lens", "max_context"])]
    prompt: Option<String>,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    /// Shape mode (instead of the model): this many requests of seeded random K/V rows.
    #[arg(long)]
    requests: Option<usize>,
    /// Shape mode: comma-separated context length of each request.
    #[arg(long, value_delimiter = ',', conflicts_with = "max_context")]
    context_lens: Option<Vec<usize>>,
    /// Shape mode: draw each request's context length from 1..=N with the seed.
    #[arg(long)]
    max_context: Option<usize>,
    /// Shape mode: tokens per block (a pool format's, and INT8 per channel's group).
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// Shape mode: blocks of a pool format's pools.
    #[arg(long, default_value_t = 64)]
    num_blocks: usize,
    /// Shape mode: query heads.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Shape mode: KV heads.
    #[arg(long, default_value_t = 2)]
    kv_heads: usize,
    /// Shape mode: head dimension.
    #[arg(long, default_value_t = 16)]
    head_dim: usize,
    /// Shape mode: seed of the rows, queries and drawn lengths.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_quant(a: QuantArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let QuantArgs {
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
    } = a;
    use crate::cache::CacheFormat;
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
        let sp = crate::lessons::quant::export::QuantShapes {
            lens: lens.clone(),
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
        };
        let b = backend(kind)?;
        let (arrays, extra) = crate::lessons::quant::export::quant_shapes(b.as_ref(), fmt, &sp)?;
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
    let (arrays, extra) = crate::lessons::quant::export::quant(b.as_ref(), fmt, &text, &source, &m)?;
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
    Ok(())
}

/// `kvscope export quant`.
pub static QUANT: Sub<QuantArgs> = Sub {
    name: "quant",
    about: "KV-cache quantisation (lesson 10): the tiny model reads a text byte by byte from an empty cache in one format: k.npy, v.npy (f32), k_codes.npy, v_codes.npy (uint8, unpacked), k_scales.npy, v_scales.npy (and k_zeros.npy, v_zeros.npy for KIVI), k_deq.npy, v_deq.npy, out.npy, nll.npy and a manifest that defines each.",
    run: run_quant,
};

/// Every FP8 code: codes.npy (65,536 uint8: the code the encoder chooses for each f16 bit pattern,
/// scale 1) and values.npy (256 f32: each code's value).
#[derive(clap::Args)]
pub struct Fp8TableArgs {
    /// e4m3 | e5m2
    #[arg(long)]
    format: String,
    #[arg(long)]
    out: PathBuf,
}

fn run_fp8_table(a: Fp8TableArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let Fp8TableArgs { format, out } = a;
    use crate::cache::dtype::quant::{E4M3, E5M2};
    let f = match format.as_str() {
        "e4m3" => E4M3,
        "e5m2" => E5M2,
        other => bail!("unknown FP8 format `{other}` (known: e4m3, e5m2)"),
    };
    let arrays = crate::lessons::quant::export::fp8_table(f);
    let mut extra = serde_json::Map::new();
    extra.insert(
            "fp8".into(),
            serde_json::json!({
                "format": f.name, "exponent_bits": f.ebits, "mantissa_bits": f.mbits, "bias": f.bias,
                "max": f.max(), "max_code": f.max_code, "nan_code": crate::cache::dtype::quant::FP8_NAN,
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
        &crate::compute::CpuBackend,
        &[],
        &arrays,
        extra,
    )?;
    outln!("{}: 65536 codes and 256 values; wrote {}", f.name, out.display());
    Ok(())
}

/// `kvscope export fp8-table`.
pub static FP8_TABLE: Sub<Fp8TableArgs> = Sub {
    name: "fp8-table",
    about: "Every FP8 code: codes.npy (65,536 uint8: the code the encoder chooses for each f16 bit pattern, scale 1) and values.npy (256 f32: each code's value).",
    run: run_fp8_table,
};

/// Lesson 10's quality table: held-out bits per byte with the cache in each format (every 256-token
/// window decoded token by token from an empty cache), as `quant.json` (the lesson's stored copy is
/// `assets/measurements/quant.json`).
#[derive(clap::Args)]
pub struct QuantTableArgs {
    /// Held-out 256-token windows (at most 64 for tiny; SmolLM2's held-out text holds 2).
    #[arg(long, default_value_t = 64)]
    windows: usize,
    /// KIVI's group size G.
    #[arg(long, default_value_t = 32)]
    group: usize,
    /// KIVI's residual R.
    #[arg(long, default_value_t = 32)]
    residual: usize,
    #[command(flatten)]
    model: crate::command::ModelArgs,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_quant_table(a: QuantTableArgs, lessons: Option<&Path>) -> Result<()> {
    let _ = lessons;
    let QuantTableArgs {
        windows,
        group,
        residual,
        model,
        backend: kind,
        out,
    } = a;
    let b = backend(kind)?;
    let m = model.load()?;
    let t0 = std::time::Instant::now();
    let mut table = m
        .quant_table(b.as_ref(), windows, group, residual)
        .map_err(|e| anyhow::anyhow!(e))?;
    // The decode speed per 8-bit format against f16, in one run (kvscope bench's p3-* lines).
    let (pools, groups) = crate::cache::CacheFormat::decode_bench(group, residual);
    let groups: Vec<(&str, crate::cache::GroupFormat)> = groups.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let lines = crate::lessons::quant::bench::p3_quant(b.as_ref(), 8, 8192, &pools, &groups, 9)?;
    table.bench = Some(crate::drivers::quant::QuantBench {
        backend: b.kind().name().to_string(),
        machine: b.device(),
        requests: 8,
        context: 8192,
        lines: lines
            .iter()
            .map(|l| crate::drivers::quant::QuantBenchLine {
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
    Ok(())
}

/// `kvscope export quant-table`.
pub static QUANT_TABLE: Sub<QuantTableArgs> = Sub {
    name: "quant-table",
    about: "Lesson 10's quality table: held-out bits per byte with the cache in each format (every 256-token window decoded token by token from an empty cache), as `quant.json` (the lesson's stored copy is `assets/measurements/quant.json`).",
    run: run_quant_table,
};

/// Lesson 10's lines in `kvscope bench`'s ratios: `p3-<format>`, one per format of the one list
/// (`cache::CacheFormat::decode_bench`): P3's decode over the quantised caches against f16 in the same
/// run; KIVI at G = R = 32, the lesson's defaults.
pub struct P3Formats;

/// The registry's handle on [`P3Formats`] (`LessonKind::ratio_lines`).
pub static P3_FORMATS: P3Formats = P3Formats;

impl crate::command::RatioLines for P3Formats {
    fn ids(&self) -> Vec<String> {
        let (pools, groups) = crate::cache::CacheFormat::decode_bench(32, 32);
        pools
            .iter()
            .map(|d| format!("p3-{d}"))
            .chain(groups.iter().map(|(n, _)| format!("p3-{n}")))
            .collect()
    }

    fn about(&self) -> &'static str {
        "lesson 10's decode against f16"
    }

    fn run(
        &self,
        b: &dyn crate::compute::Backend,
        only: &[String],
        requests: usize,
        context: usize,
        json: bool,
    ) -> Result<bool> {
        let want = |id: &str| only.iter().any(|o| o.eq_ignore_ascii_case(id));
        let (pools, group_formats) = crate::cache::CacheFormat::decode_bench(32, 32);
        let quant: Vec<_> = pools.into_iter().filter(|d| want(&format!("p3-{d}"))).collect();
        let groups: Vec<(&str, crate::cache::GroupFormat)> = group_formats
            .iter()
            .map(|(n, g)| (n.as_str(), *g))
            .filter(|(n, _)| want(&format!("p3-{n}")))
            .collect();
        if quant.is_empty() && groups.is_empty() {
            return Ok(false);
        }
        let ql = crate::lessons::quant::bench::p3_quant(b, requests, context, &quant, &groups, 9)?;
        if json {
            outln!("{}", serde_json::to_string_pretty(&ql)?);
        } else {
            print_quant(&ql, b);
        }
        Ok(true)
    }
}

/// Lesson 10's P3 lines: tokens per second, bytes read, GB/s against each pool's own read roof (on the
/// host) and the speed-up over f16, with which limit binds.
fn print_quant(lines: &[crate::lessons::quant::bench::QuantLine], b: &dyn crate::compute::Backend) {
    outln!(
        "{:<18} {:>10} {:>10} {:>8} {:>9} {:>8} {:>9} {:>8}",
        "id",
        "tok/s",
        "MB/step",
        "GB/s",
        "roof",
        "of roof",
        "FLOP/B",
        "vs f16"
    );
    for l in lines {
        let roof = l.read_roof.map_or("—".to_string(), |r| format!("{r:.1}"));
        let of = l.read_roof.map_or("—".to_string(), |r| format!("{:.2}", l.gbs / r));
        outln!(
            "{:<18} {:>10.0} {:>10.1} {:>8.1} {:>9} {:>8} {:>9.1} {:>7.2}×",
            l.id,
            l.tokens_per_s,
            l.bytes_read / 1e6,
            l.gbs,
            roof,
            of,
            l.flop_per_byte,
            l.speedup
        );
    }
    let (gemm, _, which) = crate::compute::bench::best_gemm_gflops(512);
    outln!(
        "on {} ({}); best GEMM here {gemm:.0} GFLOP/s ({which}); 8 requests, H32/KV8 (GQA 4), hd 128, block 16",
        b.kind().name(),
        b.device()
    );
    for l in lines.iter().filter(|l| l.convert_ms.is_some()) {
        outln!(
            "  {:<16} {:.1} ms per step, of which the codes' conversion to f16 alone takes {:.1} ms (both pools, all threads)",
            l.id,
            l.ms,
            l.convert_ms.unwrap_or(0.0)
        );
    }
    for l in lines {
        let compute = gemm / l.flop_per_byte;
        match l.read_roof {
            Some(r) => {
                let (lim, what) = if compute < r {
                    (compute, "compute")
                } else {
                    (r, "the read roof")
                };
                outln!(
                    "  {:<16} binding limit {lim:.1} GB/s ({what}: read roof {r:.1} GB/s, best GEMM / {:.0} FLOP per byte = {compute:.1} GB/s); reached {:.2} of it",
                    l.id,
                    l.flop_per_byte,
                    l.gbs / lim
                );
            }
            None => outln!(
                "  {:<16} compute limit at the host's best GEMM / {:.0} FLOP per byte = {compute:.1} GB/s; the device's read roof is not measured by these lines (upload included in the time)",
                l.id,
                l.flop_per_byte
            ),
        }
    }
}
