//! Paged prefill on the CPU backend: the paged decode over the query rows (each row a request with its
//! causal context), so a chunk of one token is the decode, bit for bit.

use super::PagedPrefillInput;
use crate::compute::ops::paged_decode::launch as decode_launch;
use crate::compute::{BackendError, CpuBackend, Valid};

pub(crate) fn run(b: &CpuBackend, inp: Valid<&PagedPrefillInput>) -> Result<Vec<f32>, BackendError> {
    let (rows, parts) = (inp.rows(), decode_launch::cuda_num_partitions(inp.max_context()));
    crate::compute::launch::would_run_cuda(&[
        super::launch::cuda(inp.shape.kv_heads, rows, parts),
        decode_launch::cuda_reduce(inp.n_heads, rows),
    ]);
    let map = inp.row_map();
    let mut tables = Vec::new();
    // Validated as this decode problem (`validate_for`).
    let dec = inp.project(|p| p.as_decode(&map, &mut tables));
    Ok(crate::compute::ops::paged_decode::cpu::decode(b, dec.as_ref()))
}
