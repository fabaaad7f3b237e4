//! CUDA: the `kernels/*.cu` sources, the NVRTC + cudarc backend for real NVIDIA GPUs, and the simulator
//! backend that runs the same sources on CPU threads. Each op's launches live in its folder, written once
//! for both backends (`ops/<op>/cuda.rs`), its launch geometry in `ops/<op>/launch.rs`; every entry
//! point's argument list is generated from `kernels/shim/entries.def` (`entries`).
//!
//! `unsafe` (FFI into the shim and cudarc launches) lives in this module and in that file of each op,
//! the CUDA side of it; each use carries a `// SAFETY:` line.
//!
//! Both backends exist only with the `native` feature (the default). The web build keeps the sources
//! (students still read them next to the result) and lists both backends as unavailable, "not in the
//! web build", as candle's dummy backends do.

#[cfg(feature = "native")]
mod backend;
#[cfg(feature = "native")]
pub(crate) mod device;
#[cfg(feature = "native")]
pub(crate) mod entries;
#[cfg(feature = "native")]
pub(crate) mod sim;
pub mod sources;

#[cfg(feature = "native")]
pub use device::{CudaBackend, compile, include_dirs, nvrtc_loaded, nvrtc_names, nvrtc_status, probe};
#[cfg(feature = "native")]
pub use entries::ENTRY_PARAMS;
#[cfg(feature = "native")]
pub use sim::{MAX_SIM_THREADS, SimBackend};

/// Why the CUDA backends are missing from a build without the `native` feature.
pub const NOT_IN_THIS_BUILD: &str = "not in the web build (no cudarc, no C++ shim)";

/// The CUDA backend's row of the backend table: probe it as a `dyn Backend`.
pub fn probe_backend() -> Result<std::sync::Arc<dyn crate::compute::Backend>, String> {
    #[cfg(feature = "native")]
    return probe().map(|b| b as std::sync::Arc<dyn crate::compute::Backend>);
    #[cfg(not(feature = "native"))]
    Err(NOT_IN_THIS_BUILD.into())
}

/// The shim backend's probe: it is compiled into the native binary, so there it is always ready.
pub fn probe_sim() -> Result<std::sync::Arc<dyn crate::compute::Backend>, String> {
    #[cfg(feature = "native")]
    return Ok(std::sync::Arc::new(SimBackend));
    #[cfg(not(feature = "native"))]
    Err(NOT_IN_THIS_BUILD.into())
}
