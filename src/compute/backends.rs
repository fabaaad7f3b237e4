//! The backend table: [`BACKENDS`], each backend's probe and kernel sources, made from the one list of
//! backends in `kind.rs` (which also makes the [`BackendKind`] enum). Adding a backend is a folder and
//! a row of that list.

use std::sync::Arc;

use super::kind::backend_list;
use super::{Backend, BackendKind, Kernel, KernelSource};

/// One row of the backend table.
pub struct BackendInfo {
    /// Which backend.
    pub kind: BackendKind,
    /// Make it ready, or say why it cannot run here. Never panics.
    pub probe: fn() -> Result<Arc<dyn Backend>, String>,
    /// Whether probing can take long (driver loading, compilation): the app then probes it off the UI
    /// thread and lists it as "probing…" meanwhile.
    pub slow_probe: bool,
    /// Whether it simulates every GPU thread on the CPU (benchmarks and sweeps give it small shapes).
    pub simulated: bool,
    /// The source file and entry point of a kernel, for backends whose kernels students can read.
    pub kernel_source: fn(Kernel) -> Option<KernelSource>,
    /// What the kernel panel says ran, in English and Chinese.
    pub ran: [&'static str; 2],
}

/// [`BACKENDS`] from the list.
macro_rules! backend_rows {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal { $($field:ident: $value:expr),* $(,)? } )*) => {
        /// The backend table, in [`BackendKind::ALL`] order.
        pub static BACKENDS: [BackendInfo; [$($name),*].len()] = [
            $(BackendInfo { kind: BackendKind::$variant, $($field: $value),* },)*
        ];
    };
}

backend_list!(backend_rows);

impl BackendKind {
    /// This backend's row of the table.
    pub fn info(self) -> &'static BackendInfo {
        &BACKENDS[self as usize]
    }
}

/// The source of `op` that a student should read: the active backend's own, or else the first
/// backend's in the table that has one (the CPU runs Rust, so it shows the CUDA twin).
pub fn kernel_source(active: BackendKind, kernel: Kernel) -> Option<KernelSource> {
    (active.info().kernel_source)(kernel).or_else(|| BACKENDS.iter().find_map(|b| (b.kernel_source)(kernel)))
}

/// A backend, or the reason it cannot run here.
#[derive(Clone)]
pub struct BackendStatus {
    /// Which backend.
    pub kind: BackendKind,
    /// The ready backend, or a reason a user can act on.
    pub backend: Result<Arc<dyn Backend>, String>,
}

/// Probe one backend. Never panics.
pub fn probe(kind: BackendKind) -> BackendStatus {
    BackendStatus {
        kind,
        backend: (kind.info().probe)(),
    }
}

/// Probe every backend.
pub fn probe_all() -> Vec<BackendStatus> {
    BackendKind::ALL.iter().map(|&k| probe(k)).collect()
}
