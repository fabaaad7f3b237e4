//! `kvscope lessons check|list`: validate lesson files (the embedded ones or a teacher's folder) with
//! the same loader the app uses, and list their steps and views.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum LessonsCmd {
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

/// Run `kvscope lessons …`.
pub fn run(cmd: LessonsCmd) -> Result<bool> {
    let (dir, list) = match cmd {
        LessonsCmd::Check { dir } => (dir, false),
        LessonsCmd::List { dir } => (dir, true),
    };
    let loaded = match &dir {
        Some(d) => kvscope::lessons::load_dir(d),
        None => kvscope::lessons::load_embedded(),
    };
    match loaded {
        Ok(lessons) => {
            for l in &lessons {
                let title = l.file.title.get_ref();
                outln!(
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
                        outln!(
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
            outln!("{} lessons, no problems", lessons.len());
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
