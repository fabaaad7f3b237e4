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
//  * Threads. By default the CUDA threads of a block are fibers on the launching OS thread, run
//    in thread order, each until it reaches a barrier, a shuffle or its end; the launcher sets
//    `threadIdx` before it resumes one. Under ThreadSanitizer each fiber is a TSan fiber that
//    shares no happens-before with the others except through the barriers, so a missing
//    `__syncthreads` is still reported as a data race (scripts/sanitize.sh). With
//    KVS_SHIM_OS_THREADS every CUDA thread of a block is a real OS thread instead (taken from a
//    reusable pool; AddressSanitizer runs this one).
//    The blocks of the grid run one after another; launches are serialised by a mutex.
//  * `__syncthreads()` opens when every thread of the block that has not returned waits at it,
//    so threads that leave early (a bounds check) never block the others at later barriers
//    (with OS threads: a `std::barrier` per block, and `arrive_and_drop()` on return).
//  * Warp shuffles (`__shfl_xor_sync`, `__shfl_down_sync`, `__shfl_up_sync`, `__shfl_sync`)
//    use a barrier per warp plus an exchange buffer: every lane publishes its value,
//    waits, reads its source lane, waits again. They are only valid with the full mask
//    (0xffffffff) and all lanes of the warp converged, which is what the kernels use.
//  * Atomics go through `std::atomic_ref`.
//  * Math: `__expf` and friends map to the exact libm functions, so compare with a tolerance.
//
// Not supported (keep the kernels within these limits): dynamic `extern __shared__`,
// `__half2`, bf16, mma/wmma, cp.async, inline asm, cooperative groups, warp votes.
//
// Even as fibers, a CUDA thread is far slower than on a GPU: keep test shapes small.
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
#include <type_traits>
#include <vector>

// ThreadSanitizer: the fiber runtime tells it about each switch and each barrier (below).
#if defined(__SANITIZE_THREAD__)
#define KVS_SHIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVS_SHIM_TSAN 1
#endif
#endif
#ifdef KVS_SHIM_TSAN
#include <sanitizer/tsan_interface.h>
// Dynamic annotations, exported by the TSan runtime: the scheduler's writes of the thread index
// (one thread_local shared by every fiber of the OS thread) are not data the kernels share.
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

// Fibers need Linux (mmap, and ucontext where the switch below is not written); elsewhere the
// OS-thread runtime is used.
#if !defined(KVS_SHIM_OS_THREADS) && !defined(__linux__)
#define KVS_SHIM_OS_THREADS 1
#endif
#ifndef KVS_SHIM_OS_THREADS
#include <sys/mman.h>
#include <ucontext.h>
#endif

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
// What both runtimes share: launches are serialised, and a launch's size is checked once.
// ---------------------------------------------------------------------------------------
namespace kvs_shim {

inline std::mutex& launch_mutex() {
    static std::mutex m;
    return m;
}

// A launch's threads per block and number of blocks (both 0 for an empty launch); a block of more
// than 1024 threads aborts, as a CUDA launch would fail.
struct LaunchSize {
    unsigned threads;
    unsigned long long blocks;
};
inline LaunchSize launch_size(dim3 grid, dim3 block) {
    const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
    const unsigned long long blocks = static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
    if (blocks == 0 || threads == 0) return {0, 0};
    if (threads > 1024) {
        std::fprintf(stderr, "kvs shim: block of %llu threads (> 1024)\n", threads);
        std::abort();
    }
    return {static_cast<unsigned>(threads), blocks};
}

}  // namespace kvs_shim

#ifdef KVS_SHIM_OS_THREADS
// ---------------------------------------------------------------------------------------
// Per-block runtime, OS threads (with KVS_SHIM_OS_THREADS; scripts/sanitize.sh builds this one):
// block barrier, warp barriers and shuffle exchange buffers
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

// Run `body` (which calls the kernel) as a grid of blocks. Blocks run one after another;
// the threads of a block run concurrently as OS threads.
template <class F>
void launch(dim3 grid, dim3 block, F&& body) {
    std::lock_guard<std::mutex> guard(launch_mutex());
    const LaunchSize size = launch_size(grid, block);
    if (size.threads == 0) return;  // empty launch: nothing to do
    const unsigned nthreads = size.threads;
    const unsigned long long nblocks = size.blocks;
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

inline void block_sync() { g_block.sync->arrive_and_wait(); }
inline void warp_sync() { my_warp().bar->arrive_and_wait(); }

}  // namespace kvs_shim

