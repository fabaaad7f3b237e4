// kernels/shim/sim.cpp -- the kvscope CUDA kernels, compiled for the CPU.
//
// Build (what build.rs does through the `cc` crate):
//     g++ -std=c++20 -O2 -pthread -I kernels/shim -I kernels -c kernels/shim/sim.cpp
// `-I kernels/shim` makes the `#include <cuda_fp16.h>` of the .cu files find the shim's
// cuda_fp16.h. Each .cu file is included inside its own namespace, so helpers with the
// same name in two files cannot clash (NVRTC compiles each file on its own anyway).
// Every kernel entry point listed in entries.def gets an `extern "C"` wrapper
// `kvs_sim_<entry>(grid, block, args...)`, expanded below from that list and declared in kvs_sim.h
// from the same list. A new .cu file needs its namespace include here, once.

#include "cuda_shim.h"
#include "cuda_fp16.h"
#include "kvs_sim.h"

#include <string>
#include <utility>

namespace kvs_attention {
#include "../attention.cu"
}
namespace kvs_kv_cache {
#include "../kv_cache.cu"
}
namespace kvs_paged_attention {
#include "../paged_attention.cu"
}
namespace kvs_bandwidth {
#include "../bandwidth.cu"
}
namespace kvs_flash {
#include "../flash_attention.cu"
}
namespace kvs_rope {
#include "../rope.cu"
}
namespace kvs_stream_attention {
#include "../stream_attention.cu"
}
namespace kvs_score_attention {
#include "../score_attention.cu"
}
namespace kvs_quant_kv {
#include "../quant_kv.cu"
}
namespace kvs_group_kv {
#include "../group_kv.cu"
}
namespace kvs_mla_attention {
#include "../mla_attention.cu"
}
namespace kvs_mask_table {
#include "../mask_table.cu"
}

static_assert(sizeof(__half) == sizeof(uint16_t), "__half must be 16 bits");

namespace {
// The C interface's buffers as the kernels take them: binary16 bits as __half; every other argument
// passes unchanged.
inline __half* kvs_arg(uint16_t* p) { return reinterpret_cast<__half*>(p); }
inline const __half* kvs_arg(const uint16_t* p) { return reinterpret_cast<const __half*>(p); }
template <typename T>
inline T kvs_arg(T x) {
    return x;
}
}  // namespace

#define KVS_LAUNCH(call) \
    kvs_shim::launch(dim3(gx, gy, gz), dim3(bx, by, bz), [&]() { call; })

// How many times each wrapper was called, by entry name (the selftest checks that every entry of
// entries.def ran).
namespace {
std::mutex kvs_count_mutex;
std::vector<std::pair<std::string, long>>& kvs_counts() {
    static std::vector<std::pair<std::string, long>> counts;
    return counts;
}
void kvs_count(const char* entry) {
    std::lock_guard<std::mutex> lock(kvs_count_mutex);
    for (auto& [name, n] : kvs_counts())
        if (name == entry) {
            ++n;
            return;
        }
    kvs_counts().emplace_back(entry, 1);
}
}  // namespace

extern "C" long kvs_sim_launches(const char* entry) {
    std::lock_guard<std::mutex> lock(kvs_count_mutex);
    for (const auto& [name, n] : kvs_counts())
        if (name == entry) return n;
    return 0;
}

#define KVS_ARG(pair) kvs_arg(KVS_NAME(pair))

// One wrapper per line of entries.def: launch ns::entry on the grid with the converted arguments.
extern "C" {
#define KVS_ENTRY(ns, entry, ...)                                          \
    void kvs_sim_##entry(KVS_GRID_PARAMS, KVS_MAP(KVS_PARAM, __VA_ARGS__)) { \
        kvs_count(#entry);                                                 \
        KVS_LAUNCH(ns::entry(KVS_MAP(KVS_ARG, __VA_ARGS__)));              \
    }
#include "entries.def"
#undef KVS_ENTRY
}  // extern "C"
