// =======================================================================================
// kernels/paged_attention.cu -- decode attention over a paged KV cache (f16 K/V, f32 math)
// =======================================================================================
//
// What it computes
// ----------------
// One decode step: every request r has ONE new query token (q[r,h,:] for each query head
// h) that attends to all ctx = context_lens[r] tokens already in the KV cache:
//
//     out[r,h,:] = sum_t softmax_t(scale * q[r,h,:] . K[r,kvh,t,:]) * V[r,kvh,t,:]
//
// with GQA: query head h uses kv head kvh = h / G, G = H / KVH. There is no mask: the
// new token's own K/V row was appended to the cache before this kernel runs, and every
// cached token is in its past.
//
// Where the K/V rows live: the paged cache
// ---------------------------------------
//     k_pool, v_pool  [N, KVH, B, hd] f16      N physical blocks of B tokens (block_size)
//     block_tables    [R, max_blocks_per_seq] i32, padded with -1
// Token t of request r is in physical block block_tables[r][t / B], row t % B. The kernel
// reads every K/V row THROUGH the block table, straight from the pool. There is no
// "gather into a contiguous tensor" step: that would copy the whole cache every step.
// (Tests gather only to build the reference answer.)
//
// Split-context design ("PagedAttention V2", as in vLLM)
// -------------------------------------------------------
// A long context is cut into partitions of PARTITION_SIZE = 512 tokens, and every
// partition gets its own thread block. With 8 requests x 8 kv heads that is only 64
// blocks for a short context, but 64 x 16 = 1024 blocks for 8192 tokens: enough to keep
// every SM of a big GPU streaming memory. Two kernels:
//
//   1. paged_attention_decode_f16   grid (KVH, R, P), block (128,1,1) = 4 warps.
//      Block (kvh, r, p) handles tokens [512p, min(512(p+1), ctx)) and writes, for each
//      query head h of its group, an UNNORMALISED partial result:
//          tmp_max[r,h,p]   = m = max_t s_t
//          tmp_sum[r,h,p]   = l = sum_t exp(s_t - m)
//          tmp_out[r,h,p,:] =     sum_t exp(s_t - m) * v_t
//      An empty partition (512p >= ctx) writes m = -inf, l = 0, out = 0.
//   2. paged_attention_reduce_f32   grid (H, R, 1), block (128,1,1).
//      Merges the partitions exactly like the online softmax does:
//          M = max_p m_p,   w_p = exp(m_p - M),   L = sum_p w_p l_p
//          out[r,h,:] = sum_p w_p tmp_out[r,h,p,:] / L          (L == 0 -> zeros)
//   The host passes P = num_partitions = max(1, ceil(max_context / 512)).
//   Layouts: q [R,H,hd] f32; tmp_out [R,H,P,hd]; tmp_max, tmp_sum [R,H,P]; out [R,H,hd].
//
// Why one block serves a whole GQA group
// --------------------------------------
// Decode attention does very little math per byte: each K/V element is used for one
// multiply-add per query head. The kernel is limited by memory bandwidth, so the goal is
// to read every K/V byte from DRAM exactly once. All G query heads of a kv head need the
// same K/V rows, so block (kvh, r, p) loads each row ONCE and uses it for all G heads
// (in passes of HEADS_PER_PASS = 4 heads, to bound the registers; G = 4 in Llama-3-8B
// style models is a single pass; with G = 8 the second pass re-reads the partition's K/V,
// mostly from L2).
//
// Inside a block: threads, loads and the online softmax
// ----------------------------------------------------
//  * A K/V row of hd halves is split into 16-byte pieces of 8 halves. LPR ("lanes per
//    row") = the smallest power of two >= ceil(hd/8) consecutive lanes own one row, each
//    lane 8 dims (hd = 128 -> LPR = 16: two rows per warp per load instruction). Lanes
//    next to each other read bytes next to each other, so a warp-wide load is one or two
//    contiguous 256-byte rows: fully coalesced 16-byte loads.
//  * The LPR lanes that share a row form a "group"; the block has 128/LPR groups (8 for
//    hd = 128). Group g takes tokens g, g + #groups, g + 2 #groups, ... of the partition,
//    UNROLL = 4 at a time: the 4 block-table lookups are issued together, then the 4 K
//    and 4 V row loads (V does not depend on the scores), so 8 independent 16-byte loads
//    per thread are in flight while the warp waits for DRAM.
//  * The dot product q . k: each lane multiplies its 8 dims (f32 math), then the LPR
//    partial sums are added with a butterfly of warp shuffles (__shfl_xor_sync), which
//    leaves the full score in every lane of the group. No shared memory, no barrier.
//  * Each group keeps its own ONLINE softmax state per head: running max m, running sum
//    l and the unnormalised accumulator acc for its 8 dims, rescaled by exp(m_old - m_new)
//    whenever the max grows (once per UNROLL tokens).
//  * At the end the groups (2 per warp, 4 warps for hd = 128) are merged through shared
//    memory with the same max/rescale rule: that is the only use of shared memory, and it
//    needs exactly two __syncthreads, reached by all threads (loop bounds are uniform).
//  * q is pre-multiplied by `scale`; all accumulation is in f32.
//  * Registers: q (4 heads x 8 dims) and acc (4 x 8) stay in registers; with
//    __launch_bounds__(128, 4) the kernel fits in 128 registers, so 4 blocks = 16 warps
//    share an SM and each keeps 4 KB of K/V loads in flight.
// Requirements: exactly 128 threads per block (checked), head_dim <= 256,
// n_heads % n_kv_heads == 0. Any block_size >= 1 and head_dim >= 1 work (16-byte loads
// are used when head_dim % 8 == 0, element loads otherwise).
//
// This file must compile with NVRTC (only <cuda_fp16.h>) and with the CPU shim in
// kernels/shim: no inline asm, no __half2, static shared memory, full-mask shuffles.
// =======================================================================================

