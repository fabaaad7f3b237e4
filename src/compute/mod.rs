//! The compute interface: the [`Backend`] trait, its CPU implementation, the f64 reference and the
//! shared checker.
//!
//! Every backend takes host tensors and returns host tensors, so lessons, the CLI and tests call them
//! the same way. Every op takes one input struct (`compute::ops::*`), which is validated once, in the
//! trait's provided methods, before any backend code (and so before any kernel launch) sees it. A
//! backend that cannot run is a [`BackendStatus`] with a reason, never a panic; an op a backend does not
//! implement yet is a [`BackendError::NotImplemented`], shown like any other reason. The backends are
//! one table ([`backend_table!`] below): adding one is a folder and a row.

mod check;
mod cpu;
#[allow(unsafe_code)]
pub mod cuda;
pub mod launch;
pub mod ops;
pub mod reference;
pub mod suite;
pub mod timing;
pub mod wgpu;

use std::sync::Arc;

pub use check::{CheckReport, MAX_REPORTED, Mismatch, Tolerance, check};
pub use cpu::CpuBackend;
pub use ops::attention::AttnInput;
pub use ops::copy_blocks::CopyBlocksInput;
pub use ops::flash::FlashInput;
pub use ops::paged_append::PagedAppendInput;
pub use ops::paged_decode::{DecodeTables, PagedDecodeInput};
pub use ops::static_append::StaticAppendInput;
pub use ops::{Kernel, Op};

/// Why a backend call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The inputs do not fit together.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The device or its driver failed.
    #[error("device error: {0}")]
    Device(String),
    /// This backend has no implementation of the op yet (an op can land on the CPU first and get
    /// its CUDA and WGSL twins later).
    #[error("`{op}` is not implemented on the {backend} backend yet")]
    NotImplemented {
        /// The `Backend` method.
        op: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
    /// This backend's kernels have no read path for the pools' KV dtype (`kernels/kv/<dtype>.*`).
    #[error("the {backend} backend has no kernels for {dtype} KV pools yet")]
    UnsupportedDtype {
        /// The dtype's name.
        dtype: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
}

/// The f16 values of a read-only pool view, or the error a backend whose kernels have no read path for
/// the pool's dtype gives (today every GPU-side kernel reads f16 only; the CPU backend reads every dtype
/// through its format).
pub(crate) fn f16_pool<'a>(
    p: crate::cache::PoolRef<'a>,
    backend: &'static str,
) -> Result<&'a [half::f16], BackendError> {
    p.as_f16().ok_or(BackendError::UnsupportedDtype {
        dtype: p.dtype.name(),
        backend,
    })
}

/// [`f16_pool`] for a writable view.
pub(crate) fn f16_pool_mut<'a>(
    p: crate::cache::PoolMut<'a>,
    backend: &'static str,
) -> Result<&'a mut [half::f16], BackendError> {
    let dtype = p.dtype.name();
    p.into_f16().ok_or(BackendError::UnsupportedDtype { dtype, backend })
}

/// Both pools hold the shape's dtype, its `numel` values and its scales.
pub(crate) fn check_pools(s: crate::cache::PagedShape, pools: [crate::cache::PoolRef; 2]) -> Result<(), BackendError> {
    for p in pools {
        if p.dtype != s.dtype {
            return Err(invalid(format!(
                "the shape says {} pools, a pool holds {}",
                s.dtype, p.dtype
            )));
        }
        if p.len() != s.numel() || p.scales.len() != s.num_scales() {
            return Err(invalid(format!(
                "pools must have {} values and {} scales",
                s.numel(),
                s.num_scales()
            )));
        }
    }
    Ok(())
}

pub(crate) fn invalid(msg: impl Into<String>) -> BackendError {
    BackendError::InvalidInput(msg.into())
}

/// The largest head_dim the kernels accept (their shared-memory arrays are sized for it).
pub const MAX_HEAD_DIM: usize = 256;

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

/// What a backend's kernels can hold, for validation (see [`OpInput`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Floats of shared memory the flash kernel's tiles may take ([`Backend::flash_smem_floats`]).
    pub flash_smem_floats: usize,
}

