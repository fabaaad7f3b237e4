//! The ops of the wgpu backend: upload the inputs, dispatch the WGSL kernels with the geometry of
//! [`super::dispatch`], read the outputs back; and the device-resident timings.

use half::f16;
use ndarray::Array3;

use super::pool::{Kind, Pooled};
use super::{Dispatch, F16Path, WgpuBackend, dev, dispatch, f32s, pack_f16, u, unpack_f16};
use crate::compute::cuda::launch::LaunchDims;
use crate::compute::timing::median_time;
use crate::compute::{
    AttnInput, Backend, BackendError, BackendKind, CopyBlocksInput, DecodeTiming, Device, FlashInput, PagedAppendInput,
    PagedDecodeInput, StaticAppendInput,
};
use crate::math::AttnCore;

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
struct FlashParams {
    attn: AttnParams,
    block_q: u32,
    block_k: u32,
    _pad: [u32; 2],
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

impl AppendParams {
    /// kv_cache.wgsl's uniforms for a paged-pool entry (`paged_append`, `copy_blocks`): `n` elements,
    /// the pool's shape, and `num_slots` (slots for `paged_append`, values per block for `copy_blocks`).
    fn paged(n: usize, s: crate::cache::PagedShape, num_slots: usize) -> Result<Self, BackendError> {
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

    fn clock(&self) -> String {
        self.clock_words()
    }

    fn run_attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError> {
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let q = self.storage(inp.q.as_slice().unwrap_or_default());
        let k = self.storage(inp.k.as_slice().unwrap_or_default());
        let v = self.storage(inp.v.as_slice().unwrap_or_default());
        let (n_s, n_o) = (h * t * t, h * t * hd);
        let (scores, probs, out) = (self.zeros(n_s), self.zeros(n_s), self.zeros(n_o));
        let got = self.run(
            &[
                Dispatch {
                    entry: "attention_scores_f32",
                    bindings: vec![(0, &p), (1, &q), (2, &k), (5, &scores)],
                    groups: dispatch::attention_scores(h, t).grid,
                },
                Dispatch {
                    entry: "softmax_rows_f32",
                    bindings: vec![(0, &p), (4, &scores), (5, &probs)],
                    groups: dispatch::softmax_rows(h * t).grid,
                },
                Dispatch {
                    entry: "attention_pv_f32",
                    bindings: vec![(0, &p), (3, &v), (4, &probs), (5, &out)],
                    groups: dispatch::attention_pv(h, t, hd).grid,
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
        let q = self.storage(inp.q.as_slice().unwrap_or_default());
        let k = self.storage(inp.k.as_slice().unwrap_or_default());
        let v = self.storage(inp.v.as_slice().unwrap_or_default());
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
                groups: dispatch::attention_fused(h, t).grid,
            }],
            &[(&out, h * t * hd)],
        )?;
        Array3::from_shape_vec((h, t, hd), f32s(got.into_iter().next().unwrap_or_default())).map_err(dev)
    }

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

    fn run_flash_attention(&self, inp: &FlashInput) -> Result<Array3<f32>, BackendError> {
        let a = &inp.attn;
        let (h, _, t, hd) = a.dims();
        let l = dispatch::flash_attention(h, t, inp.block_q);
        if l.grid[0] > 65535 {
            return Err(BackendError::InvalidInput(format!(
                "T = {t} with Br = {}: {} row blocks, more than the 65535 workgroups a dispatch dimension allows",
                inp.block_q, l.grid[0]
            )));
        }
        let p = self.uniform(&FlashParams {
            attn: self.attn_params(a)?,
            block_q: u(inp.block_q)?,
            block_k: u(inp.block_k)?,
            _pad: [0; 2],
        });
        let q = self.storage(a.q.as_slice().unwrap_or_default());
        let k = self.storage(a.k.as_slice().unwrap_or_default());
        let v = self.storage(a.v.as_slice().unwrap_or_default());
        let out = self.zeros(h * t * hd);
        let got = self.run(
            &[Dispatch {
                entry: l.entry,
                bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (4, &out)],
                groups: l.grid,
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
            dispatch::static_cache_append(s.batch, s.kv_heads, s.head_dim),
            &params,
            inp.k_new,
            inp.v_new,
            &[0],
            inp.k_cache,
            inp.v_cache,
        )
    }

    fn run_copy_blocks(&self, inp: CopyBlocksInput) -> Result<(), BackendError> {
        let s = inp.shape;
        let (pairs, per) = (inp.pairs(), s.kv_heads * s.block_size * s.head_dim);
        let params = AppendParams::paged(pairs * per, s, per)?;
        let p = self.uniform(&params);
        let mapping = self.storage(inp.block_mapping);
        let (kd, vd) = (self.storage(&pack_f16(inp.k_pool)), self.storage(&pack_f16(inp.v_pool)));
        let words = inp.k_pool.len().div_ceil(2);
        let got = self.run(
            &[Dispatch {
                entry: "copy_blocks_f16",
                bindings: vec![(0, &p), (3, &mapping), (4, &kd), (5, &vd)],
                groups: dispatch::copy_blocks(pairs, per).grid,
            }],
            &[(&kd, words), (&vd, words)],
        )?;
        unpack_f16(&got[0], inp.k_pool);
        unpack_f16(&got[1], inp.v_pool);
        Ok(())
    }

    fn run_paged_append(&self, inp: PagedAppendInput) -> Result<(), BackendError> {
        let s = inp.shape;
        let n = inp.slot_mapping.len() * s.kv_heads * s.head_dim;
        if n == 0 {
            return Ok(());
        }
        let params = AppendParams::paged(n, s, inp.slot_mapping.len())?;
        self.append(
            dispatch::paged_append(inp.slot_mapping.len(), s.kv_heads, s.head_dim),
            &params,
            inp.k,
            inp.v,
            inp.slot_mapping,
            inp.k_pool,
            inp.v_pool,
        )
    }

    /// The fused kernel on device-resident Q/K/V, timed with timestamp queries where the adapter has them
    /// (`time_dispatches`). It
    /// counts as "on the host" only on a CPU adapter (lavapipe), where a host GEMM is a fair baseline.
    fn time_attention_fused(&self, inp: &AttnInput, reps: usize) -> Result<(f64, bool), BackendError> {
        inp.validate()?;
        let (h, _, t, hd) = inp.dims();
        let p = self.uniform(&self.attn_params(inp)?);
        let q = self.storage(inp.q.as_slice().unwrap_or_default());
        let k = self.storage(inp.k.as_slice().unwrap_or_default());
        let v = self.storage(inp.v.as_slice().unwrap_or_default());
        let out = self.zeros(h * t * hd);
        let fused = [Dispatch {
            entry: "attention_fused_f32",
            bindings: vec![(0, &p), (1, &q), (2, &k), (3, &v), (5, &out)],
            groups: dispatch::attention_fused(h, t).grid,
        }];
        let secs = self.time_dispatches(&fused, reps)?;
        Ok((secs, self.info.device_type == wgpu::DeviceType::Cpu))
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

    /// Device-resident K/V, timed with timestamp queries where the adapter has them (the copy, which is
    /// no compute pass, on the wall clock), against a read-only WGSL stream over the same bytes
    /// (`read_stream_u32`) and a buffer-to-buffer copy of them.
    fn time_paged_decode(&self, inp: &PagedDecodeInput, reps: usize) -> Result<DecodeTiming, BackendError> {
        inp.validate()?;
        let b = self.decode_buffers(inp)?;
        let decode = b.dispatches();
        let decode_s = self.time_dispatches(&decode, reps)?;
        // The same K/V byte count, as two passes over one half (a binding holds at most 128 MiB).
        let half = inp.kv_bytes().div_ceil(2).div_ceil(16).max(1) * 16;
        let data = self.pool.take(&self.device, Kind::Storage, half as u64);
        let dst = self.pool.take(&self.device, Kind::Storage, half as u64);
        let words = half / 16;
        let stream = dispatch::read_stream(words);
        let p = self.uniform(&[u(words)?, 0u32, 0, 0]);
        let partial = self.zeros(stream.grid[0] as usize);
        let read = || Dispatch {
            entry: "read_stream_u32",
            bindings: vec![(0, &p), (1, &data), (2, &partial)],
            groups: stream.grid,
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

/// A decode problem uploaded to the device.
struct DecodeBuffers {
    params: Pooled,
    q: Pooled,
    k_pool: Pooled,
    v_pool: Pooled,
    tables: Pooled,
    lens: Pooled,
    tmp_out: Pooled,
    tmp_max: Pooled,
    tmp_sum: Pooled,
    out: Pooled,
    /// Workgroups of the decode and of the reduce.
    groups: ([u32; 3], [u32; 3]),
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
                groups: self.groups.1,
            },
        ]
    }
}

impl WgpuBackend {
    fn decode_buffers(&self, inp: &PagedDecodeInput) -> Result<DecodeBuffers, BackendError> {
        let s = inp.shape;
        let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
        let max_ctx = inp.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize;
        let parts = dispatch::num_partitions(max_ctx);
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
            q: self.storage(inp.q),
            k_pool: self.storage(&pack_f16(inp.k_pool)),
            v_pool: self.storage(&pack_f16(inp.v_pool)),
            tables: self.storage(inp.block_tables),
            lens: self.storage(inp.context_lens),
            tmp_out: self.zeros(r * h * parts * hd),
            tmp_max: self.zeros(r * h * parts),
            tmp_sum: self.zeros(r * h * parts),
            out: self.zeros(r * h * hd),
            groups: (
                dispatch::paged_decode(s.kv_heads, r, parts).grid,
                dispatch::paged_reduce(h, r).grid,
            ),
        })
    }
}

impl WgpuBackend {
    /// Both append kernels: upload the rows and the pools, dispatch one invocation per element,
    /// read the pools back.
    #[allow(clippy::too_many_arguments)]
    fn append(
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
                entry: geometry.entry,
                bindings,
                groups: geometry.grid,
            }],
            &[(&kd, words), (&vd, words)],
        )?;
        unpack_f16(&got[0], k_pool);
        unpack_f16(&got[1], v_pool);
        Ok(())
    }
}