#include <cuda_fp16.h>

#include "common.cuh"  // KVS_INF, KVS_UNROLL
#include "kv_dtype.cuh"  // kv_t, kv_load8, kv_unpack8: the pools' dtype (kernels/kv/)

#define PA_PARTITION_SIZE 512  // tokens per partition (must match the host)
#define PA_THREADS 128         // threads per block (4 warps)
#define PA_VEC 8               // halves per lane per row: one 16-byte load
#define PA_MAX_HEAD_DIM 256
#define PA_HEADS_PER_PASS 4    // query heads of the GQA group handled per pass over K/V
#define PA_UNROLL 4            // tokens per group per loop iteration
// Occupancy hint: at most 128 registers per thread, so 4 blocks (16 warps) fit on one SM.
// 1024 blocks (8 requests x 8 kv heads x 16 partitions) then run in ~2 full waves on an
// H100/H200 (132 SMs), each warp keeping up to 4 K + 4 V row loads in flight.
#define PA_MIN_BLOCKS_PER_SM 4

// =======================================================================================
// Kernel 1: one partition of one query row for one GQA group
// =======================================================================================
// The body of kernel 1, shared by the decode entry (row = request r) and the prefill entry
// (row = one query token of a chunk; kernels/paged_attention.cu, paged_prefill_f16 below):
// query row `r` of q attends the first `ctx` tokens of the block table `table`, and
// writes the partial results of that row. The shared arrays are the entry's.
__device__ __forceinline__ void pa_partition(
    float* __restrict__ tmp_out, float* __restrict__ tmp_max, float* __restrict__ tmp_sum,
    const float* __restrict__ q, const kv_t* __restrict__ k_pool, const kv_t* __restrict__ v_pool,
    const int* __restrict__ table, const int ctx, const int r, const int max_blocks_per_seq,
    const int num_partitions, const int n_heads, const int n_kv_heads, const int block_size,
    const int head_dim, const float scale, const int kvh, const int part,
    float (*s_m)[PA_HEADS_PER_PASS], float (*s_l)[PA_HEADS_PER_PASS],
    float (*s_acc)[PA_THREADS * PA_VEC]) {
    const int tid = (int)threadIdx.x;
    const int G = n_heads / n_kv_heads;  // query heads per kv head

    // ---- thread layout: groups of LPR lanes share one K/V row -------------------------
    int lpr = 1;
    while (lpr * PA_VEC < head_dim) lpr <<= 1;  // 1, 2, 4, 8, 16 or 32 (divides 32)
    const int n_groups = PA_THREADS / lpr;
    const int group = tid / lpr;  // groups never straddle a warp
    const int lane = tid % lpr;   // lane inside the group
    const int d0 = lane * PA_VEC; // this lane owns dims d0 .. d0+7
    const bool vec_ok = (head_dim % PA_VEC) == 0;

    // ---- the tokens of this partition ---------------------------------------------------
    const int t_begin = part * PA_PARTITION_SIZE;
    const int t_end = min(ctx, t_begin + PA_PARTITION_SIZE);
    const int n_tok = max(0, t_end - t_begin);  // 0: empty partition
    const int tokens_per_iter = n_groups * PA_UNROLL;
    // Same trip count in every thread (tokens past t_end are masked), so every lane takes
    // part in every shuffle and every thread reaches every barrier.
    const int n_iters = (n_tok + tokens_per_iter - 1) / tokens_per_iter;

    // t / block_size for every token: a shift when block_size is a power of two.
    int bs_shift = 0;
    while (bs_shift < 30 && (1 << bs_shift) < block_size) ++bs_shift;
    const bool bs_pow2 = (1 << bs_shift) == block_size;

    const long long head_stride = (long long)block_size * head_dim;  // one kv head in a block
    const long long block_stride = (long long)n_kv_heads * head_stride;  // one physical block
    const kv_t* k_base = k_pool + (long long)kvh * head_stride;
    const kv_t* v_base = v_pool + (long long)kvh * head_stride;

    for (int g0 = 0; g0 < G; g0 += PA_HEADS_PER_PASS) {  // passes over the GQA group
        const int n_g = min(PA_HEADS_PER_PASS, G - g0);
        const int h0 = kvh * G + g0;  // first query head of this pass

        // ---- this lane's slice of q for each head, pre-scaled, in registers -----------
        float qf[PA_HEADS_PER_PASS][PA_VEC];
        KVS_UNROLL
        for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
            const float* qg = q + ((long long)r * n_heads + h0 + g) * head_dim;
            KVS_UNROLL
            for (int e = 0; e < PA_VEC; ++e)
                qf[g][e] = (g < n_g && d0 + e < head_dim) ? qg[d0 + e] * scale : 0.0f;
        }

        // ---- online softmax state of this group (identical in its LPR lanes) ----------
        float m[PA_HEADS_PER_PASS], l[PA_HEADS_PER_PASS], acc[PA_HEADS_PER_PASS][PA_VEC];
        KVS_UNROLL
        for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
            m[g] = -KVS_INF;
            l[g] = 0.0f;
            KVS_UNROLL
            for (int e = 0; e < PA_VEC; ++e) acc[g][e] = 0.0f;
        }

        for (int it = 0; it < n_iters; ++it) {
            // -- 1. find my UNROLL tokens through the block table ------------------------
            // (all table lookups first, so their latencies overlap)
            int phys[PA_UNROLL], off[PA_UNROLL];
            KVS_UNROLL
            for (int u = 0; u < PA_UNROLL; ++u) {
                const int t = t_begin + (it * PA_UNROLL + u) * n_groups + group;
                phys[u] = -1;  // -1: no token (past the end of the partition)
                off[u] = 0;
                if (t < t_end) {
                    const int lblk = bs_pow2 ? (t >> bs_shift) : (t / block_size);
                    off[u] = t - lblk * block_size;
                    // The block table: logical block -> physical block of the pool.
                    phys[u] = (lblk < max_blocks_per_seq) ? table[lblk] : -1;
                }
            }
            // -- then issue the K and V row loads of all UNROLL tokens (16 bytes per lane
            //    each). V does not depend on the scores, so it is requested now too: 8
            //    independent loads per thread are in flight while we wait.
            long long row[PA_UNROLL];  // element offset of the token's row for kv head kvh
            bool valid[PA_UNROLL];
            kv_raw8 kraw[PA_UNROLL];
            KVS_UNROLL
            for (int u = 0; u < PA_UNROLL; ++u) {
                valid[u] = phys[u] >= 0;
                row[u] = (long long)phys[u] * block_stride + (long long)off[u] * head_dim;
                kraw[u] = valid[u] ? kv_load8(k_base + row[u], d0, head_dim, vec_ok)
                                   : kv_zero8();
            }
            kv_raw8 vraw[PA_UNROLL];
            KVS_UNROLL
            for (int u = 0; u < PA_UNROLL; ++u)
                vraw[u] = valid[u] ? kv_load8(v_base + row[u], d0, head_dim, vec_ok) : kv_zero8();

            // -- 2. partial dot products over my 8 dims, for every head -----------------
            float s[PA_UNROLL][PA_HEADS_PER_PASS];
            KVS_UNROLL
            for (int u = 0; u < PA_UNROLL; ++u) {
                float kf[PA_VEC];
                kv_unpack8(kraw[u], kf);
                KVS_UNROLL
                for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
                    float dot = 0.0f;
                    KVS_UNROLL
                    for (int e = 0; e < PA_VEC; ++e) dot += qf[g][e] * kf[e];
                    s[u][g] = dot;
                }
            }

            // -- 3. sum the partials of the LPR lanes of a row (butterfly) --------------
            // XOR with offsets < LPR stays inside the group; all 32 lanes of the warp
            // take part (full mask, converged), each group reducing its own values.
            for (int o = lpr >> 1; o > 0; o >>= 1) {
                KVS_UNROLL
                for (int u = 0; u < PA_UNROLL; ++u) {
                    KVS_UNROLL
                    for (int g = 0; g < PA_HEADS_PER_PASS; ++g)
                        s[u][g] += __shfl_xor_sync(0xffffffffu, s[u][g], o);
                }
            }

            // -- 4. online softmax: scores -> probabilities, rescale the old state ------
            KVS_UNROLL
            for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
                float m_new = m[g];
                KVS_UNROLL
                for (int u = 0; u < PA_UNROLL; ++u) {
                    if (!valid[u]) s[u][g] = -KVS_INF;  // token past the end: masked
                    m_new = fmaxf(m_new, s[u][g]);
                }
                // m == -inf: nothing accumulated yet (corr = 0 avoids -inf - -inf = NaN).
                const float corr = (m[g] == -KVS_INF) ? 0.0f : __expf(m[g] - m_new);
                float p_sum = 0.0f;
                KVS_UNROLL
                for (int u = 0; u < PA_UNROLL; ++u) {
                    const float p = (s[u][g] == -KVS_INF) ? 0.0f : __expf(s[u][g] - m_new);
                    s[u][g] = p;  // s now holds probabilities (relative to m_new)
                    p_sum += p;
                }
                l[g] = l[g] * corr + p_sum;
                KVS_UNROLL
                for (int e = 0; e < PA_VEC; ++e) acc[g][e] *= corr;
                m[g] = m_new;
            }

            // -- 5. acc += p * V for my 8 dims (V rows were loaded in step 1) ---------
            KVS_UNROLL
            for (int u = 0; u < PA_UNROLL; ++u) {
                float vf[PA_VEC];
                kv_unpack8(vraw[u], vf);
                KVS_UNROLL
                for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
                    KVS_UNROLL
                    for (int e = 0; e < PA_VEC; ++e) acc[g][e] += s[u][g] * vf[e];
                }
            }
        }

        // ---- merge the groups through shared memory ------------------------------------
        KVS_UNROLL
        for (int g = 0; g < PA_HEADS_PER_PASS; ++g) {
            KVS_UNROLL
            for (int e = 0; e < PA_VEC; ++e) s_acc[g][tid * PA_VEC + e] = acc[g][e];
            if (lane == 0) {
                s_m[group][g] = m[g];
                s_l[group][g] = l[g];
            }
        }
        __syncthreads();  // BARRIER 1: every group's partials are visible to all threads

        // Thread tid produces outputs (g, d) = tid, tid + 128, ... of the n_g x hd results.
        for (int idx = tid; idx < n_g * head_dim; idx += PA_THREADS) {
            const int g = idx / head_dim;
            const int d = idx % head_dim;
            float M = -KVS_INF;
            for (int grp = 0; grp < n_groups; ++grp) M = fmaxf(M, s_m[grp][g]);
            float L = 0.0f, A = 0.0f;
            if (M != -KVS_INF) {
                for (int grp = 0; grp < n_groups; ++grp) {
                    const float mg = s_m[grp][g];
                    if (mg == -KVS_INF) continue;  // this group saw no token
                    const float w = __expf(mg - M);
                    L += w * s_l[grp][g];
                    // dim d of group grp was held by thread grp*lpr + d/8, slot d%8
                    A += w * s_acc[g][grp * lpr * PA_VEC + d];
                }
            }
            const long long o = ((long long)r * n_heads + h0 + g) * num_partitions + part;
            tmp_out[o * head_dim + d] = A;
            if (d == 0) {
                tmp_max[o] = M;
                tmp_sum[o] = L;
            }
        }
        __syncthreads();  // BARRIER 2: shared memory is free before the next pass reuses it
    }
}

