// =======================================================================================
// kernels/attention.cu -- scaled dot-product attention for a whole sequence (prefill), f32
// =======================================================================================
//
// What it computes
// ----------------
// For every query head h and query position i:
//
//     s[h,i,j] = scale * dot(q[h,i,:], k[kvh,j,:])        scale = 1/sqrt(head_dim)
//     p[h,i,j] = softmax_j(s[h,i,j])                      (over the visible keys j)
//     o[h,i,:] = sum_j p[h,i,j] * v[kvh,j,:]
//
// GQA (grouped-query attention): query head h reads kv head kvh = h / (H / KVH), so a
// group of H/KVH query heads shares one K/V head. Plain multi-head attention is KVH == H;
// multi-query attention is KVH == 1.
//
// Masks (int mask_kind): key j is visible to query i when
//     0 none    always
//     1 causal  j <= i
//     2 window  j <= i && (j > i - W || j < S)   (W = window >= 1, S = sinks >= 0:
//                                                 the first S tokens stay visible, S = 0
//                                                 is a plain sliding window)
// A masked score is -infinity, so exp() makes its probability exactly 0. A row whose keys
// are all masked gets probabilities 0 and output 0 (never NaN: we never compute
// (-inf) - (-inf)).
//
// Layouts (row-major, contiguous, f32)
// ------------------------------------
//     q      [H,   T, hd]        k, v  [KVH, T, hd]
//     scores [H,   T, T ]        probs [H,   T, T ]        out [H, T, hd]
//
// Versions in this file
// ---------------------
// v1, three plain kernels -- easy to read, and they write the whole T x T score matrix
// to global memory (that is exactly the memory traffic the fused kernel avoids):
//   1. attention_scores_f32   one thread per (query i, key j): a dot product.
//                             grid (ceil(T/16), ceil(T/16), H), block (16,16,1);
//                             x -> key j, y -> query i, z -> head.
//   2. softmax_rows_f32       one block per row, stable softmax (subtract the row max):
//                             block-wide max and sum with warp shuffles + shared memory.
//                             grid (rows,1,1), block (128,1,1) (any multiple of 32 <= 1024).
//   3. attention_pv_f32       one thread per (query i, dim d): out = probs . V.
//                             grid (ceil(hd/16), ceil(T/16), H), block (16,16,1);
//                             x -> dim d, y -> query i, z -> head.
// v2, one fused kernel ("flash-attention style", simplified):
//   4. attention_fused_f32    one block per (query i, head h), grid (T, H, 1), block
//                             (128,1,1). The scaled q row sits in shared memory. Keys are
//                             walked in tiles of blockDim keys with an ONLINE softmax:
//                             keep a running max m, running sum l and an unnormalised
//                             accumulator acc; when the max grows from m to m', rescale
//                             l and acc by exp(m - m'). Scores never touch global memory.
//                             head_dim <= 256.
//      What is simplified next to FlashAttention(-2): a block serves ONE query row (no Q
//      tiling: FlashAttention stages a tile of Br query rows in shared memory), so K and V
//      are re-read from global memory once per query (T times per head instead of about
//      T/Br times), there is no K/V tile staging in shared memory beyond the probabilities,
//      and there is no backward pass. It avoids the T x T matrices, as FlashAttention
//      does, but not the repeated K/V reads.
//
// This file must compile with NVRTC (no system headers) and with the CPU shim in
// kernels/shim (no inline asm, no dynamic shared memory, full-mask warp shuffles only).
// It is f32 only: the one header it needs is kernels/common.cuh (the masks, the block-wide
// reductions), shown after this file in the app's kernel panel.
// =======================================================================================

#include "common.cuh"  // KVS_INF, the mask predicate attn_visible, attn_block_max/sum

#define ATTN_MAX_HEAD_DIM 256
#define ATTN_MAX_THREADS 1024
// Output dims one thread of the fused kernel owns: d = tid, tid + blockDim, ... (<= 8 when
// blockDim >= 32 and head_dim <= 256).
#define ATTN_FUSED_ACC (ATTN_MAX_HEAD_DIM / ATTN_WARP)

