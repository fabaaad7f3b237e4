// =======================================================================================
// kernels/common.cuh -- what the kvscope kernels share: +infinity, the unroll hint, the
// attention masks and the block-wide reductions
// =======================================================================================
//
// A kernel file includes it with `#include "common.cuh"`. NVRTC gets it inlined in place of
// that line (compute::cuda::sources, which keeps the file's line numbers with #line); the
// CPU shim includes each .cu file in its own namespace, so this file has no include guard
// and every namespace gets its own copy. Its twin is kernels/common.wgsl; the mask predicate
// of both is tested against src/math/mask.rs over every mask kind (kernels/mask_table.cu).
//
// Masks (int mask_kind): key j is visible to query i when
//     0 none    always
//     1 causal  j <= i
//     2 window  j <= i && (j > i - W || j < S)   (W = window >= 1, S = sinks >= 0:
//                                                 the first S tokens stay visible, S = 0
//                                                 is a plain sliding window)
// =======================================================================================

#ifndef KVS_INF
#define KVS_INF __int_as_float(0x7f800000)  // +infinity (NVRTC has no <math.h>)
#endif

#ifndef KVS_UNROLL
#if defined(__CUDA_ARCH__)
#define KVS_UNROLL _Pragma("unroll")
#else
#define KVS_UNROLL
#endif
#endif

#define ATTN_WARP 32

#define ATTN_MASK_NONE 0
#define ATTN_MASK_CAUSAL 1
#define ATTN_MASK_WINDOW 2

// Is key j visible to query i?
__device__ __forceinline__ bool attn_visible(int i, int j, int mask_kind, int window, int sinks) {
    if (mask_kind == ATTN_MASK_CAUSAL) return j <= i;
    if (mask_kind == ATTN_MASK_WINDOW) return j <= i && (j > i - window || j < sinks);
    return true;
}

// 2^e as a float (e in the normal range).
__device__ __forceinline__ float kvs_pow2(int e) { return __uint_as_float((unsigned int)(e + 127) << 23); }

// The smallest f16 value >= s (s >= 0), as a float: the INT8 scales' rounding (quant_kv.cu's per
// token, group_kv.cu's per channel).
__device__ __forceinline__ float kvs_f16_ceil(float s) {
    if (!(s > 0.0f)) return 0.0f;
    if (s >= 65504.0f) return 65504.0f;
    if (s < kvs_pow2(-14)) return ceilf(s * kvs_pow2(24)) * kvs_pow2(-24);
    const unsigned int b = __float_as_uint(s);
    return __uint_as_float((b & 0x1fffu) == 0u ? b : (b & ~0x1fffu) + 0x2000u);
}

// ---------------------------------------------------------------------------------------
// Block-wide reductions: first inside each warp with shuffles (no shared memory, no
// barrier), then across warps through shared memory. Every thread of the block must call
// them (they contain __syncthreads) and blockDim.x must be a multiple of 32.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float attn_warp_max(float v) {
    // Butterfly: after offsets 16, 8, 4, 2, 1 every lane holds the max of all 32 lanes.
    for (int off = ATTN_WARP / 2; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float attn_warp_sum(float v) {
    for (int off = ATTN_WARP / 2; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float attn_block_max(float v, float* s_red /* [32] shared */) {
    const int tid = (int)threadIdx.x;
    const int n_warps = (int)blockDim.x / ATTN_WARP;
    v = attn_warp_max(v);
    if ((tid % ATTN_WARP) == 0) s_red[tid / ATTN_WARP] = v;
    __syncthreads();  // BARRIER: every warp's partial is in s_red before anyone reads it
    float r = -KVS_INF;
    for (int w = 0; w < n_warps; ++w) r = fmaxf(r, s_red[w]);
    __syncthreads();  // BARRIER: everyone has read s_red before a later call overwrites it
    return r;
}

__device__ __forceinline__ float attn_block_sum(float v, float* s_red /* [32] shared */) {
    const int tid = (int)threadIdx.x;
    const int n_warps = (int)blockDim.x / ATTN_WARP;
    v = attn_warp_sum(v);
    if ((tid % ATTN_WARP) == 0) s_red[tid / ATTN_WARP] = v;
    __syncthreads();  // BARRIER: partials complete
    float r = 0.0f;
    for (int w = 0; w < n_warps; ++w) r += s_red[w];
    // BARRIER: s_red free again. No current caller touches s_red after a block sum, so
    // this one is only insurance for reuse (in attn_block_max it is required: softmax
    // calls attn_block_sum right after it).
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------------------------------
// The decode body of the kernels that materialise a score row (score_attention,
// stream_attention, quant_kv, group_kv, mla_attention): for one query head, with its scaled
// query already in shared memory,
//
//     p[t] = score(t)                     t < len     (-inf: masked, MASKED kernels only)
//     p[t] = softmax_t(p)                 in place: p is the head's probs row
//     o[d] = sum_t term(p[t], t, d)       d < out_dim, tokens in order
//
// Each kernel supplies how a score and a P.V term are read from its cache (`score`, `term`:
// lambdas over the block table, the dtype, the codes and scales, the rotation), so the
// softmax and the walk are written once. MASKED kernels (tokens masked as -inf: evicted or
// outside the window) give masked tokens weight 0, skip them in P.V, and write 0 in the
// row's columns from len to T. Strided over the block's threads; every thread must call it
// (it contains __syncthreads). The paged decode's split-context online softmax
// (paged_attention.cu) is another algorithm and does not use it.
// ---------------------------------------------------------------------------------------
template <bool MASKED, class Score, class Term>
__device__ __forceinline__ void decode_row(float* p, float* o, int len, int T, int out_dim,
                                           float* s_red /* [32] shared */, Score score,
                                           Term term) {
    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    float m = -KVS_INF;
    for (int t = tid; t < len; t += nt) {
        const float s = score(t);
        p[t] = s;
        m = fmaxf(m, s);
    }
    m = attn_block_max(m, s_red);
    float l = 0.0f;
    for (int t = tid; t < len; t += nt) {
        const float e = (MASKED && p[t] == -KVS_INF) ? 0.0f : __expf(p[t] - m);
        p[t] = e;
        l += e;
    }
    l = attn_block_sum(l, s_red);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    if (MASKED) {
        for (int t = tid; t < T; t += nt) p[t] = t < len ? p[t] * inv : 0.0f;
    } else {
        for (int t = tid; t < len; t += nt) p[t] *= inv;
    }
    __syncthreads();  // BARRIER: every probability is in p before P.V reads them all

    for (int d = tid; d < out_dim; d += nt) {
        float acc = 0.0f;
        for (int t = 0; t < len; ++t) {
            const float pt = p[t];
            if (MASKED && pt == 0.0f) continue;
            acc += term(pt, t, d);
        }
        o[d] = acc;
    }
}
