// kernels/shim/cuda_shim.h -- run the real CUDA kernel source (.cu) on the CPU.
//
// How it works
// ------------
// The kvscope kernels are plain CUDA C++. With a few macros and a small runtime they are
// also valid C++20, so the very same file can be compiled by g++ and executed on the CPU.
// That lets the project test the GPU code on machines without a GPU.
//
//  * Qualifiers. `__global__`, `__device__`, `__host__` expand to nothing. `__shared__`
//    expands to `static`: blocks run one after another, so a function-local static is
//    shared by exactly the threads of the block that is running (like shared memory).
//  * Indices. `threadIdx` and `blockIdx` are `thread_local`; `blockDim` and `gridDim` are
//    globals set by the launcher.
//  * Threads. Every CUDA thread of a block is a real OS thread (taken from a reusable pool).
//    The blocks of the grid run one after another; launches are serialised by a mutex.
//  * `__syncthreads()` is a `std::barrier` for the block, recreated for every block. When a
//    thread returns from the kernel it calls `arrive_and_drop()`, so threads that leave
//    early (a bounds check) never block the others at later barriers.
//  * Warp shuffles (`__shfl_xor_sync`, `__shfl_down_sync`, `__shfl_up_sync`, `__shfl_sync`)
//    use one barrier per warp plus an exchange buffer: every lane publishes its value,
//    waits, reads its source lane, waits again. They are only valid with the full mask
//    (0xffffffff) and all lanes of the warp converged, which is what the kernels use.
//  * Atomics go through `std::atomic_ref`.
//  * Math: `__expf` and friends map to the exact libm functions, so compare with a tolerance.
//
// Not supported (keep the kernels within these limits): dynamic `extern __shared__`,
// `__half2`, bf16, mma/wmma, cp.async, inline asm, cooperative groups, warp votes.
//
// One OS thread per CUDA thread is slow: keep test shapes small.
#pragma once
#ifndef KVS_CUDA_SHIM_H
#define KVS_CUDA_SHIM_H

#include <math.h>

#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

// ---------------------------------------------------------------------------------------
// Qualifiers and attributes
// ---------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __launch_bounds__(...)
// `__restrict__` is understood by g++ as it is.

#define KVS_SHIM 1

// ---------------------------------------------------------------------------------------
// Built-in vector types and indices
// ---------------------------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};
// may_alias: kernels load 16 bytes of __half through a uint4, as CUDA code does.
struct __attribute__((may_alias, aligned(16))) uint4 {
    unsigned int x, y, z, w;
};
struct __attribute__((may_alias, aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((may_alias, aligned(8))) float2 {
    float x, y;
};
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
    return uint4{x, y, z, w};
}
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }

constexpr int warpSize = 32;

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline dim3 blockDim;
inline dim3 gridDim;

// ---------------------------------------------------------------------------------------
// Per-block runtime state: block barrier, warp barriers and shuffle exchange buffers
// ---------------------------------------------------------------------------------------
namespace kvs_shim {

struct Warp {
    std::unique_ptr<std::barrier<>> bar;
    unsigned lanes = 0;           // lanes that exist in this warp (last warp may be partial)
    std::uint64_t xbuf[32] = {};  // shuffle exchange buffer, one slot per lane
};

struct Block {
    unsigned nthreads = 0;
    std::unique_ptr<std::barrier<>> sync;  // __syncthreads
    std::vector<Warp> warps;

    void reset(unsigned n) {
        nthreads = n;
        sync = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(n));
        warps.resize((n + 31) / 32);
        for (unsigned w = 0; w < warps.size(); ++w) {
            const unsigned lanes = (n - 32 * w < 32) ? (n - 32 * w) : 32;
            warps[w].lanes = lanes;
            warps[w].bar = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(lanes));
        }
    }
};

inline Block g_block;
inline thread_local unsigned t_linear = 0;  // x + y*bx + z*bx*by, as in CUDA

