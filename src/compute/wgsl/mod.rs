//! The wgpu backend: the WGSL twins of the CUDA kernels (`kernels/*.wgsl`), on any GPU wgpu drives
//! (Vulkan, Metal, DX12), software adapters such as lavapipe included.
//!
//! How it works: probing opens a device with WebGPU's default limits (256 invocations and 16 KiB of
//! workgroup memory per workgroup, at most 8 storage buffers per stage) and compiles every pipeline once,
//! inside validation error scopes, so a shader the adapter rejects becomes the reason the backend is
//! unavailable instead of a panic. The device and pipelines live for the process (`OnceLock`). Each op
//! uploads its inputs, dispatches the same geometry the WGSL header describes, copies the outputs into
//! mappable buffers and reads them back; `read` maps through a callback and polls, so the same code can
//! run asynchronously later (a web build).
//!
//! f16 K/V take one of two paths ([`F16Path`]): u32 pairs read with `unpack2x16float`, the baseline
//! that runs on every adapter, or `array<f16>` where the adapter has `SHADER_F16`. Only the small pool
//! snippet (`kernels/f16_{read,write}_{packed,native}.wgsl`) differs; the device string says which runs.

mod sources;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use half::f16;
use ndarray::Array3;
use wgpu::util::DeviceExt;

pub use sources::{F16Path, FILES, kernel_source};

use crate::compute::timing::median_time;
use crate::compute::{
    AttnInput, Backend, BackendError, BackendKind, DecodeTiming, Device, PagedAppendInput, PagedDecodeInput,
    StaticAppendInput,
};
use crate::math::AttnCore;

/// Tokens per partition of the WGSL split-context decode (`PART` in `kernels/paged_attention.wgsl`).
pub const PARTITION: usize = 256;

/// The wgpu backend.
pub struct WgpuBackend {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pipelines: HashMap<&'static str, wgpu::ComputePipeline>,
    f16: F16Path,
}

static PROBE: OnceLock<Result<Arc<WgpuBackend>, String>> = OnceLock::new();

/// The wgpu backend, or why it is unavailable. Probed once per process.
pub fn probe() -> Result<Arc<WgpuBackend>, String> {
    PROBE
        .get_or_init(|| {
            std::panic::catch_unwind(|| WgpuBackend::open(None))
                .unwrap_or_else(|_| Err("wgpu panicked while opening the device".into()))
                .map(Arc::new)
        })
        .clone()
}

/// The backend table's probe.
pub fn probe_backend() -> Result<Arc<dyn Backend>, String> {
    probe().map(|b| b as Arc<dyn Backend>)
}

impl WgpuBackend {
    /// Open a device and compile every pipeline for `f16` (or, for `None`, the native path where the
    /// adapter has shader-f16 and `KVSCOPE_WGPU_F16` is not `packed`, else the packed one).
    pub fn open(f16: Option<F16Path>) -> Result<WgpuBackend, String> {
        open(f16)
    }

    /// Which f16 path runs.
    pub fn f16_path(&self) -> F16Path {
        self.f16
    }
}

fn open(f16: Option<F16Path>) -> Result<WgpuBackend, String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
        .map_err(|e| format!("no GPU adapter with compute shaders ({e}); install a Vulkan driver (mesa-vulkan-drivers gives lavapipe)"))?;
    let info = adapter.get_info();
    let has_f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
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
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("kvscope compute"),
        required_features: if f16 == F16Path::Native {
            wgpu::Features::SHADER_F16
        } else {
            wgpu::Features::empty()
        },
        required_limits: wgpu::Limits::default(),
        ..Default::default()
    }))
    .map_err(|e| {
        format!(
            "{} ({:?}) cannot give WebGPU's default limits: {e}",
            info.name, info.backend
        )
    })?;
    let mut pipelines = HashMap::new();
    for file in FILES {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(file.file),
            source: wgpu::ShaderSource::Wgsl(file.module(f16).into()),
        });
        for &entry in file.entries {
            let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
            pipelines.insert(entry, p);
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!(
                "kernels/{} does not compile on {}: {}",
                file.file,
                info.name,
                describe(&e)
            ));
        }
    }
    Ok(WgpuBackend {
        device,
        queue,
        info,
        pipelines,
        f16,
    })
}

