// =======================================================================================
// kernels/mask_table.cu -- the kernels' mask predicate as a table (a test kernel, no op)
// =======================================================================================
//
//   out [rows, cols]  out[i, j] = 1 when key j is visible to query i under the mask
//                     (mask_kind, window, sinks), else 0
//
// mask_table_i32: grid (ceil(cols/16), ceil(rows/16), 1), block (16, 16, 1). It evaluates
// attn_visible of kernels/common.cuh, which every attention kernel uses, so comparing its
// table with src/math/mask.rs (tests/kernels.rs) checks the one predicate the kernels share.
// =======================================================================================

#include "common.cuh"

extern "C" __global__ void mask_table_i32(int* __restrict__ out, int rows, int cols, int mask_kind,
                                          int window, int sinks) {
    const int j = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int i = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (i >= rows || j >= cols) return;
    out[(long long)i * cols + j] = attn_visible(i, j, mask_kind, window, sinks) ? 1 : 0;
}