inline unsigned lane_id() { return t_linear & 31u; }
inline Warp& my_warp() { return g_block.warps[t_linear >> 5]; }

// A reusable pool of worker threads; worker i plays CUDA thread i of every block. Each worker waits
// on its own semaphore, so a launch wakes exactly the n workers it needs, all at once (a condition
// variable shared by all of them woke every worker ever spawned, one mutex holder at a time).
class Pool {
public:
    void run(unsigned n, const std::function<void(unsigned)>& job) {
        while (slots_.size() < n) {
            slots_.push_back(std::make_unique<Slot>());
            std::thread(&Pool::worker, this, static_cast<unsigned>(slots_.size() - 1), slots_.back().get())
                .detach();
        }
        job_ = &job;
        remaining_.store(n, std::memory_order_relaxed);
        for (unsigned i = 0; i < n; ++i) slots_[i]->go.release();  // publishes job_ to worker i
        done_.acquire();                                           // the last worker's release
        job_ = nullptr;
    }

private:
    struct Slot {
        std::binary_semaphore go{0};
    };

    void worker(unsigned id, Slot* slot) {
        for (;;) {
            slot->go.acquire();
            (*job_)(id);
            if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.release();
        }
    }

    std::vector<std::unique_ptr<Slot>> slots_;
    const std::function<void(unsigned)>* job_ = nullptr;
    std::atomic<unsigned> remaining_{0};
    std::binary_semaphore done_{0};
};

inline Pool& pool() {
    static Pool* p = new Pool;  // intentionally leaked: workers are detached and live forever
    return *p;
}

inline std::mutex& launch_mutex() {
    static std::mutex m;
    return m;
}

// Run `body` (which calls the kernel) as a grid of blocks. Blocks run one after another;
// the threads of a block run concurrently as OS threads.
template <class F>
void launch(dim3 grid, dim3 block, F&& body) {
    std::lock_guard<std::mutex> guard(launch_mutex());
    const unsigned long long nthreads_ll =
        static_cast<unsigned long long>(block.x) * block.y * block.z;
    const unsigned long long nblocks =
        static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
    if (nblocks == 0 || nthreads_ll == 0) return;  // empty launch: nothing to do
    if (nthreads_ll > 1024) {
        std::fprintf(stderr, "kvs shim: block of %llu threads (> 1024)\n", nthreads_ll);
        std::abort();
    }
    const unsigned nthreads = static_cast<unsigned>(nthreads_ll);
    gridDim = grid;
    blockDim = block;
    g_block.reset(nthreads);

    // The end-of-block barrier; its completion step (run once, while every thread waits)
    // recreates the block and warp barriers for the next block.
    auto next_block = [nthreads]() noexcept { g_block.reset(nthreads); };
    std::barrier<decltype(next_block)> end_of_block(static_cast<std::ptrdiff_t>(nthreads),
                                                    next_block);

    const std::function<void(unsigned)> job = [&](unsigned tid) {
        t_linear = tid;
        threadIdx = uint3{tid % block.x, (tid / block.x) % block.y, tid / (block.x * block.y)};
        for (unsigned long long b = 0; b < nblocks; ++b) {
            blockIdx = uint3{static_cast<unsigned>(b % grid.x),
                             static_cast<unsigned>((b / grid.x) % grid.y),
                             static_cast<unsigned>(b / (static_cast<unsigned long long>(grid.x) *
                                                        grid.y))};
            body();
            // This thread has left the kernel: it takes no part in later barriers of the
            // block (so early returns cannot deadlock the threads still running).
            my_warp().bar->arrive_and_drop();
            g_block.sync->arrive_and_drop();
            end_of_block.arrive_and_wait();
        }
    };
    pool().run(nthreads, job);
}