// =======================================================================================
// v1 / kernel 1: scores = scale * Q K^T, masked entries = -inf
// One thread per (i, j). Simple and correct; each thread streams two rows from global
// memory (neighbouring threads read the same q row, which the cache serves).
// =======================================================================================
extern "C" __global__ void attention_scores_f32(const float* __restrict__ q,
                                                const float* __restrict__ k,
                                                float* __restrict__ scores, int n_heads,
                                                int n_kv_heads, int seq, int head_dim,
                                                float scale, int mask_kind, int window,
                                                int sinks) {
    const int j = (int)(blockIdx.x * blockDim.x + threadIdx.x);  // key
    const int i = (int)(blockIdx.y * blockDim.y + threadIdx.y);  // query
    const int h = (int)blockIdx.z;                               // query head
    // This kernel has no barrier, so threads outside the matrix may simply return.
    if (i >= seq || j >= seq || h >= n_heads) return;

    const int kvh = h / (n_heads / n_kv_heads);  // GQA: the K/V head of this query head
    const float* qi = q + ((long long)h * seq + i) * head_dim;
    const float* kj = k + ((long long)kvh * seq + j) * head_dim;

    float s = -KVS_INF;
    if (attn_visible(i, j, mask_kind, window, sinks)) {
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) dot += qi[d] * kj[d];
        s = dot * scale;
    }
    scores[((long long)h * seq + i) * seq + j] = s;
}

// =======================================================================================
// v1 / kernel 2: row softmax, one block per row
//   pass 1: m   = max_c x[c]                 (block reduction)
//   pass 2: sum = sum_c exp(x[c] - m)        (block reduction)
//   pass 3: y[c] = exp(x[c] - m) / sum
// Subtracting m keeps every exp() <= 1, so nothing overflows. If every entry is -inf,
// m = -inf and we write zeros instead of computing exp(-inf - -inf) = NaN.
// =======================================================================================
extern "C" __global__ void softmax_rows_f32(const float* __restrict__ in,
                                            float* __restrict__ out, int rows, int cols) {
    __shared__ float s_red[ATTN_WARP];
    const int row = (int)blockIdx.x;
    // The whole block takes this branch together (it depends only on blockIdx), so no
    // thread is left waiting at a barrier below.
    if (row >= rows) return;

    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const float* x = in + (long long)row * cols;
    float* y = out + (long long)row * cols;

    float m = -KVS_INF;
    for (int c = tid; c < cols; c += nt) m = fmaxf(m, x[c]);
    m = attn_block_max(m, s_red);  // same value in every thread

    float sum = 0.0f;
    if (m != -KVS_INF) {  // uniform branch: m is the block-wide max
        for (int c = tid; c < cols; c += nt) sum += __expf(x[c] - m);
    }
    sum = attn_block_sum(sum, s_red);

    const float inv = (sum > 0.0f) ? 1.0f / sum : 0.0f;
    for (int c = tid; c < cols; c += nt)
        y[c] = (m == -KVS_INF) ? 0.0f : __expf(x[c] - m) * inv;
}

// =======================================================================================
// v1 / kernel 3: out = P V
// One thread per (i, d): walks the probability row of query i and column d of V.
// Neighbouring threads (x -> d) read neighbouring V elements: coalesced.
// =======================================================================================
extern "C" __global__ void attention_pv_f32(const float* __restrict__ probs,
                                            const float* __restrict__ v,
                                            float* __restrict__ out, int n_heads,
                                            int n_kv_heads, int seq, int head_dim) {
    const int d = (int)(blockIdx.x * blockDim.x + threadIdx.x);  // output dim
    const int i = (int)(blockIdx.y * blockDim.y + threadIdx.y);  // query
    const int h = (int)blockIdx.z;
    if (d >= head_dim || i >= seq || h >= n_heads) return;  // no barriers: safe

    const int kvh = h / (n_heads / n_kv_heads);
    const float* p = probs + ((long long)h * seq + i) * seq;
    const float* vd = v + (long long)kvh * seq * head_dim + d;

    float acc = 0.0f;
    for (int j = 0; j < seq; ++j) acc += p[j] * vd[(long long)j * head_dim];
    out[((long long)h * seq + i) * head_dim + d] = acc;
}

