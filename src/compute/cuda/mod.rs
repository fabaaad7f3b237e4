//! CUDA: the `kernels/*.cu` sources, the NVRTC + cudarc backend for real NVIDIA GPUs, and the simulator
//! backend that runs the same sources on CPU threads. Each op's launches live in its folder
//! (`ops/<op>/cuda.rs` and `sim.rs`), its launch geometry in `ops/<op>/launch.rs`.
//!
//! `unsafe` (FFI into the shim and cudarc launches) lives in this module and in those two files of each
//! op, the CUDA side of it; each use carries a `// SAFETY:` line.

mod backend;
pub(crate) mod device;
pub(crate) mod sim;
pub mod sources;

pub use device::{CudaBackend, compile, include_dirs, nvrtc_status, probe};
pub use sim::{MAX_SIM_THREADS, SimBackend};

/// The CUDA backend's row of the backend table: probe it as a `dyn Backend`.
pub fn probe_backend() -> Result<std::sync::Arc<dyn crate::compute::Backend>, String> {
    probe().map(|b| b as std::sync::Arc<dyn crate::compute::Backend>)
}

/// The shim backend's probe: it is compiled into the binary, so it is always ready.
pub fn probe_sim() -> Result<std::sync::Arc<dyn crate::compute::Backend>, String> {
    Ok(std::sync::Arc::new(SimBackend))
}
