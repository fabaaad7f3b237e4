// =======================================================================================
// kernels/quant_kv.cu -- a KV cache stored in 8 bits: the quantising append and the
// dequantising paged decode (INT8 per token, FP8 E4M3 and E5M2)
// =======================================================================================
//
// Formats (fmt), one byte per value, written from their specifications:
//   1  INT8 symmetric, one scale per token row: scale = absmax(row) / 127 rounded UP to an
//      f16 value (so |x / scale| <= 127 and the round trip errs by at most scale / 2);
//      code = rint(x / scale) clamped to [-127, 127], two's complement.
//   2  FP8 E4M3 (OCP "E4M3FN"): bias 7, 3 mantissa bits, no infinities, max 448 (0x7E),
//      NaN only at S.1111.111.
//   3  FP8 E5M2: bias 15, 2 mantissa bits, infinities at S.11111.00, max 57344 (0x7B).
//   FP8 stores x / scale with a scale per tensor or per KV head (vLLM's k_scale / v_scale),
//   rounded to nearest, ties to even (subnormals included); finite values past max and
//   +-Inf saturate to +-max (vLLM's KV-cache write saturates; a plain cast would not);
//   NaN is written as 0x7F (a NaN in both formats).
// Scales (scale_mode): 0 one per row, index (block*KVH + h)*B + slot; 1 one per KV head;
// 2 one per tensor. The host's Rust twin is src/cache/dtype/quant.rs; tests compare codes.
//
// Layouts
//     k_pool, v_pool   [N, KVH, B, hd] u8 codes    k_scales, v_scales  f32 (see scale_mode)
//     k, v             [num_tokens, KVH, hd] f32   slot_mapping [num_tokens] i32 (<0: skip)
//     q, out           [R, H, hd] f32              block_tables [R, max_blocks] i32
//     context_lens     [R] i32                     probs  [R, H, max_blocks * B] f32 scratch
//
// quant_append_u8: grid (num_tokens, 1, 1), block (32, 1, 1). Thread h < KVH quantises the
// row of KV head h (strided over the threads): its scale first (INT8: the row's absmax;
// FP8: read), then its codes, so each row has one writer and no barrier is needed.
//
// quant_decode_u8: grid (KVH, R, 1), block (32, 1, 1) (any multiple of 32 works). One block
// per (KV head, request) walks its G query heads in turn, as score_attention.cu does:
// scores strided over the threads (each K row's codes dequantised, the row's scale applied
// once to the dot product), block max and sum, probabilities normalised in `probs`, then
// P.V strided over the head dimensions (V's codes dequantised, each row's scale applied to
// its weight). hd <= 256 (checked by the host). A simple kernel: the point is what the
// bytes hold, and the CPU backend's SIMD path is the one the benchmarks time.
//
// This file must compile with NVRTC (no system headers) and with the CPU shim.
// =======================================================================================

#include "common.cuh"

#define QUANT_MAX_HD 256


// FP8 parameters of fmt 2 (E4M3) and 3 (E5M2).
__device__ __forceinline__ int q_mbits(int fmt) { return fmt == 2 ? 3 : 2; }
__device__ __forceinline__ int q_bias(int fmt) { return fmt == 2 ? 7 : 15; }
__device__ __forceinline__ unsigned int q_max_code(int fmt) { return fmt == 2 ? 0x7Eu : 0x7Bu; }
__device__ __forceinline__ float q_max(int fmt) { return fmt == 2 ? 448.0f : 57344.0f; }

// The value of an FP8 code (exact).
__device__ __forceinline__ float fp8_decode(unsigned int c, int fmt) {
    const int mb = q_mbits(fmt);
    const unsigned int emask = fmt == 2 ? 15u : 31u;
    const unsigned int mmask = (1u << mb) - 1u;
    const unsigned int e = (c >> mb) & emask;
    const unsigned int m = c & mmask;
    const float sign = (c & 0x80u) ? -1.0f : 1.0f;
    if (e == emask) {
        if (fmt == 3) return m == 0u ? sign * KVS_INF : __uint_as_float(0x7fc00000u);
        if (m == mmask) return __uint_as_float(0x7fc00000u);
    }
    const int bias = q_bias(fmt);
    if (e == 0u) return sign * (float)m * kvs_pow2(1 - bias - mb);
    return sign * (float)((1u << mb) + m) * kvs_pow2((int)e - bias - mb);
}