// =======================================================================================
// v2 / kernel 4: fused attention with an online softmax
//
// Block (i, h), blockDim = nt threads (a multiple of 32; the host uses 128).
//   setup : s_q = scale * q[h,i,:] in shared memory
//   for each tile of nt keys j0 .. j0+nt-1 (only keys <= i for causal/window masks):
//     thread t computes the score s of key j0 + t (or -inf)
//     m_tile = block max of s;  m' = max(m, m_tile)
//     p_t    = exp(s - m')  -> shared s_p[t]
//     corr   = exp(m - m')    (how much the old running values shrink)
//     l      = l * corr + sum_t p_t
//     acc[d] = acc[d] * corr + sum_t p_t * v[j0+t, d]   (thread owns d = tid, tid+nt, ..)
//     m      = m'
//   out[h,i,d] = acc[d] / l   (0 when l == 0: no visible key)
// Only O(hd + nt) floats of shared memory, whatever T is.
// =======================================================================================
extern "C" __global__ void attention_fused_f32(const float* __restrict__ q,
                                               const float* __restrict__ k,
                                               const float* __restrict__ v,
                                               float* __restrict__ out, int n_heads,
                                               int n_kv_heads, int seq, int head_dim,
                                               float scale, int mask_kind, int window,
                                               int sinks) {
    __shared__ float s_q[ATTN_MAX_HEAD_DIM];  // scaled query row
    __shared__ float s_p[ATTN_MAX_THREADS];   // probabilities of the current key tile
    __shared__ float s_red[ATTN_WARP];        // cross-warp reduction scratch

    const int i = (int)blockIdx.x;  // query position
    const int h = (int)blockIdx.y;  // query head
    // Uniform for the whole block (depends only on blockIdx and arguments): safe to return
    // before the first barrier. head_dim > 256 is rejected by the host.
    if (i >= seq || h >= n_heads || head_dim > ATTN_MAX_HEAD_DIM) return;

    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int kvh = h / (n_heads / n_kv_heads);
    const float* qi = q + ((long long)h * seq + i) * head_dim;
    const float* kb = k + (long long)kvh * seq * head_dim;
    const float* vb = v + (long long)kvh * seq * head_dim;

    for (int d = tid; d < head_dim; d += nt) s_q[d] = qi[d] * scale;
    __syncthreads();  // BARRIER 1: the whole q row is in shared memory before it is read

    // Causal and window masks hide every key after i: do not even visit those tiles.
    // (The loop bound is the same in every thread, so all threads run the same number of
    // iterations and reach the same barriers.)
    const int j_end = (mask_kind == ATTN_MASK_NONE) ? seq : min(seq, i + 1);

    float m = -KVS_INF;  // running max of the scores seen so far
    float l = 0.0f;      // running sum of exp(s - m)
    float acc[ATTN_FUSED_ACC];
    KVS_UNROLL
    for (int a = 0; a < ATTN_FUSED_ACC; ++a) acc[a] = 0.0f;

    for (int j0 = 0; j0 < j_end; j0 += nt) {
        // -- 1. one score per thread ----------------------------------------------------
        const int j = j0 + tid;
        float s = -KVS_INF;
        if (j < j_end && attn_visible(i, j, mask_kind, window, sinks)) {
            const float* kj = kb + (long long)j * head_dim;
            float dot = 0.0f;
            for (int d = 0; d < head_dim; ++d) dot += s_q[d] * kj[d];
            s = dot;  // q was pre-scaled
        }

        // -- 2. online softmax update ---------------------------------------------------
        const float m_tile = attn_block_max(s, s_red);  // contains barriers (all threads)
        const float m_new = fmaxf(m, m_tile);
        // If s == -inf then p = 0. If m_new is -inf, every key so far was masked and
        // s == -inf too, so we never form (-inf) - (-inf).
        const float p = (s == -KVS_INF) ? 0.0f : __expf(s - m_new);
        const float corr = (m == -KVS_INF) ? 0.0f : __expf(m - m_new);
        s_p[tid] = p;
        __syncthreads();  // BARRIER 2: all p of this tile are in s_p before anyone reads them

        // -- 3. accumulate p . V for the dims this thread owns ---------------------------
        const int n_keys = min(nt, j_end - j0);
        float l_tile = 0.0f;
        KVS_UNROLL
        for (int a = 0; a < ATTN_FUSED_ACC; ++a) acc[a] *= corr;
        for (int jj = 0; jj < n_keys; ++jj) {
            const float pj = s_p[jj];  // broadcast read: every thread reads the same word
            l_tile += pj;
            if (pj == 0.0f) continue;  // masked key: skip its V row (same in all threads)
            const float* vj = vb + (long long)(j0 + jj) * head_dim;
            KVS_UNROLL
            for (int a = 0; a < ATTN_FUSED_ACC; ++a) {
                const int d = tid + a * nt;
                if (d < head_dim) acc[a] += pj * vj[d];  // threads read consecutive d
            }
        }
        l = l * corr + l_tile;
        m = m_new;
        // No barrier needed here: the next tile writes s_p only after attn_block_max,
        // whose first barrier every thread reaches only after finishing this loop.
    }

    float* oi = out + ((long long)h * seq + i) * head_dim;
    const float inv = (l > 0.0f) ? 1.0f / l : 0.0f;  // l == 0: no visible key -> zeros
    KVS_UNROLL
    for (int a = 0; a < ATTN_FUSED_ACC; ++a) {
        const int d = tid + a * nt;
        if (d < head_dim) oi[d] = acc[a] * inv;
    }
}
