// =======================================================================================
// kernels/kv_cache.cu -- writing new K/V rows into a KV cache (f32 in, f16 stored)
// =======================================================================================
//
// During decoding, every step produces one new key row and one new value row per
// (request, kv head, layer). Attention at later steps needs all of them again, so they
// are stored in a KV cache instead of being recomputed. The cache holds f16 (half the
// bytes of f32); each value is rounded with __float2half (round to nearest, ties to even).
// Attention reads them back and accumulates in f32.
//
// Two cache designs, one kernel each:
//
// 1. static_cache_append_f16 -- the "static" (preallocated) cache
//      k_cache, v_cache  [L, B, KVH, S, hd] f16     L layers, B batch rows, S = max_seq
//      k_new, v_new      [B, KVH, hd] f32           the rows of decode step `pos`
//    Row (layer, b, h) goes to sequence position `pos`:
//      dst = ((((layer*B + b)*KVH + h)*S + pos)*hd + d)
//    Every request reserves S positions up front, used or not: simple addressing, but
//    memory is wasted when most sequences are shorter than S.
//    launch: grid (B*KVH, 1, 1) -- one block per (b, h); block (128,1,1), threads loop
//    over d (consecutive threads write consecutive halves: coalesced).
//
// 2. paged_append_f16 -- the paged cache (vLLM style)
//      k_pool, v_pool    [num_blocks, KVH, block_size, hd] f16   one shared pool
//      k, v              [num_tokens, KVH, hd] f32               new tokens of any requests
//      slot_mapping      [num_tokens] i32: slot = physical_block * block_size + offset
//    The host's allocator hands out fixed-size blocks from a free list and records, for
//    each token, the slot it goes to. A slot < 0 means "do not store this token" (vLLM's
//    convention for padding), and the kernel skips it.
//      dst = ((block*KVH + h)*block_size + offset)*hd + d
//    launch: grid (num_tokens, 1, 1) -- one block per token; block (128,1,1), threads loop
//    over the KVH*hd values of the token.
//
// 3. copy_blocks_f16 -- copy-on-write of the paged cache (vLLM's copy_blocks)
//      k_pool, v_pool    [num_blocks, KVH, block_size, hd] f16
//      block_mapping     [num_pairs, 2] i32: (src, dst) physical blocks
//    When a forked request first appends into a shared, partly filled last block, the host
//    gives it a fresh block and asks for the filled slots to be copied there. A whole block
//    (KVH*block_size*hd values of K and of V) is copied; full blocks are never copied.
//    The host guarantees that no dst is also a src or another pair's dst, so pairs are
//    independent and may run in any order.
//    launch: grid (num_pairs, 1, 1) -- one block per pair; block (128,1,1), threads loop
//    over the block's values (consecutive threads copy consecutive halves: coalesced).
//
// Indices are computed in 64-bit (long long): a real cache easily has more than 2^31
// elements. Neither kernel uses barriers, so out-of-range threads may return early.
// Compiles with NVRTC (only <cuda_fp16.h>) and with the CPU shim in kernels/shim.
// =======================================================================================

#include <cuda_fp16.h>

#include "kv_dtype.cuh"  // kv_t, kv_store: the paged pools' dtype (kernels/kv/)

extern "C" __global__ void static_cache_append_f16(__half* __restrict__ k_cache,
                                                   __half* __restrict__ v_cache,
                                                   const float* __restrict__ k_new,
                                                   const float* __restrict__ v_new, int layer,
                                                   int pos, int batch, int n_kv_heads,
                                                   int max_seq, int head_dim) {
    const int bh = (int)blockIdx.x;  // = b * KVH + h
    if (bh >= batch * n_kv_heads || layer < 0 || pos < 0 || pos >= max_seq) return;
    const int b = bh / n_kv_heads;
    const int h = bh % n_kv_heads;

    const long long dst =
        ((((long long)layer * batch + b) * n_kv_heads + h) * max_seq + pos) * head_dim;
    const long long src = (long long)bh * head_dim;  // [B, KVH, hd]: row (b, h)

    for (int d = (int)threadIdx.x; d < head_dim; d += (int)blockDim.x) {
        k_cache[dst + d] = __float2half(k_new[src + d]);
        v_cache[dst + d] = __float2half(v_new[src + d]);
    }
}

extern "C" __global__ void paged_append_f16(kv_t* __restrict__ k_pool,
                                            kv_t* __restrict__ v_pool,
                                            const float* __restrict__ k,
                                            const float* __restrict__ v,
                                            const int* __restrict__ slot_mapping,
                                            int num_tokens, int n_kv_heads, int block_size,
                                            int head_dim) {
    const int t = (int)blockIdx.x;  // token
    if (t >= num_tokens || block_size <= 0) return;
    const int slot = slot_mapping[t];
    if (slot < 0) return;  // padding token: nothing to store
    const int block = slot / block_size;   // physical block in the pool
    const int offset = slot % block_size;  // row inside that block

    const int n = n_kv_heads * head_dim;  // values per token per tensor
    const long long src = (long long)t * n;
    for (int e = (int)threadIdx.x; e < n; e += (int)blockDim.x) {
        const int h = e / head_dim;
        const int d = e % head_dim;
        const long long dst =
            (((long long)block * n_kv_heads + h) * block_size + offset) * head_dim + d;
        kv_store(k_pool, dst, k[src + e]);
        kv_store(v_pool, dst, v[src + e]);
    }
}

extern "C" __global__ void copy_blocks_f16(kv_t* __restrict__ k_pool, kv_t* __restrict__ v_pool,
                                           const int* __restrict__ block_mapping, int num_pairs,
                                           int numel_per_block) {
    const int p = (int)blockIdx.x;  // pair
    if (p >= num_pairs || numel_per_block <= 0) return;
    const long long src = (long long)block_mapping[2 * p] * numel_per_block;
    const long long dst = (long long)block_mapping[2 * p + 1] * numel_per_block;
    for (int e = (int)threadIdx.x; e < numel_per_block; e += (int)blockDim.x) {
        k_pool[dst + e] = k_pool[src + e];
        v_pool[dst + e] = v_pool[src + e];
    }
}
