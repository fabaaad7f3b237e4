// =======================================================================================
// kernels/stream_attention.cu -- decode attention over a paged cache whose keys are stored
// BEFORE RoPE, rotated as they are read, each at a position the host chooses (StreamingLLM)
// =======================================================================================
//
// What it computes
// ----------------
// One decode step per request r: the query q[r,h,:] (not yet rotated) is turned to the
// position q_pos[r]; every cached token t < context_lens[r] of the request is read through
// the block table and its key is turned to key_pos[r,t] on the way in; a token with
// key_pos < 0 is masked (skipped: the edge of a sliding window inside a kept block):
//
//     s_t = scale * rope(q, q_pos) . rope(K_t, key_pos[t])         (key_pos[t] >= 0)
//     p_t = softmax_t(s_t),      out[r,h,:] = sum_t p_t V_t,      probs[r,h,t] = p_t
//
// The host picks the positions: with positions by cache slot, the kept tokens in text
// order get 0, 1, 2, ... (StreamingLLM's scheme: the distances the model sees stay within
// its trained context however long the stream); with text positions each token keeps its
// own. RoPE scores depend only on q_pos - key_pos, and rotations compose (R(a) R(b) = R(a+b)),
// so a key rotated at write time could also be moved, by rotating it again by p' - p; but then
// every window key would be re-rotated and written back at every step. Storing unrotated keys and
// rotating them here, as they are read, makes renumbering read-only.
//
// Layouts
// -------
//     q, out        [R, H, hd] f32          q_pos [R] i32
//     k_pool,v_pool [N, KVH, B, hd] f16     block_tables [R, max_blocks] i32
//     key_pos       [R, max_blocks * B]     (the request's live tokens in table order)
//     probs         [R, H, max_blocks * B]  f32; also the scores' scratch
//     cos_sin       [P, hd]: row p holds cos(p theta_i) for i < hd/2, then sin(p theta_i)
// Token t of request r is row t % B of physical block block_tables[r, t / B]. GQA: query
// head h reads KV head h / (H / KVH). Rotation is "rotate half" (d pairs with d + hd/2),
// as kernels/rope.cu.
//
// stream_decode_f16: grid (H, R, 1), block (32, 1, 1) from the host (any multiple of 32
// works). One block per (query head, request): the rotated, scaled query sits in shared memory; the threads stride over the
// tokens for the scores (written to probs), reduce max and sum across the block, normalise
// probs in place, and then stride over the head dimensions for P.V, each summing the
// tokens in order. A simple kernel, not a fast one: the lesson streams a 0.8M-parameter
// model; the fast decode is kernels/paged_attention.cu. hd <= 256 (checked by the host).
//
// This file must compile with NVRTC (no system headers) and with the CPU shim in
// kernels/shim.
// =======================================================================================

#include "common.cuh"
#include "kv_dtype.cuh"

#define STREAM_MAX_HD 256

extern "C" __global__ void stream_decode_f16(float* __restrict__ out, float* __restrict__ probs,
                                             const float* __restrict__ q,
                                             const int* __restrict__ q_pos,
                                             const kv_t* __restrict__ k_pool,
                                             const kv_t* __restrict__ v_pool,
                                             const int* __restrict__ block_tables,
                                             const int* __restrict__ context_lens,
                                             const int* __restrict__ key_pos,
                                             const float* __restrict__ cos_sin, int max_blocks,
                                             int n_heads, int n_kv_heads, int block_size,
                                             int head_dim, float scale) {
    __shared__ float s_q[STREAM_MAX_HD];
    __shared__ float s_red[32];
    const int h = (int)blockIdx.x;
    const int r = (int)blockIdx.y;
    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int kvh = h / (n_heads / n_kv_heads);
    const int half = head_dim / 2;
    const int T = max_blocks * block_size;
    const int len = context_lens[r] < 0 ? 0 : context_lens[r];

    // The query, turned to q_pos and scaled once.
    const float* qr = q + ((size_t)r * n_heads + h) * head_dim;
    const float* qcs = cos_sin + (size_t)q_pos[r] * head_dim;
    for (int d = tid; d < half; d += nt) {
        const float x1 = qr[d], x2 = qr[d + half];
        const float c = qcs[d], s = qcs[half + d];
        s_q[d] = (x1 * c - x2 * s) * scale;
        s_q[d + half] = (x2 * c + x1 * s) * scale;
    }
    __syncthreads();  // BARRIER: the rotated query is complete before any score reads it

    float* p = probs + ((size_t)r * n_heads + h) * T;
    const int* kp = key_pos + (size_t)r * T;
    const int* table = block_tables + (size_t)r * max_blocks;
    float* o = out + ((size_t)r * n_heads + h) * head_dim;
    decode_row<true>(
        p, o, len, T, head_dim, s_red,
        [&](int t) {
            const int pos = kp[t];
            if (pos < 0) return -KVS_INF;  // masked: outside the window
            const int blk = table[t / block_size];
            const kv_t* row =
                k_pool + (((size_t)blk * n_kv_heads + kvh) * block_size + t % block_size) * head_dim;
            const float* kcs = cos_sin + (size_t)pos * head_dim;
            float dot = 0.0f;
            for (int d = 0; d < half; ++d) {
                const float k1 = __half2float(row[d]), k2 = __half2float(row[d + half]);
                const float c = kcs[d], s = kcs[half + d];
                dot += s_q[d] * (k1 * c - k2 * s);
                dot += s_q[d + half] * (k2 * c + k1 * s);
            }
            return dot;
        },
        [&](float pt, int t, int d) {
            const int blk = table[t / block_size];
            const kv_t* row =
                v_pool + (((size_t)blk * n_kv_heads + kvh) * block_size + t % block_size) * head_dim;
            return pt * __half2float(row[d]);
        });
}
