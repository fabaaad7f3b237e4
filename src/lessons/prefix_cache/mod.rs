//! Lesson 7, prefix caching and copy-on-write (kind `prefix`): a scripted session replayed on the real
//! [`PagedKvCache`] with its prefix cache (`cache::prefix`): requests sharing a system prompt, a prompt
//! cached in full (its last block recomputed), a finished chat turn whose blocks stay cached for the next turn, parallel sampling by fork, the
//! copy-on-write of a shared partial block, and eviction under memory pressure. Every prefill writes
//! its K/V through the backend's `paged_append` kernel, every copy-on-write runs the backend's
//! `copy_blocks` kernel, and after every event paged decode of the live requests, through their
//! (shared) block tables, is checked against contiguous attention on each request's own tokens. The
//! timeline has one frame per event.

#[cfg(feature = "native")]
pub mod cli;
mod out;
mod replay;

use super::{LessonKind, Output, Params};

use crate::compute::{Backend, Kernel};
use crate::lessons::{Lesson, Schema};

pub use out::{Event, PrefixFrame, PrefixOut};

crate::views! {
    /// The views of lesson 7.
    pub enum View {
        /// The pool: owners, reference counts and short hashes.
        Pool = "pool",
        /// One request's hash chain, block by block.
        Chain = "chain",
        /// The hash → block map.
        Map = "map",
        /// The block tables, shared entries marked.
        Tables = "tables",
        /// The free list and the evictor.
        Lists = "lists",
        /// Hit rate, prefill saved and memory against no sharing.
        Stats = "stats",
        /// What happened at this event.
        Events = "events",
        /// Paged decode through the shared tables, checked.
        Check = "check",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 7.
pub struct PrefixCache;

impl Schema for PrefixCache {
    fn name(&self) -> &'static str {
        "prefix"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["block_size", "token_slots", "sharing", "prompt_len", "samples", "seed"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        replay::PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        POINTS
    }
}

impl LessonKind for PrefixCache {
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::PREFIX_SCHEDULE]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::CopyBlocks, Kernel::PagedAppend, Kernel::PagedDecode]
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        Ok(Box::new(replay::replay(p, backend)?))
    }
}

/// The named points of the replay a step's `at` may open at.
const POINTS: &[&str] = &[
    "shared",
    "repeat",
    "finished",
    "turn2",
    "fork",
    "cow",
    "probe_before",
    "evict",
    "probe_after",
];

#[cfg(test)]
mod tests {
    use super::replay::replay;
    use super::*;
    use crate::compute::{CpuBackend, Tolerance, check};

    /// A NaN in a frame's decode (the lesson's computed floats) is a NaN of the lesson.
    #[test]
    fn a_nan_in_a_frames_decode_is_a_nan_of_the_lesson() {
        let mut out = replay(&Params::new(), &CpuBackend::new()).unwrap();
        assert!(!out.has_nan());
        let f = out.frames.iter_mut().find(|f| f.check.is_some()).unwrap();
        f.check = Some(check(
            "decode",
            &[2],
            &[0.5f32, f32::NAN],
            &[0.5f64, 0.25],
            Tolerance::F32,
        ));
        assert!(out.has_nan());
    }
}
