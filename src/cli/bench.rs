//! `kvscope bench`: P1 (attention against GEMM) and P3 (paged decode against a read-only stream of the same bytes)
//! as same-run ratios, or one of `render` (heatmap frame times), `model` (both models' speed) and `app`
//! (what a lesson-3 slider drag costs). A lesson's own measurements (`sweep`, lesson 4; `serving`, lesson
//! 12) are subcommands in its folder's `cli.rs`, which `main.rs` adds from the registry.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kvscope::compute::BackendKind;
use kvscope::compute::bench;
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
    /// Run only these benchmarks (p1, p1-keep, p3, p3-b1, p3-b64, and p3-<format> for lesson 10's formats).
    #[arg(long, value_delimiter = ',', help = only_help())]
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
    /// Both models' speed on a backend: prefill and decode tokens/s, and decode's bytes per token
    /// (weights + KV) against this machine's read rate over the same weights, measured in the same run.
    /// SmolLM2 is measured when its file is there (./scripts/smollm2/fetch.sh), else the reason is printed.
    Model {
        /// Backend to measure.
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        /// Tokens to decode after the prompt.
        #[arg(long, default_value_t = 32)]
        decode: usize,
        /// Another copy of SmolLM2's GGUF file.
        #[arg(long)]
        model_file: Option<std::path::PathBuf>,
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
        Some(BenchCmd::App { backend }) => app(backend),
        Some(BenchCmd::Model {
            backend,
            decode,
            model_file,
            json,
        }) => model_speed(backend, decode, model_file.as_deref(), json),
        None => ratios(&args),
    }
}

/// `bench model`: the tiny model on 128 bytes of the held-out English text, SmolLM2 on its first 128
/// tokens; each prefilled, then decoding through the paged cache.
fn model_speed(kind: BackendKind, decode: usize, file: Option<&std::path::Path>, json: bool) -> Result<bool> {
    use kvscope::model::{HELDOUT_EN, Model, ModelName, speed};
    let b = backend(kind)?;
    let mut rows = Vec::new();
    let tiny = Model::embedded().map_err(|e| anyhow::anyhow!("{e}"))?;
    rows.push(speed::measure(&tiny, b.as_ref(), &HELDOUT_EN.as_bytes()[..128], decode).map_err(anyhow::Error::msg)?);
    match Model::select(ModelName::Smollm2, file) {
        Ok(m) => {
            let ids = m.tokenizer.encode(HELDOUT_EN).map_err(anyhow::Error::msg)?;
            rows.push(speed::measure(&m, b.as_ref(), &ids[..128.min(ids.len())], decode).map_err(anyhow::Error::msg)?);
        }
        Err(e) => outln!("smollm2 not measured: {e}"),
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(true);
    }
    outln!(
        "{:<8} {:>11} {:>9} {:>12} {:>9} {:>11} {:>10} {:>9} {:>8}",
        "model",
        "parameters",
        "prompt",
        "prefill t/s",
        "decode",
        "decode t/s",
        "MB/token",
        "read GB/s",
        "of limit"
    );
    for r in &rows {
        outln!(
            "{:<8} {:>11} {:>9} {:>12.1} {:>9} {:>11.2} {:>10.1} {:>9.1} {:>8.2}",
            r.model,
            r.parameters,
            r.prefill_tokens,
            r.prefill_tok_s,
            r.decode_tokens,
            r.decode_tok_s,
            (r.weight_bytes + r.kv_bytes) as f64 / 1e6,
            r.read_gbs,
            r.fraction_of_limit
        );
    }
    outln!(
        "on {}; a decode step reads every f32 weight (the tied embedding too) and the f16 KV cache; the limit is \
         this machine's parallel read of the same weights, measured in this run (the tiny model's 3 MB sit in \
         cache, so its limit is the cache's, not memory's)",
        rows[0].backend
    );
    Ok(true)
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
    // The lessons' own lines (lesson 10's `p3-<format>`), found through the registry; only by `--only`.
    let mut lesson_ran = false;
    if !args.only.is_empty() {
        for r in kvscope::lessons::REGISTRY.iter().filter_map(|k| k.ratio_lines()) {
            lesson_ran |= r.run(b.as_ref(), &args.only, req, ctx, args.json)?;
        }
    }
    if lesson_ran && lines.is_empty() {
        return Ok(true);
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&lines).context("json")?);
    } else {
        out!("{}", bench::table(&lines));
        if b.kind() == kvscope::compute::BackendKind::Cpu {
            print_limits(&lines);
        }
    }
    Ok(true)
}