/// A wgpu error with its details (a validation error's description names the line and column).
fn describe(e: &wgpu::Error) -> String {
    match e {
        wgpu::Error::Validation { description, .. } => description.trim().to_string(),
        other => other.to_string(),
    }
}

fn dev(e: impl std::fmt::Display) -> BackendError {
    BackendError::Device(e.to_string())
}

fn u(n: usize) -> Result<u32, BackendError> {
    u32::try_from(n).map_err(|_| BackendError::InvalidInput(format!("{n} does not fit the shaders' 32-bit indices")))
}

/// Workgroups for `n` invocations of `per` each, in x and (past 65535) y.
fn groups_2d(n: usize, per: usize) -> (u32, u32) {
    let g = n.div_ceil(per).max(1);
    if g <= 65535 {
        (g as u32, 1)
    } else {
        (65535, g.div_ceil(65535) as u32)
    }
}

/// f16 values as u32 words (two per word, element 2w in the low half), padded to a whole word.
fn pack_f16(x: &[f16]) -> Vec<u32> {
    x.chunks(2)
        .map(|c| c[0].to_bits() as u32 | (c.get(1).map_or(0, |h| h.to_bits() as u32) << 16))
        .collect()
}

fn unpack_f16(words: &[u32], out: &mut [f16]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = f16::from_bits((words[i / 2] >> ((i % 2) * 16)) as u16);
    }
}

/// One dispatch: a pipeline, its bindings (binding number, buffer) and the workgroup counts.
struct Dispatch<'a> {
    entry: &'static str,
    bindings: Vec<(u32, &'a wgpu::Buffer)>,
    groups: (u32, u32, u32),
}

impl WgpuBackend {
    fn storage<T: bytemuck::Pod>(&self, data: &[T], writable: bool) -> wgpu::Buffer {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        // A binding may not be empty: give empty inputs one zero word.
        let zero = [0u8; 4];
        let contents = if bytes.is_empty() { &zero[..] } else { bytes };
        let mut usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        if writable {
            usage |= wgpu::BufferUsages::COPY_SRC;
        }
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents,
            usage,
        })
    }

    fn zeros(&self, words: usize) -> wgpu::Buffer {
        self.storage(&vec![0u32; words.max(1)], true)
    }

    fn uniform<T: bytemuck::Pod>(&self, params: &T) -> wgpu::Buffer {
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::bytes_of(params),
            usage: wgpu::BufferUsages::UNIFORM,
        })
    }

    /// Encode `dispatches` in order in one submission, then read `outputs` back (each `len` elements
    /// of 4 bytes). Reading maps through a callback and polls the device.
    fn run(&self, dispatches: &[Dispatch], outputs: &[(&wgpu::Buffer, usize)]) -> Result<Vec<Vec<u32>>, BackendError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = self.encode(dispatches)?;
        let mut staging = Vec::new();
        for (buf, len) in outputs {
            let size = (len.max(&1) * 4) as u64;
            let s = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(buf, 0, &s, 0, size);
            staging.push((s, *len));
        }
        let idx = self.queue.submit([encoder.finish()]);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(dev(format!("wgpu rejected the dispatch: {}", describe(&e))));
        }
        let mut result = Vec::new();
        for (s, len) in staging {
            result.push(self.read(&s, len, idx.clone())?);
        }
        Ok(result)
    }

    /// Submit `dispatches` and `copies` (source, destination, bytes) and wait until the device is done:
    /// what the timings measure.
    fn submit_wait(
        &self,
        dispatches: &[Dispatch],
        copies: &[(&wgpu::Buffer, &wgpu::Buffer, u64)],
    ) -> Result<(), BackendError> {
        let mut encoder = self.encode(dispatches)?;
        for (src, dst, bytes) in copies {
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, *bytes);
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

    fn encode(&self, dispatches: &[Dispatch]) -> Result<wgpu::CommandEncoder, BackendError> {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for d in dispatches {
            let pipeline = self
                .pipelines
                .get(d.entry)
                .ok_or_else(|| dev(format!("pipeline {} is missing", d.entry)))?;
            let layout = pipeline.get_bind_group_layout(0);
            let entries: Vec<wgpu::BindGroupEntry> = d
                .bindings
                .iter()
                .map(|(b, buf)| wgpu::BindGroupEntry {
                    binding: *b,
                    resource: buf.as_entire_binding(),
                })
                .collect();
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(d.entry),
                layout: &layout,
                entries: &entries,
            });
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(d.entry),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(d.groups.0, d.groups.1, d.groups.2);
        }
        Ok(encoder)
    }

    fn read(&self, buf: &wgpu::Buffer, len: usize, idx: wgpu::SubmissionIndex) -> Result<Vec<u32>, BackendError> {
        let (tx, rx) = std::sync::mpsc::channel();
        buf.slice(..).map_async(wgpu::MapMode::Read, move |r| drop(tx.send(r)));
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: Some(std::time::Duration::from_secs(120)),
            })
            .map_err(dev)?;
        rx.recv().map_err(dev)?.map_err(dev)?;
        let words = {
            let data = buf.slice(..).get_mapped_range().map_err(dev)?;
            bytemuck::cast_slice::<u8, u32>(&data)[..len].to_vec()
        };
        buf.unmap();
        Ok(words)
    }
}

