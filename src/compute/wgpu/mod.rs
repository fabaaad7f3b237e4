//! The wgpu backend: the WGSL twins of the CUDA kernels (`kernels/*.wgsl`), on any GPU wgpu drives
//! (Vulkan, Metal, DX12), software adapters such as lavapipe included.
//!
//! How it works: probing opens a device with WebGPU's default limits (256 invocations and 16 KiB of
//! workgroup memory per workgroup, at most 8 storage buffers per stage) and compiles every pipeline once,
//! inside validation error scopes, so a shader the adapter rejects becomes the reason the backend is
//! unavailable instead of a panic. The device and pipelines live for the process (`OnceLock`), and
//! buffers are reused through a pool (`pool.rs`). Each op uploads its inputs, dispatches the same geometry the WGSL header describes, copies the outputs into
//! mappable buffers and reads them back; `read` maps through a callback and polls, so the same code can
//! run asynchronously later (a web build).
//!
//! f16 K/V take one of two paths ([`F16Path`]): u32 pairs read with `unpack2x16float`, the baseline
//! that runs on every adapter, or `array<f16>` where the adapter has `SHADER_F16`. Only the small pool
//! snippet (`kernels/f16_{read,write}_{packed,native}.wgsl`) differs; the device string says which runs.

mod ops;
mod pool;
#[cfg(target_arch = "wasm32")]
pub mod replay;
mod sources;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use half::f16;

pub(crate) use ops::{AppendParams, FlashParams};
pub use pool::PoolStats;
pub(crate) use pool::Pooled;
use pool::{Kind, Pool};
pub use sources::{COMMON, DECODE_ROW, F16Path, Pools, WgslFile, files, kernel_source};

use crate::compute::timing::median_time;
use crate::compute::{Backend, BackendError};

/// The wgpu backend.
pub struct WgpuBackend {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    /// The compiled pipelines by entry point: every kernel's, or (a device that grades an exercise) the
    /// grading ops' files' first and any other file's when a dispatch first asks for it.
    pipelines: Mutex<HashMap<&'static str, wgpu::ComputePipeline>>,
    /// The kernel files replaced on this device (`(file name, text)`), for the files compiled later.
    edits: Vec<(String, String)>,
    /// The adapter's most workgroup memory (the device is opened with WebGPU's default 16 KiB).
    workgroup_storage: u32,
    f16: F16Path,
    pool: Arc<Pool>,
    /// Two timestamp slots (start of the first pass, end of the last), when the adapter has timestamp
    /// queries and `KVSCOPE_WGPU_CLOCK` is not `wall`.
    timestamps: Option<wgpu::QuerySet>,
}

static PROBE: OnceLock<Result<Arc<WgpuBackend>, String>> = OnceLock::new();

/// The wgpu backend, or why it is unavailable. Probed once per process (in the browser, by
/// [`open_web`] before the app starts: opening a device there must be awaited).
pub fn probe() -> Result<Arc<WgpuBackend>, String> {
    #[cfg(not(target_arch = "wasm32"))]
    return PROBE
        .get_or_init(|| {
            std::panic::catch_unwind(|| WgpuBackend::open(None))
                .unwrap_or_else(|_| Err("wgpu panicked while opening the device".into()))
                .map(Arc::new)
        })
        .clone();
    #[cfg(target_arch = "wasm32")]
    PROBE
        .get()
        .cloned()
        .unwrap_or_else(|| Err("WebGPU was not opened (the page starts the app through web::start)".into()))
}

/// Open WebGPU in the browser (awaited: the page has one thread and `request_adapter` answers through
/// the event loop), and remember the result for [`probe`]. Returns it, for the page's status line.
#[cfg(target_arch = "wasm32")]
pub async fn open_web() -> Result<Arc<WgpuBackend>, String> {
    let r = open_async(None, &[], None).await.map(Arc::new);
    let _ = PROBE.set(r.clone());
    r
}

