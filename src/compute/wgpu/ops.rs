//! What the wgpu backend's ops share (the kernels' uniform structs, the append helper), its `Backend`
//! impl (each op's code lives in `ops/<op>/wgpu.rs`), and the device-resident timings.

use half::f16;

use super::pool::Kind;
use super::{Dispatch, F16Path, WgpuBackend, pack_f16, u, unpack_f16};
use crate::compute::launch::{self, LaunchDims};
use crate::compute::ops::paged_decode::wgpu::upload as upload_decode;
use crate::compute::timing::median_time;
use crate::compute::{AttnInput, Backend, BackendError, BackendKind, DecodeTiming, Device, PagedDecodeInput, Valid};

/// `attention.wgsl`'s uniforms.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AttnParams {
    n_heads: u32,
    n_kv_heads: u32,
    seq: u32,
    head_dim: u32,
    scale: f32,
    mask_kind: u32,
    window: u32,
    sinks: u32,
}

/// `flash_attention.wgsl`'s uniforms.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct FlashParams {
    pub(crate) attn: AttnParams,
    pub(crate) block_q: u32,
    pub(crate) block_k: u32,
    pub(crate) _pad: [u32; 2],
}

/// `kv_cache.wgsl`'s uniforms.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AppendParams {
    pub(crate) n: u32,
    pub(crate) kv_heads: u32,
    pub(crate) head_dim: u32,
    pub(crate) layers: u32,
    pub(crate) batch: u32,
    pub(crate) max_seq_len: u32,
    pub(crate) layer: u32,
    pub(crate) pos: u32,
    pub(crate) block_size: u32,
    pub(crate) num_slots: u32,
    pub(crate) _pad: [u32; 2],
}

impl AppendParams {
    /// kv_cache.wgsl's uniforms for a paged-pool entry (`paged_append`, `copy_blocks`): `n` elements,
    /// the pool's shape, and `num_slots` (slots for `paged_append`, values per block for `copy_blocks`).
    pub(crate) fn paged(n: usize, s: crate::cache::PagedShape, num_slots: usize) -> Result<Self, BackendError> {
        Ok(Self {
            n: u(n)?,
            kv_heads: u(s.kv_heads)?,
            head_dim: u(s.head_dim)?,
            block_size: u(s.block_size)?,
            num_slots: u(num_slots)?,
            ..bytemuck::Zeroable::zeroed()
        })
    }
}

const _: () = assert!(std::mem::size_of::<AttnParams>() == 32);
const _: () = assert!(std::mem::size_of::<AppendParams>() == 48);

impl WgpuBackend {
    /// The attention uniforms of `inp`.
    pub(crate) fn attn_params(&self, inp: &AttnInput) -> Result<AttnParams, BackendError> {
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
        // Browsers keep the adapter's name to themselves (WebGPU gives an empty one).
        let name = if self.info.name.is_empty() {
            "unnamed adapter"
        } else {
            &self.info.name
        };
        format!("{name} ({:?}), {f16}", self.info.backend)
    }

    fn clock(&self) -> String {
        self.clock_words()
    }

    // `run_<op>` calls `ops::<op>::wgpu::run`, for every row of the op table.
    crate::compute::ops::op_table!(impl_backend_ops[wgpu]);

    fn shared_memory(&self) -> Option<(u64, [&'static str; 2])> {
        Some((
            u64::from(self.workgroup_storage),
            [
                "workgroup memory the adapter offers (maxComputeWorkgroupStorageSize; kvscope asks for WebGPU's default 16 KiB)",
                "适配器提供的 workgroup 内存（maxComputeWorkgroupStorageSize；kvscope 只申请 WebGPU 默认的 16 KiB）",
            ],
        ))
    }

    fn flash_smem_floats(&self) -> usize {
        crate::compute::ops::flash::WGSL_SMEM_FLOATS
    }

    /// The fused kernel on device-resident Q/K/V, timed with timestamp queries where the adapter has them
    /// (`time_dispatches`). It
    /// counts as "on the host" only on a CPU adapter (lavapipe), where a host GEMM is a fair baseline.
    fn time_attention_fused(&self, inp: &AttnInput, reps: usize) -> Result<(f64, bool), BackendError> {
        let checked = Valid::check(inp, &self.limits())?;
        let inp: &AttnInput = &checked;
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let [q, k, v] = inp.slices().map(|s| self.storage(s));
        let out = self.zeros(h * t * hd);
        let fused = [Dispatch {
            dims: crate::compute::ops::attention_fused::launch::wgsl(h, t),
            bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (5, &out)],
        }];
        let secs = self.time_dispatches(&fused, reps)?;
        Ok((secs, self.info.device_type == wgpu::DeviceType::Cpu))
    }

