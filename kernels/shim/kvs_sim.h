/* kernels/shim/kvs_sim.h -- C interface of the CPU simulator of the kvscope kernels.
 *
 * kernels/shim/sim.cpp compiles the real kernels/<op>.cu files as C++ (with cuda_shim.h) and
 * exports one wrapper per CUDA entry point:
 *
 *     kvs_sim_<entry>(gx, gy, gz, bx, by, bz, <the entry's own arguments>)
 *
 * which "launches" the kernel with grid (gx,gy,gz) and block (bx,by,bz) on CPU threads and
 * returns when it has finished. Pointers are ordinary host memory. __half buffers are
 * passed as uint16_t* holding IEEE binary16 bits. Launches are serialised (thread-safe).
 * Shapes, layouts and launch configurations: see the header comment of each .cu file.
 */
#ifndef KVS_SIM_H
#define KVS_SIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kernels/attention.cu */
void kvs_sim_attention_scores_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, const float* q, const float* k,
                                  float* scores, int n_heads, int n_kv_heads, int seq,
                                  int head_dim, float scale, int mask_kind, int window,
                                  int sinks);
void kvs_sim_softmax_rows_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, const float* in, float* out, int rows, int cols);
void kvs_sim_attention_pv_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, const float* probs, const float* v, float* out,
                              int n_heads, int n_kv_heads, int seq, int head_dim);
void kvs_sim_attention_fused_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, const float* q, const float* k,
                                 const float* v, float* out, int n_heads, int n_kv_heads,
                                 int seq, int head_dim, float scale, int mask_kind, int window,
                                 int sinks);

/* kernels/kv_cache.cu */
void kvs_sim_static_cache_append_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, uint16_t* k_cache,
                                     uint16_t* v_cache, const float* k_new, const float* v_new,
                                     int layer, int pos, int batch, int n_kv_heads, int max_seq,
                                     int head_dim);
void kvs_sim_paged_append_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, uint16_t* k_pool, uint16_t* v_pool, const float* k,
                              const float* v, const int* slot_mapping, int num_tokens,
                              int n_kv_heads, int block_size, int head_dim);
/* kernels/flash_attention.cu */
void kvs_sim_flash_attention_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, const float* q, const float* k, const float* v,
                                 float* out, int n_heads, int n_kv_heads, int seq, int head_dim,
                                 float scale, int mask_kind, int window, int sinks, int block_q,
                                 int block_k);
void kvs_sim_copy_blocks_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, uint16_t* k_pool, uint16_t* v_pool,
                             const int* block_mapping, int num_pairs, int numel_per_block);

/* kernels/paged_attention.cu */
void kvs_sim_paged_attention_decode_f16(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, float* tmp_out,
                                        float* tmp_max, float* tmp_sum, const float* q,
                                        const uint16_t* k_pool, const uint16_t* v_pool,
                                        const int* block_tables, const int* context_lens,
                                        int max_blocks_per_seq, int num_partitions,
                                        int n_heads, int n_kv_heads, int block_size,
                                        int head_dim, float scale);
void kvs_sim_paged_attention_reduce_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, float* out,
                                        const float* tmp_out, const float* tmp_max,
                                        const float* tmp_sum, const int* context_lens,
                                        int num_partitions, int n_heads, int head_dim);

/* kernels/bandwidth.cu; `data` holds n_words 16-byte words */
void kvs_sim_read_stream_u32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, const uint32_t* data, long long n_words, uint32_t* partial);

#ifdef __cplusplus
}
#endif

#endif /* KVS_SIM_H */