/// Open WebGPU in the browser with some kernel files replaced (`(file name, text)`): an exercise's
/// edit, graded on a device of its own (`crate::exercises`), with the pipelines of the files `only`
/// names compiled now (all for `None`) and the others when first asked for.
#[cfg(target_arch = "wasm32")]
pub async fn open_web_edited(edits: &[(String, String)], only: Option<&[&str]>) -> Result<WgpuBackend, String> {
    open_async(None, edits, only).await
}

/// The backend table's probe.
pub fn probe_backend() -> Result<Arc<dyn Backend>, String> {
    probe().map(|b| b as Arc<dyn Backend>)
}

impl WgpuBackend {
    /// Open a device and compile every pipeline for `f16` (or, for `None`, the native path where the
    /// adapter has shader-f16 and `KVSCOPE_WGPU_F16` is not `packed`, else the packed one).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(f16: Option<F16Path>) -> Result<WgpuBackend, String> {
        pollster::block_on(open_async(f16, &[], None))
    }

    /// [`Self::open`] with some kernel files replaced (`(file name, text)`): an exercise's edit, graded
    /// on a device of its own (`crate::exercises`). Only the pipelines of the files `only` names are
    /// compiled now (all for `None`), the others when a dispatch first asks for one: grading runs one
    /// op's suites, and compiling every kernel was most of a grade's time.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_edited(
        f16: Option<F16Path>,
        edits: &[(String, String)],
        only: Option<&[&str]>,
    ) -> Result<WgpuBackend, String> {
        pollster::block_on(open_async(f16, edits, only))
    }

    /// The pipeline of `entry`, compiled now if its file was left for later (a device that grades an
    /// exercise compiles the grading ops' files first; a suite may call another op's kernel).
    fn pipeline(&self, entry: &str) -> Result<wgpu::ComputePipeline, BackendError> {
        let mut p = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if !p.contains_key(entry)
            && let Some(file) = files().into_iter().find(|f| f.entries.contains(&entry))
        {
            compile(&self.device, &file, self.f16, &self.edits, &mut p);
        }
        p.get(entry)
            .cloned()
            .ok_or_else(|| dev(format!("pipeline {entry} is missing")))
    }

    /// Which f16 path runs.
    pub fn f16_path(&self) -> F16Path {
        self.f16
    }

    /// How many buffers this backend has created and how often it reused one.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }
}

/// Open a device and compile every pipeline (of the files `only` names, when it names some): the one
/// path, awaited in the browser and blocked on natively.
async fn open_async(
    f16: Option<F16Path>,
    edits: &[(String, String)],
    only: Option<&[&str]>,
) -> Result<WgpuBackend, String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    #[cfg(not(target_arch = "wasm32"))]
    {
        desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    }
    // WebGL2 has no compute shaders: in the browser only WebGPU can run the kernels.
    #[cfg(target_arch = "wasm32")]
    {
        desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    }
    let instance = wgpu::Instance::new(desc);
    #[cfg(not(target_arch = "wasm32"))]
    let hint = "install a Vulkan driver (mesa-vulkan-drivers gives lavapipe)";
    #[cfg(target_arch = "wasm32")]
    let hint = "this browser offers no WebGPU; the lessons compute on the CPU backend";
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions::default())
        .await
        .map_err(|e| format!("no GPU adapter with compute shaders ({e}); {hint}"))?;
    let info = adapter.get_info();
    let has_f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
    let has_timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY)
        && std::env::var("KVSCOPE_WGPU_CLOCK").as_deref() != Ok("wall");
    let f16 = f16.unwrap_or(
        if has_f16 && std::env::var("KVSCOPE_WGPU_F16").as_deref() != Ok("packed") {
            F16Path::Native
        } else {
            F16Path::Packed
        },
    );
    if f16 == F16Path::Native && !has_f16 {
        return Err(format!("{} has no shader-f16 feature", info.name));
    }
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("kvscope compute"),
            required_features: if f16 == F16Path::Native {
                wgpu::Features::SHADER_F16
            } else {
                wgpu::Features::empty()
            } | if has_timestamps {
                wgpu::Features::TIMESTAMP_QUERY
            } else {
                wgpu::Features::empty()
            },
            required_limits: wgpu::Limits::default(),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            format!(
                "{} ({:?}) cannot give WebGPU's default limits: {e}",
                info.name, info.backend
            )
        })?;
    let mut pipelines = HashMap::new();
    for file in files() {
        if only.is_some_and(|o| !o.contains(&file.file)) {
            continue;
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        compile(&device, &file, f16, edits, &mut pipelines);
        if let Some(e) = scope.pop().await {
            return Err(format!(
                "kernels/{} does not compile on {}: {}",
                file.file,
                info.name,
                describe(&e)
            ));
        }
    }
    let timestamps = has_timestamps.then(|| {
        device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("kvscope timing"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        })
    });
    Ok(WgpuBackend {
        workgroup_storage: adapter.limits().max_compute_workgroup_storage_size,
        timestamps,
        device,
        queue,
        info,
        pipelines: Mutex::new(pipelines),
        edits: edits.to_vec(),
        f16,
        pool: Arc::default(),
    })
}