/// The CPU's physical limits as far as they can be derived here, and which one binds each line: the
/// FMA peak from the thread count, the vector width the decode runs at and the clock `/proc/cpuinfo`
/// reports; the read bandwidth is the P3 lines' measured stream.
fn print_limits(lines: &[bench::BenchLine]) {
    let threads = rayon::current_num_threads();
    let lanes = if kvscope::simd::accelerated() { 8 } else { 4 };
    // Two FMA pipes per core is what current x86 cores (and the Zen 4 this was written on) have; it
    // is assumed, not read.
    let pipes = 2;
    let ghz = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("cpu MHz"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|mhz| mhz / 1e3)
    });
    let per_cycle = (threads * pipes * lanes * 2) as f64;
    let gemm = lines.iter().find(|l| l.id == "P1").map(|l| l.baseline);
    let read = lines.iter().find(|l| l.id == "P3").map(|l| l.baseline);
    outln!();
    match ghz {
        Some(g) => outln!(
            "FMA peak: {threads} threads × {pipes} FMA pipes (assumed) × {lanes} f32 lanes × 2 FLOP × {g:.3} GHz \
             (/proc/cpuinfo; boost clocks run higher) = {:.0} GFLOP/s",
            per_cycle * g
        ),
        None => outln!(
            "FMA peak: {per_cycle} FLOP per cycle ({threads} threads × {pipes} pipes × {lanes} lanes × 2); no clock to read"
        ),
    }
    if let (Some(gemm), Some(g)) = (gemm, ghz) {
        let of_peak = gemm / (per_cycle * g);
        let note = if of_peak > 1.0 {
            format!(
                " (above 1: the cores ran at {:.2} GHz or more, above the reported clock)",
                gemm / per_cycle
            )
        } else {
            String::new()
        };
        outln!("best GEMM measured: {gemm:.0} GFLOP/s = {of_peak:.2} of that peak{note}");
    }
    if let Some(read) = read {
        outln!("read bandwidth (the P3 stream over the pools): {read:.1} GB/s");
        if let Some(gemm) = gemm {
            outln!(
                "machine balance: {gemm:.0} / {read:.1} = {:.1} FLOP per byte read",
                gemm / read
            );
            // Decode with a GQA group of 4 does 2 FLOP per query per f16 value of K and of V: 4 per byte,
            // so the best it can do is the lower of the read roof and the best GEMM rate over 4.
            let compute_roof = gemm / 4.0;
            let (limit, which) = if compute_roof < read {
                (compute_roof, "compute (best GEMM / 4 FLOP per byte)")
            } else {
                (read, "memory (the read roof)")
            };
            outln!(
                "P3's limits: read roof {read:.1} GB/s, compute {gemm:.0} GFLOP/s / 4 FLOP per f16 K/V byte at GQA 4 = \
                 {compute_roof:.1} GB/s; {which} binds here"
            );
            for l in lines.iter().filter(|l| l.id.starts_with("P3")) {
                let lim = if l.id == "P3" {
                    limit
                } else {
                    compute_roof.min(l.baseline)
                };
                outln!(
                    "  {:7} {:.1} GB/s = {:.2} of its binding limit ({lim:.1} GB/s), {:.2} of its read roof",
                    l.id,
                    l.value,
                    l.value / lim,
                    l.ratio
                );
            }
        }
    }
    // What the block table's shape costs the memory system itself, without the kernel.
    for l in lines.iter().filter(|l| l.id.starts_with("P3")) {
        if let Some(t) = l.table_order_read {
            outln!(
                "{}: the same bytes read plainly in the block tables' order (whole blocks, every KV head, no software \
                 prefetch): {t:.1} GB/s = {:.2} of the read roof; the kernel reads {:.2}× that",
                l.id,
                t / l.baseline,
                l.value / t
            );
        }
    }
    if gemm.is_some() {
        // Causal attention at T tokens: 4·hd·T(T+1)/2 FLOP per head over 4·T·hd f32 values of Q, K, V, O.
        let t = 1024.0;
        outln!(
            "P1 binds on compute (causal attention at T = 1024 does {:.0} FLOP per byte of Q, K, V and O), so its \
             ratio is shown against the best GEMM",
            4.0 * t * (t + 1.0) / 2.0 / (4.0 * t * 4.0)
        );
    }
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
            outln!(
                "T={:5}  upload+maxpool {:9.1} ms   frame 1280x800 mean {:7.2} ms  worst {:7.2} ms  ({} frames, {})",
                r.t,
                r.upload_ms,
                r.frame_ms,
                r.worst_ms,
                r.frames,
                r.adapter
            );
        }
        rows.push(r);
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(true)
}