#else
// ---------------------------------------------------------------------------------------
// Per-block runtime, fibers (the default): the threads of a block are ucontext fibers on the
// launching OS thread, run in thread order; each runs until it reaches a barrier, a shuffle or
// its end, then the next one runs. A barrier opens when every thread of the block (of the warp,
// for warp barriers) that has not returned waits at it, as with the OS threads' arrive_and_drop.
// No OS scheduler is involved, so a __syncthreads costs one context switch per thread instead of
// waking every OS thread of the block (the OS-thread runtime is kept behind KVS_SHIM_OS_THREADS).
//
// Under ThreadSanitizer (KVS_SHIM_TSAN) every CUDA thread of a block is a TSan fiber (made once
// per thread index and reused by every block). Happens-before then runs only where CUDA
// puts it: from the launcher to each thread when the block starts (the switch into a fiber
// synchronises; the switch back does not), between the threads of a block (of a warp) at each
// barrier (each arriving thread releases the barrier's sync object, each leaving one acquires
// it; two objects per barrier, by the parity of the barrier's count, so a thread that already
// went on to the next barrier cannot leak its later writes to one still leaving), and from every
// thread to the launcher when the block ends. Two threads that share memory without a barrier
// between them are therefore reported, whatever order the fibers happened to run in.
// ---------------------------------------------------------------------------------------
namespace kvs_shim {

enum class At : unsigned char { Run, Block, Warp, Done };

#if defined(__x86_64__)
// A fiber switch on x86-64 without a system call (ucontext's swapcontext saves and restores the
// signal mask, two syscalls per switch, which was half the shim's time): push the callee-saved
// registers and the SSE/x87 control words on the old stack, store its pointer, load the new one,
// pop the same. A new fiber's stack is laid out as if it had switched away just before
// fiber_entry's first instruction.
struct Ctx {
    void* sp = nullptr;
#ifdef KVS_SHIM_TSAN
    void* tsan = nullptr;  // this context's TSan fiber
#endif
};
__attribute__((naked, noinline)) inline void ctx_switch(void** /*from*/, void* /*to*/) {
    asm volatile(
        "pushq %rbp\n\t"
        "pushq %rbx\n\t"
        "pushq %r12\n\t"
        "pushq %r13\n\t"
        "pushq %r14\n\t"
        "pushq %r15\n\t"
        "subq $8, %rsp\n\t"
        "stmxcsr (%rsp)\n\t"
        "fnstcw 4(%rsp)\n\t"
        "movq %rsp, (%rdi)\n\t"
        "movq %rsi, %rsp\n\t"
        "ldmxcsr (%rsp)\n\t"
        "fldcw 4(%rsp)\n\t"
        "addq $8, %rsp\n\t"
        "popq %r15\n\t"
        "popq %r14\n\t"
        "popq %r13\n\t"
        "popq %r12\n\t"
        "popq %rbx\n\t"
        "popq %rbp\n\t"
        "ret\n\t");
}
inline void swap_raw(Ctx& from, Ctx& to) { ctx_switch(&from.sp, to.sp); }
inline void prepare(Ctx& c, char* lo, std::size_t size, void (*entry)()) {
    // The stack top, 16-byte aligned; after the switch's `ret` into entry, rsp = top - 8, as after
    // a call. Below the return address: six zeroed registers and this thread's control words.
    auto top = reinterpret_cast<std::uintptr_t>(lo + size) & ~std::uintptr_t{15};
    auto* w = reinterpret_cast<std::uint64_t*>(top);
    *--w = 0;                                         // entry's own (never used) return address
    *--w = reinterpret_cast<std::uint64_t>(entry);   // where the first switch returns to
    for (int r = 0; r < 6; ++r) *--w = 0;             // rbp, rbx, r12-r15
    std::uint32_t mxcsr = 0;
    std::uint16_t fpucw = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    *--w = static_cast<std::uint64_t>(mxcsr) | (static_cast<std::uint64_t>(fpucw) << 32);
    c.sp = w;
}
#else
struct Ctx {
    ucontext_t uc;
#ifdef KVS_SHIM_TSAN
    void* tsan = nullptr;  // this context's TSan fiber
#endif
};
inline void swap_raw(Ctx& from, Ctx& to) { swapcontext(&from.uc, &to.uc); }
inline void prepare(Ctx& c, char* lo, std::size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = lo;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
#endif

// Switch from the launcher into a fiber (`sync`: TSan sees the launcher's writes before the
// switch happen before the fiber's reads after it) or back (no synchronisation).
inline void swap(Ctx& from, Ctx& to, [[maybe_unused]] bool sync) {
#ifdef KVS_SHIM_TSAN
    __tsan_switch_to_fiber(to.tsan, sync ? 0u : __tsan_switch_to_fiber_no_sync);
#endif
    swap_raw(from, to);
}

struct Fiber {
    Ctx ctx;
    void* stack = nullptr;
    // Written by the fiber when it parks and by the launcher when it resumes it: atomic (relaxed),
    // so that TSan, which sees no happens-before from a fiber back to the launcher, does not report it.
    std::atomic<At> at{At::Run};
    unsigned block_waits = 0;  // barriers this thread has reached: the parity picks a sync object
    unsigned warp_waits = 0;
};

// A fiber's stack: the kernels keep a few small arrays in locals; 256 KiB (mapped lazily, with a
// guard page below it so an overflow faults instead of writing into a neighbour).
constexpr std::size_t kFiberStack = 256 * 1024;
constexpr std::size_t kGuard = 4096;

struct Sched {
    Ctx main;
    Fiber fibers[1024];  // a fiber's address must not move
    unsigned n = 0;             // threads in the running block
    unsigned cur = 0;           // the fiber running now
    std::uint64_t xbuf[1024] = {};  // shuffle exchange buffer, one slot per thread
    void (*call)(void*) = nullptr;  // the kernel call of this launch, and its closure
    void* closure = nullptr;
    // TSan sync objects (only their addresses are used): the block barrier's and each warp's
    // barrier's, by parity, and the block's end.
    char block_bar[2] = {};
    char warp_bar[32][2] = {};
    char done = 0;
};

inline Sched& sched() {
    static Sched* s = new Sched;  // intentionally leaked, like the stacks
    return *s;
}

inline thread_local unsigned t_linear = 0;  // x + y*bx + z*bx*by, as in CUDA
inline unsigned lane_id() { return t_linear & 31u; }

// Give the OS thread back to the scheduler until a barrier releases this fiber.
inline void park(At why) {
    Sched& s = sched();
    Fiber& f = s.fibers[s.cur];
#ifdef KVS_SHIM_TSAN
    void* bar = nullptr;
    if (why == At::Block) bar = &s.block_bar[f.block_waits & 1u];
    if (why == At::Warp) bar = &s.warp_bar[s.cur / 32][f.warp_waits & 1u];
    if (bar) __tsan_release(bar);
#endif
    if (why == At::Block) ++f.block_waits;
    if (why == At::Warp) ++f.warp_waits;
    f.at.store(why, std::memory_order_relaxed);
    swap(f.ctx, s.main, false);
#ifdef KVS_SHIM_TSAN
    if (bar) __tsan_acquire(bar);
#endif
}

inline void fiber_main() {
    Sched& s = sched();
#ifdef KVS_SHIM_TSAN
    // Under TSan a fiber is made once and then runs the same thread of every later block (a TSan
    // fiber per thread per block cost more than OS threads did: each is a TSan thread state).
    for (;;) {
        s.call(s.closure);
        __tsan_release(&s.done);
        park(At::Done);  // resumed by the next block that has this thread
    }
#else
    s.call(s.closure);
    park(At::Done);  // never resumed: the next block prepares a fresh context
    std::abort();
#endif
}

[[noreturn]] inline void deadlock(unsigned n) {
    std::fprintf(stderr,
                 "kvs shim: the %u threads of a block wait at different barriers (a __syncthreads or "
                 "shuffle that not every thread reaches)\n",
                 n);
    std::abort();
}

// Run one block of `n` threads to its end.
inline void run_block(unsigned n, dim3 block) {
    Sched& s = sched();
    s.n = n;
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = s.fibers[i];
        if (!f.stack) {
            void* m = mmap(nullptr, kFiberStack + kGuard, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) {
                std::fprintf(stderr, "kvs shim: cannot map a fiber stack\n");
                std::abort();
            }
            mprotect(m, kGuard, PROT_NONE);
            f.stack = m;
        }
#ifdef KVS_SHIM_TSAN
        if (!f.ctx.tsan) {
            prepare(f.ctx, static_cast<char*>(f.stack) + kGuard, kFiberStack, fiber_main);
            f.ctx.tsan = __tsan_create_fiber(0);
        }
#else
        prepare(f.ctx, static_cast<char*>(f.stack) + kGuard, kFiberStack, fiber_main);
#endif
        f.at.store(At::Run, std::memory_order_relaxed);
        f.block_waits = 0;
        f.warp_waits = 0;
    }
#ifdef KVS_SHIM_TSAN
    // Read by the fibers of the last block after they last synchronised with the launcher.
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    s.main.tsan = __tsan_get_current_fiber();
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
    for (;;) {
        for (unsigned i = 0; i < n; ++i) {
            Fiber& f = s.fibers[i];
            if (f.at.load(std::memory_order_relaxed) != At::Run) continue;
#ifdef KVS_SHIM_TSAN
            AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
            s.cur = i;
            t_linear = i;
            threadIdx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
#ifdef KVS_SHIM_TSAN
            AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
            swap(s.main, f.ctx, true);
        }
        // Every fiber now waits or has returned. Open each warp whose live lanes all wait at its
        // barrier; if none, the block barrier when every live thread waits there.
        bool opened = false, any_block = false, any_warp = false;
        for (unsigned w = 0; w * 32 < n; ++w) {
            const unsigned lo = w * 32, hi = (lo + 32 < n) ? lo + 32 : n;
            bool warp = false, other = false;
            for (unsigned i = lo; i < hi; ++i) {
                const At a = s.fibers[i].at;
                warp |= a == At::Warp;
                other |= a == At::Block;
            }
            any_warp |= warp;
            any_block |= other;
            if (warp && !other) {
                for (unsigned i = lo; i < hi; ++i)
                    if (s.fibers[i].at == At::Warp) s.fibers[i].at.store(At::Run, std::memory_order_relaxed);
                opened = true;
            }
        }
        if (opened) continue;
        if (any_warp) deadlock(n);
        if (!any_block) break;  // every thread returned
        for (unsigned i = 0; i < n; ++i)
            if (s.fibers[i].at == At::Block) s.fibers[i].at.store(At::Run, std::memory_order_relaxed);
    }
#ifdef KVS_SHIM_TSAN
    __tsan_acquire(&s.done);  // every thread's writes happen before the launcher goes on
#endif
}

// Run `body` (which calls the kernel) as a grid of blocks, one block after another.
template <class F>
void launch(dim3 grid, dim3 block, F&& body) {
    std::lock_guard<std::mutex> guard(launch_mutex());
    const LaunchSize size = launch_size(grid, block);
    if (size.threads == 0) return;  // empty launch: nothing to do
    gridDim = grid;
    blockDim = block;
    Sched& s = sched();
    using B = std::remove_reference_t<F>;
    s.call = [](void* c) { (*static_cast<B*>(c))(); };
    s.closure = const_cast<void*>(static_cast<const void*>(&body));
    for (unsigned long long b = 0; b < size.blocks; ++b) {
        blockIdx = uint3{static_cast<unsigned>(b % grid.x),
                         static_cast<unsigned>((b / grid.x) % grid.y),
                         static_cast<unsigned>(b / (static_cast<unsigned long long>(grid.x) * grid.y))};
        run_block(size.threads, block);
    }
    s.call = nullptr;
    s.closure = nullptr;
}

template <class T>
inline T shfl_from(T v, int src, unsigned mask) {
    static_assert(sizeof(T) <= 8, "shuffle of a type larger than 8 bytes");
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "kvs shim: shuffles need the full mask 0xffffffff\n");
        std::abort();
    }
    Sched& s = sched();
    const unsigned base = t_linear & ~31u;
    const unsigned lanes = (s.n - base < 32) ? (s.n - base) : 32;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    s.xbuf[t_linear] = bits;
    park(At::Warp);  // every lane has published its value
    T r = v;
    if (src >= 0 && static_cast<unsigned>(src) < lanes) std::memcpy(&r, &s.xbuf[base + src], sizeof(T));
    park(At::Warp);  // every lane has read before the buffer is reused
    return r;
}

inline void block_sync() { park(At::Block); }
inline void warp_sync() { park(At::Warp); }

}  // namespace kvs_shim

#endif  // KVS_SHIM_OS_THREADS

// ---------------------------------------------------------------------------------------
// Synchronisation and warp shuffles
// ---------------------------------------------------------------------------------------
inline void __syncthreads() { kvs_shim::block_sync(); }
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) { kvs_shim::warp_sync(); }
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
