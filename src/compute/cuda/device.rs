//! The CUDA backend: `kernels/*.cu` compiled by NVRTC at run time for the device's compute capability
//! and launched through cudarc.
//!
//! How it works: probing goes driver library → context → NVRTC → compile → load, and stops at the
//! first thing missing with a reason a user can act on. cudarc loads libcuda and libnvrtc with
//! `dlopen` and panics (rather than returning an error) when a library or one of its symbols is
//! missing, so every probing call runs under `catch_unwind` with a silent panic hook. Compiled modules
//! are kept for the life of the process (one probe per process, see [`probe`]).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig, PushKernelArg,
    ValidAsZeroBits, sys,
};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};

use super::entries::{Entries, Kernels, entry_is};
use super::sources::{KernelFile, MEASURING_ENTRIES, files};
use crate::compute::launch::{self, LaunchDims};
use crate::compute::ops::attention_fused::cuda as fused;
use crate::compute::{AttnInput, Backend, BackendError, Valid};

/// Run `f`, turning a panic into `None` without printing it.
fn quietly<T>(f: impl FnOnce() -> T) -> Option<T> {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(f)).ok();
    std::panic::set_hook(prev);
    r
}

fn driver_error(what: &str, e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{what}: {name} {text}").trim_end().to_string()
}

/// The file names cudarc asks the dynamic loader for when it loads NVRTC, in its order. They come from
/// the crate's `cuda-12080` feature: `libnvrtc.so`, then `libnvrtc.so.12` and older; CUDA 13's
/// `libnvrtc.so.13` is not among them, so it is loaded through a link named `libnvrtc.so` on
/// `LD_LIBRARY_PATH` (`scripts/gpu-check.sh` makes one). The 12.8 bindings call only functions NVRTC 13
/// still has (create, compile, log, PTX, destroy, version), each looked up when first called.
pub fn nvrtc_names() -> Vec<String> {
    let mut names = cudarc::get_lib_name_candidates("nvrtc");
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// Whether libnvrtc can be loaded, or why not.
pub fn nvrtc_status() -> Result<(), String> {
    // SAFETY: only dlopens candidate library names and drops them; panics are caught.
    match quietly(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }) {
        Some(true) => Ok(()),
        Some(false) => Err(format!(
            "NVRTC not found: none of {} is on the loader's path (install the CUDA toolkit or the nvidia-cuda-nvrtc-cu12 wheel and put its lib folder on LD_LIBRARY_PATH; for CUDA 13's libnvrtc.so.13, a link to it named libnvrtc.so)",
            nvrtc_names().join(", ")
        )),
        None => Err("NVRTC was found but could not be loaded".into()),
    }
}

/// The NVRTC this process uses: its version and the file the loader mapped, e.g.
/// `NVRTC 13.0 (/usr/local/cuda/lib64/libnvrtc.so.13.0.88)`.
pub fn nvrtc_loaded() -> Result<String, String> {
    nvrtc_status()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes one int through each pointer, both valid for the call; the library
    // was found above, and a missing symbol's panic is caught.
    let r = quietly(|| unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) })
        .ok_or("NVRTC was loaded but has no nvrtcVersion")?;
    if r != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcVersion failed: {r:?}"));
    }
    let file = std::fs::read_to_string("/proc/self/maps").ok().and_then(|maps| {
        maps.lines().find_map(|l| {
            let path = l.split_whitespace().nth(5)?;
            let name = std::path::Path::new(path).file_name()?.to_str()?;
            name.starts_with("libnvrtc.so").then(|| path.to_string())
        })
    });
    Ok(format!(
        "NVRTC {major}.{minor} ({})",
        file.as_deref().unwrap_or("file not known")
    ))
}

/// Folders that may hold `cuda_fp16.h`: `KVSCOPE_CUDA_INCLUDE`, `$CUDA_HOME/include`,
/// `$CUDA_PATH/include`, `/usr/local/cuda/include` and `/usr/include`, those that exist.
pub fn include_dirs() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if let Ok(p) = std::env::var("KVSCOPE_CUDA_INCLUDE") {
        v.extend(std::env::split_paths(&p).map(|p| p.display().to_string()));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(p) = std::env::var(var) {
            v.push(format!("{p}/include"));
        }
    }
    v.extend(["/usr/local/cuda/include".to_string(), "/usr/include".to_string()]);
    v.retain(|d| std::path::Path::new(d).join("cuda_fp16.h").exists());
    v
}

/// Compile one kernel file with NVRTC for `arch` (e.g. `compute_90`). The error carries the full log.
pub fn compile(file: &KernelFile, arch: &str) -> Result<Ptx, String> {
    nvrtc_status()?;
    let opts = CompileOptions {
        include_paths: include_dirs(),
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(file.file.to_string()),
        ..Default::default()
    };
    let r = quietly(|| compile_ptx_with_opts(file.compile_source(), opts))
        .ok_or_else(|| format!("NVRTC crashed while compiling kernels/{}", file.file))?;
    r.map_err(|e| match e {
        CompileError::CompileError { log, .. } => format!(
            "NVRTC failed to compile kernels/{} for {arch}:\n{}",
            file.file,
            log.to_string_lossy()
        ),
        other => format!("NVRTC failed on kernels/{}: {other:?}", file.file),
    })
}

/// The CUDA backend, ready to launch.
pub struct CudaBackend {
    pub(super) stream: Arc<CudaStream>,
    pub(super) device: String,
    pub(super) funcs: HashMap<&'static str, CudaFunction>,
    pub(super) ctx: Arc<CudaContext>,
    /// Shared memory per SM, as the driver reports it.
    pub(super) smem_per_sm: Option<u64>,
}

