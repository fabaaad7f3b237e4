// =======================================================================================
// kernels/group_kv.cu -- a KV cache quantised in GROUPS: INT8 per channel and KIVI-style
// 2-/4-bit (K per channel, V per token), with the f16 residual that waits for a group
// =======================================================================================
//
// Quantisation here waits until a group is complete, so each layer's cache has two parts:
//   code pools  k_codes, v_codes [N, KVH, G, hd*bits/8] bytes: bits-bit codes packed along
//               the head dimension, code d in bits (d*bits)%8.. of byte d*bits/8 of its row;
//               blocks of G tokens (G = the K group).
//   parameters  k_scale, k_zero [N, KVH, hd] f32 holding f16 values: one per channel per
//               block (per-channel K, and V for INT8 per channel); KIVI's V:
//               v_scale, v_zero [N, KVH, G, ceil(hd/G)]: one per token per group of G channels.
//   rings       k_ring, v_ring [rings, R+1, KVH, hd] f16: token t of a request at row
//               t % (R+1) until it is quantised (R+1: V's leaving token is quantised in the
//               step that appends the next one).
// Formats: symmetric (INT8 per channel): scale = absmax/127 rounded UP to an f16 value,
//   code = rint(x/scale) clamped to [-127,127], two's complement, value = code*scale;
// asymmetric (KIVI, jy-yuan/KIVI): zero = f16(min), scale = f16((max - zero)/(2^bits-1)),
//   code = rint((x - zero)/scale) clamped to [0, 2^bits-1], value = code*scale + zero.
// rintf rounds half to even. The Rust encoder (src/compute/ops/group_append/mod.rs) is the
// one every backend's codes are compared with.
//
// group_store_f16: grid (rows, 1, 1), block (32,1,1): new row i (ring, t) of every KV head
//   into its ring row, rounded to f16 (round to nearest even).
// group_quant: grid (jobs, 1, 1), block (32,1,1): thread h < KVH runs job j for KV head h
//   alone (its rows' bytes have one writer): kind 0 (K) or 1 (V) quantises tokens t0..t0+G
//   of the ring per channel into block dst; kind 2 quantises V's token t0 per group of G
//   channels into slot dst (block dst/G, offset dst%G).
// group_decode: grid (KVH, R, 1), block (32,1,1): one block per (KV head, request), its
//   query group in turn, as quant_decode_u8 in quant_kv.cu: scores (each K value read
//   from the codes when t < kq, else from the ring), block max and sum, P.V (V alike,
//   t < vq). hd <= 256.
// This file must compile with NVRTC (only <cuda_fp16.h>) and with the CPU shim.
// =======================================================================================

#include <cuda_fp16.h>

#include "common.cuh"

#define GROUP_MAX_HD 256

__device__ __forceinline__ float g_f16r(float x) { return __half2float(__float2half_rn(x)); }

// The group's (scale, zero) of n values x[i * stride].
__device__ __forceinline__ void g_params(const __half* x, long long stride, int n, int bits, int sym,
                                         float* scale, float* zero) {
    if (sym) {
        float amax = 0.0f;
        for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(__half2float(x[i * stride])));
        *scale = kvs_f16_ceil(amax / 127.0f);
        *zero = 0.0f;
    } else {
        float lo = KVS_INF, hi = -KVS_INF;
        for (int i = 0; i < n; ++i) {
            const float v = __half2float(x[i * stride]);
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
        lo = g_f16r(lo);
        *zero = lo;
        *scale = g_f16r((hi - lo) / (float)((1 << bits) - 1));
    }
}

__device__ __forceinline__ unsigned int g_encode(float x, float scale, float zero, int bits, int sym) {
    if (!(scale > 0.0f) || x != x) return 0u;
    if (sym) {
        const float r = fminf(fmaxf(rintf(x / scale), -127.0f), 127.0f);
        return (unsigned int)((int)r) & 0xffu;
    }
    const float levels = (float)((1 << bits) - 1);
    return (unsigned int)fminf(fmaxf(rintf((x - zero) / scale), 0.0f), levels);
}

__device__ __forceinline__ float g_decode(unsigned int c, float scale, float zero, int sym) {
    if (sym) return (float)(int)(signed char)(c & 0xffu) * scale;
    return (float)c * scale + zero;
}

