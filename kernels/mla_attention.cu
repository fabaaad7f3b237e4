// =======================================================================================
// kernels/mla_attention.cu -- multi-head latent attention (MLA, DeepSeek-V2/V3) decode over
// a paged latent cache, with the up-projections absorbed: K and V are never expanded
// =======================================================================================
//
// MLA caches, per token and for all heads together, one row of d_c + d_r values: the
// normalised latent c_KV (d_c) and the decoupled RoPE key k_R (d_r). Head h's key is
// [c_KV W_UK_h ; k_R] and its value c_KV W_UV_h, so with the host absorbing W_UK into the
// query (q~_h = W_UK_h q_nope_h, d_c values) the score is
//     s_t = (q~_h . c_KV,t + q_R,h . k_R,t) * scale,  scale = 1/sqrt(d_nope + d_r)
// (the query-key head size, as DeepSeek-V3's reference), and the output stays in latent
// space: o~_h = sum_t p_t c_KV,t (d_c values); the host applies W_UV_h after the kernel.
//
// Layouts
//     q_abs   [R, H, d_c] f32     q_rope [R, H, d_r] f32     out [R, H, d_c] f32
//     latent  [N, B, d_c + d_r] f16 (a paged pool with one KV head)
//     block_tables [R, max_blocks] i32     context_lens [R] i32
//     probs   [R, H, max_blocks * B] f32 scratch
//
// mla_decode_f16: grid (H, R, 1), block (32, 1, 1) (any multiple of 32 works). One block
// per (head, request): the head's query (d_c + d_r values) in shared memory, scores strided
// over the threads, block max and sum, probabilities normalised in `probs`, then the
// latent-space output strided over d_c. d_c + d_r <= 1024 (checked by the host). Every
// head reads the same latent rows, and this kernel reads them once per head: H * (d_c + d_r)
// * 2 bytes per token. Production MLA decode (vLLM's MLA backends, FlashMLA) treats the
// absorbed decode as MQA, one KV head shared by all query heads, and reads each row once for
// all heads, (d_c + d_r) * 2 bytes per token: the figure lesson 11 quotes for DeepSeek-V3.
// Prefill does the opposite: it expands K and V from the latent and runs ordinary attention.
// This file must compile with NVRTC (only <cuda_fp16.h>) and with the CPU shim.
// =======================================================================================

#include <cuda_fp16.h>

#include "common.cuh"

#define MLA_MAX_DIM 1024

extern "C" __global__ void mla_decode_f16(float* __restrict__ out, float* __restrict__ probs,
                                          const float* __restrict__ q_abs, const float* __restrict__ q_rope,
                                          const __half* __restrict__ latent, const int* __restrict__ block_tables,
                                          const int* __restrict__ context_lens, int max_blocks, int n_heads,
                                          int block_size, int d_c, int d_r, float scale) {
    __shared__ float s_q[MLA_MAX_DIM];
    __shared__ float s_red[32];
    const int h = (int)blockIdx.x;
    const int r = (int)blockIdx.y;
    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int dim = d_c + d_r;
    const int T = max_blocks * block_size;
    const int len = context_lens[r] < 0 ? 0 : context_lens[r];
    const int* table = block_tables + (size_t)r * max_blocks;

    const float* qa = q_abs + ((size_t)r * n_heads + h) * d_c;
    const float* qr = q_rope + ((size_t)r * n_heads + h) * d_r;
    for (int i = tid; i < dim; i += nt) s_q[i] = (i < d_c ? qa[i] : qr[i - d_c]) * scale;
    __syncthreads();  // BARRIER: the scaled query is complete before any score reads it

    float* p = probs + ((size_t)r * n_heads + h) * T;
    float* o = out + ((size_t)r * n_heads + h) * d_c;
    auto row_of = [&](int t) {
        return latent + ((size_t)table[t / block_size] * block_size + t % block_size) * dim;
    };
    decode_row<false>(
        p, o, len, T, d_c, s_red,
        [&](int t) {
            const __half* row = row_of(t);
            float dot = 0.0f;
            for (int i = 0; i < dim; ++i) dot += s_q[i] * __half2float(row[i]);
            return dot;
        },
        [&](float pt, int t, int d) { return pt * __half2float(row_of(t)[d]); });
}