/// Compile `file` (with `edits` applied) into a module and a pipeline per entry point, into `out`.
fn compile(
    device: &wgpu::Device,
    file: &WgslFile,
    f16: F16Path,
    edits: &[(String, String)],
    out: &mut HashMap<&'static str, wgpu::ComputePipeline>,
) {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(file.file),
        source: wgpu::ShaderSource::Wgsl(
            file.module_with(f16, crate::cache::KvDtype::F16, edits)
                .expect("the f16 dtype has WGSL pool snippets")
                .into(),
        ),
    });
    for &entry in &file.entries {
        let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        out.insert(entry, p);
    }
}

/// A wgpu error with its details (a validation error's description names the line and column).
fn describe(e: &wgpu::Error) -> String {
    match e {
        wgpu::Error::Validation { description, .. } => description.trim().to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn dev(e: impl std::fmt::Display) -> BackendError {
    BackendError::Device(e.to_string())
}

pub(crate) fn u(n: usize) -> Result<u32, BackendError> {
    u32::try_from(n).map_err(|_| BackendError::InvalidInput(format!("{n} does not fit the shaders' 32-bit indices")))
}

/// f16 values as u32 words (two per word, element 2w in the low half), padded to a whole word.
pub(crate) fn pack_f16(x: &[f16]) -> Vec<u32> {
    x.chunks(2)
        .map(|c| c[0].to_bits() as u32 | (c.get(1).map_or(0, |h| h.to_bits() as u32) << 16))
        .collect()
}

pub(crate) fn unpack_f16(words: &[u32], out: &mut [f16]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = f16::from_bits((words[i / 2] >> ((i % 2) * 16)) as u16);
    }
}

/// One dispatch: a pipeline, its bindings (binding number, buffer) and the workgroup counts.
pub(crate) struct Dispatch<'a> {
    /// The entry point (its pipeline), its workgroups (`grid`) and `@workgroup_size` (`block`).
    pub(crate) dims: crate::compute::launch::LaunchDims,
    /// (binding number, buffer).
    pub(crate) bindings: Vec<(u32, &'a Pooled)>,
}

impl WgpuBackend {
    /// A pooled buffer of `kind` holding `bytes` (written through the queue, so after every earlier
    /// submission). A binding may not be empty: empty data gets one zero word.
    fn filled(&self, kind: Kind, bytes: &[u8]) -> Pooled {
        let zero = [0u8; 4];
        let contents = if bytes.is_empty() { &zero[..] } else { bytes };
        #[cfg(target_arch = "wasm32")]
        replay::uploaded(contents);
        let b = self.pool.take(&self.device, kind, contents.len() as u64);
        self.queue.write_buffer(b.buffer(), 0, contents);
        b
    }

    pub(crate) fn storage<T: bytemuck::Pod>(&self, data: &[T]) -> Pooled {
        self.filled(Kind::Storage, bytemuck::cast_slice(data))
    }

    pub(crate) fn zeros(&self, words: usize) -> Pooled {
        self.storage(&vec![0u32; words.max(1)])
    }

    pub(crate) fn uniform<T: bytemuck::Pod>(&self, params: &T) -> Pooled {
        self.filled(Kind::Uniform, bytemuck::bytes_of(params))
    }

    /// Encode `dispatches` in order in one submission, then read `outputs` back (each `len` elements
    /// of 4 bytes). Reading maps through a callback and polls the device. The dispatches are reported as
    /// launches (`compute::launch::report`).
    pub(crate) fn run(
        &self,
        dispatches: &[Dispatch],
        outputs: &[(&Pooled, usize)],
    ) -> Result<Vec<Vec<u32>>, BackendError> {
        for d in dispatches {
            crate::compute::launch::ran_wgsl(&d.dims);
        }
        // In the browser: the readback of this call if an earlier pass of the computation recorded it,
        // else submit it and say the computation must wait (`replay`).
        #[cfg(target_arch = "wasm32")]
        let key = replay::key(dispatches.iter().map(|d| &d.dims), outputs.iter().map(|o| o.1));
        #[cfg(target_arch = "wasm32")]
        if let Some(words) = replay::recorded(&key)? {
            return Ok(words);
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = self.encode(dispatches, None)?;
        let mut staging = Vec::new();
        for (buf, len) in outputs {
            let size = (len.max(&1) * 4) as u64;
            let s = self.pool.take(&self.device, Kind::Staging, size);
            encoder.copy_buffer_to_buffer(buf.buffer(), 0, s.buffer(), 0, size);
            staging.push((s, *len));
        }
        let idx = self.queue.submit([encoder.finish()]);
        #[cfg(not(target_arch = "wasm32"))]
        {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(dev(format!("wgpu rejected the dispatch: {}", describe(&e))));
            }
            let mut result = Vec::new();
            for (s, len) in staging {
                result.push(self.read(s, len, idx.clone())?);
            }
            Ok(result)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = idx;
            Err(replay::pend(key, async move {
                if let Some(e) = scope.pop().await {
                    return Err(dev(format!("wgpu rejected the dispatch: {}", describe(&e))));
                }
                let mut result = Vec::new();
                for (s, len) in staging {
                    result.push(replay::read(s, len).await?);
                }
                Ok(result)
            }))
        }
    }

    /// Submit `dispatches` and `copies` (source, destination, bytes) and wait until the device is done:
    /// what the timings measure. The browser cannot wait inside a frame, so the web build measures no
    /// GPU time (the lessons show their stored measurements).
    pub(crate) fn submit_wait(
        &self,
        dispatches: &[Dispatch],
        copies: &[(&Pooled, &Pooled, u64)],
    ) -> Result<(), BackendError> {
        #[cfg(target_arch = "wasm32")]
        if cfg!(target_arch = "wasm32") {
            let _ = (dispatches, copies);
            return Err(dev(replay::NO_TIMING));
        }
        let mut encoder = self.encode(dispatches, None)?;
        for (src, dst, bytes) in copies {
            encoder.copy_buffer_to_buffer(src.buffer(), 0, dst.buffer(), 0, *bytes);
        }
        let idx = self.queue.submit([encoder.finish()]);
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: Some(std::time::Duration::from_secs(120)),
            })
            .map_err(dev)?;
        Ok(())
    }

    /// Seconds the device spent on one submission of `dispatches` (median of `reps`, after one warm-up):
    /// from timestamps written at the start of the first pass and the end of the last where the adapter
    /// has timestamp queries, else on the host's wall clock around the submission and its wait.
    pub(crate) fn time_dispatches(&self, dispatches: &[Dispatch], reps: usize) -> Result<f64, BackendError> {
        #[cfg(target_arch = "wasm32")]
        if cfg!(target_arch = "wasm32") {
            let _ = (dispatches, reps);
            return Err(dev(replay::NO_TIMING));
        }
        let Some(qs) = &self.timestamps else {
            let mut failed = None;
            let s = median_time(reps, || {
                if let Err(e) = self.submit_wait(dispatches, &[]) {
                    failed = Some(e);
                }
            });
            return failed.map_or(Ok(s.as_secs_f64()), Err);
        };
        let once = || -> Result<f64, BackendError> {
            let mut encoder = self.encode(dispatches, Some(qs))?;
            let resolve = self.pool.take(&self.device, Kind::Resolve, 16);
            let staging = self.pool.take(&self.device, Kind::Staging, 16);
            encoder.resolve_query_set(qs, 0..2, resolve.buffer(), 0);
            encoder.copy_buffer_to_buffer(resolve.buffer(), 0, staging.buffer(), 0, 16);
            let idx = self.queue.submit([encoder.finish()]);
            let w = self.read(staging, 4, idx)?;
            let (t0, t1) = (
                u64::from(w[0]) | (u64::from(w[1]) << 32),
                u64::from(w[2]) | (u64::from(w[3]) << 32),
            );
            Ok(t1.saturating_sub(t0) as f64 * f64::from(self.queue.get_timestamp_period()) * 1e-9)
        };
        once()?;
        let mut t = (0..reps.max(1)).map(|_| once()).collect::<Result<Vec<f64>, _>>()?;
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }

    /// How the timings are taken, in words (bench output).
    fn clock_words(&self) -> String {
        match self.timestamps {
            Some(_) => "timestamp queries (the copy: host wall clock)".to_string(),
            None => "host wall clock around each submission (no timestamp queries used)".to_string(),
        }
    }

    /// Encode one compute pass per dispatch; with `ts`, timestamps 0 and 1 mark the start of the first
    /// pass and the end of the last.
    fn encode(
        &self,
        dispatches: &[Dispatch],
        ts: Option<&wgpu::QuerySet>,
    ) -> Result<wgpu::CommandEncoder, BackendError> {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let last = dispatches.len().saturating_sub(1);
        for (i, d) in dispatches.iter().enumerate() {
            let pipeline = self.pipeline(d.dims.entry)?;
            let pipeline = &pipeline;
            let layout = pipeline.get_bind_group_layout(0);
            let entries: Vec<wgpu::BindGroupEntry> = d
                .bindings
                .iter()
                .map(|(b, buf)| wgpu::BindGroupEntry {
                    binding: *b,
                    resource: buf.binding(),
                })
                .collect();
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(d.dims.entry),
                layout: &layout,
                entries: &entries,
            });
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(d.dims.entry),
                timestamp_writes: ts.filter(|_| i == 0 || i == last).map(|query_set| {
                    wgpu::ComputePassTimestampWrites {
                        query_set,
                        beginning_of_pass_write_index: (i == 0).then_some(0),
                        end_of_pass_write_index: (i == last).then_some(1),
                    }
                }),
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(d.dims.grid[0], d.dims.grid[1], d.dims.grid[2]);
        }
        Ok(encoder)
    }

    /// Read `len` words of a staging buffer once submission `idx` is done. The buffer goes back to the
    /// pool only when it was read and unmapped.
    fn read(&self, staging: Pooled, len: usize, idx: wgpu::SubmissionIndex) -> Result<Vec<u32>, BackendError> {
        let buf = staging.buffer();
        let slice = buf.slice(..staging.bytes());
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| drop(tx.send(r)));
        let mapped = self
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: Some(std::time::Duration::from_secs(120)),
            })
            .map_err(dev)
            .and_then(|_| rx.recv().map_err(dev)?.map_err(dev));
        if let Err(e) = mapped {
            staging.discard();
            return Err(e);
        }
        let words = match slice.get_mapped_range() {
            Ok(data) => Ok(bytemuck::cast_slice::<u8, u32>(&data)[..len].to_vec()),
            Err(e) => Err(dev(e)),
        };
        buf.unmap();
        words
    }
}

pub(crate) fn f32s(words: Vec<u32>) -> Vec<f32> {
    bytemuck::cast_vec(words)
}