__device__ __forceinline__ unsigned int g_code(const unsigned char* codes, long long row, int d, int rb,
                                               int bits) {
    const int bit = d * bits;
    return ((unsigned int)codes[row * rb + (bit >> 3)] >> (bit & 7)) & ((1u << bits) - 1u);
}

extern "C" __global__ void group_store_f16(__half* __restrict__ k_ring, __half* __restrict__ v_ring,
                                           const float* __restrict__ k, const float* __restrict__ v,
                                           const int* __restrict__ rows, int n_rows, int n_kv_heads,
                                           int head_dim, int cap) {
    const int i = (int)blockIdx.x;
    if (i >= n_rows) return;
    const int ring = rows[2 * i];
    const int t = rows[2 * i + 1];
    const int n = n_kv_heads * head_dim;
    const long long dst = ((long long)ring * cap + t % cap) * n;
    for (int x = (int)threadIdx.x; x < n; x += (int)blockDim.x) {
        k_ring[dst + x] = __float2half_rn(k[(long long)i * n + x]);
        v_ring[dst + x] = __float2half_rn(v[(long long)i * n + x]);
    }
}

extern "C" __global__ void group_quant(unsigned char* __restrict__ k_codes, unsigned char* __restrict__ v_codes,
                                       float* __restrict__ k_scale, float* __restrict__ k_zero,
                                       float* __restrict__ v_scale, float* __restrict__ v_zero,
                                       const __half* __restrict__ k_ring, const __half* __restrict__ v_ring,
                                       const int* __restrict__ jobs, int n_jobs, int n_kv_heads, int head_dim,
                                       int group, int cap, int bits, int sym) {
    const int j = (int)blockIdx.x;
    if (j >= n_jobs) return;
    const int kind = jobs[4 * j], ring = jobs[4 * j + 1], t0 = jobs[4 * j + 2], dst = jobs[4 * j + 3];
    const int hd = head_dim;
    const int rb = hd * bits / 8;
    const int per = 8 / bits;  // codes per byte
    const long long ring_row = (long long)n_kv_heads * hd;
    for (int h = (int)threadIdx.x; h < n_kv_heads; h += (int)blockDim.x) {
        if (kind == 2) {  // V per token: groups of `group` channels
            const int vg = (hd + group - 1) / group;
            const long long row = ((long long)(dst / group) * n_kv_heads + h) * group + dst % group;
            const __half* x = v_ring + ((long long)ring * cap + t0 % cap) * ring_row + (long long)h * hd;
            for (int g = 0; g < vg; ++g) {
                const int c0 = g * group;
                const int n = hd - c0 < group ? hd - c0 : group;
                g_params(x + c0, 1, n, bits, sym, &v_scale[row * vg + g], &v_zero[row * vg + g]);
            }
            for (int b = 0; b < rb; ++b) {
                unsigned int byte = 0u;
                for (int e = 0; e < per; ++e) {
                    const int d = b * per + e;
                    const long long pi = row * vg + d / group;
                    byte |= g_encode(__half2float(x[d]), v_scale[pi], v_zero[pi], bits, sym) << (e * bits);
                }
                v_codes[row * rb + b] = (unsigned char)byte;
            }
        } else {  // per channel: tokens t0 .. t0+group of the ring into block dst
            const int v = kind == 1;
            const __half* rbase = (v ? v_ring : k_ring) + (long long)ring * cap * ring_row + (long long)h * hd;
            unsigned char* codes = v ? v_codes : k_codes;
            float* scale = v ? v_scale : k_scale;
            float* zero = v ? v_zero : k_zero;
            const long long pb = ((long long)dst * n_kv_heads + h) * hd;
            for (int d = 0; d < hd; ++d) {
                // The group's values of channel d are G ring rows apart (the ring wraps only at cap).
                float lo = KVS_INF, hi = -KVS_INF, amax = 0.0f;
                for (int i = 0; i < group; ++i) {
                    const float x = __half2float(rbase[(long long)((t0 + i) % cap) * ring_row + d]);
                    lo = fminf(lo, x);
                    hi = fmaxf(hi, x);
                    amax = fmaxf(amax, fabsf(x));
                }
                if (sym) {
                    scale[pb + d] = kvs_f16_ceil(amax / 127.0f);
                    zero[pb + d] = 0.0f;
                } else {
                    lo = g_f16r(lo);
                    zero[pb + d] = lo;
                    scale[pb + d] = g_f16r((hi - lo) / (float)((1 << bits) - 1));
                }
            }
            for (int i = 0; i < group; ++i) {
                const long long row = ((long long)dst * n_kv_heads + h) * group + i;
                const __half* x = rbase + (long long)((t0 + i) % cap) * ring_row;
                for (int b = 0; b < rb; ++b) {
                    unsigned int byte = 0u;
                    for (int e = 0; e < per; ++e) {
                        const int d = b * per + e;
                        byte |= g_encode(__half2float(x[d]), scale[pb + d], zero[pb + d], bits, sym) << (e * bits);
                    }
                    codes[row * rb + b] = (unsigned char)byte;
                }
            }
        }
    }
}

