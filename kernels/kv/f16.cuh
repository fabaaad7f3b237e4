// =======================================================================================
// kernels/kv/f16.cuh -- how the KV kernels read and write f16 pools
// =======================================================================================
//
// A KV dtype is one header like this one: the pool's element type kv_t, the 16-byte load
// of 8 values of a row (kv_load8, kept raw so that many loads can be in flight), their
// conversion to f32 (kv_unpack8), and the store of one f32 (kv_store). The kernels
// include "kv_dtype.cuh"; the host compiles them with the pool's dtype header in its
// place (the CPU shim's kv_dtype.cuh includes this file: it runs the f16 pools). No
// include guard: the shim includes each kernel file in a namespace of its own.
// =======================================================================================


#include <cuda_fp16.h>

#ifndef KVS_UNROLL  // common.cuh, included before this file, defines it
#define KVS_UNROLL
#endif

typedef __half kv_t;   // one stored value
typedef uint4 kv_raw8; // 8 stored values, as loaded

__device__ __forceinline__ float kv_lo(unsigned int w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
}
__device__ __forceinline__ float kv_hi(unsigned int w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
}

// 8 raw values -> 8 floats.
__device__ __forceinline__ void kv_unpack8(const kv_raw8 u, float f[8]) {
    f[0] = kv_lo(u.x); f[1] = kv_hi(u.x);
    f[2] = kv_lo(u.y); f[3] = kv_hi(u.y);
    f[4] = kv_lo(u.z); f[5] = kv_hi(u.z);
    f[6] = kv_lo(u.w); f[7] = kv_hi(u.w);
}

// 8 values that read as 0.
__device__ __forceinline__ kv_raw8 kv_zero8() {
    kv_raw8 u;
    u.x = 0u; u.y = 0u; u.z = 0u; u.w = 0u;
    return u;
}

// The 8 values row[d0 .. d0+7]; dims >= head_dim read as 0.
// vec_ok (head_dim % 8 == 0, uniform) -> one aligned 16-byte load.
__device__ __forceinline__ kv_raw8 kv_load8(const kv_t* row, int d0, int head_dim, bool vec_ok) {
    if (d0 >= head_dim) return kv_zero8();  // this lane owns no dims (hd < 8 * LPR)
    if (vec_ok) return *reinterpret_cast<const kv_raw8*>(row + d0);
    unsigned int b[8];  // odd head_dim: element by element
    KVS_UNROLL
    for (int e = 0; e < 8; ++e)
        b[e] = (d0 + e < head_dim) ? (unsigned int)__half_as_ushort(row[d0 + e]) : 0u;
    kv_raw8 u;
    u.x = b[0] | (b[1] << 16);
    u.y = b[2] | (b[3] << 16);
    u.z = b[4] | (b[5] << 16);
    u.w = b[6] | (b[7] << 16);
    return u;
}

// Store one value, rounded to nearest (ties to even).
__device__ __forceinline__ void kv_store(kv_t* pool, long long i, float x) {
    pool[i] = __float2half(x);
}
