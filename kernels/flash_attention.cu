// =======================================================================================
// kernels/flash_attention.cu -- FlashAttention's tiled forward pass (f32, one head per
// grid row), the step after attention.cu's one-query-per-block fused kernel
// =======================================================================================
//
//   q     [H, T, hd]      queries          k, v  [KVH, T, hd]  keys and values (GQA: query
//   out   [H, T, hd]      output                                head h reads KV head h / (H/KVH))
//
// flash_attention_f32: grid (ceil(T / Br), H, 1), block (128, 1, 1); Br = block_q query rows
// and Bc = block_k keys per tile, chosen by the host.
//   1. The block's Br query rows (scaled by 1/sqrt(hd)) are staged in shared memory once.
//   2. For every key tile of Bc keys that the mask does not hide entirely, K's and V's tiles are
//      staged in shared memory, the Br x Bc scores are computed there, and each row updates its
//      running max m, running sum l and unnormalised accumulator acc (the online softmax):
//        m_new = max(m, rowmax S);  c = exp(m - m_new);  l = l*c + sum exp(S - m_new);
//        acc = acc*c + exp(S - m_new) * V
//      Tiles wholly above the diagonal (causal) or wholly left of every row's window (window
//      without sinks) are skipped: their K and V are never read.
//   3. After the last tile the row block's output acc / l is written once.
// So Q is read once, O written once, and K and V once per row block: about T/Br times per
// head instead of T times for attention.cu's fused kernel; the T x T matrices never exist.
//
// What is simplified next to FlashAttention-2: f32 everywhere (no tensor cores, no half/bf16
// inputs); one 128-thread block per row block whose threads share each tile's work through
// shared memory, where FA2 gives each warp its own rows of Q (FA2 paper, section 3.3; it was
// FlashAttention-1 that split the key loop across warps) and keeps S and the accumulator in
// registers; plain shared-memory loops instead of mma instructions; no double-buffered loads
// (cp.async); no backward pass. Warp specialisation and asynchronous TMA loads are
// FlashAttention-3's (Hopper), not FA2's. Shared memory is static: the host
// rejects tiles with (2*Br + 2*Bc)*hd + Br*Bc > FA_SMEM floats or Br > FA_MAX_BR, and the
// kernel returns at once for them.
//
// Barriers: every __syncthreads below is reached by all threads of the block (the early
// returns and the tile skip depend only on blockIdx and arguments, so they are uniform).
// This file must compile with NVRTC (no system headers) and with the CPU shim in
// kernels/shim. It is f32 only: the one header it needs is kernels/common.cuh (the masks),
// shown after this file in the app's kernel panel.
// =======================================================================================

#include "common.cuh"  // KVS_INF, the mask predicate attn_visible

// This kernel's name for the one mask predicate of every kernel (attn_visible, common.cuh).
__device__ __forceinline__ bool fa_visible(int i, int j, int mask_kind, int window, int sinks) {
    return attn_visible(i, j, mask_kind, window, sinks);
}

#define FA_SMEM 10240   // floats of shared memory for the Q, K, V, score and accumulator tiles
#define FA_MAX_BR 64    // most query rows per block

// Whether the mask hides every (query, key) pair of rows i0..i1 and keys j0..j1 (inclusive).
__device__ __forceinline__ bool fa_tile_hidden(int i0, int i1, int j0, int j1, int mask_kind,
                                               int window, int sinks) {
    if (mask_kind == ATTN_MASK_NONE) return false;
    if (j0 > i1) return true;  // every key is in every row's future
    // Window: the first row's window starts furthest left; keys at or before i0 - window are
    // outside every row's window unless they are sinks.
    return mask_kind == ATTN_MASK_WINDOW && j0 >= sinks && j1 <= i0 - window;
}

