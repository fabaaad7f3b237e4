//! RoPE on the CUDA backend: `rope_f32`.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::launch;
use crate::compute::cuda::device::{CudaBackend, cfg, dev, i};
use crate::compute::ops::rope::RopeInput;
use crate::compute::{BackendError, Valid};

pub(crate) fn run(b: &CudaBackend, inp: Valid<&RopeInput>) -> Result<Vec<f32>, BackendError> {
    let s = b.stream();
    let x = s.clone_htod(inp.x).map_err(dev)?;
    let pos = s.clone_htod(inp.positions).map_err(dev)?;
    let table = s.clone_htod(inp.cos_sin).map_err(dev)?;
    let mut out: CudaSlice<f32> = s.alloc_zeros(inp.x.len()).map_err(dev)?;
    let l = launch::cuda(inp.rows());
    let (n, h, hd) = (i(inp.rows()), i(inp.n_heads), i(inp.head_dim));
    let mut a = s.launch_builder(b.func(l.entry)?);
    a.arg(&x).arg(&pos).arg(&table).arg(&mut out).arg(&n).arg(&h).arg(&hd);
    // SAFETY: matches rope_f32; x and out hold N·heads·hd values, every position has a row of the
    // [P, hd] table (validated).
    unsafe { a.launch(cfg(&l)) }.map_err(dev)?;
    s.clone_dtoh(&out).map_err(dev)
}
