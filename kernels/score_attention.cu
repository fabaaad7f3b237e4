// =======================================================================================
// kernels/score_attention.cu -- decode attention over a paged cache that also RETURNS the
// attention weights, summed over each KV head's query group (the scores H2O accumulates),
// with a validity mask per (KV head, slot) for token-level eviction
// =======================================================================================
//
// What it computes
// ----------------
// One decode step per request r. Every query head h of KV head k = h / G (G = H / KVH)
// reads the request's cached tokens t < context_lens[r] through the block table; a token
// whose slot is marked invalid for KV head k (evicted by H2O, SnapKV, ...) is skipped:
//
//     s_t = scale * q[r,h,:] . K_t            (valid[blk, k, off] != 0)
//     p_t = softmax_t(s_t),   out[r,h,:] = sum_t p_t V_t,   probs[r,h,t] = p_t
//     scores[r,k,t] = sum over the group's heads h of probs[r,h,t]
//
// Keys are stored already rotated (RoPE at write time, text positions), as in
// paged_attention.cu. Fused decode kernels (vLLM's PagedAttention, FlashAttention) never
// write p: they keep it in registers and shared memory. This one writes it, which is what
// an eviction policy that scores tokens by attention needs, and what it costs: the extra
// bytes are R * KVH * T * 4 for scores (and R * H * T * 4 for the per-head map).
//
// Layouts
// -------
//     q, out        [R, H, hd] f32 (q already rotated)
//     k_pool,v_pool [N, KVH, B, hd] f16     block_tables [R, max_blocks] i32
//     context_lens  [R] i32                  valid [N, KVH, B] i32 (1 = the slot is attended)
//     probs         [R, H, max_blocks * B] f32; also the scores' scratch
//     scores        [R, KVH, max_blocks * B] f32
// Column t is the request's t-th token in table order: row t % B of block
// block_tables[r, t / B]. Columns at or past context_lens[r] are written as 0.
//
// score_decode_f16: grid (KVH, R, 1), block (32, 1, 1) from the host (any multiple of 32
// works). One block per (KV head, request) walks its G query heads in turn (the scaled query
// in shared memory; scores strided over the threads, block max and sum, probabilities
// normalised in place, then P.V strided over the head dimensions, each sum over the tokens
// in order), and then sums the group's probabilities per token, heads in order, so the
// scores are deterministic. A simple kernel, not a fast one: the lesson's model is tiny.
// hd <= 256 (checked by the host).
//
// This file must compile with NVRTC (no system headers) and with the CPU shim in
// kernels/shim.
// =======================================================================================

#include "common.cuh"
#include "kv_dtype.cuh"

#define SCORE_MAX_HD 256

extern "C" __global__ void score_decode_f16(float* __restrict__ out, float* __restrict__ probs,
                                            float* __restrict__ scores, const float* __restrict__ q,
                                            const kv_t* __restrict__ k_pool,
                                            const kv_t* __restrict__ v_pool,
                                            const int* __restrict__ block_tables,
                                            const int* __restrict__ context_lens,
                                            const int* __restrict__ valid, int max_blocks,
                                            int n_heads, int n_kv_heads, int block_size,
                                            int head_dim, float scale) {
    __shared__ float s_q[SCORE_MAX_HD];
    __shared__ float s_red[32];
    const int kvh = (int)blockIdx.x;
    const int r = (int)blockIdx.y;
    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int G = n_heads / n_kv_heads;
    const int T = max_blocks * block_size;
    const int len = context_lens[r] < 0 ? 0 : context_lens[r];
    const int* table = block_tables + (size_t)r * max_blocks;

    for (int g = 0; g < G; ++g) {
        const int h = kvh * G + g;
        const float* qr = q + ((size_t)r * n_heads + h) * head_dim;
        for (int d = tid; d < head_dim; d += nt) s_q[d] = qr[d] * scale;
        __syncthreads();  // BARRIER: the scaled query is complete before any score reads it

        float* p = probs + ((size_t)r * n_heads + h) * T;
        float* o = out + ((size_t)r * n_heads + h) * head_dim;
        decode_row<true>(
            p, o, len, T, head_dim, s_red,
            [&](int t) {
                const int blk = table[t / block_size];
                const int off = t % block_size;
                if (valid[((size_t)blk * n_kv_heads + kvh) * block_size + off] == 0)
                    return -KVS_INF;  // evicted for this KV head
                const kv_t* row = k_pool + (((size_t)blk * n_kv_heads + kvh) * block_size + off) * head_dim;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d) dot += s_q[d] * __half2float(row[d]);
                return dot;
            },
            [&](float pt, int t, int d) {
                const int blk = table[t / block_size];
                const kv_t* row = v_pool + (((size_t)blk * n_kv_heads + kvh) * block_size +
                                            t % block_size) * head_dim;
                return pt * __half2float(row[d]);
            });
        __syncthreads();  // BARRIER: every thread has left this head's loops before the next head
                          // rewrites s_q (its scores read it) and its probs row
    }

    // The group's mass per token, heads in order (every probs row of the group is complete:
    // the loop's last barrier).
    float* sc = scores + ((size_t)r * n_kv_heads + kvh) * T;
    for (int t = tid; t < T; t += nt) {
        float acc = 0.0f;
        for (int g = 0; g < G; ++g) acc += probs[((size_t)r * n_heads + kvh * G + g) * T + t];
        sc[t] = acc;
    }
}