// The decode entry: block (kvh, r, p) is partition p of request r's one query token.
extern "C" __global__ void __launch_bounds__(PA_THREADS, PA_MIN_BLOCKS_PER_SM)
paged_attention_decode_f16(float* __restrict__ tmp_out, float* __restrict__ tmp_max,
                           float* __restrict__ tmp_sum, const float* __restrict__ q,
                           const kv_t* __restrict__ k_pool,
                           const kv_t* __restrict__ v_pool,
                           const int* __restrict__ block_tables,
                           const int* __restrict__ context_lens, int max_blocks_per_seq,
                           int num_partitions, int n_heads, int n_kv_heads, int block_size,
                           int head_dim, float scale) {
    // Per-group partial results, merged at the end of each pass (the only shared memory).
    __shared__ float s_m[PA_THREADS][PA_HEADS_PER_PASS];  // running max     [group][head]
    __shared__ float s_l[PA_THREADS][PA_HEADS_PER_PASS];  // running sum     [group][head]
    __shared__ float s_acc[PA_HEADS_PER_PASS][PA_THREADS * PA_VEC];  // [head][thread*8+e]

    const int kvh = (int)blockIdx.x;   // kv head (= GQA group)
    const int r = (int)blockIdx.y;     // request
    const int part = (int)blockIdx.z;  // partition
    // Bad arguments: leave. The condition is the same for every thread of the block, so
    // nobody is left waiting at a barrier.
    if ((int)blockDim.x != PA_THREADS || kvh >= n_kv_heads || part >= num_partitions ||
        head_dim < 1 || head_dim > PA_MAX_HEAD_DIM || block_size < 1 ||
        n_heads % n_kv_heads != 0)
        return;
    pa_partition(tmp_out, tmp_max, tmp_sum, q, k_pool, v_pool,
                 block_tables + (long long)r * max_blocks_per_seq, context_lens[r], r,
                 max_blocks_per_seq, num_partitions, n_heads, n_kv_heads, block_size, head_dim,
                 scale, kvh, part, s_m, s_l, s_acc);
}

