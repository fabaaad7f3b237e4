//! RoPE on both CUDA backends: `rope_f32` of `kernels/rope.cu`.

use crate::compute::cuda::entries::i;
use crate::compute::cuda::entries::{Entries, RopeF32};
use crate::compute::ops::rope::RopeInput;
use crate::compute::{BackendError, Valid};

use super::launch;

pub(crate) fn run<K: Entries>(b: &K, inp: Valid<&RopeInput>) -> Result<Vec<f32>, BackendError> {
    let l = launch::cuda(inp.rows());
    b.budget(&[l])?;
    let (x, pos, table) = (b.upload(inp.x)?, b.upload(inp.positions)?, b.upload(inp.cos_sin)?);
    let mut out = b.zeros(inp.x.len())?;
    let a = RopeF32 {
        x: &x,
        positions: &pos,
        cos_sin: &table,
        out: &mut out,
        n: i(inp.rows()),
        n_heads: i(inp.n_heads),
        head_dim: i(inp.head_dim),
    };
    // SAFETY: x and out hold N·heads·hd values, positions N, and every position has a row of the
    // [P, hd] table (validated); the kernel reads and writes only those.
    unsafe { b.rope_f32(&l, a) }?;
    b.to_vec(&out)
}
