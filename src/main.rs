//! The `kvscope` command line: parsing here, one module per subcommand in `src/cli/`.

/// `print!` to stdout that ends the process quietly (exit status 0) when the reader has gone, as
/// command-line tools do (`kvscope lessons list | head`), instead of panicking on the broken pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

/// [`out!`] with a newline.
macro_rules! outln {
    () => {
        out!("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use cli::{
    BackendChoice, bench::BenchArgs, export::ExportCmd, kernels::KernelsCmd, lessons::LessonsCmd, render::RenderArgs,
};

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
    /// Write the tensors of one computation as .npy files plus manifest.json (a lesson's own exports
    /// come from the lesson registry: `LessonKind::exports`).
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
    /// Kernel exercises: list them, show one's blanked kernel, or grade an edited kernel against the f64
    /// reference (for a course's autograder).
    #[command(subcommand)]
    Exercise(cli::exercise::ExerciseCmd),
    /// Render the full app frame of a lesson step to a PNG, without a window (for slides, docs, tests).
    Render(RenderArgs),
    /// Draw every wgpu renderer offscreen on real data and write PNGs into DIR.
    RenderViews {
        #[arg(long, default_value = "out/views")]
        out: PathBuf,
    },
    /// Generate text with the tiny trained model through a KV cache, and print tokens per second.
    Generate(cli::generate::GenerateArgs),
    /// Lesson 11's memory calculator: KV bytes per token and per request, weights, and how many requests
    /// fit in a GPU's memory, from a model's config.
    Calc(cli::calc::CalcArgs),
    /// Run the benchmarks: P1 attention vs GEMM and P3 paged decode vs a copy (no subcommand), or one of
    /// the subcommands.
    Bench(BenchArgs),
}

fn run() -> Result<bool> {
    // `kvscope export` and `kvscope bench`: the subcommands that belong to no lesson (`ExportCmd`,
    // `BenchCmd`), then each lesson kind's own, which the registry lists; a lesson's runs here, anything
    // else below.
    let owned = |bench: bool| -> Vec<&'static dyn kvscope::command::LessonCommand> {
        let of = |k: &&'static dyn kvscope::lessons::LessonKind| if bench { k.benches() } else { k.exports() };
        kvscope::lessons::REGISTRY.iter().flat_map(of).collect()
    };
    let (exports, benches) = (owned(false), owned(true));
    let add = |mut c: clap::Command, subs: &[&'static dyn kvscope::command::LessonCommand]| {
        for x in subs {
            c = c.subcommand(x.command());
        }
        c
    };
    let matches = Cli::command()
        .mut_subcommand("export", |e| add(e, &exports))
        .mut_subcommand("bench", |b| add(b, &benches))
        .get_matches();
    if let Some((group, gm)) = matches.subcommand()
        && let Some((name, sub)) = gm.subcommand()
        && let Some(x) = match group {
            "export" => exports.iter(),
            "bench" => benches.iter(),
            _ => [].iter(),
        }
        .find(|x| x.name() == name)
    {
        let lessons = matches.get_one::<PathBuf>("lessons").cloned();
        return x.run(sub, lessons.as_deref()).map(|_| true);
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        None => cli::app::run(cli.lessons, cli.fresh),
        Some(Command::Render(args)) => cli::render::run(cli.lessons, args),
        Some(Command::Export(cmd)) => cli::export::run(cmd).map(|_| true),
        Some(Command::Lessons(cmd)) => cli::lessons::run(cmd),
        Some(Command::Kernels(cmd)) => cli::kernels::run(cmd),
        Some(Command::Exercise(cmd)) => cli::exercise::run(cmd),
        Some(Command::Check { backend, json, seed }) => cli::check::run(backend, json, seed),
        Some(Command::RenderViews { out }) => {
            for p in kvscope::render::demo::write_views(&out).map_err(|e| anyhow::anyhow!(e))? {
                outln!("wrote {}", p.display());
            }
            Ok(true)
        }
        Some(Command::Bench(args)) => cli::bench::run(args),
        Some(Command::Calc(args)) => cli::calc::run(args),
        Some(Command::Generate(args)) => cli::generate::run(args).map(|_| true),
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
