//! The CUDA simulator backend: the real `kernels/*.cu` files, compiled as C++ with the shim in
//! `kernels/shim/` (see its header), run on the CPU: a block's CUDA threads are fibers on the calling
//! thread, run one after another between barriers (`__syncthreads`, warp shuffles through an exchange
//! buffer). It proves the kernels on machines without a GPU and lets students step the exact code a GPU
//! would run. It is slow next to a GPU, so it refuses large launches.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::entries::{Entries, Kernels, MaskTableI32, ReadStreamU32, entry_is, i};
use crate::compute::launch::{self, LaunchDims};
use crate::compute::{Backend, BackendError, BackendKind};

include!(concat!(env!("OUT_DIR"), "/sim_ffi.rs"));

// `impl Entries for SimBackend`: each entry's launch calls the shim's C wrapper of that entry.
include!(concat!(env!("OUT_DIR"), "/cuda_entries_sim.rs"));

/// The most simulated CUDA threads one call may launch (about a second of CPU time).
pub const MAX_SIM_THREADS: u64 = 1 << 20;

/// The CUDA-on-CPU simulator backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct SimBackend;

/// Refuse launches too large to simulate.
pub(crate) fn budget(launches: &[LaunchDims]) -> Result<(), BackendError> {
    let n: u64 = launches.iter().map(LaunchDims::threads).sum();
    if n > MAX_SIM_THREADS {
        return Err(BackendError::InvalidInput(format!(
            "{n} simulated GPU threads is too many for the CPU simulator (limit {MAX_SIM_THREADS}); use a smaller shape or the cpu backend"
        )));
    }
    Ok(())
}

/// A launch's grid and block, as the wrappers' first six arguments; reported as a launch that ran
/// (`compute::launch::report`), since every caller passes them to a wrapper next.
pub(crate) fn dims(l: &LaunchDims) -> (u32, u32, u32, u32, u32, u32) {
    launch::ran_cuda(l);
    (l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2])
}

impl Kernels for SimBackend {
    const NAME: &'static str = "cuda-sim";
    type Buf<T: DeviceRepr + ValidAsZeroBits + Copy + Default> = Vec<T>;
    fn upload<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, host: &[T]) -> Result<Vec<T>, BackendError> {
        Ok(host.to_vec())
    }
    fn zeros<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, n: usize) -> Result<Vec<T>, BackendError> {
        Ok(vec![T::default(); n])
    }
    fn download<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(
        &self,
        buf: &Vec<T>,
        host: &mut [T],
    ) -> Result<(), BackendError> {
        host.copy_from_slice(buf);
        Ok(())
    }
    fn to_vec<T: DeviceRepr + ValidAsZeroBits + Copy + Default>(&self, buf: &Vec<T>) -> Result<Vec<T>, BackendError> {
        Ok(buf.clone())
    }
    fn budget(&self, launches: &[LaunchDims]) -> Result<(), BackendError> {
        budget(launches)
    }
}

impl Backend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::CudaSim
    }

    fn device(&self) -> String {
        "kernels/*.cu on CPU threads (C++ shim)".to_string()
    }

    // `run_<op>` calls `ops::<op>::cuda::run`, generic over both CUDA backends, for every row of the
    // op table.
    crate::compute::ops::op_table!(impl_backend_ops[cuda]);
}

impl SimBackend {
    /// Run `read_stream_u32` (kernels/bandwidth.cu, the read-only roof the CUDA backend times) over
    /// `data`, padded with zeros to whole 16-byte words; returns the per-block partial sums.
    pub fn read_stream_partials(&self, data: &[u32]) -> Result<Vec<u32>, BackendError> {
        let words: Vec<[u32; 4]> = data
            .chunks(4)
            .map(|c| std::array::from_fn(|i| c.get(i).copied().unwrap_or(0)))
            .collect();
        let n_words = words.len();
        let l = launch::read_stream(n_words);
        budget(&[l])?;
        let mut partial = vec![0u32; l.grid[0] as usize];
        let a = ReadStreamU32 {
            data: &words,
            n_words: n_words as i64,
            partial: &mut partial,
        };
        // SAFETY: `words` holds n_words 16-byte words; `partial` holds one u32
        // per block of the grid; the kernel reads only words[0..n_words] and writes partial[blockIdx.x].
        unsafe { self.read_stream_u32(&l, a) }?;
        Ok(partial)
    }
}

impl SimBackend {
    /// Run `mask_table_i32` (kernels/mask_table.cu: the mask predicate every CUDA attention kernel
    /// shares, from kernels/common.cuh) over `rows × cols`: 1 where key j is visible to query i.
    pub fn mask_table(&self, mask: crate::math::Mask, rows: usize, cols: usize) -> Result<Vec<i32>, BackendError> {
        let l = LaunchDims {
            entry: "mask_table_i32",
            grid: [launch::d(cols.div_ceil(16)), launch::d(rows.div_ceil(16)), 1],
            block: [16, 16, 1],
        };
        budget(&[l])?;
        let mut out = vec![-1i32; rows * cols];
        let (mask_kind, window, sinks) = mask.code();
        let a = MaskTableI32 {
            out: &mut out,
            rows: i(rows),
            cols: i(cols),
            mask_kind,
            window,
            sinks,
        };
        // SAFETY: `out` holds rows·cols values; the kernel writes out[i·cols + j] for i < rows, j < cols.
        unsafe { self.mask_table_i32(&l, a) }?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-only stream kernel reads every word exactly once: its partial sums add up to the
    /// host's sum, for lengths that are not multiples of the block or of the grid.
    #[test]
    fn read_stream_kernel_reads_every_word_once() {
        for n in [1usize, 3, 4, 1023, 1024, 1025, 70_001] {
            let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let want = data.iter().fold(0u32, |a, &x| a.wrapping_add(x));
            let got = SimBackend.read_stream_partials(&data).unwrap();
            assert_eq!(got.iter().fold(0u32, |a, &x| a.wrapping_add(x)), want, "n = {n}");
        }
    }
}
