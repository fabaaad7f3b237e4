//! The subcommands of `kvscope`, one module each; `main.rs` only parses and dispatches.

pub mod app;
pub mod bench;
pub mod calc;
pub mod check;
pub mod export;
pub mod generate;
pub mod kernels;
pub mod lessons;
pub mod render;
pub mod serving;

use std::sync::Arc;

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

use anyhow::Result;
use kvscope::compute::{self, Backend, BackendKind};

/// `all`, or one backend by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// Every backend (unavailable ones are listed with the reason).
    All,
    /// One backend.
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

/// A ready backend, or an error that says why it is unavailable.
pub fn backend(kind: BackendKind) -> Result<Arc<dyn Backend>> {
    compute::probe(kind)
        .backend
        .map_err(|reason| anyhow::anyhow!("backend {} is unavailable: {reason}", kind.name()))
}

/// One `--set id=value`: an integer (a slider, a switch as 0/1, or a built-in text's index), or any
/// other value, which only a text parameter takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetArg {
    /// The parameter id.
    pub id: String,
    /// The value as written.
    pub value: SetValue,
}

/// The value of a [`SetArg`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValue {
    /// An integer.
    Int(i64),
    /// A text, for a `kind = "text"` parameter.
    Text(String),
}

/// `id=value`, for `--set`.
pub fn parse_set(s: &str) -> Result<SetArg, String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected id=value"))?;
    let value = match v.trim().parse::<i64>() {
        Ok(n) => SetValue::Int(n),
        Err(_) => SetValue::Text(v.to_string()),
    };
    Ok(SetArg {
        id: k.trim().to_string(),
        value,
    })
}

/// Every `--set` name must be a parameter of at least one of `lessons` (the error lists theirs), and
/// a value that is not an integer must go to a text parameter; texts become their ids.
pub fn check_sets(lessons: &[&kvscope::lessons::Lesson], set: &[SetArg]) -> Result<Vec<(String, i64)>> {
    use kvscope::lesson_file::ParamKind;
    let mut known: Vec<String> = Vec::new();
    for l in lessons {
        for p in &l.file.params {
            if !known.contains(p.id.get_ref()) {
                known.push(p.id.get_ref().clone());
            }
        }
    }
    let mut out = Vec::new();
    for a in set {
        let k = &a.id;
        if !known.contains(k) {
            let ids: Vec<&str> = lessons.iter().map(|l| l.id()).collect();
            anyhow::bail!(
                "--set {k}: no such parameter in {} (parameters: {})",
                ids.join(", "),
                known.join(", ")
            );
        }
        let is_text = lessons
            .iter()
            .flat_map(|l| &l.file.params)
            .any(|p| p.id.get_ref() == k && p.kind == ParamKind::Text);
        let is_model = lessons
            .iter()
            .flat_map(|l| &l.file.params)
            .any(|p| p.id.get_ref() == k && p.kind == ParamKind::Model);
        let v = match &a.value {
            SetValue::Int(n) => *n,
            SetValue::Text(t) if is_model => match t.as_str() {
                "random" => 0,
                "tiny" => 1,
                "smollm2" => 2,
                _ => anyhow::bail!("--set {k}={t}: a model is random, tiny or smollm2 (or 0, 1, 2)"),
            },
            SetValue::Text(t) if is_text => kvscope::model::texts::intern(t)
                .ok_or_else(|| anyhow::anyhow!("--set {k}=: the text is empty (the model needs at least one byte)"))?,
            SetValue::Text(t) => anyhow::bail!("--set {k}={t}: `{k}` takes an integer"),
        };
        out.push((k.clone(), v));
    }
    Ok(out)
}

/// The lessons: a teacher's folder, or the embedded ones; errors name file, line and column.
pub fn load_lessons(dir: Option<&std::path::Path>) -> Result<Vec<kvscope::lessons::Lesson>> {
    let loaded = match dir {
        Some(d) => kvscope::lessons::load_dir(d),
        None => kvscope::lessons::load_embedded(),
    };
    loaded.map_err(|errors| {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("the lesson files have errors:\n{}", text.join("\n"))
    })
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
    pub fn load(&self) -> Result<kvscope::model::Model> {
        let name = match self.model {
            ModelArg::Tiny => kvscope::model::ModelName::Tiny,
            ModelArg::Smollm2 => kvscope::model::ModelName::Smollm2,
        };
        kvscope::model::Model::select(name, self.model_file.as_deref()).map_err(|e| anyhow::anyhow!("{e}"))
    }
}