fn f32s(words: Vec<u32>) -> Vec<f32> {
    bytemuck::cast_vec(words)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AttnParams {
    n_heads: u32,
    n_kv_heads: u32,
    seq: u32,
    head_dim: u32,
    scale: f32,
    mask_kind: u32,
    window: u32,
    sinks: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AppendParams {
    n: u32,
    kv_heads: u32,
    head_dim: u32,
    layers: u32,
    batch: u32,
    max_seq_len: u32,
    layer: u32,
    pos: u32,
    block_size: u32,
    num_slots: u32,
    _pad: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct DecodeParams {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    num_partitions: u32,
    scale: f32,
    _pad: u32,
}

const _: () = assert!(std::mem::size_of::<AttnParams>() == 32);
const _: () = assert!(std::mem::size_of::<AppendParams>() == 48);
const _: () = assert!(std::mem::size_of::<DecodeParams>() == 32);

impl WgpuBackend {
    fn attn_params(&self, inp: &AttnInput) -> Result<AttnParams, BackendError> {
        let (h, kvh, t, hd) = inp.dims();
        let (mask_kind, window, sinks) = inp.mask.code();
        Ok(AttnParams {
            n_heads: u(h)?,
            n_kv_heads: u(kvh)?,
            seq: u(t)?,
            head_dim: u(hd)?,
            scale: 1.0 / (hd as f32).sqrt(),
            mask_kind: mask_kind as u32,
            window: window as u32,
            sinks: sinks as u32,
        })
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn device(&self) -> String {
        let f16 = match self.f16 {
            F16Path::Packed => "f16 as u32 pairs",
            F16Path::Native => "native f16",
        };
        format!("{} ({:?}), {f16}", self.info.name, self.info.backend)
    }

    fn run_attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError> {
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let q = self.storage(inp.q.as_slice().unwrap_or_default(), false);
        let k = self.storage(inp.k.as_slice().unwrap_or_default(), false);
        let v = self.storage(inp.v.as_slice().unwrap_or_default(), false);
        let (n_s, n_o) = (h * t * t, h * t * hd);
        let (scores, probs, out) = (self.zeros(n_s), self.zeros(n_s), self.zeros(n_o));
        let rows = groups_2d(h * t, 1);
        let tiles = u(t.div_ceil(16))?;
        let got = self.run(
            &[
                Dispatch {
                    entry: "attention_scores_f32",
                    bindings: vec![(0, &p), (1, &q), (2, &k), (5, &scores)],
                    groups: (tiles, tiles, u(h)?),
                },
                Dispatch {
                    entry: "softmax_rows_f32",
                    bindings: vec![(0, &p), (4, &scores), (5, &probs)],
                    groups: (rows.0, rows.1, 1),
                },
                Dispatch {
                    entry: "attention_pv_f32",
                    bindings: vec![(0, &p), (3, &v), (4, &probs), (5, &out)],
                    groups: (u(hd.div_ceil(16))?, tiles, u(h)?),
                },
            ],
            &[(&scores, n_s), (&probs, n_s), (&out, n_o)],
        )?;
        let mut it = got.into_iter().map(f32s);
        let mut arr =
            |shape: (usize, usize, usize)| Array3::from_shape_vec(shape, it.next().unwrap_or_default()).map_err(dev);
        Ok(AttnCore {
            scores: arr((h, t, t))?,
            probs: arr((h, t, t))?,
            out: arr((h, t, hd))?,
        })
    }

    fn run_attention_fused(&self, inp: &AttnInput) -> Result<Array3<f32>, BackendError> {
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let q = self.storage(inp.q.as_slice().unwrap_or_default(), false);
        let k = self.storage(inp.k.as_slice().unwrap_or_default(), false);
        let v = self.storage(inp.v.as_slice().unwrap_or_default(), false);
        let out = self.zeros(h * t * hd);
        if t > 65535 {
            return Err(BackendError::InvalidInput(format!(
                "T = {t}: the fused WGSL kernel dispatches one workgroup per query (at most 65535)"
            )));
        }
        let got = self.run(
            &[Dispatch {
                entry: "attention_fused_f32",
                bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (5, &out)],
                groups: (u(t)?, u(h)?, 1),
            }],
            &[(&out, h * t * hd)],
        )?;
        Array3::from_shape_vec((h, t, hd), f32s(got.into_iter().next().unwrap_or_default())).map_err(dev)
    }

    fn run_static_cache_append(&self, inp: StaticAppendInput) -> Result<(), BackendError> {
        let s = inp.shape;
        let n = s.batch * s.kv_heads * s.head_dim;
        let params = AppendParams {
            n: u(n)?,
            kv_heads: u(s.kv_heads)?,
            head_dim: u(s.head_dim)?,
            layers: u(s.layers)?,
            batch: u(s.batch)?,
            max_seq_len: u(s.max_seq_len)?,
            layer: u(inp.layer)?,
            pos: u(inp.pos)?,
            block_size: 1,
            num_slots: 0,
            _pad: [0; 2],
        };
        self.append(
            "static_cache_append_f16",
            &params,
            n,
            inp.k_new,
            inp.v_new,
            &[0],
            inp.k_cache,
            inp.v_cache,
        )
    }

    fn run_paged_append(&self, inp: PagedAppendInput) -> Result<(), BackendError> {
        let s = inp.shape;
        let n = inp.slot_mapping.len() * s.kv_heads * s.head_dim;
        if n == 0 {
            return Ok(());
        }
        let params = AppendParams {
            n: u(n)?,
            kv_heads: u(s.kv_heads)?,
            head_dim: u(s.head_dim)?,
            layers: 0,
            batch: 0,
            max_seq_len: 0,
            layer: 0,
            pos: 0,
            block_size: u(s.block_size)?,
            num_slots: u(inp.slot_mapping.len())?,
            _pad: [0; 2],
        };
        self.append(
            "paged_append_f16",
            &params,
            n,
            inp.k,
            inp.v,
            inp.slot_mapping,
            inp.k_pool,
            inp.v_pool,
        )
    }

    /// The fused kernel on device-resident Q/K/V, timed on the wall clock around each submission. It
    /// counts as "on the host" only on a CPU adapter (lavapipe), where a host GEMM is a fair baseline.
    fn time_attention_fused(&self, inp: &AttnInput, reps: usize) -> Result<(f64, bool), BackendError> {
        inp.validate()?;
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let q = self.storage(inp.q.as_slice().unwrap_or_default(), false);
        let k = self.storage(inp.k.as_slice().unwrap_or_default(), false);
        let v = self.storage(inp.v.as_slice().unwrap_or_default(), false);
        let out = self.zeros(h * t * hd);
        let fused = [Dispatch {
            entry: "attention_fused_f32",
            bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (5, &out)],
            groups: (u(t)?, u(h)?, 1),
        }];
        let mut failed = None;
        let secs = median_time(reps, || {
            if let Err(e) = self.submit_wait(&fused, &[]) {
                failed = Some(e);
            }
        })
        .as_secs_f64();
        match failed {
            Some(e) => Err(e),
            None => Ok((secs, self.info.device_type == wgpu::DeviceType::Cpu)),
        }
    }

    fn run_paged_decode(&self, inp: &PagedDecodeInput) -> Result<Vec<f32>, BackendError> {
        if inp.requests() == 0 {
            return Ok(Vec::new());
        }
        let b = self.decode_buffers(inp)?;
        let n = inp.requests() * inp.n_heads * inp.shape.head_dim;
        let got = self.run(&b.dispatches(), &[(&b.out, n)])?;
        Ok(f32s(got.into_iter().next().unwrap_or_default()))
    }

    /// Device-resident K/V, timed on the wall clock around each submission (the adapter's timestamp
    /// queries are not used yet), against a read-only WGSL stream over the same bytes
    /// (`read_stream_u32`) and a buffer-to-buffer copy of them.
    fn time_paged_decode(&self, inp: &PagedDecodeInput, reps: usize) -> Result<DecodeTiming, BackendError> {
        inp.validate()?;
        let b = self.decode_buffers(inp)?;
        let decode = b.dispatches();
        let mut failed = None;
        let mut timed = |work: &dyn Fn() -> Result<(), BackendError>| {
            median_time(reps, || {
                if let Err(e) = work() {
                    failed = Some(e);
                }
            })
            .as_secs_f64()
        };
        let decode_s = timed(&|| self.submit_wait(&decode, &[]));
        // The same K/V byte count, as two passes over one half (a binding holds at most 128 MiB).
        let half = inp.kv_bytes().div_ceil(2).div_ceil(16).max(1) * 16;
        let data = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read roof"),
            size: half as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let dst = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("copy roof"),
            size: half as u64,
            usage: wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let words = half / 16;
        let groups = u(words.div_ceil(256).clamp(1, 4096))?;
        let p = self.uniform(&[u(words)?, 0u32, 0, 0]);
        let partial = self.zeros(groups as usize);
        let read = || Dispatch {
            entry: "read_stream_u32",
            bindings: vec![(0, &p), (1, &data), (2, &partial)],
            groups: (groups, 1, 1),
        };
        let reads = [read(), read()];
        let read_s = timed(&|| self.submit_wait(&reads, &[]));
        let copy_s = timed(&|| self.submit_wait(&[], &[(&data, &dst, half as u64), (&data, &dst, half as u64)]));
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(DecodeTiming {
            decode_s,
            read_s,
            copy_s,
            device: Device::Gpu,
        })
    }
}

/// A decode problem uploaded to the device.
struct DecodeBuffers {
    params: wgpu::Buffer,
    q: wgpu::Buffer,
    k_pool: wgpu::Buffer,
    v_pool: wgpu::Buffer,
    tables: wgpu::Buffer,
    lens: wgpu::Buffer,
    tmp_out: wgpu::Buffer,
    tmp_max: wgpu::Buffer,
    tmp_sum: wgpu::Buffer,
    out: wgpu::Buffer,
    /// Workgroups of the decode (KVH, R, partitions) and of the reduce (H, R).
    groups: ((u32, u32, u32), (u32, u32)),
}

impl DecodeBuffers {
    fn dispatches(&self) -> [Dispatch<'_>; 2] {
        [
            Dispatch {
                entry: "paged_attention_decode_f16",
                bindings: vec![
                    (0, &self.params),
                    (1, &self.q),
                    (2, &self.k_pool),
                    (3, &self.v_pool),
                    (4, &self.tables),
                    (5, &self.lens),
                    (6, &self.tmp_out),
                    (7, &self.tmp_max),
                    (8, &self.tmp_sum),
                ],
                groups: self.groups.0,
            },
            Dispatch {
                entry: "paged_attention_reduce_f32",
                bindings: vec![
                    (0, &self.params),
                    (6, &self.tmp_out),
                    (7, &self.tmp_max),
                    (8, &self.tmp_sum),
                    (9, &self.out),
                ],
                groups: (self.groups.1.0, self.groups.1.1, 1),
            },
        ]
    }
}

impl WgpuBackend {
    fn decode_buffers(&self, inp: &PagedDecodeInput) -> Result<DecodeBuffers, BackendError> {
        let s = inp.shape;
        let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
        let max_ctx = inp.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize;
        let parts = max_ctx.div_ceil(PARTITION).max(1);
        let params = DecodeParams {
            n_heads: u(h)?,
            kv_heads: u(s.kv_heads)?,
            head_dim: u(hd)?,
            block_size: u(s.block_size)?,
            max_blocks: u(inp.max_blocks)?,
            num_partitions: u(parts)?,
            scale: 1.0 / (hd as f32).sqrt(),
            _pad: 0,
        };
        Ok(DecodeBuffers {
            params: self.uniform(&params),
            q: self.storage(inp.q, false),
            k_pool: self.storage(&pack_f16(inp.k_pool), false),
            v_pool: self.storage(&pack_f16(inp.v_pool), false),
            tables: self.storage(inp.block_tables, false),
            lens: self.storage(inp.context_lens, false),
            tmp_out: self.zeros(r * h * parts * hd),
            tmp_max: self.zeros(r * h * parts),
            tmp_sum: self.zeros(r * h * parts),
            out: self.zeros(r * h * hd),
            groups: ((u(s.kv_heads)?, u(r)?, u(parts)?), (u(h)?, u(r)?)),
        })
    }
}

impl WgpuBackend {
    /// Both append kernels: upload the rows and the pools, dispatch one invocation per element,
    /// read the pools back.
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        entry: &'static str,
        params: &AppendParams,
        n: usize,
        k: &[f32],
        v: &[f32],
        slots: &[i32],
        k_pool: &mut [f16],
        v_pool: &mut [f16],
    ) -> Result<(), BackendError> {
        let p = self.uniform(params);
        let (ks, vs, sl) = (
            self.storage(k, false),
            self.storage(v, false),
            self.storage(slots, false),
        );
        let (kd, vd) = (
            self.storage(&pack_f16(k_pool), true),
            self.storage(&pack_f16(v_pool), true),
        );
        let words = k_pool.len().div_ceil(2);
        let (gx, gy) = groups_2d(n, 64);
        let mut bindings = vec![(0, &p), (1, &ks), (2, &vs), (4, &kd), (5, &vd)];
        if entry == "paged_append_f16" {
            bindings.push((3, &sl));
        }
        let got = self.run(
            &[Dispatch {
                entry,
                bindings,
                groups: (gx, gy, 1),
            }],
            &[(&kd, words), (&vd, words)],
        )?;
        unpack_f16(&got[0], k_pool);
        unpack_f16(&got[1], v_pool);
        Ok(())
    }
}
