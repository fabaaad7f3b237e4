//! `impl Backend for CudaBackend`: each op's launches live in its folder (`ops/<op>/cuda.rs`); this
//! dispatches to them, and times paged decode on device-resident buffers with CUDA events.

use cudarc::driver::{CudaSlice, sys};

use super::device::{CudaBackend, dev};
use super::entries::{Entries, ReadStreamU32};
use crate::compute::launch;
use crate::compute::ops::paged_decode::cuda::{DecodeBuffers, launch as launch_decode, upload as upload_decode};
use crate::compute::{AttnInput, Backend, BackendError, BackendKind, DecodeTiming, Device, PagedDecodeInput, Valid};

impl CudaBackend {
    /// Milliseconds of one decode step on device-resident data, of one read-only stream over the K/V
    /// bytes one step reads (`kv_bytes`, the `read_stream_u32` kernel), and of one device-to-device copy
    /// of them; each the mean of `reps`, timed with CUDA events on the same stream.
    pub(crate) fn time_decode_read_copy(
        &self,
        b: &mut DecodeBuffers<CudaBackend>,
        kv_bytes: usize,
        reps: usize,
    ) -> Result<(f64, f64, f64), BackendError> {
        let ev = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(dev)
        };
        launch_decode(self, b)?; // warm-up
        let (t0, t1) = (ev()?, ev()?);
        t0.record(&self.stream).map_err(dev)?;
        for _ in 0..reps {
            launch_decode(self, b)?;
        }
        t1.record(&self.stream).map_err(dev)?;
        let decode_ms = t0.elapsed_ms(&t1).map_err(dev)? as f64 / reps as f64;
        let src: CudaSlice<u8> = self.stream.alloc_zeros(kv_bytes).map_err(dev)?;
        let mut dst: CudaSlice<u8> = self.stream.alloc_zeros(kv_bytes).map_err(dev)?;
        self.stream.memcpy_dtod(&src, &mut dst).map_err(dev)?;
        let (c0, c1) = (ev()?, ev()?);
        c0.record(&self.stream).map_err(dev)?;
        for _ in 0..reps {
            self.stream.memcpy_dtod(&src, &mut dst).map_err(dev)?;
        }
        c1.record(&self.stream).map_err(dev)?;
        let copy_ms = c0.elapsed_ms(&c1).map_err(dev)? as f64 / reps as f64;
        // The read-only roof over the same bytes (rounded up to whole 16-byte words).
        let words = kv_bytes.div_ceil(16);
        let l = launch::read_stream(words);
        let data: CudaSlice<[u32; 4]> = self.stream.alloc_zeros(words).map_err(dev)?;
        let mut partial: CudaSlice<u32> = self.stream.alloc_zeros(l.grid[0] as usize).map_err(dev)?;
        let mut read = || -> Result<(), BackendError> {
            let a = ReadStreamU32 {
                data: &data,
                n_words: words as i64,
                partial: &mut partial,
            };
            // SAFETY: data holds n_words 16-byte words, partial one u32 per block of the grid.
            unsafe { self.read_stream_u32(&l, a) }
        };
        read()?; // warm-up
        let (r0, r1) = (ev()?, ev()?);
        r0.record(&self.stream).map_err(dev)?;
        for _ in 0..reps {
            read()?;
        }
        r1.record(&self.stream).map_err(dev)?;
        let read_ms = r0.elapsed_ms(&r1).map_err(dev)? as f64 / reps as f64;
        Ok((decode_ms, read_ms, copy_ms))
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device(&self) -> String {
        self.device.clone()
    }

    fn clock(&self) -> String {
        "CUDA events on the stream".to_string()
    }

    // `run_<op>` calls `ops::<op>::cuda::run`, for every row of the op table.
    crate::compute::ops::op_table!(impl_backend_ops[cuda]);

    fn shared_memory(&self) -> Option<(u64, [&'static str; 2])> {
        self.smem_per_sm.map(|b| {
            (
                b,
                [
                    "shared memory per SM (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)",
                    "每个 SM 的共享内存（CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR）",
                ],
            )
        })
    }

    /// Device-resident K/V, timed with CUDA events, against a device-to-device copy of the same bytes.
    fn time_paged_decode(&self, inp: &PagedDecodeInput, reps: usize) -> Result<DecodeTiming, BackendError> {
        let inp = Valid::check(inp, &self.limits())?;
        let mut bufs = upload_decode(self, &inp)?;
        let (decode_ms, read_ms, copy_ms) = self.time_decode_read_copy(&mut bufs, inp.kv_bytes(), reps)?;
        Ok(DecodeTiming {
            decode_s: decode_ms / 1e3,
            read_s: read_ms / 1e3,
            copy_s: copy_ms / 1e3,
            device: Device::Gpu,
        })
    }

    /// The fused kernel on device-resident Q/K/V, timed with CUDA events (not on the host).
    fn time_attention_fused(&self, inp: &AttnInput, reps: usize) -> Result<(f64, bool), BackendError> {
        Ok((self.time_attention_fused_ms(inp, reps)? / 1e3, false))
    }
}