    /// Device-resident K/V, timed with timestamp queries where the adapter has them (the copy, which is
    /// no compute pass, on the wall clock), against a read-only WGSL stream over the same bytes
    /// (`read_stream_u32`) and a buffer-to-buffer copy of them.
    fn time_paged_decode(&self, inp: &PagedDecodeInput, reps: usize) -> Result<DecodeTiming, BackendError> {
        let inp = Valid::check(inp, &self.limits())?;
        let b = upload_decode(self, &inp)?;
        let decode = b.dispatches();
        let decode_s = self.time_dispatches(&decode, reps)?;
        // The same K/V byte count, as two passes over one half (a binding holds at most 128 MiB).
        let half = inp.kv_bytes().div_ceil(2).div_ceil(16).max(1) * 16;
        let data = self.pool.take(&self.device, Kind::Storage, half as u64);
        let dst = self.pool.take(&self.device, Kind::Storage, half as u64);
        let words = half / 16;
        let stream = launch::read_stream(words);
        let p = self.uniform(&[u(words)?, 0u32, 0, 0]);
        let partial = self.zeros(stream.grid[0] as usize);
        let read = || Dispatch {
            dims: stream,
            bindings: vec![(0, &p), (1, &data), (2, &partial)],
        };
        let reads = [read(), read()];
        let read_s = self.time_dispatches(&reads, reps)?;
        // A copy is no compute pass: timed on the wall clock.
        let mut failed = None;
        let copy_s = median_time(reps, || {
            if let Err(e) = self.submit_wait(&[], &[(&data, &dst, half as u64), (&data, &dst, half as u64)]) {
                failed = Some(e);
            }
        })
        .as_secs_f64();
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

impl WgpuBackend {
    /// Both append kernels: upload the rows and the pools, dispatch one invocation per element,
    /// read the pools back.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append(
        &self,
        geometry: LaunchDims,
        params: &AppendParams,
        k: &[f32],
        v: &[f32],
        slots: &[i32],
        k_pool: &mut [f16],
        v_pool: &mut [f16],
    ) -> Result<(), BackendError> {
        let p = self.uniform(params);
        let (ks, vs, sl) = (self.storage(k), self.storage(v), self.storage(slots));
        let (kd, vd) = (self.storage(&pack_f16(k_pool)), self.storage(&pack_f16(v_pool)));
        let words = k_pool.len().div_ceil(2);
        let mut bindings = vec![(0, &p), (1, &ks), (2, &vs), (4, &kd), (5, &vd)];
        if geometry.entry == "paged_append_f16" {
            bindings.push((3, &sl));
        }
        let got = self.run(
            &[Dispatch {
                dims: geometry,
                bindings,
            }],
            &[(&kd, words), (&vd, words)],
        )?;
        unpack_f16(&got[0], k_pool);
        unpack_f16(&got[1], v_pool);
        Ok(())
    }
}

impl WgpuBackend {
    /// Run `mask_table_i32` (kernels/mask_table.wgsl: the mask predicate every WGSL attention kernel
    /// shares, from kernels/common.wgsl) over `rows × cols`: 1 where key j is visible to query i.
    pub fn mask_table(&self, mask: crate::math::Mask, rows: usize, cols: usize) -> Result<Vec<i32>, BackendError> {
        let (mk, win, sinks) = mask.code();
        let p = self.uniform(&[u(rows)?, u(cols)?, mk as u32, win as u32, sinks as u32, 0, 0, 0]);
        let out = self.zeros(rows * cols);
        let dims = LaunchDims {
            entry: "mask_table_i32",
            grid: [launch::d(cols.div_ceil(16)), launch::d(rows.div_ceil(16)), 1],
            block: [16, 16, 1],
        };
        let got = self.run(
            &[Dispatch {
                dims,
                bindings: vec![(0, &p), (1, &out)],
            }],
            &[(&out, rows * cols)],
        )?;
        Ok(bytemuck::cast_vec(got.into_iter().next().unwrap_or_default()))
    }
}
