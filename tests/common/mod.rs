//! What several test files share: whether CI requires the wgpu backend.
//!
//! `scripts/test.sh` (so CI) sets `KVSCOPE_REQUIRE_BACKENDS=vulkan,gl`. A test that can run on wgpu asks
//! [`wgpu_required`]; where the wgpu backend is required but does not come up, the test fails instead of
//! skipping. Without the variable (a developer's machine without Mesa), a missing adapter is a skip with
//! its reason.

#![allow(dead_code)] // each test file uses part of it

use std::sync::Arc;

use kvscope::compute::{Backend, BackendKind, probe};

/// Whether the environment requires the wgpu backend (`KVSCOPE_REQUIRE_BACKENDS` names `vulkan`).
pub fn wgpu_required() -> bool {
    std::env::var("KVSCOPE_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "vulkan"))
}

/// The wgpu backend; `None` (with the reason on stderr) only where it is not required.
pub fn wgpu() -> Option<Arc<dyn Backend>> {
    match probe(BackendKind::Wgpu).backend {
        Ok(b) => Some(b),
        Err(e) if wgpu_required() => {
            panic!("KVSCOPE_REQUIRE_BACKENDS names vulkan but the wgpu backend is unavailable: {e}")
        }
        Err(e) => {
            eprintln!("skipped: the wgpu backend is unavailable here: {e}");
            None
        }
    }
}
