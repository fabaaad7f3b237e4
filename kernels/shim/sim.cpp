// kernels/shim/sim.cpp -- the kvscope CUDA kernels, compiled for the CPU.
//
// Build (what build.rs does through the `cc` crate):
//     g++ -std=c++20 -O2 -pthread -I kernels/shim -I kernels -c kernels/shim/sim.cpp
// `-I kernels/shim` makes the `#include <cuda_fp16.h>` of the .cu files find the shim's
// cuda_fp16.h. Each .cu file is included inside its own namespace, so helpers with the
// same name in two files cannot clash (NVRTC compiles each file on its own anyway).
// Every kernel gets an `extern "C"` wrapper `kvs_sim_<entry>(grid, block, args...)`,
// declared in kvs_sim.h.

#include "cuda_shim.h"
#include "cuda_fp16.h"
#include "kvs_sim.h"

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

static_assert(sizeof(__half) == sizeof(uint16_t), "__half must be 16 bits");

namespace {
inline __half* as_half(uint16_t* p) { return reinterpret_cast<__half*>(p); }
inline const __half* as_half(const uint16_t* p) { return reinterpret_cast<const __half*>(p); }
}  // namespace

#define KVS_LAUNCH(call) \
    kvs_shim::launch(dim3(gx, gy, gz), dim3(bx, by, bz), [&]() { call; })

extern "C" {

void kvs_sim_attention_scores_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, const float* q, const float* k,
                                  float* scores, int n_heads, int n_kv_heads, int seq,
                                  int head_dim, float scale, int mask_kind, int window,
                                  int sinks) {
    KVS_LAUNCH(kvs_attention::attention_scores_f32(q, k, scores, n_heads, n_kv_heads, seq,
                                                   head_dim, scale, mask_kind, window, sinks));
}

void kvs_sim_softmax_rows_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, const float* in, float* out, int rows, int cols) {
    KVS_LAUNCH(kvs_attention::softmax_rows_f32(in, out, rows, cols));
}

void kvs_sim_attention_pv_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, const float* probs, const float* v, float* out,
                              int n_heads, int n_kv_heads, int seq, int head_dim) {
    KVS_LAUNCH(kvs_attention::attention_pv_f32(probs, v, out, n_heads, n_kv_heads, seq,
                                               head_dim));
}

void kvs_sim_attention_fused_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, const float* q, const float* k,
                                 const float* v, float* out, int n_heads, int n_kv_heads,
                                 int seq, int head_dim, float scale, int mask_kind, int window,
                                 int sinks) {
    KVS_LAUNCH(kvs_attention::attention_fused_f32(q, k, v, out, n_heads, n_kv_heads, seq,
                                                  head_dim, scale, mask_kind, window, sinks));
}

void kvs_sim_static_cache_append_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, uint16_t* k_cache,
                                     uint16_t* v_cache, const float* k_new, const float* v_new,
                                     int layer, int pos, int batch, int n_kv_heads, int max_seq,
                                     int head_dim) {
    KVS_LAUNCH(kvs_kv_cache::static_cache_append_f16(as_half(k_cache), as_half(v_cache), k_new,
                                                     v_new, layer, pos, batch, n_kv_heads,
                                                     max_seq, head_dim));
}

void kvs_sim_paged_append_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, uint16_t* k_pool, uint16_t* v_pool, const float* k,
                              const float* v, const int* slot_mapping, int num_tokens,
                              int n_kv_heads, int block_size, int head_dim) {
    KVS_LAUNCH(kvs_kv_cache::paged_append_f16(as_half(k_pool), as_half(v_pool), k, v,
                                              slot_mapping, num_tokens, n_kv_heads, block_size,
                                              head_dim));
}

void kvs_sim_flash_attention_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, const float* q, const float* k, const float* v,
                                 float* out, int n_heads, int n_kv_heads, int seq, int head_dim,
                                 float scale, int mask_kind, int window, int sinks, int block_q,
                                 int block_k) {
    KVS_LAUNCH(kvs_flash::flash_attention_f32(q, k, v, out, n_heads, n_kv_heads, seq, head_dim,
                                              scale, mask_kind, window, sinks, block_q, block_k));
}

void kvs_sim_copy_blocks_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, uint16_t* k_pool, uint16_t* v_pool,
                             const int* block_mapping, int num_pairs, int numel_per_block) {
    KVS_LAUNCH(kvs_kv_cache::copy_blocks_f16(as_half(k_pool), as_half(v_pool), block_mapping,
                                             num_pairs, numel_per_block));
}

void kvs_sim_paged_attention_decode_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, float* tmp_out,
                                        float* tmp_max, float* tmp_sum, const float* q,
                                        const uint16_t* k_pool, const uint16_t* v_pool,
                                        const int* block_tables, const int* context_lens,
                                        int max_blocks_per_seq, int num_partitions,
                                        int n_heads, int n_kv_heads, int block_size,
                                        int head_dim, float scale) {
    KVS_LAUNCH(kvs_paged_attention::paged_attention_decode_f16(
        tmp_out, tmp_max, tmp_sum, q, as_half(k_pool), as_half(v_pool), block_tables,
        context_lens, max_blocks_per_seq, num_partitions, n_heads, n_kv_heads, block_size,
        head_dim, scale));
}

void kvs_sim_paged_attention_reduce_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, float* out,
                                        const float* tmp_out, const float* tmp_max,
                                        const float* tmp_sum, const int* context_lens,
                                        int num_partitions, int n_heads, int head_dim) {
    KVS_LAUNCH(kvs_paged_attention::paged_attention_reduce_f32(
        out, tmp_out, tmp_max, tmp_sum, context_lens, num_partitions, n_heads, head_dim));
}

void kvs_sim_read_stream_u32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, const uint32_t* data, long long n_words, uint32_t* partial) {
    const uint4* words = reinterpret_cast<const uint4*>(data);
    KVS_LAUNCH(kvs_bandwidth::read_stream_u32(words, n_words, partial));
}

}  // extern "C"
