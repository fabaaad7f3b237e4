// kernels/shim/cuda_fp16.h -- CPU stand-in for CUDA's <cuda_fp16.h>.
//
// When the .cu files are compiled as C++ for the CPU shim (with `-I kernels/shim`),
// their `#include <cuda_fp16.h>` lands here instead of the CUDA header.
//
// `__half` is the compiler's native `_Float16` (IEEE binary16, supported by gcc >= 12 on x86-64
// and by clang; `__fp16` on AArch64 with gcc < 13),
// so a `__half*` buffer has exactly the same bits as CUDA's `__half` (and as Rust's
// `half::f16` / `u16`). Conversions float -> half round to nearest, ties to even, which
// is what CUDA's `__float2half` does.
//
// Only the handful of functions the kvscope kernels use are provided.
#pragma once
#ifndef KVS_SHIM_CUDA_FP16_H
#define KVS_SHIM_CUDA_FP16_H

#include <bit>
#include <cstdint>

#if defined(__aarch64__) && !defined(__clang__) && __GNUC__ < 13
// GCC before 13 has no C++ `_Float16` on AArch64; its `__fp16` is the same IEEE binary16 storage
// format (arithmetic promotes to float, and the kernels only convert), with round-to-nearest-even
// conversions from float.
typedef __fp16 __half;
#else
typedef _Float16 __half;
#endif

static_assert(sizeof(__half) == 2, "__half must be 2 bytes");

// float -> half, round to nearest even (the C/C++ conversion uses the current rounding
// mode, which is round-to-nearest-even by default).
inline __half __float2half(float f) { return static_cast<__half>(f); }
inline __half __float2half_rn(float f) { return static_cast<__half>(f); }
// half -> float is exact.
inline float __half2float(__half h) { return static_cast<float>(h); }

// Bit reinterpretation, as in CUDA.
inline __half __ushort_as_half(unsigned short bits) {
    return std::bit_cast<__half>(static_cast<std::uint16_t>(bits));
}
inline unsigned short __half_as_ushort(__half h) {
    return static_cast<unsigned short>(std::bit_cast<std::uint16_t>(h));
}

#endif  // KVS_SHIM_CUDA_FP16_H
