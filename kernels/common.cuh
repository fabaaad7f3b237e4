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
