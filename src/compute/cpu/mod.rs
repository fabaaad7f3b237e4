//! The CPU backend: f32 math on the rayon pool (both cores). Its ops live in their folders
//! (`ops/<op>/cpu.rs`): the materialising attention uses the GEMM-based f32 path of `math`, the fused
//! one FlashAttention's loop order on register tiles, and paged decode walks the block tables in place
//! with an online softmax.

use super::{Backend, BackendKind};

/// The CPU backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend on the global rayon pool.
    pub fn new() -> Self {
        Self
    }
}

/// The CPU backend's row of the backend table: always ready.
pub fn probe() -> Result<std::sync::Arc<dyn Backend>, String> {
    Ok(std::sync::Arc::new(CpuBackend))
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        format!("CPU, {} threads", rayon::current_num_threads())
    }

    // `run_<op>` calls `ops::<op>::cpu::run`, for every row of the op table.
    super::ops::op_table!(impl_backend_ops[cpu]);
}
