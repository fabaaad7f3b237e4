/* kernels/shim/kvs_sim.h -- C interface of the CPU simulator of the kvscope kernels.
 *
 * kernels/shim/sim.cpp compiles the real kernels/<op>.cu files as C++ (with cuda_shim.h) and
 * exports one wrapper per CUDA entry point listed in kernels/shim/entries.def:
 *
 *     kvs_sim_<entry>(gx, gy, gz, bx, by, bz, <the entry's own arguments>)
 *
 * which "launches" the kernel with grid (gx,gy,gz) and block (bx,by,bz) on CPU threads and
 * returns when it has finished. Pointers are ordinary host memory. __half buffers are
 * passed as uint16_t* holding IEEE binary16 bits. Launches are serialised (thread-safe).
 * Shapes, layouts and launch configurations: see the header comment of each .cu file.
 * The prototypes below are expanded from entries.def, as are the wrappers and the Rust
 * declarations, so the three cannot disagree.
 */
#ifndef KVS_SIM_H
#define KVS_SIM_H

#include <stdint.h>

/* KVS_MAP(f, a, b, ...) expands to f(a), f(b), ... for up to 32 arguments. */
#define KVS_CAT_(a, b) a##b
#define KVS_CAT(a, b) KVS_CAT_(a, b)
#define KVS_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, ...) N
#define KVS_COUNT(...) KVS_COUNT_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define KVS_MAP_1(f, a) f(a)
#define KVS_MAP_2(f, a, ...) f(a), KVS_MAP_1(f, __VA_ARGS__)
#define KVS_MAP_3(f, a, ...) f(a), KVS_MAP_2(f, __VA_ARGS__)
#define KVS_MAP_4(f, a, ...) f(a), KVS_MAP_3(f, __VA_ARGS__)
#define KVS_MAP_5(f, a, ...) f(a), KVS_MAP_4(f, __VA_ARGS__)
#define KVS_MAP_6(f, a, ...) f(a), KVS_MAP_5(f, __VA_ARGS__)
#define KVS_MAP_7(f, a, ...) f(a), KVS_MAP_6(f, __VA_ARGS__)
#define KVS_MAP_8(f, a, ...) f(a), KVS_MAP_7(f, __VA_ARGS__)
#define KVS_MAP_9(f, a, ...) f(a), KVS_MAP_8(f, __VA_ARGS__)
#define KVS_MAP_10(f, a, ...) f(a), KVS_MAP_9(f, __VA_ARGS__)
#define KVS_MAP_11(f, a, ...) f(a), KVS_MAP_10(f, __VA_ARGS__)
#define KVS_MAP_12(f, a, ...) f(a), KVS_MAP_11(f, __VA_ARGS__)
#define KVS_MAP_13(f, a, ...) f(a), KVS_MAP_12(f, __VA_ARGS__)
#define KVS_MAP_14(f, a, ...) f(a), KVS_MAP_13(f, __VA_ARGS__)
#define KVS_MAP_15(f, a, ...) f(a), KVS_MAP_14(f, __VA_ARGS__)
#define KVS_MAP_16(f, a, ...) f(a), KVS_MAP_15(f, __VA_ARGS__)
#define KVS_MAP_17(f, a, ...) f(a), KVS_MAP_16(f, __VA_ARGS__)
#define KVS_MAP_18(f, a, ...) f(a), KVS_MAP_17(f, __VA_ARGS__)
#define KVS_MAP_19(f, a, ...) f(a), KVS_MAP_18(f, __VA_ARGS__)
#define KVS_MAP_20(f, a, ...) f(a), KVS_MAP_19(f, __VA_ARGS__)
#define KVS_MAP_21(f, a, ...) f(a), KVS_MAP_20(f, __VA_ARGS__)
#define KVS_MAP_22(f, a, ...) f(a), KVS_MAP_21(f, __VA_ARGS__)
#define KVS_MAP_23(f, a, ...) f(a), KVS_MAP_22(f, __VA_ARGS__)
#define KVS_MAP_24(f, a, ...) f(a), KVS_MAP_23(f, __VA_ARGS__)
#define KVS_MAP_25(f, a, ...) f(a), KVS_MAP_24(f, __VA_ARGS__)
#define KVS_MAP_26(f, a, ...) f(a), KVS_MAP_25(f, __VA_ARGS__)
#define KVS_MAP_27(f, a, ...) f(a), KVS_MAP_26(f, __VA_ARGS__)
#define KVS_MAP_28(f, a, ...) f(a), KVS_MAP_27(f, __VA_ARGS__)
#define KVS_MAP_29(f, a, ...) f(a), KVS_MAP_28(f, __VA_ARGS__)
#define KVS_MAP_30(f, a, ...) f(a), KVS_MAP_29(f, __VA_ARGS__)
#define KVS_MAP_31(f, a, ...) f(a), KVS_MAP_30(f, __VA_ARGS__)
#define KVS_MAP_32(f, a, ...) f(a), KVS_MAP_31(f, __VA_ARGS__)
#define KVS_MAP(f, ...) KVS_CAT(KVS_MAP_, KVS_COUNT(__VA_ARGS__))(f, __VA_ARGS__)

/* A (type, name) pair of entries.def as a parameter, and as the name alone. */
#define KVS_PARAM_(type, name) type name
#define KVS_PARAM(pair) KVS_PARAM_ pair
#define KVS_NAME_(type, name) name
#define KVS_NAME(pair) KVS_NAME_ pair

/* The launch dimensions every wrapper takes first. */
#define KVS_GRID_PARAMS unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz

#ifdef __cplusplus
struct uint4; /* 16 bytes of four 32-bit words: the read stream's unit (cuda_shim.h defines it) */
extern "C" {
#else
struct uint4;
typedef struct uint4 uint4;
#endif

#define KVS_ENTRY(ns, entry, ...) void kvs_sim_##entry(KVS_GRID_PARAMS, KVS_MAP(KVS_PARAM, __VA_ARGS__));
#include "entries.def"
#undef KVS_ENTRY

/* How many times the wrapper of `entry` (its name, e.g. "rope_f32") has been called. */
long kvs_sim_launches(const char* entry);

#ifdef __cplusplus
}
#endif

#endif /* KVS_SIM_H */
