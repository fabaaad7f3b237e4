//! This lesson kind's `kvscope export` subcommand (found through the registry: `LessonKind::exports`):
//! the scheduler replay. Desktop build only.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::command::Sub;
use crate::compute::BackendKind;
use crate::lessons::paged_cache::out::PagedOut;
use crate::lessons::set_args::{SetArg, parse_set, write_replay};

/// A paged-cache lesson's scheduler replay as `schedule.json`: the pool, then per step who was
/// admitted, decoded, preempted, recomputed and finished, who runs and waits, the free blocks and
/// the block tables.
#[derive(clap::Args)]
pub struct ScheduleArgs {
    /// The lesson (a lesson of kind `paged`).
    #[arg(long, default_value = "paged-cache")]
    lesson: String,
    /// Slider values, id=value (repeatable).
    #[arg(long = "set", value_parser = parse_set)]
    set: Vec<SetArg>,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_schedule(a: ScheduleArgs, lessons: Option<&Path>) -> Result<()> {
    write_replay(&a.lesson, a.set, a.backend, &a.out, lessons, "schedule.json", |o| {
        o.downcast_ref::<PagedOut>()
            .map(|r| (r.schedule(), format!("{} steps", r.frames.len())))
            .ok_or("a paged-cache lesson")
    })
}

/// `kvscope export schedule`.
pub static SCHEDULE: Sub<ScheduleArgs> = Sub {
    name: "schedule",
    about: "A paged-cache lesson's scheduler replay as `schedule.json`: the pool, then per step who was admitted, decoded, preempted, recomputed and finished, who runs and waits, the free blocks and the block tables.",
    run: run_schedule,
};