// The prefill entry (chunked prefill and speculative verification): a chunk of C new tokens
// of request r, at positions [ctx_r - C, ctx_r), their K/V already appended. Query row i
// (q [Q, H, hd], the chunks of all requests one after another) belongs to request
// row_req[i] and attends its first row_ctx[i] cached tokens: ctx_r - C + j + 1 for the
// chunk's j-th token, which is the causal mask inside the chunk. Block (kvh, i, p) is
// partition p of row i; every row runs the decode body, so a chunk of one token computes
// exactly what paged_attention_decode_f16 computes. Each row reads its K/V rows itself: the
// chunk's rows do not share loads (lesson 6's flash kernel tiles queries that way).
// The rows are merged by paged_attention_reduce_f32 with context_lens = row_ctx, grid (H, Q).
extern "C" __global__ void __launch_bounds__(PA_THREADS, PA_MIN_BLOCKS_PER_SM)
paged_prefill_f16(float* __restrict__ tmp_out, float* __restrict__ tmp_max,
                  float* __restrict__ tmp_sum, const float* __restrict__ q,
                  const kv_t* __restrict__ k_pool, const kv_t* __restrict__ v_pool,
                  const int* __restrict__ block_tables, const int* __restrict__ row_req,
                  const int* __restrict__ row_ctx, int n_rows, int max_blocks_per_seq,
                  int num_partitions, int n_heads, int n_kv_heads, int block_size, int head_dim,
                  float scale) {
    __shared__ float s_m[PA_THREADS][PA_HEADS_PER_PASS];
    __shared__ float s_l[PA_THREADS][PA_HEADS_PER_PASS];
    __shared__ float s_acc[PA_HEADS_PER_PASS][PA_THREADS * PA_VEC];

    const int kvh = (int)blockIdx.x;
    const int row = (int)blockIdx.y;  // query row of the chunks
    const int part = (int)blockIdx.z;
    if ((int)blockDim.x != PA_THREADS || kvh >= n_kv_heads || row >= n_rows ||
        part >= num_partitions || head_dim < 1 || head_dim > PA_MAX_HEAD_DIM ||
        block_size < 1 || n_heads % n_kv_heads != 0)
        return;
    const int r = row_req[row];
    pa_partition(tmp_out, tmp_max, tmp_sum, q, k_pool, v_pool,
                 block_tables + (long long)r * max_blocks_per_seq, row_ctx[row], row,
                 max_blocks_per_seq, num_partitions, n_heads, n_kv_heads, block_size, head_dim,
                 scale, kvh, part, s_m, s_l, s_acc);
}

