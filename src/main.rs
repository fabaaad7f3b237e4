//! The `kvscope` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use kvscope::bench;
use kvscope::compute::{self, BackendKind, suite::SuiteSize};
use kvscope::export::{self, PagedDecodeParams};
use kvscope::math::{AttnShape, Mask, Rng};
use kvscope::ui::headless::Headless;
use kvscope::ui::text::Lang;
use kvscope::ui::{AppConfig, KvscopeApp};

#[derive(Parser)]
#[command(
    name = "kvscope",
    version,
    about = "Transformer attention and the KV cache, taught with real kernels"
)]
struct Cli {
    /// Load lessons from this folder (a teacher's own) instead of the embedded ones.
    #[arg(long, global = true)]
    lessons: Option<PathBuf>,
    /// Start with the stored state ignored.
    #[arg(long)]
    fresh: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Write the tensors of one computation as .npy files plus manifest.json.
    #[command(subcommand)]
    Export(ExportCmd),
    /// Compare every op of every backend with the f64 reference.
    Check {
        /// Which backend(s).
        #[arg(long, default_value = "all")]
        backend: BackendChoice,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Lesson files: validate them, or list them.
    #[command(subcommand)]
    Lessons(LessonsCmd),
    /// The CUDA kernels: list them, or compile them with NVRTC to PTX files.
    #[command(subcommand)]
    Kernels(KernelsCmd),
    /// Render the full app frame of a lesson step to a PNG, without a window (for slides, docs, tests).
    Render {
        /// Lesson id (see `kvscope lessons list`), or `all` to render every step of every lesson
        /// into the folder given by --out.
        #[arg(long)]
        lesson: String,
        /// Step number, from 1.
        #[arg(long, default_value_t = 1)]
        step: usize,
        /// Language: en or zh.
        #[arg(long, default_value = "en")]
        lang: String,
        /// Frame size in pixels, WxH.
        #[arg(long, default_value = "1600x900")]
        size: String,
        /// Presentation mode.
        #[arg(long)]
        present: bool,
        /// Light theme.
        #[arg(long)]
        light: bool,
        /// Backend to compute on.
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        /// Timeline position (decode token / scheduler step) instead of the step's own.
        #[arg(long)]
        at: Option<usize>,
        /// Slider values, id=value (repeatable).
        #[arg(long = "set", value_parser = parse_set)]
        set: Vec<(String, i64)>,
        /// Run lesson 4's bandwidth sweep on the backend first, so its plot shows this machine's numbers.
        #[arg(long)]
        measure: bool,
        /// Output PNG (or folder, with --lesson all).
        #[arg(long)]
        out: PathBuf,
    },
    /// Draw every wgpu renderer offscreen on real data and write PNGs into DIR.
    RenderViews {
        #[arg(long, default_value = "out/views")]
        out: PathBuf,
    },
    /// Run the benchmarks: P1 attention vs GEMM and P3 paged decode vs memcpy, or `bench render`
    /// for heatmap frame times on the wgpu adapter.
    Bench {
        /// `render` for the renderer frame-time benchmark.
        what: Option<String>,
        /// Backend to measure.
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        /// Smaller sizes, for a quick look.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Run only these benchmarks (p1, p1m, p3).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

/// `all`, or one backend by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BackendChoice {
    All,
    One(BackendKind),
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(BackendChoice::All);
        }
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .map(BackendChoice::One)
            .ok_or_else(|| {
                let names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown backend `{s}` (expected all, {})", names.join(", "))
            })
    }
}

