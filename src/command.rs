//! The command-line pieces that the binary (`src/cli/`) and the lessons' own `kvscope export`
//! subcommands share: writing to stdout, the `--model` flags, a backend by name, and
//! [`LessonCommand`], the trait through which `kvscope export` finds a lesson's subcommands in the
//! registry ([`crate::lessons::LessonKind::exports`]). Desktop build only.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use clap::{ArgMatches, Args, Command, FromArgMatches};

use crate::compute::{self, Backend, BackendKind};

/// Write to stdout; a closed pipe ends the process with status 0 (its reader has all it wanted), any
/// other write error ends it with a message and status 1.
pub fn write_stdout(args: std::fmt::Arguments) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("kvscope: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// A ready backend, or an error that says why it is unavailable.
pub fn backend(kind: BackendKind) -> Result<Arc<dyn Backend>> {
    compute::probe(kind)
        .backend
        .map_err(|reason| anyhow::anyhow!("backend {} is unavailable: {reason}", kind.name()))
}

/// The model a command runs: `--model tiny|smollm2` and `--model-file PATH`.
#[derive(clap::Args, Clone, Debug)]
pub struct ModelArgs {
    /// tiny: the byte-level model trained here (embedded); smollm2: SmolLM2-135M-Instruct (98 MB, fetched
    /// by ./scripts/smollm2/fetch.sh into the user's cache directory).
    #[arg(long, value_enum, default_value = "tiny")]
    pub model: ModelArg,
    /// Another copy of the model's file: a safetensors file for tiny, the GGUF file for smollm2.
    #[arg(long)]
    pub model_file: Option<std::path::PathBuf>,
}

/// The models by command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelArg {
    /// The byte-level model trained here.
    Tiny,
    /// SmolLM2-135M-Instruct.
    Smollm2,
}

impl ModelArgs {
    /// Load it (a missing or damaged file is an error naming the file and what is wrong).
    pub fn load(&self) -> Result<crate::model::Model> {
        let name = match self.model {
            ModelArg::Tiny => crate::model::ModelName::Tiny,
            ModelArg::Smollm2 => crate::model::ModelName::Smollm2,
        };
        crate::model::Model::select(name, self.model_file.as_deref()).map_err(|e| anyhow::anyhow!("{e}"))
    }
}

/// One subcommand that a lesson kind owns: `kvscope export NAME` or `kvscope bench NAME`.
pub trait LessonCommand: Sync {
    /// Its name on the command line.
    fn name(&self) -> &'static str;
    /// Its flags and help, as a clap subcommand.
    fn command(&self) -> Command;
    /// Run it on its parsed flags; `lessons` is the global `--lessons` folder.
    fn run(&self, matches: &ArgMatches, lessons: Option<&Path>) -> Result<()>;
}

/// Lines a lesson kind adds to `kvscope bench`'s same-run ratios (no subcommand), found through the
/// registry ([`crate::lessons::LessonKind::ratio_lines`]): `--only ID` runs them, never the default run.
pub trait RatioLines: Sync {
    /// The ids `--only` selects them by, as its help lists them.
    fn ids(&self) -> Vec<String>;
    /// What they measure, for `--only`'s help.
    fn about(&self) -> &'static str;
    /// Run those of [`Self::ids`] that `only` names (case-insensitively) on `b`, for `requests` requests
    /// of `context` tokens, and print them (a table, or JSON); false when `only` names none of them.
    fn run(&self, b: &dyn Backend, only: &[String], requests: usize, context: usize, json: bool) -> Result<bool>;
}

/// A [`LessonCommand`] from a clap `Args` struct and the function that runs it.
pub struct Sub<A> {
    /// The subcommand's name.
    pub name: &'static str,
    /// Its help text.
    pub about: &'static str,
    /// What it does.
    pub run: fn(A, Option<&Path>) -> Result<()>,
}

impl<A: Args + FromArgMatches + Sync> LessonCommand for Sub<A> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn command(&self) -> Command {
        let about = self.about.split("\n\n").next().unwrap_or(self.about);
        A::augment_args(Command::new(self.name).about(about).long_about(self.about))
    }

    fn run(&self, matches: &ArgMatches, lessons: Option<&Path>) -> Result<()> {
        let a = A::from_arg_matches(matches).map_err(|e| anyhow::anyhow!("{e}"))?;
        (self.run)(a, lessons)
    }
}

/// The CPU model and thread count (host backends) or the backend's device, for a stored measurement.
pub fn machine_name(b: &dyn crate::compute::Backend, host: bool) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if host {
        format!("{cpu}, {threads} threads")
    } else {
        b.device()
    }
}

/// Today's UTC date, `YYYY-MM-DD` (civil-from-days, Howard Hinnant's algorithm).
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
