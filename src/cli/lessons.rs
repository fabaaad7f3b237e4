//! `kvscope lessons check|list|questions`: validate lesson files (the embedded ones or a teacher's folder)
//! with the same loader the app uses, list their steps and views, and print their questions with the
//! answers the lessons compute.

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
    /// Print the placeholders a lesson fills and their values at a step's settings (for writing its
    /// narration and questions).
    Values {
        /// The lesson's id.
        lesson: String,
        /// The step (from 1) whose settings (`set`) to compute with.
        #[arg(long, default_value_t = 1)]
        step: usize,
    },
    /// Print every step's questions with the answers the lessons compute at their default settings (on
    /// the CPU). Exits non-zero when a question has no answer.
    Questions {
        /// A folder of lesson files; the shipped lessons when omitted.
        dir: Option<PathBuf>,
        /// Chinese instead of English.
        #[arg(long)]
        zh: bool,
    },
}

/// `kvscope lessons values`: the placeholders of `lesson` at step `step`'s settings.
fn values(lesson: &str, step: usize) -> Result<bool> {
    let lessons =
        kvscope::lessons::load_embedded().map_err(|e| anyhow::anyhow!("{} problem(s) in lesson files", e.len()))?;
    let l = lessons
        .iter()
        .find(|l| l.id() == lesson)
        .ok_or_else(|| anyhow::anyhow!("no lesson `{lesson}`"))?;
    let s = l
        .file
        .steps
        .get(step.saturating_sub(1))
        .ok_or_else(|| anyhow::anyhow!("lesson `{lesson}` has {} steps", l.file.steps.len()))?;
    let backend = kvscope::compute::CpuBackend::new();
    let out = kvscope::lessons::compute(l, &s.set_params(), &backend).map_err(|e| anyhow::anyhow!(e))?;
    for (k, v) in l.kind.values(l, Some(out.as_ref())) {
        outln!("{k} = {v}");
    }
    Ok(true)
}

/// `kvscope lessons questions`: each question, filled, and its answer from the run at the step's settings.
fn questions(lessons: &[kvscope::lessons::Lesson], zh: bool) -> bool {
    use kvscope::lessons::questions::{Answer, answer};
    let backend = kvscope::compute::CpuBackend::new();
    let pick = |t: &kvscope::lesson_file::Text| if zh { t.zh.clone() } else { t.en.clone() }.unwrap_or_default();
    let (mut n, mut ok) = (0, true);
    for l in lessons {
        for (i, s) in l.file.steps.iter().enumerate().filter(|(_, s)| !s.questions.is_empty()) {
            let params = s.set_params();
            let (values, out) = match kvscope::lessons::compute(l, &params, &backend) {
                Ok(out) => (l.kind.values(l, Some(out.as_ref())), out),
                Err(e) => {
                    outln!("{} step {}: the lesson does not compute: {e}", l.id(), i + 1);
                    ok = false;
                    continue;
                }
            };
            for q in &s.questions {
                n += 1;
                let ask = kvscope::lessons::fill(&pick(q.ask.get_ref()), &values, "—", zh);
                let a = match answer(q, &values) {
                    Ok(Answer::Number { shown, slack, .. }) => format!("{shown} (± {slack:.3})"),
                    Ok(Answer::Choice(k)) => pick(q.choices[k].label.get_ref()),
                    Ok(Answer::Pick(p)) => {
                        let view = q.pick.as_ref().map(|v| v.get_ref().view.as_str()).unwrap_or_default();
                        match out.pick_surface(view) {
                            Some(sf) if p < sf.choices() => format!("{} on `{view}`", sf.describe(p, zh)),
                            Some(sf) => {
                                ok = false;
                                format!("NO ANSWER: item {p} of {} on `{view}`", sf.choices())
                            }
                            None => {
                                ok = false;
                                format!("NO ANSWER: `{view}` takes no picks")
                            }
                        }
                    }
                    Err(e) => {
                        ok = false;
                        format!("NO ANSWER: {e}")
                    }
                };
                outln!("{} step {}: {ask}\n    → {a}", l.id(), i + 1);
            }
        }
    }
    outln!("{n} questions");
    ok
}

/// Run `kvscope lessons …`.
pub fn run(cmd: LessonsCmd) -> Result<bool> {
    let (dir, list, ask) = match cmd {
        LessonsCmd::Check { dir } => (dir, false, None),
        LessonsCmd::List { dir } => (dir, true, None),
        LessonsCmd::Questions { dir, zh } => (dir, false, Some(zh)),
        LessonsCmd::Values { lesson, step } => return values(&lesson, step),
    };
    let loaded = match &dir {
        Some(d) => kvscope::lessons::load_dir(d),
        None => kvscope::lessons::load_embedded(),
    };
    match loaded {
        Ok(lessons) => {
            if let Some(zh) = ask {
                return Ok(questions(&lessons, zh));
            }
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
