//! The subcommands of `kvscope`, one module each; `main.rs` only parses and dispatches.

pub mod app;
pub mod bench;
pub mod check;
pub mod export;
pub mod generate;
pub mod kernels;
pub mod lessons;
pub mod render;

use std::sync::Arc;

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

/// `id=value`, for `--set`.
pub fn parse_set(s: &str) -> Result<(String, i64), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected id=value"))?;
    let v = v.trim().parse::<i64>().map_err(|e| format!("`{s}`: {e}"))?;
    Ok((k.trim().to_string(), v))
}

/// Every `--set` name must be a parameter of at least one of `lessons`; the error lists theirs.
pub fn check_sets(lessons: &[&kvscope::lesson::Lesson], set: &[(String, i64)]) -> Result<()> {
    let mut known: Vec<String> = Vec::new();
    for l in lessons {
        for p in &l.file.params {
            if !known.contains(p.id.get_ref()) {
                known.push(p.id.get_ref().clone());
            }
        }
    }
    for (k, _) in set {
        if !known.contains(k) {
            let ids: Vec<&str> = lessons.iter().map(|l| l.id()).collect();
            anyhow::bail!(
                "--set {k}: no such parameter in {} (parameters: {})",
                ids.join(", "),
                known.join(", ")
            );
        }
    }
    Ok(())
}

/// The lessons: a teacher's folder, or the embedded ones; errors name file, line and column.
pub fn load_lessons(dir: Option<&std::path::Path>) -> Result<Vec<kvscope::lesson::Lesson>> {
    let loaded = match dir {
        Some(d) => kvscope::lesson::load_dir(d),
        None => kvscope::lesson::load_embedded(),
    };
    loaded.map_err(|errors| {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("the lesson files have errors:\n{}", text.join("\n"))
    })
}
