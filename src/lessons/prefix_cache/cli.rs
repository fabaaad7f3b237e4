//! This lesson kind's `kvscope export` subcommand (found through the registry: `LessonKind::exports`):
//! the prefix-cache replay. Desktop build only.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::command::Sub;
use crate::compute::BackendKind;
use crate::lessons::prefix_cache::PrefixOut;
use crate::lessons::set_args::{SetArg, parse_set, write_replay};

/// A prefix-caching lesson's replay as `prefix-schedule.json`: per event the block tables, the
/// reference counts, the block hashes, the hits and misses, the copy-on-write copies (src → dst),
/// the free list and the evictor.
#[derive(clap::Args)]
pub struct PrefixScheduleArgs {
    /// The lesson (a lesson of kind `prefix`).
    #[arg(long, default_value = "prefix-cache")]
    lesson: String,
    /// Slider values, id=value (repeatable).
    #[arg(long = "set", value_parser = parse_set)]
    set: Vec<SetArg>,
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    #[arg(long)]
    out: PathBuf,
}

fn run_prefix_schedule(a: PrefixScheduleArgs, lessons: Option<&Path>) -> Result<()> {
    write_replay(
        &a.lesson,
        a.set,
        a.backend,
        &a.out,
        lessons,
        "prefix-schedule.json",
        |o| {
            o.downcast_ref::<PrefixOut>()
                .map(|r| (r.schedule(), format!("{} events", r.frames.len())))
                .ok_or("a prefix-caching lesson")
        },
    )
}

/// `kvscope export prefix-schedule`.
pub static PREFIX_SCHEDULE: Sub<PrefixScheduleArgs> = Sub {
    name: "prefix-schedule",
    about: "A prefix-caching lesson's replay as `prefix-schedule.json`: per event the block tables, the reference counts, the block hashes, the hits and misses, the copy-on-write copies (src → dst), the free list and the evictor.",
    run: run_prefix_schedule,
};
