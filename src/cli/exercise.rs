//! `kvscope exercise list|show|grade`: the kernel exercises from the command line, for a course's
//! autograder. `grade` runs in a child process with a timeout (an edited kernel may never end) and exits
//! 0 when the edit passes every check, 1 when it does not (or does not compile), 2 on a usage error.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use clap::Subcommand;
use kvscope::exercises;

#[derive(Subcommand)]
pub enum ExerciseCmd {
    /// Every exercise: its id, lesson, kernel file, the ops that grade it, and what to write.
    List {
        /// Titles in Chinese.
        #[arg(long)]
        zh: bool,
    },
    /// The file a student starts from (the kernel with the exercise's region blanked), on stdout.
    Show {
        /// The exercise.
        id: String,
        /// The solution instead (the shipped kernel file).
        #[arg(long)]
        solution: bool,
        /// The hint in Chinese.
        #[arg(long)]
        zh: bool,
    },
    /// Grade an edited kernel file: compile errors at their line and column, then the grading ops'
    /// checks against the f64 reference on hidden seeds. Exits 0 on a pass, 1 on a fail.
    Grade {
        /// The exercise.
        id: String,
        /// The edited kernel file.
        #[arg(long)]
        source: PathBuf,
        /// Print the grade as JSON.
        #[arg(long)]
        json: bool,
        /// Seconds the grading may take before it is stopped (a kernel that never ends).
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Grade in this process, without a child or a timeout (what the child runs).
        #[arg(long, hide = true)]
        here: bool,
    },
}

/// Run `kvscope exercise …`.
pub fn run(cmd: ExerciseCmd) -> Result<bool> {
    match cmd {
        ExerciseCmd::List { zh } => {
            for x in exercises::all().map_err(|e| anyhow!(e))? {
                let title = if zh { &x.title.zh } else { &x.title.en };
                let track = if x.bug.is_some() { "bug" } else { "blank" };
                outln!(
                    "{:20} {:6} lesson {:18} kernels/{:18} graded by {:28} {}",
                    x.id,
                    track,
                    x.lesson,
                    x.file,
                    x.ops.join(", "),
                    title.as_deref().unwrap_or_default()
                );
            }
            Ok(true)
        }
        ExerciseCmd::Show { id, solution, zh } => {
            let x = exercises::find(&id).map_err(|e| anyhow!(e))?;
            let text = if solution { x.solution() } else { x.blanked(zh) };
            kvscope::command::write_stdout(format_args!("{text}"));
            Ok(true)
        }
        ExerciseCmd::Grade {
            id,
            source,
            json,
            timeout,
            here,
        } => {
            let x = exercises::find(&id).map_err(|e| anyhow!(e))?;
            let text = std::fs::read_to_string(&source).with_context(|| format!("reading {}", source.display()))?;
            let g = if here {
                x.grade_here(&text)
            } else {
                let exe = std::env::current_exe().context("finding the kvscope executable")?;
                exercises::grade_in_child(&exe, &id, &text, std::time::Duration::from_secs(timeout))
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&g)?);
            } else {
                print_grade(&g, &source, &x);
            }
            Ok(g.passed)
        }
    }
}

fn print_grade(g: &exercises::Grade, source: &std::path::Path, x: &exercises::Exercise) {
    for e in &g.compile_errors {
        outln!("{}:{}:{}: error: {}", source.display(), e.line, e.column, e.message);
    }
    if let Some(e) = &g.error {
        outln!("error: {e}");
    }
    let n = g.checks.len();
    let failed: Vec<_> = g.failed().collect();
    // Every failed check, and where the first few are wrong.
    for (i, c) in failed.iter().enumerate() {
        outln!("{c}");
        if i < 3
            && let Some(m) = &c.wrong_map
        {
            outln!(
                "  where it is wrong ({} × {} of the last two dimensions{}; X = a wrong element):",
                m.rows,
                m.cols,
                if m.map_rows < m.rows || m.map_cols < m.cols {
                    ", binned"
                } else {
                    ""
                }
            );
            for line in m.text().lines() {
                outln!("  {line}");
            }
        }
    }
    let verdict = if g.passed { "PASS" } else { "FAIL" };
    if !g.compile_errors.is_empty() {
        outln!(
            "FAIL {}: the kernel does not compile ({} error(s) above)",
            x.id,
            g.compile_errors.len()
        );
        return;
    }
    if n == 0 {
        outln!("FAIL {}: no check ran", x.id);
        return;
    }
    outln!(
        "{verdict} {}: {} of {n} checks against the f64 reference passed on {} hidden seeds (ops: {}); max abs error {:.2e}",
        x.id,
        n - failed.len(),
        exercises::HIDDEN_SEEDS.len(),
        x.ops.join(", "),
        g.max_abs()
    );
}
