//! The compute interface: the [`Backend`] trait, its CPU implementation, the f64 reference and the
//! shared checker.
//!
//! Every backend takes host tensors and returns host tensors, so lessons, the CLI and tests call them
//! the same way. Every op takes one input struct (`compute::ops::*`), which is validated once, in the
//! trait's provided methods, before any backend code (and so before any kernel launch) sees it. A
//! backend that cannot run is a [`BackendStatus`] with a reason, never a panic; an op a backend does not
//! implement yet is a [`BackendError::NotImplemented`], shown like any other reason. The backends are
//! one table (`backends.rs`): adding one is a folder and a row.

mod backends;
pub mod bench;
mod check;
mod cpu;
#[allow(unsafe_code)]
pub mod cuda;
mod input;
mod kind;
pub mod kv_snippets;
pub mod launch;
pub mod ops;
pub mod profile;
pub mod reference;
pub mod suite;
pub mod timing;
pub mod wgpu;

pub use backends::{BACKENDS, BackendInfo, BackendStatus, kernel_source, probe, probe_all};
pub use check::{Against, CheckReport, MAX_REPORTED, Mismatch, Tolerance, WrongMap, check};
pub use cpu::CpuBackend;
pub use input::{BackendError, Limits, MAX_HEAD_DIM, OpInput, Valid};
pub(crate) use input::{check_pools, f16_pool, f16_pool_mut, invalid};
pub use kind::BackendKind;
pub use ops::attention::AttnInput;
pub use ops::copy_blocks::CopyBlocksInput;
pub use ops::flash::FlashInput;
pub use ops::paged_append::PagedAppendInput;
pub use ops::paged_decode::{DecodeTables, PagedDecodeInput};
pub use ops::static_append::StaticAppendInput;
pub use ops::{Kernel, Op};

/// Where a timing ran: on the host's threads, or on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Device {
    /// The host CPU (rayon threads).
    Host,
    /// A GPU, timed with its own events.
    Gpu,
}

/// A paged-decode step, a read-only stream over the same K/V bytes (the roof of a kernel that only
/// reads them) and a copy of them (which reads and writes each byte), timed on the same device in one
/// run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeTiming {
    /// Seconds of one decode step.
    pub decode_s: f64,
    /// Seconds of one read-only pass over the K/V bytes the step reads.
    pub read_s: f64,
    /// Seconds of one copy of them (N bytes read and N written).
    pub copy_s: f64,
    /// Where it ran.
    pub device: Device,
}

impl DecodeTiming {
    /// GB/s of the decode, the read stream and the copy for `bytes` K/V bytes; the copy counts the
    /// bytes it reads and the bytes it writes (2 · bytes).
    pub fn gbs(&self, bytes: usize) -> (f64, f64, f64) {
        let b = bytes as f64 / 1e9;
        (b / self.decode_s, b / self.read_s, 2.0 * b / self.copy_s)
    }
}

/// A compute backend. Implement the `run_*` methods it supports (the others say "not implemented on
/// <backend>"); callers use the provided methods, which validate inputs first so that no backend (and
/// no kernel) ever sees inconsistent sizes.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// The device, in words ("CPU, 2 threads", "NVIDIA H200 (sm_90)").
    fn device(&self) -> String;
    /// How the `time_*` methods measure, in words (bench output).
    fn clock(&self) -> String {
        "host wall clock".to_string()
    }

    /// Floats of shared memory the flash kernel's tiles may take on this backend (its static
    /// allocation): the CUDA kernel's 40 KiB unless the backend's twin has less. The CPU runs the same
    /// tiling in Rust under the CUDA kernel's budget.
    fn flash_smem_floats(&self) -> usize {
        ops::flash::CUDA_SMEM_FLOATS
    }

    /// Time one paged-decode step against a read-only stream and a copy of the same K/V bytes on the
    /// same device (lesson 4's sweep, `kvscope bench`). The default times the host-in/host-out op, a
    /// parallel sum over the K/V pools themselves and a memcpy on the same threads, each back to back
    /// (`timing::host_decode_roofs`); a GPU backend times device-resident data against a reduction kernel
    /// and a device-to-device copy.
    fn time_paged_decode(&self, inp: &PagedDecodeInput, reps: usize) -> Result<DecodeTiming, BackendError> {
        let valid = Valid::check(inp, &self.limits())?;
        let mut failed = None;
        let (decode_s, read_s, copy_s) = timing::host_decode_roofs(
            reps,
            || {
                if let Err(e) = self.run_paged_decode(valid) {
                    failed = Some(e);
                }
            },
            f16_pool(inp.k_pool, "host timing")?,
            f16_pool(inp.v_pool, "host timing")?,
            inp.kv_bytes(),
            inp.kv_bytes(),
        );
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(DecodeTiming {
            decode_s,
            read_s,
            copy_s,
            device: Device::Host,
        })
    }
    /// Seconds of one fused attention forward (median of `reps`; a GPU backend times device-resident
    /// data), and whether it ran on the host (so a host GEMM is a fair baseline).
    fn time_attention_fused(&self, inp: &AttnInput, reps: usize) -> Result<(f64, bool), BackendError> {
        let valid = Valid::check(inp, &self.limits())?;
        let mut failed = None;
        let t = timing::median_time(reps, || match self.run_attention_fused(valid) {
            Ok(out) => {
                std::hint::black_box(out);
            }
            Err(e) => failed = Some(e),
        });
        match failed {
            Some(e) => Err(e),
            None => Ok((t.as_secs_f64(), true)),
        }
    }

    /// The error of an op this backend does not implement.
    fn not_implemented(&self, op: Op) -> BackendError {
        BackendError::NotImplemented {
            op: op.name(),
            backend: self.kind().name(),
        }
    }

    /// The on-chip shared memory the device reports, in bytes, and what the figure is (English, Chinese);
    /// `None` for backends that run on host memory (the CPU, and the shim, whose `__shared__` arrays
    /// are ordinary host memory).
    fn shared_memory(&self) -> Option<(u64, [&'static str; 2])> {
        None
    }

    /// The limits inputs are validated against on this backend.
    fn limits(&self) -> Limits {
        Limits {
            flash_smem_floats: self.flash_smem_floats(),
        }
    }

    // One `run_<op>` and one validating `<op>` per row of the op table.
    ops::op_table!(backend_methods);
}

/// `make()`'s text, made once per `key` for the life of the process (the kernel panel's display texts:
/// a kernel file with the common file it uses after it).
pub(crate) fn made_once(key: &'static str, make: impl FnOnce() -> String) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static MADE: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    made.entry(key).or_insert_with(|| Box::leak(make().into_boxed_str()))
}

/// Where a backend's kernel source lives, for the app's kernel panel.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// Path from the repository root, e.g. `kernels/attention.cu`.
    pub path: &'static str,
    /// The whole file.
    pub source: &'static str,
    /// The entry point shown first.
    pub entry: &'static str,
    /// Its 1-based line.
    pub line: usize,
}