#[derive(Subcommand)]
enum LessonsCmd {
    /// Validate lesson files: the embedded ones, or every *.toml in DIR. Exits non-zero on a problem.
    Check {
        /// A folder of lesson files (a teacher's own); the shipped lessons when omitted.
        dir: Option<PathBuf>,
    },
    /// List the lessons and their steps.
    List {
        /// A folder of lesson files; the shipped lessons when omitted.
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum KernelsCmd {
    /// Each op with its kernel file, entry points and source line.
    List,
    /// Compile every kernels/*.cu with NVRTC to DIR/<file>.ptx.
    Ptx {
        /// NVRTC virtual architecture, e.g. compute_80 or compute_90.
        #[arg(long, default_value = "compute_90")]
        arch: String,
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum ExportCmd {
    /// One attention layer: x, weights, q, k, v, scores, probs, out, y.
    Attention {
        #[arg(long, default_value_t = 8)]
        seq: usize,
        #[arg(long, default_value_t = 32)]
        d_model: usize,
        #[arg(long, default_value_t = 4)]
        heads: usize,
        #[arg(long, default_value_t = 4)]
        kv_heads: usize,
        /// none | causal | window:W | window:W,sinks:S
        #[arg(long, default_value = "causal")]
        mask: Mask,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
    /// One paged decode step: q, K/V pools, block tables, context lengths and out.
    PagedDecode {
        #[arg(long, default_value_t = 2)]
        requests: usize,
        /// Comma-separated context length of each request.
        #[arg(long, value_delimiter = ',', conflicts_with = "max_context")]
        context_lens: Option<Vec<usize>>,
        /// Draw each request's context length from 1..=N with the seed.
        #[arg(long)]
        max_context: Option<usize>,
        #[arg(long, default_value_t = 16)]
        block_size: usize,
        #[arg(long, default_value_t = 64)]
        num_blocks: usize,
        #[arg(long, default_value_t = 4)]
        heads: usize,
        #[arg(long, default_value_t = 2)]
        kv_heads: usize,
        #[arg(long, default_value_t = 16)]
        head_dim: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = "cpu")]
        backend: BackendKind,
        #[arg(long)]
        out: PathBuf,
    },
}

fn backend(kind: BackendKind) -> Result<std::sync::Arc<dyn compute::Backend>> {
    let st = compute::probe(kind);
    st.backend
        .map_err(|reason| anyhow::anyhow!("backend {} is unavailable: {reason}", kind.name()))
}

fn run_export(cmd: ExportCmd) -> Result<()> {
    match cmd {
        ExportCmd::Attention {
            seq,
            d_model,
            heads,
            kv_heads,
            mask,
            seed,
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
            let (arrays, checks) = export::attention_arrays(b.as_ref(), shape, mask, seed)?;
            let params = serde_json::json!({"seq": seq, "d_model": d_model, "heads": heads, "kv_heads": kv_heads,
                "head_dim": d_model / heads, "mask": mask.to_string(), "seed": seed});
            export::write_export(&out, "attention", params, seed, b.as_ref(), &checks, &arrays)?;
            println!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
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
            println!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
    }
    Ok(())
}

fn run_check(choice: BackendChoice, json: bool, seed: u64) -> Result<bool> {
    let kinds: Vec<BackendKind> = match choice {
        BackendChoice::All => BackendKind::ALL.to_vec(),
        BackendChoice::One(kind) => vec![kind],
    };
    let mut ok = true;
    let mut json_out = Vec::new();
    for kind in kinds {
        let st = compute::probe(kind);
        match st.backend {
            Err(reason) => {
                // Asking for one backend by name and not getting it is a failure; `all` lists it.
                if choice != BackendChoice::All {
                    ok = false;
                }
                if json {
                    json_out.push(serde_json::json!({"backend": kind.name(), "available": false, "reason": reason}));
                } else {
                    println!("== {}: unavailable: {reason}\n", kind.name());
                }
            }
            Ok(b) => {
                let reports = compute::suite::run(b.as_ref(), SuiteSize::Full, seed);
                let failed = reports.iter().filter(|r| !r.passed()).count();
                ok &= failed == 0;
                if json {
                    json_out.push(serde_json::json!({"backend": kind.name(), "available": true, "device": b.device(), "failed": failed, "reports": reports}));
                } else {
                    println!("== {} ({})", kind.name(), b.device());
                    for r in &reports {
                        println!("{r}");
                    }
                    println!("== {}: {} checks, {} failed\n", kind.name(), reports.len(), failed);
                }
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&json_out)?);
    }
    Ok(ok)
}

fn parse_set(s: &str) -> Result<(String, i64), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected id=value"))?;
    let v = v.trim().parse::<i64>().map_err(|e| format!("`{s}`: {e}"))?;
    Ok((k.trim().to_string(), v))
}

fn parse_size(s: &str) -> Result<[u32; 2]> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .with_context(|| format!("--size {s}: expected WxH, e.g. 1600x900"))?;
    let (w, h) = (w.parse::<u32>()?, h.parse::<u32>()?);
    if !(64..=8192).contains(&w) || !(64..=8192).contains(&h) {
        bail!("--size {s}: width and height must lie in 64..=8192");
    }
    Ok([w, h])
}

fn has_display() -> bool {
    if cfg!(target_os = "linux") {
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    } else {
        true
    }
}

fn run_app(lessons: Option<PathBuf>, fresh: bool) -> Result<bool> {
    if !has_display() {
        eprintln!("kvscope: no display found (neither DISPLAY nor WAYLAND_DISPLAY is set), so the window cannot open.");
        eprintln!("Render lesson steps to PNG files instead, for example:");
        eprintln!("  kvscope render --lesson attention-matrix --step 1 --out step1.png");
        eprintln!("  kvscope render --lesson all --out out/steps");
        return Ok(false);
    }
    let config = AppConfig {
        lessons_dir: lessons,
        sync: false,
        fresh,
        export_dir: None,
    };
    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_title("kvscope")
            .with_inner_size([1440.0, 900.0])
            .with_min_inner_size([960.0, 600.0]),
        renderer: eframe::Renderer::Wgpu,
        ..Default::default()
    };
    eframe::run_native(
        "kvscope",
        options,
        Box::new(move |cc| Ok(Box::new(kvscope::ui::create(cc, &config)))),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}\nThe window could not open. `kvscope render --lesson all --out DIR` draws every lesson step without one."
        )
    })?;
    Ok(true)
}