/// An op's input: what validation checks before any backend sees it.
pub trait OpInput {
    /// Whether the sizes fit together (and fit the backend's `limits`).
    fn validate_for(&self, limits: &Limits) -> Result<(), BackendError>;
    /// Whether the op has nothing to do (no launch at all), e.g. an empty list of copies.
    fn nothing_to_do(&self) -> bool {
        false
    }
}

impl<T: OpInput + ?Sized> OpInput for &T {
    fn validate_for(&self, limits: &Limits) -> Result<(), BackendError> {
        (**self).validate_for(limits)
    }
    fn nothing_to_do(&self) -> bool {
        (**self).nothing_to_do()
    }
}

/// An op input that passed validation. Only validation makes one (`Valid::check` is private to the
/// crate), so a backend's `run_<op>`, which takes it, cannot be reached with unchecked sizes from safe
/// code: the CUDA shim and the kernels index by these sizes.
#[derive(Debug, Clone, Copy)]
pub struct Valid<T>(T);

impl<T: OpInput> Valid<T> {
    /// Validate `inp` against `limits`.
    pub(crate) fn check(inp: T, limits: &Limits) -> Result<Self, BackendError> {
        inp.validate_for(limits)?;
        Ok(Valid(inp))
    }

    /// Whether the op has nothing to do.
    pub fn nothing_to_do(&self) -> bool {
        self.0.nothing_to_do()
    }
}

impl<T> Valid<T> {
    /// The checked input, for a backend that needs it by value (its mutable buffers).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Valid<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
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

/// Declare the backends: each row names the variant, its name in the UI/CLI/saved state, and its
/// [`BackendInfo`] fields. `BackendKind`, `BackendKind::ALL` and [`BACKENDS`] all come from here.
macro_rules! backend_table {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal { $($field:ident: $value:expr),* $(,)? } )*) => {
        /// The backends kvscope knows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
        pub enum BackendKind {
            $( $(#[$doc])* #[serde(rename = $name)] #[value(name = $name)] $variant, )*
        }

        impl BackendKind {
            /// Every kind, in the order the UI lists them.
            pub const ALL: [BackendKind; [$($name),*].len()] = [$(BackendKind::$variant),*];

            /// Short name.
            pub fn name(self) -> &'static str {
                match self {
                    $(BackendKind::$variant => $name,)*
                }
            }
        }

        /// The backend table, in [`BackendKind::ALL`] order.
        pub static BACKENDS: [BackendInfo; [$($name),*].len()] = [
            $(BackendInfo { kind: BackendKind::$variant, $($field: $value),* },)*
        ];
    };
}

backend_table! {
    /// Rust on the CPU (f32, rayon); the reference path.
    Cpu = "cpu" {
        probe: cpu::probe,
        slow_probe: false,
        simulated: false,
        kernel_source: |_| None,
        ran: [
            "the CPU backend ran the same op in Rust; choose cuda or cuda-sim to run this source, wgpu for its WGSL twin",
            "CPU 后端用 Rust 计算同一运算；选择 cuda 或 cuda-sim 运行这份源码，选择 wgpu 运行它的 WGSL 孪生版本",
        ],
    }
    /// NVIDIA GPU through cudarc + NVRTC.
    Cuda = "cuda" {
        probe: cuda::probe_backend,
        slow_probe: true,
        simulated: false,
        kernel_source: cuda::sources::kernel_source,
        ran: ["ran on the GPU through NVRTC + cudarc", "经 NVRTC + cudarc 在 GPU 上运行"],
    }
    /// The same `.cu` sources run on CPU threads by the C++ shim (small shapes only).
    CudaSim = "cuda-sim" {
        probe: cuda::probe_sim,
        slow_probe: false,
        simulated: true,
        kernel_source: cuda::sources::kernel_source,
        ran: [
            "this exact source ran on CPU threads (cuda-sim shim)",
            "这份源码在 CPU 线程上运行（cuda-sim 模拟）",
        ],
    }
    /// The WGSL twins of the kernels on any GPU wgpu drives (Vulkan, Metal, DX12; lavapipe too).
    Wgpu = "wgpu" {
        probe: self::wgpu::probe_backend,
        slow_probe: true,
        simulated: false,
        kernel_source: self::wgpu::kernel_source,
        ran: [
            "this WGSL twin ran through wgpu on the adapter in the status bar",
            "这份 WGSL 孪生 kernel 经 wgpu 在状态栏所示的适配器上运行",
        ],
    }
}

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