template <class T>
inline T shfl_from(T v, int src, unsigned mask) {
    static_assert(sizeof(T) <= 8, "shuffle of a type larger than 8 bytes");
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "kvs shim: shuffles need the full mask 0xffffffff\n");
        std::abort();
    }
    Warp& w = my_warp();
    const unsigned lane = lane_id();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    w.xbuf[lane] = bits;
    w.bar->arrive_and_wait();  // every lane has published its value
    T r = v;
    if (src >= 0 && static_cast<unsigned>(src) < w.lanes) std::memcpy(&r, &w.xbuf[src], sizeof(T));
    w.bar->arrive_and_wait();  // every lane has read before the buffer is reused
    return r;
}

}  // namespace kvs_shim

// ---------------------------------------------------------------------------------------
// Synchronisation and warp shuffles
// ---------------------------------------------------------------------------------------
inline void __syncthreads() { kvs_shim::g_block.sync->arrive_and_wait(); }
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) {
    kvs_shim::my_warp().bar->arrive_and_wait();
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Lane l reads lane l ^ laneMask; reading from a later width-segment returns its own value.
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
    const int lane = static_cast<int>(kvs_shim::lane_id());
    int src = lane ^ laneMask;
    if (src / width > lane / width) src = lane;
    return kvs_shim::shfl_from(var, src, mask);
}
// Lane l reads lane l + delta within its width-segment (else keeps its own value).
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    const int lane = static_cast<int>(kvs_shim::lane_id());
    int src = lane + static_cast<int>(delta);
    if ((lane % width) + static_cast<int>(delta) >= width) src = lane;
    return kvs_shim::shfl_from(var, src, mask);
}
// Lane l reads lane l - delta within its width-segment (else keeps its own value).
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    const int lane = static_cast<int>(kvs_shim::lane_id());
    int src = lane - static_cast<int>(delta);
    if ((lane % width) < static_cast<int>(delta)) src = lane;
    return kvs_shim::shfl_from(var, src, mask);
}
// Lane l reads lane srcLane of its width-segment.
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
    const int lane = static_cast<int>(kvs_shim::lane_id());
    const int src = (lane / width) * width + (((srcLane % width) + width) % width);
    return kvs_shim::shfl_from(var, src, mask);
}

// ---------------------------------------------------------------------------------------
// Atomics (return the old value, as in CUDA)
// ---------------------------------------------------------------------------------------
template <class T>
inline T atomicAdd(T* addr, T val) {
    return std::atomic_ref<T>(*addr).fetch_add(val);
}
template <class T>
inline T atomicSub(T* addr, T val) {
    return std::atomic_ref<T>(*addr).fetch_sub(val);
}
template <class T>
inline T atomicExch(T* addr, T val) {
    return std::atomic_ref<T>(*addr).exchange(val);
}
template <class T>
inline T atomicCAS(T* addr, T compare, T val) {
    std::atomic_ref<T>(*addr).compare_exchange_strong(compare, val);
    return compare;  // holds the old value whether or not the swap happened
}
template <class T>
inline T atomicMax(T* addr, T val) {
    std::atomic_ref<T> a(*addr);
    T old = a.load();
    while (old < val && !a.compare_exchange_weak(old, val)) {
    }
    return old;
}
template <class T>
inline T atomicMin(T* addr, T val) {
    std::atomic_ref<T> a(*addr);
    T old = a.load();
    while (val < old && !a.compare_exchange_weak(old, val)) {
    }
    return old;
}

// ---------------------------------------------------------------------------------------
// Math and bit intrinsics
// ---------------------------------------------------------------------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __uint_as_float(unsigned int u) { return std::bit_cast<float>(u); }
inline unsigned int __float_as_uint(float f) { return std::bit_cast<unsigned int>(f); }

inline int __popc(unsigned int x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned int>(x)); }
inline int __ffs(int x) {
    return x == 0 ? 0 : std::countr_zero(static_cast<unsigned int>(x)) + 1;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

template <class T>
inline T __ldg(const T* p) {
    return *p;
}

#endif  // KVS_CUDA_SHIM_H