#[allow(clippy::too_many_arguments)]
fn run_render(
    lessons: Option<PathBuf>,
    lesson: String,
    step: usize,
    lang: &str,
    size: &str,
    present: bool,
    light: bool,
    backend: BackendKind,
    at: Option<usize>,
    set: Vec<(String, i64)>,
    measure: bool,
    out: PathBuf,
) -> Result<bool> {
    let size = parse_size(size)?;
    let lang = match lang {
        "en" => Lang::En,
        "zh" => Lang::Zh,
        other => bail!("--lang {other}: expected en or zh"),
    };
    let config = AppConfig {
        lessons_dir: lessons,
        sync: true,
        fresh: true,
        export_dir: None,
    };
    let mut app = KvscopeApp::new(&config, None, None);
    if !app.load_errors().is_empty() {
        for e in app.load_errors() {
            eprintln!("{e}");
        }
        bail!("the lesson files have errors");
    }
    app.lang = lang;
    app.presentation = present;
    app.set_light(light);
    app.choose_backend(backend);
    if app.active_backend() != backend {
        eprintln!("kvscope: {}", app.fallback().unwrap_or("backend unavailable"));
    }
    if measure {
        use kvscope::ui::views::cache_views::{measure_point, sweep_contexts};
        let kind = app.active_backend();
        let b = app.backend_arc();
        for c in sweep_contexts(kind) {
            let p = measure_point(kind, b.as_ref(), c).map_err(|e| anyhow::anyhow!(e))?;
            eprintln!(
                "measured ctx {}: decode {:.2} GB/s, copy {:.2} GB/s",
                p.context, p.kernel, p.copy
            );
            app.vs.sweep.points.push(p);
        }
        app.vs.sweep.backend = Some(kind);
    }
    let mut headless = Headless::new().map_err(|e| anyhow::anyhow!(e))?;
    let mut targets = Vec::new();
    if lesson == "all" {
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
        for (i, l) in app.lessons().iter().enumerate() {
            for j in 0..l.file.steps.len() {
                let suffix = if lang == Lang::Zh { "-zh" } else { "" };
                targets.push((i, j, out.join(format!("{}-{:02}{suffix}.png", l.id(), j + 1))));
            }
        }
    } else {
        let Some(i) = app.lessons().iter().position(|l| l.id() == lesson) else {
            let ids: Vec<String> = app.lessons().iter().map(|l| l.id().to_string()).collect();
            bail!("no lesson `{lesson}` (lessons: {})", ids.join(", "));
        };
        let n = app.lessons()[i].file.steps.len();
        if step == 0 || step > n {
            bail!("--step {step}: lesson `{lesson}` has steps 1..={n}");
        }
        targets.push((i, step - 1, out.clone()));
    }
    for (i, j, path) in targets {
        app.goto(i, j);
        for (k, v) in &set {
            app.set_param(k, *v);
        }
        if let Some(a) = at {
            app.set_cursor(a);
        }
        let img = headless
            .render(size, 1.0, 3, |ui| app.show(ui))
            .map_err(|e| anyhow::anyhow!(e))?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        img.write_png(&path).map_err(|e| anyhow::anyhow!(e))?;
        println!("{}", path.display());
    }
    Ok(true)
}