/// What a lesson-3 slider change costs, measured as a user meets it: the app runs its real worker
/// thread, and the time counts from the change to the end of the first frame that shows the new result
/// (the frame that submits the job, the wait for the worker's wake-up, and the frame that draws the
/// result; headless at 1600×900 on the wgpu adapter found here, read back as `kvscope render` does).
/// Three changes at T = 1024 (d_model = 1024, 16 heads), then, in a fresh app, three at T = 256 (8
/// heads), the first of them the app's first after start. After each, where the worker's time went
/// (the lesson's spans, [`kvscope::compute::profile`], measured again on this thread) and the reference
/// check that follows the result.
fn app(kind: BackendKind) -> Result<bool> {
    use std::time::{Duration, Instant};
    let big = [("seq", 1024), ("d_model", 1024), ("heads", 16), ("kv_heads", 16)];
    let small = [("seq", 256), ("d_model", 256), ("heads", 8), ("kv_heads", 8)];
    let mut worst = [0.0f64; 2];
    for (which, (start, changes)) in [
        (big, [("kv_heads", 8), ("kv_heads", 4), ("seed", 1)]),
        (small, [("kv_heads", 4), ("kv_heads", 2), ("seed", 1)]),
    ]
    .into_iter()
    .enumerate()
    {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let tx = std::sync::Mutex::new(tx);
        let config = AppConfig {
            lessons_dir: None,
            sync: false,
            fresh: true,
            export_dir: None,
        };
        let wake = move || {
            let _ = tx.lock().map(|t| t.send(()));
        };
        let mut app = KvscopeApp::new(&config, None, Some(Box::new(wake)));
        app.choose_backend(kind);
        if !app.goto_id("multi-head", 1) {
            bail!("lesson multi-head not found");
        }
        let lesson = app.lesson().cloned().context("lesson")?;
        let mut headless = Headless::new().map_err(|e| anyhow::anyhow!(e))?;
        if which == 0 {
            outln!("adapter: {}; backend {}", headless.adapter(), kind.name());
        }
        // One frame; `change` is applied at the end of its UI code, as a slider dragged in it would be
        // (the app then submits the job before the frame is painted).
        let mut frame = |app: &mut KvscopeApp, change: &[(&str, i64)]| -> Result<String> {
            let t = Instant::now();
            let (r, spans) = kvscope::compute::profile::record(|| {
                headless.render([1600, 900], 1.0, 1, |ui| {
                    app.show(ui);
                    if !change.is_empty() {
                        for (k, v) in change {
                            app.set_param(k, *v);
                        }
                        app.after_ui(ui.ctx());
                    }
                })
            });
            r.map_err(|e| anyhow::anyhow!(e))?;
            Ok(format!(
                "{:.0} ({})",
                t.elapsed().as_secs_f64() * 1e3,
                spans
                    .iter()
                    .map(|(n, ms)| format!("{n} {ms:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        // Set the starting shape. At T = 1024 the app first settles on it (its first result is not one
        // of the three timed changes); at T = 256 the first timed change is made in the app's first
        // frame, so its result is the app's first.
        let mut steps: Vec<Vec<(&str, i64)>> = changes.iter().map(|c| vec![*c]).collect();
        if which == 0 {
            steps.insert(0, start.to_vec());
        } else {
            steps[0].splice(0..0, start);
        }
        for (n, step) in steps.iter().enumerate() {
            let before = app.output().cloned();
            let cpu0 = cpu_ms();
            let t = Instant::now();
            let mut frames = vec![frame(&mut app, step)?];
            loop {
                // The newest job's result has arrived, and this frame drew it.
                let shown = app
                    .output()
                    .is_some_and(|o| !before.as_ref().is_some_and(|b| std::sync::Arc::ptr_eq(b, o)));
                if shown && !app.computing() {
                    break;
                }
                rx.recv_timeout(Duration::from_secs(120))
                    .context("the worker sent no result in 120 s")?;
                while rx.try_recv().is_ok() {}
                frames.push(frame(&mut app, &[])?);
            }
            let latency = t.elapsed().as_secs_f64() * 1e3;
            let cpu = cpu_ms().zip(cpu0).map(|(b, a)| b - a);
            // Let the app settle before anything else runs: its worker checks the result against the
            // reference once a frame has shown it, as after any change a user makes.
            while app.reports().is_none() {
                rx.recv_timeout(Duration::from_secs(120))
                    .context("the worker sent no reference check in 120 s")?;
                while rx.try_recv().is_ok() {}
                frame(&mut app, &[])?;
            }
            if which == 0 && n == 0 {
                // What a frame costs with nothing new to draw, on the settled app:
                // the floor under the two frames a change needs when its result misses the first.
                let idle: Vec<String> = (0..3).map(|_| frame(&mut app, &[])).collect::<Result<_>>()?;
                outln!("three frames with nothing new to draw (T=1024): {}", idle.join(" + "));
                continue;
            }
            worst[which] = worst[which].max(latency);
            let p = app.params().cloned().unwrap_or_default();
            let ((out, verify_ms), spans) = kvscope::compute::profile::record(|| {
                let out = kvscope::lessons::compute(&lesson, &p, app.running_backend().as_ref());
                let t = Instant::now();
                let passed = out.ok().map(|o| {
                    kvscope::ui::worker::verify_output(o.as_ref())
                        .iter()
                        .all(|r| r.passed())
                });
                (passed, t.elapsed().as_secs_f64() * 1e3)
            });
            let get = |k: &str| p.get(k).copied().unwrap_or_default();
            outln!(
                "T={} d={} H={} KVH={} seed={}{}: change → end of the first frame with the result {latency:.0} ms ({} frame{}: {})",
                get("seq"),
                get("d_model"),
                get("heads"),
                get("kv_heads"),
                get("seed"),
                if which == 1 && n == 0 {
                    " (the app's first job)"
                } else {
                    ""
                },
                frames.len(),
                if frames.len() == 1 { "" } else { "s" },
                frames.join(" + "),
            );
            if let Some(cpu) = cpu {
                // Every thread of the process: the UI, the worker's pool and the software renderer's.
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                outln!(
                    "    CPU time of all threads from the change to that frame: {cpu:.0} ms on {cores} core{}, at least {:.0} ms of wall time",
                    if cores == 1 { "" } else { "s" },
                    cpu / cores as f64
                );
            }
            let total: f64 = spans.iter().map(|s| s.1).sum();
            // The arithmetic those spans do, counted from the shape (a multiply-add is 2 flops; lesson 3
            // is causal, so attention counts the T(T+1)/2 query-key pairs the mask lets through, and
            // the kernels, which skip only whole tiles in the future, do somewhat more): a floor under
            // the worker on this CPU, whatever the code around the kernels does.
            let [t, d, h, kvh] = ["seq", "d_model", "heads", "kv_heads"].map(|k| get(k) as f64);
            let hd = d / h.max(1.0);
            let pairs = t * (t + 1.0) / 2.0;
            let flops = [
                ("Q, K, V projections", 2.0 * t * d * (d + 2.0 * kvh * hd)),
                ("attention kernels", 4.0 * h * pairs * hd),
                ("fused kernel", 4.0 * h * pairs * hd),
                ("W_O", 2.0 * t * d * d),
            ];
            let (gflop, ms) = flops.iter().fold((0.0, 0.0), |(g, m), (name, f)| {
                let ms = spans.iter().filter(|s| s.0 == *name).map(|s| s.1).sum::<f64>();
                (g + f / 1e9, m + ms)
            });
            outln!(
                "    worker, measured again here: {}; reference check after it {verify_ms:.0} ms ({})",
                spans
                    .iter()
                    .map(|(name, ms)| format!("{name} {ms:.0}"))
                    .chain([format!("total {total:.0} ms")])
                    .collect::<Vec<_>>()
                    .join(", "),
                match out {
                    Some(true) => "passed",
                    Some(false) => "FAILED",
                    None => "the computation failed",
                },
            );
            outln!(
                "    the kernels' arithmetic (projections, attention, fused, W_O): {gflop:.1} GFLOP in {ms:.0} ms, {:.0} GFLOP/s",
                gflop / (ms.max(1e-3) / 1e3)
            );
        }
    }
    outln!(
        "worst change → result: T=1024 {:.0} ms, T=256 {:.0} ms (target 150 ms)",
        worst[0],
        worst[1]
    );
    Ok(true)
}

/// Milliseconds on CPU so far, summed over every thread of this process (Linux's per-thread
/// `schedstat`, in nanoseconds); `None` elsewhere.
fn cpu_ms() -> Option<f64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut ns = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|x| x.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns as f64 / 1e6)
}

/// `--only`'s help: the fixed lines, then each lesson's own lines (`LessonKind::ratio_lines`).
fn only_help() -> String {
    let mut help = "Run only these benchmarks: p1, p1-keep, p3, p3-b1, p3-b64".to_string();
    for r in kvscope::lessons::REGISTRY.iter().filter_map(|k| k.ratio_lines()) {
        help.push_str(&format!(", or {}: {}", r.about(), r.ids().join(", ")));
    }
    help
}