extern "C" __global__ void flash_attention_f32(const float* __restrict__ q,
                                               const float* __restrict__ k,
                                               const float* __restrict__ v,
                                               float* __restrict__ out, int n_heads,
                                               int n_kv_heads, int seq, int head_dim,
                                               float scale, int mask_kind, int window,
                                               int sinks, int block_q, int block_k) {
    __shared__ float smem[FA_SMEM];
    __shared__ float s_m[FA_MAX_BR];     // running max per row
    __shared__ float s_l[FA_MAX_BR];     // running sum per row
    __shared__ float s_corr[FA_MAX_BR];  // this tile's rescale factor per row

    const int br = block_q, bc = block_k, hd = head_dim;
    const int h = (int)blockIdx.y;
    const int i0 = (int)blockIdx.x * br;
    // Uniform for the whole block: safe to return before the first barrier.
    if (h >= n_heads || br < 1 || bc < 1 || br > FA_MAX_BR || hd < 1 ||
        (2 * br + 2 * bc) * hd + br * bc > FA_SMEM || i0 >= seq)
        return;
    const int nr = min(br, seq - i0);  // rows of this block (the last one may be short)
    const int i1 = i0 + nr - 1;
    float* s_q = smem;            // [br, hd] scaled queries
    float* s_k = s_q + br * hd;   // [bc, hd]
    float* s_v = s_k + bc * hd;   // [bc, hd]
    float* s_s = s_v + bc * hd;   // [br, bc] scores, then probabilities
    float* s_a = s_s + br * bc;   // [br, hd] accumulator

    const int tid = (int)threadIdx.x;
    const int nt = (int)blockDim.x;
    const int kvh = h / (n_heads / n_kv_heads);
    const float* qb = q + ((long long)h * seq + i0) * hd;
    const float* kb = k + (long long)kvh * seq * hd;
    const float* vb = v + (long long)kvh * seq * hd;

    for (int e = tid; e < nr * hd; e += nt) {
        s_q[e] = qb[e] * scale;
        s_a[e] = 0.0f;
    }
    for (int r = tid; r < nr; r += nt) {
        s_m[r] = -KVS_INF;
        s_l[r] = 0.0f;
    }
    __syncthreads();  // BARRIER 1: Q tile, accumulators and row state are ready

    for (int j0 = 0; j0 < seq; j0 += bc) {
        const int nc = min(bc, seq - j0);
        if (fa_tile_hidden(i0, i1, j0, j0 + nc - 1, mask_kind, window, sinks)) continue;
        for (int e = tid; e < nc * hd; e += nt) {
            s_k[e] = kb[(long long)j0 * hd + e];
            s_v[e] = vb[(long long)j0 * hd + e];
        }
        __syncthreads();  // BARRIER 2: K and V tiles are in shared memory

        for (int e = tid; e < nr * bc; e += nt) {
            const int r = e / bc, c = e % bc;
            float s = -KVS_INF;
            if (c < nc && fa_visible(i0 + r, j0 + c, mask_kind, window, sinks)) {
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d) dot += s_q[r * hd + d] * s_k[c * hd + d];
                s = dot;
            }
            s_s[e] = s;
        }
        __syncthreads();  // BARRIER 3: the score tile is complete

        for (int r = tid; r < nr; r += nt) {
            const float m_old = s_m[r];
            float m_new = m_old;
            for (int c = 0; c < nc; ++c) m_new = fmaxf(m_new, s_s[r * bc + c]);
            if (m_new == -KVS_INF) {  // nothing visible in this row yet
                for (int c = 0; c < nc; ++c) s_s[r * bc + c] = 0.0f;
                s_corr[r] = 1.0f;
                continue;
            }
            const float corr = (m_old == -KVS_INF) ? 0.0f : __expf(m_old - m_new);
            float sum = 0.0f;
            for (int c = 0; c < nc; ++c) {
                const float s = s_s[r * bc + c];
                const float p = (s == -KVS_INF) ? 0.0f : __expf(s - m_new);
                s_s[r * bc + c] = p;
                sum += p;
            }
            s_l[r] = s_l[r] * corr + sum;
            s_m[r] = m_new;
            s_corr[r] = corr;
        }
        __syncthreads();  // BARRIER 4: probabilities and rescale factors are ready

        for (int e = tid; e < nr * hd; e += nt) {
            const int r = e / hd, d = e % hd;
            float a = s_a[e] * s_corr[r];
            for (int c = 0; c < nc; ++c) a += s_s[r * bc + c] * s_v[c * hd + d];
            s_a[e] = a;
        }
        __syncthreads();  // BARRIER 5: the next tile may overwrite K, V and the scores
    }

    float* ob = out + ((long long)h * seq + i0) * hd;
    for (int e = tid; e < nr * hd; e += nt) {
        const float l = s_l[e / hd];
        ob[e] = l > 0.0f ? s_a[e] / l : 0.0f;
    }
}