static PROBE: OnceLock<Result<Arc<CudaBackend>, String>> = OnceLock::new();

/// The CUDA backend, or why it is unavailable. Probed once per process; the modules stay loaded.
pub fn probe() -> Result<Arc<CudaBackend>, String> {
    PROBE.get_or_init(|| probe_uncached().map(Arc::new)).clone()
}

fn probe_uncached() -> Result<CudaBackend, String> {
    // SAFETY: only dlopens candidate library names and drops them; panics are caught.
    match quietly(|| unsafe { sys::is_culib_present() }) {
        Some(true) => {}
        Some(false) => return Err("libcuda not found (no NVIDIA driver on this machine)".into()),
        None => return Err("libcuda was found but could not be loaded".into()),
    }
    let ctx = match quietly(|| CudaContext::new(0)) {
        Some(Ok(ctx)) => ctx,
        Some(Err(e)) => return Err(driver_error("the CUDA driver is present but has no usable device", e)),
        None => {
            return Err(
                "the CUDA driver library lacks functions kvscope needs (a driver older than CUDA 12.8?)".into(),
            );
        }
    };
    let name = ctx.name().map_err(|e| driver_error("cuDeviceGetName failed", e))?;
    let (maj, min) = ctx
        .compute_capability()
        .map_err(|e| driver_error("reading the compute capability failed", e))?;
    let arch = format!("compute_{maj}{min}");
    let smem_per_sm = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
        .ok()
        .and_then(|b| u64::try_from(b).ok());
    let mut funcs = HashMap::new();
    for file in files() {
        let ptx = compile(&file, &arch)?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| driver_error(&format!("loading kernels/{} failed", file.file), e))?;
        let op_entries = crate::compute::Kernel::ALL
            .into_iter()
            .filter(|k| k.kernel_file() == file.file)
            .flat_map(|k| k.cuda_entries().iter().copied());
        let measuring = MEASURING_ENTRIES
            .iter()
            .filter(|(f, _)| *f == file.file)
            .map(|(_, e)| *e);
        for entry in op_entries.chain(measuring) {
            let f = module
                .load_function(entry)
                .map_err(|e| driver_error(&format!("kernel {entry} not found"), e))?;
            funcs.insert(entry, f);
        }
    }
    Ok(CudaBackend {
        stream: ctx.default_stream(),
        device: format!("{name} (sm_{maj}{min})"),
        smem_per_sm,
        funcs,
        ctx,
    })
}

pub(crate) fn dev(e: DriverError) -> BackendError {
    BackendError::Device(driver_error("CUDA call failed", e))
}

pub(crate) fn cfg(l: &LaunchDims) -> LaunchConfig {
    launch::ran_cuda(l);
    LaunchConfig {
        grid_dim: (l.grid[0], l.grid[1], l.grid[2]),
        block_dim: (l.block[0], l.block[1], l.block[2]),
        shared_mem_bytes: 0,
    }
}

impl Kernels for CudaBackend {
    const NAME: &'static str = "CUDA";
    type Buf<T: DeviceRepr + ValidAsZeroBits + Copy + Default> = CudaSlice<T>;
    /// An empty slice uploads one zero: a zero-length allocation is not a buffer cudarc can pass.
    fn upload<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(
        &self,
        host: &[T],
    ) -> Result<CudaSlice<T>, BackendError> {
        if host.is_empty() {
            return self.zeros(1);
        }
        self.stream().clone_htod(host).map_err(dev)
    }
    fn zeros<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, n: usize) -> Result<CudaSlice<T>, BackendError> {
        self.stream().alloc_zeros(n.max(1)).map_err(dev)
    }
    fn download<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(
        &self,
        buf: &CudaSlice<T>,
        host: &mut [T],
    ) -> Result<(), BackendError> {
        if host.is_empty() {
            return Ok(());
        }
        self.stream().memcpy_dtoh(buf, host).map_err(dev)
    }
    fn to_vec<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(
        &self,
        buf: &CudaSlice<T>,
    ) -> Result<Vec<T>, BackendError> {
        self.stream().clone_dtoh(buf).map_err(dev)
    }
    fn budget(&self, _: &[LaunchDims]) -> Result<(), BackendError> {
        Ok(())
    }
}

// `impl Entries for CudaBackend`: each entry's launch pushes its arguments to cudarc in the list's order.
include!(concat!(env!("OUT_DIR"), "/cuda_entries_gpu.rs"));

impl CudaBackend {
    /// The loaded kernel `entry`.
    pub(crate) fn func(&self, entry: &str) -> Result<&CudaFunction, BackendError> {
        self.funcs
            .get(entry)
            .ok_or_else(|| BackendError::Device(format!("kernel {entry} is not loaded")))
    }

    /// The stream every launch goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Milliseconds of one fused attention launch on device-resident Q/K/V (mean of `reps`).
    pub fn time_attention_fused_ms(&self, inp: &AttnInput, reps: usize) -> Result<f64, BackendError> {
        let checked = Valid::check(inp, &self.limits())?;
        let inp: &AttnInput = &checked;
        let (h, _, t, hd) = inp.dims();
        let qkv = fused::upload_qkv(self, inp)?;
        let mut out: CudaSlice<f32> = self.stream.alloc_zeros(h * t * hd).map_err(dev)?;
        fused::launch(self, &qkv, &mut out, inp)?; // warm-up
        let ev = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(dev)
        };
        let (t0, t1) = (ev()?, ev()?);
        t0.record(&self.stream).map_err(dev)?;
        for _ in 0..reps {
            fused::launch(self, &qkv, &mut out, inp)?;
        }
        t1.record(&self.stream).map_err(dev)?;
        Ok(t0.elapsed_ms(&t1).map_err(dev)? as f64 / reps as f64)
    }
}
