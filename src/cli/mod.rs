//! The subcommands of `kvscope`, one module each; `main.rs` only parses and dispatches.

pub mod app;
pub mod bench;
pub mod calc;
pub mod check;
pub mod exercise;
pub mod export;
pub mod generate;
pub mod kernels;
pub mod lessons;
pub mod render;

use anyhow::Result;
use kvscope::compute::BackendKind;

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

pub use kvscope::command::{ModelArgs, backend, write_stdout};
pub use kvscope::lessons::set_args::{SetArg, check_sets, parse_set};