// Token t's value of channel d (KV head h) of one tensor: from the codes when t < quantised,
// else from the ring. per_token: the parameters are per token per group of channels.
__device__ __forceinline__ float g_value(const unsigned char* codes, const float* scale, const float* zero,
                                         const __half* ring, const int* table, int ring_id, int quantised,
                                         int per_token, int t, int h, int d, int n_kv_heads, int hd,
                                         int group, int cap, int bits, int sym) {
    if (t < quantised) {
        const long long blk = table[t / group];
        const long long row = (blk * n_kv_heads + h) * group + t % group;
        const long long pi = per_token ? row * ((hd + group - 1) / group) + d / group
                                       : (blk * n_kv_heads + h) * hd + d;
        return g_decode(g_code(codes, row, d, hd * bits / 8, bits), scale[pi], zero[pi], sym);
    }
    return __half2float(ring[(((long long)ring_id * cap + t % cap) * n_kv_heads + h) * hd + d]);
}

extern "C" __global__ void group_decode(float* __restrict__ out, float* __restrict__ probs,
                                        const float* __restrict__ q, const unsigned char* __restrict__ k_codes,
                                        const unsigned char* __restrict__ v_codes,
                                        const float* __restrict__ k_scale, const float* __restrict__ k_zero,
                                        const float* __restrict__ v_scale, const float* __restrict__ v_zero,
                                        const __half* __restrict__ k_ring, const __half* __restrict__ v_ring,
                                        const int* __restrict__ block_tables, const int* __restrict__ context_lens,
                                        const int* __restrict__ k_quantised, const int* __restrict__ v_quantised,
                                        const int* __restrict__ rings, int max_blocks, int n_heads,
                                        int n_kv_heads, int head_dim, float scale, int group, int cap,
                                        int bits, int sym, int v_per_token) {
    __shared__ float s_q[GROUP_MAX_HD];
    __shared__ float s_red[32];
    const int kvh = (int)blockIdx.x;
    const int r = (int)blockIdx.y;
    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int G = n_heads / n_kv_heads;
    const int T = max_blocks * group;
    const int hd = head_dim;
    const int len = context_lens[r] < 0 ? 0 : context_lens[r];
    const int kq = k_quantised[r], vq = v_quantised[r], ring = rings[r];
    const int* table = block_tables + (size_t)r * max_blocks;

    for (int g = 0; g < G; ++g) {
        const int h = kvh * G + g;
        const float* qr = q + ((size_t)r * n_heads + h) * hd;
        for (int d = tid; d < hd; d += nt) s_q[d] = qr[d] * scale;
        __syncthreads();  // BARRIER: the scaled query is complete before any score reads it

        float* p = probs + ((size_t)r * n_heads + h) * T;
        float* o = out + ((size_t)r * n_heads + h) * hd;
        decode_row<false>(
            p, o, len, T, hd, s_red,
            [&](int t) {
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d)
                    dot += s_q[d] * g_value(k_codes, k_scale, k_zero, k_ring, table, ring, kq, 0, t, kvh, d,
                                            n_kv_heads, hd, group, cap, bits, sym);
                return dot;
            },
            [&](float pt, int t, int d) {
                return pt * g_value(v_codes, v_scale, v_zero, v_ring, table, ring, vq, v_per_token, t, kvh, d,
                                    n_kv_heads, hd, group, cap, bits, sym);
            });
        __syncthreads();  // BARRIER: every thread has left this head's loops before the next head
                          // rewrites s_q and its probs row
    }
}