// The FP8 code of x (already divided by its scale): round to nearest even, saturating.
__device__ __forceinline__ unsigned int fp8_encode(float x, int fmt) {
    if (x != x) return 0x7Fu;  // NaN
    const unsigned int sign = (__float_as_uint(x) >> 24) & 0x80u;
    const float a = fabsf(x);
    if (a >= q_max(fmt)) return sign | q_max_code(fmt);  // saturate (+-Inf too)
    const int mb = q_mbits(fmt);
    const int bias = q_bias(fmt);
    int e = (int)((__float_as_uint(a) >> 23) & 0xffu) - 127;
    if (e < 1 - bias) e = 1 - bias;  // subnormal range: the smallest quantum
    unsigned int qm = (unsigned int)rintf(a * kvs_pow2(mb - e));  // exact scaling, RNE rounding
    if (qm == (2u << mb)) {  // rounded up into the next binade
        qm >>= 1;
        e += 1;
    }
    const unsigned int code =
        qm < (1u << mb) ? qm : (((unsigned int)(e + bias) << mb) | (qm - (1u << mb)));
    return sign | code;
}


__device__ __forceinline__ unsigned int int8_encode(float x, float scale) {
    if (!(scale > 0.0f) || x != x) return 0u;
    float r = rintf(x / scale);
    r = fminf(fmaxf(r, -127.0f), 127.0f);
    return (unsigned int)((int)r) & 0xffu;
}

__device__ __forceinline__ float q_decode(unsigned int c, int fmt) {
    if (fmt == 1) return (float)(int)(signed char)(c & 0xffu);
    return fp8_decode(c, fmt);
}

__device__ __forceinline__ long long q_scale_index(int scale_mode, long long row, int h) {
    return scale_mode == 0 ? row : (scale_mode == 1 ? (long long)h : 0ll);
}

// Quantise one row of hd values into dst, with its scale (INT8: computed and stored).
__device__ __forceinline__ void quant_row(unsigned char* dst, float* scales, long long si,
                                          const float* src, int hd, int fmt) {
    if (fmt == 1) {
        float amax = 0.0f;
        // One scale per row: its largest |x| maps to 127.
        for (int d = 0; d < hd; ++d) amax = fmaxf(amax, fabsf(src[d]));
        const float s = kvs_f16_ceil(amax / 127.0f);
        scales[si] = s;
        for (int d = 0; d < hd; ++d) dst[d] = (unsigned char)int8_encode(src[d], s);
    } else {
        const float s = scales[si];
        for (int d = 0; d < hd; ++d) dst[d] = (unsigned char)fp8_encode(src[d] / s, fmt);
    }
}

extern "C" __global__ void quant_append_u8(unsigned char* __restrict__ k_pool,
                                           unsigned char* __restrict__ v_pool,
                                           float* __restrict__ k_scales,
                                           float* __restrict__ v_scales,
                                           const float* __restrict__ k,
                                           const float* __restrict__ v,
                                           const int* __restrict__ slot_mapping, int num_tokens,
                                           int n_kv_heads, int block_size, int head_dim, int fmt,
                                           int scale_mode) {
    const int t = (int)blockIdx.x;
    if (t >= num_tokens || block_size <= 0) return;
    const int slot = slot_mapping[t];
    if (slot < 0) return;  // padding token: nothing to store
    const int block = slot / block_size;
    const int offset = slot % block_size;
    for (int h = (int)threadIdx.x; h < n_kv_heads; h += (int)blockDim.x) {
        const long long row = ((long long)block * n_kv_heads + h) * block_size + offset;
        const long long si = q_scale_index(scale_mode, row, h);
        const long long src = ((long long)t * n_kv_heads + h) * head_dim;
        quant_row(k_pool + row * head_dim, k_scales, si, k + src, head_dim, fmt);
        quant_row(v_pool + row * head_dim, v_scales, si, v + src, head_dim, fmt);
    }
}

extern "C" __global__ void quant_decode_u8(float* __restrict__ out, float* __restrict__ probs,
                                           const float* __restrict__ q,
                                           const unsigned char* __restrict__ k_pool,
                                           const unsigned char* __restrict__ v_pool,
                                           const float* __restrict__ k_scales,
                                           const float* __restrict__ v_scales,
                                           const int* __restrict__ block_tables,
                                           const int* __restrict__ context_lens, int max_blocks,
                                           int n_heads, int n_kv_heads, int block_size,
                                           int head_dim, float scale, int fmt, int scale_mode) {
    __shared__ float s_q[QUANT_MAX_HD];
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
        auto row_of = [&](int t) {
            return ((long long)table[t / block_size] * n_kv_heads + kvh) * block_size + t % block_size;
        };
        decode_row<false>(
            p, o, len, T, head_dim, s_red,
            [&](int t) {
                const long long row = row_of(t);
                const unsigned char* kr = k_pool + row * head_dim;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d) dot += s_q[d] * q_decode(kr[d], fmt);
                dot *= k_scales[q_scale_index(scale_mode, row, kvh)];
                return dot;
            },
            [&](float pt, int t, int d) {
                const long long row = row_of(t);
                const float w = pt * v_scales[q_scale_index(scale_mode, row, kvh)];
                return w * q_decode(v_pool[row * head_dim + d], fmt);
            });
        __syncthreads();  // BARRIER: every thread has left this head's loops before the next head
                          // rewrites s_q and its probs row
    }
}