// =======================================================================================
// Kernel 2: merge the partitions of (request r, head h)
// Each thread recomputes the global max M and total L (P is small) and then owns output
// dims d = tid, tid + blockDim, ... No shared memory and no barrier.
// =======================================================================================
extern "C" __global__ void paged_attention_reduce_f32(float* __restrict__ out,
                                                      const float* __restrict__ tmp_out,
                                                      const float* __restrict__ tmp_max,
                                                      const float* __restrict__ tmp_sum,
                                                      const int* __restrict__ context_lens,
                                                      int num_partitions, int n_heads,
                                                      int head_dim) {
    const int h = (int)blockIdx.x;
    const int r = (int)blockIdx.y;
    if (h >= n_heads) return;

    const int ctx = context_lens[r];
    // Partitions that hold tokens of this request (the rest are empty anyway).
    const int n_used =
        ctx <= 0 ? 0 : min(num_partitions, (ctx + PA_PARTITION_SIZE - 1) / PA_PARTITION_SIZE);
    const long long base = ((long long)r * n_heads + h) * num_partitions;

    float M = -KVS_INF;
    for (int p = 0; p < n_used; ++p) M = fmaxf(M, tmp_max[base + p]);
    float L = 0.0f;
    if (M != -KVS_INF) {
        for (int p = 0; p < n_used; ++p) {
            const float mp = tmp_max[base + p];
            if (mp != -KVS_INF) L += tmp_sum[base + p] * __expf(mp - M);
        }
    }
    const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;  // L == 0: no token at all -> zeros

    float* o = out + ((long long)r * n_heads + h) * head_dim;
    for (int d = (int)threadIdx.x; d < head_dim; d += (int)blockDim.x) {
        float a = 0.0f;
        if (L > 0.0f) {
            for (int p = 0; p < n_used; ++p) {
                const float mp = tmp_max[base + p];
                if (mp == -KVS_INF) continue;
                a += __expf(mp - M) * tmp_out[(base + p) * head_dim + d];
            }
        }
        o[d] = a * inv;
    }
}