/// What dragging a lesson-3 slider at T = 1024, d_model = 1024, 16 heads costs: the worker's
/// recompute and verification (off the UI thread), and the UI thread's frame with and without a new
/// result to upload (headless, on the wgpu adapter found here).
fn bench_app(kind: BackendKind) -> Result<bool> {
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
    let backend = app.backend_arc();
    let mut headless = Headless::new().map_err(|e| anyhow::anyhow!(e))?;
    println!("adapter: {}", headless.adapter());
    for (seq, d, heads) in [(1024, 1024, 16), (256, 256, 8)] {
        let mut p = kvscope::ui::model::Params::new();
        for (k, v) in [("seq", seq), ("d_model", d), ("heads", heads), ("kv_heads", heads)] {
            p.insert(k.to_string(), v);
        }
        kvscope::ui::model::normalize(&lesson, &mut p);
        let t = Instant::now();
        let out = kvscope::ui::model::compute(&lesson, &p, backend.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
        let compute_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let reports = kvscope::ui::worker::verify_output(&out);
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

fn run() -> Result<bool> {
    let cli = Cli::parse();
    match cli.command {
        None => run_app(cli.lessons, cli.fresh),
        Some(Command::Render {
            lesson,
            step,
            lang,
            size,
            present,
            light,
            backend,
            at,
            set,
            measure,
            out,
        }) => run_render(
            cli.lessons,
            lesson,
            step,
            &lang,
            &size,
            present,
            light,
            backend,
            at,
            set,
            measure,
            out,
        ),
        Some(Command::Export(cmd)) => run_export(cmd).map(|_| true),
        Some(Command::Lessons(cmd)) => {
            let (dir, list) = match cmd {
                LessonsCmd::Check { dir } => (dir, false),
                LessonsCmd::List { dir } => (dir, true),
            };
            let loaded = match &dir {
                Some(d) => kvscope::lesson::load_dir(d),
                None => kvscope::lesson::load_embedded(),
            };
            match loaded {
                Ok(lessons) => {
                    for l in &lessons {
                        let title = l.file.title.get_ref();
                        println!(
                            "ok  {}  {} ({} steps, {} parameters)  {} / {}",
                            l.source.display(),
                            l.id(),
                            l.file.steps.len(),
                            l.file.params.len(),
                            title.en.as_deref().unwrap_or(""),
                            title.zh.as_deref().unwrap_or("")
                        );
                        if list {
                            for (i, s) in l.file.steps.iter().enumerate() {
                                println!(
                                    "      {}. {}  [{}]",
                                    i + 1,
                                    s.title.get_ref().en.as_deref().unwrap_or(""),
                                    s.views
                                        .iter()
                                        .map(|v| v.get_ref().as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                );
                            }
                        }
                    }
                    println!("{} lessons, no problems", lessons.len());
                    Ok(true)
                }
                Err(errors) => {
                    for e in &errors {
                        eprintln!("{e}");
                    }
                    eprintln!("{} problem(s) in lesson files", errors.len());
                    Ok(false)
                }
            }
        }
        Some(Command::Kernels(KernelsCmd::List)) => {
            use compute::cuda::sources;
            for op in compute::Op::ALL {
                let f = sources::file_of(op);
                for entry in op.cuda_entries() {
                    let line = sources::entry_line(&f, entry).unwrap_or(0);
                    println!("{:20} kernels/{}:{line:<5} {entry}", format!("{op:?}"), f.file);
                }
            }
            Ok(true)
        }
        Some(Command::Kernels(KernelsCmd::Ptx { arch, out })) => {
            std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
            for f in compute::cuda::sources::FILES {
                let ptx = compute::cuda::compile(&f, &arch).map_err(|log| anyhow::anyhow!(log))?;
                let path = out.join(f.file.replace(".cu", ".ptx"));
                std::fs::write(&path, ptx.to_src()).with_context(|| format!("cannot write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            Ok(true)
        }
        Some(Command::Check { backend, json, seed }) => run_check(backend, json, seed),
        Some(Command::RenderViews { out }) => {
            for p in kvscope::render::demo::write_views(&out).map_err(|e| anyhow::anyhow!(e))? {
                println!("wrote {}", p.display());
            }
            Ok(true)
        }
        Some(Command::Bench {
            what: Some(w),
            quick,
            json,
            ..
        }) if w == "render" => {
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
        Some(Command::Bench {
            what: Some(w),
            backend: kind,
            json,
            ..
        }) if w == "sweep" => {
            // Exactly what lesson 4's live bandwidth plot measures, printed.
            use kvscope::ui::views::cache_views::{SWEEP_REQUESTS, measure_point, sweep_contexts};
            let st = compute::probe(kind);
            let b = st
                .backend
                .map_err(|r| anyhow::anyhow!("backend {} is unavailable: {r}", kind.name()))?;
            let mut rows = Vec::new();
            for c in sweep_contexts(kind) {
                let p = measure_point(kind, b.as_ref(), c).map_err(|e| anyhow::anyhow!(e))?;
                if !json {
                    println!(
                        "{} req × ctx {:5}: decode kernel {:7.2} GB/s   copy {:7.2} GB/s   ratio {:.2}  ({})",
                        SWEEP_REQUESTS,
                        p.context,
                        p.kernel,
                        p.copy,
                        p.kernel / p.copy,
                        kind.name()
                    );
                }
                rows.push(serde_json::json!({"context": p.context, "kernel_gbs": p.kernel, "copy_gbs": p.copy}));
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
            Ok(true)
        }
        Some(Command::Bench {
            what: Some(w),
            backend: kind,
            ..
        }) if w == "app" => bench_app(kind),
        Some(Command::Bench { what: Some(w), .. }) => {
            bail!("unknown benchmark `{w}` (expected `render`, `sweep` or `app`, or no name for P1/P3)")
        }
        Some(Command::Bench {
            what: None,
            backend: kind,
            quick,
            json,
            only,
        }) => {
            let (seq, req, ctx) = if quick { (256, 2, 2048) } else { (1024, 8, 8192) };
            let want = |id: &str| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(id));
            let mut lines = Vec::new();
            if kind == BackendKind::Cuda {
                let b = compute::cuda::probe().map_err(|r| anyhow::anyhow!("backend cuda is unavailable: {r}"))?;
                if want("p1") {
                    lines.push(bench::p1_cuda(&b, seq)?);
                }
                if want("p3") {
                    lines.push(bench::p3_cuda(&b, req, ctx)?);
                }
            } else {
                let b = backend(kind)?;
                if want("p1") {
                    lines.push(bench::p1(b.as_ref(), seq, false));
                }
                if want("p1m") {
                    lines.push(bench::p1(b.as_ref(), seq, true));
                }
                if want("p3") {
                    lines.push(bench::p3(b.as_ref(), req, ctx));
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&lines).context("json")?);
            } else {
                bench::print_table(&lines);
            }
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    let _ = kvscope::ui::STARTUP.set(std::time::Instant::now());
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
