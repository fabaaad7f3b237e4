//! `kvscope bench`: P1 (attention against GEMM) and P3 (paged decode against a read-only stream of the same bytes)
//! as same-run ratios, or one of `render` (heatmap frame times), `sweep` (lesson 4's bandwidth sweep,
//! printed) and `app` (what a lesson-3 slider drag costs).

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kvscope::bench::{self, SWEEP_REQUESTS, sweep_contexts, sweep_point};
use kvscope::compute::BackendKind;
use kvscope::lessons::Params;
use kvscope::ui::headless::Headless;
use kvscope::ui::{AppConfig, KvscopeApp};

use super::backend;

/// `kvscope bench [WHAT]`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Option<BenchCmd>,
    /// Backend to measure.
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    /// Smaller sizes, for a quick look.
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run only these benchmarks (p1, p1-keep, p3).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Heatmap frame times (1280×800) at T = 512, 2048, 8192 on the wgpu adapter.
    Render {
        /// Smaller sizes and fewer frames.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Lesson 4's live sweep (decode kernel GB/s against the read-only roof and a copy, over context lengths), printed.
    Sweep {
        /// Backend to measure.
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// What a lesson-3 slider drag costs at T = 1024, d_model = 1024, 16 heads (worker and UI frame).
    App {
        /// Backend to compute on.
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
    },
}

/// Run `kvscope bench …`.
pub fn run(args: BenchArgs) -> Result<bool> {
    match args.what {
        Some(BenchCmd::Render { quick, json }) => render(quick, json),
        Some(BenchCmd::Sweep { backend, json }) => sweep(backend, json),
        Some(BenchCmd::App { backend }) => app(backend),
        None => ratios(&args),
    }
}

/// P1 and P3 as same-run ratios.
fn ratios(args: &BenchArgs) -> Result<bool> {
    let (seq, req, ctx) = if args.quick { (256, 2, 2048) } else { (1024, 8, 8192) };
    let want = |id: &str| args.only.is_empty() || args.only.iter().any(|o| o.eq_ignore_ascii_case(id));
    let b = backend(args.backend)?;
    let mut lines = Vec::new();
    if want("p1") {
        lines.push(bench::p1(b.as_ref(), seq, false)?);
    }
    if want("p1-keep") {
        lines.push(bench::p1(b.as_ref(), seq, true)?);
    }
    if want("p3") {
        lines.push(bench::p3(b.as_ref(), req, ctx, 16)?);
    }
    for bs in [1, 64] {
        if want(&format!("p3-b{bs}")) {
            lines.push(bench::p3(b.as_ref(), req, ctx, bs)?);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&lines).context("json")?);
    } else {
        bench::print_table(&lines);
    }
    Ok(true)
}

/// Heatmap frame times on the wgpu adapter.
fn render(quick: bool, json: bool) -> Result<bool> {
    let gpu = kvscope::render::Gpu::headless().map_err(|e| anyhow::anyhow!(e))?;
    let sizes: &[usize] = if quick { &[512, 2048] } else { &[512, 2048, 8192] };
    let mut rows = Vec::new();
    for &t in sizes {
        let r = kvscope::render::demo::bench_heatmap(&gpu, t, if quick { 6 } else { 30 })
            .map_err(|e| anyhow::anyhow!(e))?;
        if !json {
            println!(
                "T={:5}  upload+maxpool {:9.1} ms   frame 1280x800 mean {:7.2} ms  worst {:7.2} ms  ({} frames, {})",
                r.t, r.upload_ms, r.frame_ms, r.worst_ms, r.frames, r.adapter
            );
        }
        rows.push(r);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(true)
}

/// Exactly what lesson 4's live bandwidth plot measures, printed.
fn sweep(kind: BackendKind, json: bool) -> Result<bool> {
    let b = backend(kind)?;
    let mut rows = Vec::new();
    for c in sweep_contexts(kind) {
        let p = sweep_point(b.as_ref(), c).map_err(|e| anyhow::anyhow!(e))?;
        if !json {
            println!(
                "{} req × ctx {:5}: decode kernel {:7.2} GB/s   read-only stream {:7.2} GB/s   copy (read+written) {:7.2} GB/s   decode/read {:.2}  ({})",
                SWEEP_REQUESTS,
                p.context,
                p.kernel,
                p.read,
                p.copy,
                p.kernel / p.read,
                kind.name()
            );
        }
        rows.push(
            serde_json::json!({"context": p.context, "kernel_gbs": p.kernel, "read_gbs": p.read, "copy_gbs": p.copy}),
        );
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(true)
}

/// What dragging a lesson-3 slider at T = 1024, d_model = 1024, 16 heads costs: the worker's
/// recompute and verification (off the UI thread), and the UI thread's frame with and without a new
/// result to upload (headless, on the wgpu adapter found here).
fn app(kind: BackendKind) -> Result<bool> {
    use std::time::Instant;
    let config = AppConfig {
        lessons_dir: None,
        sync: true,
        fresh: true,
        export_dir: None,
    };
    let mut app = KvscopeApp::new(&config, None, None);
    app.choose_backend(kind);
    if !app.goto_id("multi-head", 1) {
        bail!("lesson multi-head not found");
    }
    let lesson = app.lesson().cloned().context("lesson")?;
    let backend = app.running_backend();
    let mut headless = Headless::new().map_err(|e| anyhow::anyhow!(e))?;
    println!("adapter: {}", headless.adapter());
    for (seq, d, heads) in [(1024, 1024, 16), (256, 256, 8)] {
        let mut p = Params::new();
        for (k, v) in [("seq", seq), ("d_model", d), ("heads", heads), ("kv_heads", heads)] {
            p.insert(k.to_string(), v);
        }
        kvscope::lessons::normalize(&lesson, &mut p);
        let t = Instant::now();
        let out = kvscope::lessons::compute(&lesson, &p, backend.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
        let compute_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let reports = kvscope::ui::worker::verify_output(out.as_ref());
        let verify_ms = t.elapsed().as_secs_f64() * 1e3;
        drop(out);
        for (k, v) in &p {
            app.set_param(k, *v);
        }
        // First frame: the app computes (sync here), draws and uploads 16 new heatmaps.
        let t = Instant::now();
        headless
            .render([1600, 900], 1.0, 1, |ui| app.show(ui))
            .map_err(|e| anyhow::anyhow!(e))?;
        let first_ms = t.elapsed().as_secs_f64() * 1e3 - compute_ms - verify_ms;
        let mut frames = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            headless
                .render([1600, 900], 1.0, 1, |ui| app.show(ui))
                .map_err(|e| anyhow::anyhow!(e))?;
            frames.push(t.elapsed().as_secs_f64() * 1e3);
        }
        frames.sort_by(f64::total_cmp);
        println!(
            "T={seq} d={d} H={heads} ({}): worker compute {compute_ms:.0} ms, verify {verify_ms:.0} ms ({}); UI frame with new result ≈ {first_ms:.0} ms, steady frame median {:.1} ms (incl. readback)",
            kind.name(),
            if reports.iter().all(|r| r.passed()) {
                "passed"
            } else {
                "FAILED"
            },
            frames[2]
        );
    }
    Ok(true)
}
