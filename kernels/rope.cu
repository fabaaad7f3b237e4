// =======================================================================================
// kernels/rope.cu -- rotary position embeddings (RoPE), "rotate half" layout, f32
// =======================================================================================
//
//   x        [N, H, hd]   rows (a query or key row per token and head)
//   positions [N]         the position of each row's token (u32)
//   cos_sin  [P, hd]      row p: cos(p * theta_i) for i < hd/2, then sin(p * theta_i),
//                         theta_i = base^(-2i/hd); computed by the host in f64, stored as f32
//   out      [N, H, hd]
//
// Dimension d < hd/2 pairs with d + hd/2 and the pair turns by the angle p * theta_d:
//     out[d]        = x[d] * cos - x[d + hd/2] * sin
//     out[d + hd/2] = x[d + hd/2] * cos + x[d] * sin
// (the layout of Llama's and GPT-NeoX's "rotate_half", and of the model in assets/models).
//
// rope_f32: grid (N, 1, 1), block (128, 1, 1): one block per row; its threads stride over the
// (head, d) pairs of the row, each reading its two inputs and writing its two outputs. The
// host checks that hd is even and at most 256 and that every position has a table row.
//
// This file must compile with NVRTC (no system headers) and with the CPU shim in
// kernels/shim. It is f32 only, so it needs no header at all.
// =======================================================================================

extern "C" __global__ void rope_f32(const float* __restrict__ x,
                                    const unsigned int* __restrict__ positions,
                                    const float* __restrict__ cos_sin, float* __restrict__ out,
                                    int n, int n_heads, int head_dim) {
    const int row = (int)blockIdx.x;
    if (row >= n) return;  // no barrier in this kernel: returning early is fine
    const int half = head_dim / 2;
    const float* cs = cos_sin + (size_t)positions[row] * (size_t)head_dim;
    for (int t = (int)threadIdx.x; t < n_heads * half; t += (int)blockDim.x) {
        const int h = t / half;
        const int d = t - h * half;
        const size_t base = ((size_t)row * (size_t)n_heads + (size_t)h) * (size_t)head_dim;
        const float x1 = x[base + d];
        const float x2 = x[base + d + half];
        const float c = cs[d];
        const float s = cs[half + d];
        out[base + d] = x1 * c - x2 * s;
        out[base + d + half] = x2 * c + x1 * s;
    }
}
