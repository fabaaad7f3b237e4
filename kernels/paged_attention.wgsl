// =======================================================================================
// kernels/paged_attention.wgsl -- the WGSL twin of kernels/paged_attention.cu: decode
// attention (one query token per request) reading f16 K/V through the block tables
// =======================================================================================
//
// Same split-context algorithm as the CUDA kernel (vLLM PagedAttention V2):
//   paged_attention_decode_f16   one workgroup of 128 per (KV head, request, partition of
//                                PART = 256 tokens), dispatch (KVH, R, partitions). It serves
//                                the whole GQA group of that KV head, HP = 4 query heads per
//                                pass: each K row is read once per pass for all of them, the
//                                scores of the partition live in workgroup memory, and the
//                                partition's max m, sum l and unnormalised output go to
//                                tmp_max / tmp_sum / tmp_out [R, H, partitions(, hd)].
//   paged_prefill_f16            the same body for the query rows of ragged chunks (chunked
//                                prefill, speculative verification): dispatch (KVH, Q, partitions),
//                                row i attends its request's first ctx_r − C_r + j + 1 tokens.
//   paged_attention_reduce_f32   one workgroup per (query head, request), dispatch (H, R, 1):
//                                merges the partitions, M = max m_p,
//                                out = sum_p e^(m_p - M) tmp_out_p / sum_p e^(m_p - M) l_p.
// Token pos of request r lives in block tables[r, pos / bs] at offset pos % bs: it is read in
// place (no gather). A request with no tokens gets zeros.
//
// K and V are read through k_at / v_at: as u32 pairs with unpack2x16float on every adapter
// (f16_read_packed.wgsl), or as array<f16> where the adapter has shader-f16
// (f16_read_native.wgsl). Differences from CUDA, for WebGPU's
// defaults: 256-token partitions and 4 heads per pass keep workgroup memory near 8 KiB; no warp
// shuffles; the context length is read with workgroupUniformLoad so that every barrier is in
// uniform control flow.
// =======================================================================================

struct Params {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    num_partitions: u32,
    scale: f32,
    n_rows: u32,  // paged_prefill_f16: query rows Q (0 for decode)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
// Bindings 2 and 3 (k_pool, v_pool) and k_at/v_at come from kernels/f16_read_packed.wgsl or
// kernels/f16_read_native.wgsl, which the backend puts in front of this file.
@group(0) @binding(4) var<storage, read> tables: array<i32>;
@group(0) @binding(5) var<storage, read> lens: array<i32>;
@group(0) @binding(6) var<storage, read_write> tmp_out: array<f32>;
@group(0) @binding(7) var<storage, read_write> tmp_max: array<f32>;
@group(0) @binding(8) var<storage, read_write> tmp_sum: array<f32>;
@group(0) @binding(9) var<storage, read_write> out: array<f32>;

// neg_inf, WG and the workgroup reductions wg_max and wg_sum come from kernels/common.wgsl,
// which the backend puts in front of this file.
const PART: u32 = 256u;
const HP: u32 = 4u;
const MAX_HD: u32 = 256u;
var<workgroup> s_q: array<f32, 1024>;  // HP * MAX_HD: the pass's scaled query rows
var<workgroup> s_s: array<f32, 1024>;  // HP * PART: scores, then probabilities
var<workgroup> s_len: u32;
var<workgroup> s_req: u32;

// The body of the decode kernel, shared with the prefill entry: query row `row` (of q, tmp_*)
// attends the first `len` tokens of the block-table row starting at `tables_row`. `len` must be
// uniform (both entries read it with workgroupUniformLoad), so every barrier below is reached by the
// whole workgroup.
fn pa_partition(kvh: u32, row: u32, part: u32, t: u32, len: u32, tables_row: u32) {
    let hd = P.head_dim;
    let H = P.n_heads;
    let G = H / P.kv_heads;
    let r = row;
    let start = part * PART;
    let end = min(len, start + PART);
    let n_tok = select(0u, end - start, end > start);
    for (var g0 = 0u; g0 < G; g0 += HP) {
        let ng = min(HP, G - g0);
        let h0 = kvh * G + g0;
        // 1. the pass's query rows, pre-scaled
        for (var x = t; x < ng * hd; x += WG) {
            let gi = x / hd;
            let d = x % hd;
            s_q[gi * MAX_HD + d] = q[(r * H + h0 + gi) * hd + d] * P.scale;
        }
        workgroupBarrier();
        // 2. scores: each invocation takes tokens t and t + 128 of the partition, reading each K
        //    row once for every head of the pass
        for (var u = 0u; u < PART / WG; u++) {
            let tl = t + u * WG;
            var sc = array<f32, 4>(neg_inf(), neg_inf(), neg_inf(), neg_inf());
            if (tl < n_tok) {
                let pos = start + tl;
                // The block table: logical block -> physical block of the pool.
                // EXERCISE block-table-lookup BEGIN
                let block = u32(tables[tables_row + pos / P.block_size]);
                let base = ((block * P.kv_heads + kvh) * P.block_size + pos % P.block_size) * hd;
                // EXERCISE block-table-lookup END
                var dot = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
                for (var d = 0u; d < hd; d++) {
                    let kd = k_at(base + d);
                    for (var gi = 0u; gi < ng; gi++) {
                        dot[gi] += s_q[gi * MAX_HD + d] * kd;
                    }
                }
                for (var gi = 0u; gi < ng; gi++) {
                    sc[gi] = dot[gi];
                }
            }
            for (var gi = 0u; gi < HP; gi++) {
                s_s[gi * PART + tl] = sc[gi];
            }
        }
        workgroupBarrier();
        // 3. per head: the partition's max and sum; scores become exp(s - m)
        for (var gi = 0u; gi < ng; gi++) {
            var mx = neg_inf();
            for (var u = 0u; u < PART / WG; u++) {
                mx = max(mx, s_s[gi * PART + t + u * WG]);
            }
            let m = wg_max(mx, t);
            var l = 0.0;
            for (var u = 0u; u < PART / WG; u++) {
                let i = gi * PART + t + u * WG;
                let s = s_s[i];
                var p = 0.0;
                if (s != neg_inf()) {
                    p = exp(s - m);
                }
                s_s[i] = p;
                l += p;
            }
            let lsum = wg_sum(l, t);
            if (t == 0u) {
                let o = (r * H + h0 + gi) * P.num_partitions + part;
                tmp_max[o] = m;
                tmp_sum[o] = lsum;
            }
        }
        workgroupBarrier();  // every probability is in s_s before the P.V pass reads it
        // 4. unnormalised P.V of the partition, one output dim per invocation
        for (var gi = 0u; gi < ng; gi++) {
            let o = (r * H + h0 + gi) * P.num_partitions + part;
            for (var d = t; d < hd; d += WG) {
                var acc = 0.0;
                for (var tl = 0u; tl < n_tok; tl++) {
                    let p = s_s[gi * PART + tl];
                    if (p != 0.0) {
                        let pos = start + tl;
                        let block = u32(tables[tables_row + pos / P.block_size]);
                        let base = ((block * P.kv_heads + kvh) * P.block_size + pos % P.block_size) * hd;
                        acc += p * v_at(base + d);
                    }
                }
                tmp_out[o * hd + d] = acc;
            }
        }
        workgroupBarrier();  // s_q and s_s are free before the next pass reuses them
    }
}


@compute @workgroup_size(128, 1, 1)
fn paged_attention_decode_f16(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let r = w.y;
    if (t == 0u) {
        s_len = u32(max(lens[r], 0));
    }
    let len = workgroupUniformLoad(&s_len);  // uniform from here on
    pa_partition(w.x, r, w.z, t, len, r * P.max_blocks);
}

// The prefill entry (the twin of paged_prefill_f16): dispatch (KVH, Q, partitions), one workgroup
// per (KV head, query row, partition). `lens` holds the rows' context lengths [Q] (ctx_r − C_r + j + 1
// for the chunk's j-th token: the causal mask inside the chunk) followed by their requests [Q];
// P.n_rows is Q. A chunk of one token computes what the decode entry computes, bit for bit.
@compute @workgroup_size(128, 1, 1)
fn paged_prefill_f16(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let row = w.y;
    if (t == 0u) {
        s_len = u32(max(lens[row], 0));
        s_req = u32(max(lens[P.n_rows + row], 0));
    }
    let len = workgroupUniformLoad(&s_len);
    let req = workgroupUniformLoad(&s_req);
    pa_partition(w.x, row, w.z, t, len, req * P.max_blocks);
}

@compute @workgroup_size(128, 1, 1)
fn paged_attention_reduce_f32(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let h = w.x;
    let r = w.y;
    let H = P.n_heads;
    let hd = P.head_dim;
    let np = P.num_partitions;
    let row = (r * H + h) * np;
    var big = neg_inf();
    for (var p = 0u; p < np; p++) {
        big = max(big, tmp_max[row + p]);
    }
    var total = 0.0;
    for (var p = 0u; p < np; p++) {
        let m = tmp_max[row + p];
        if (m != neg_inf()) {
            total += tmp_sum[row + p] * exp(m - big);
        }
    }
    var inv = 0.0;
    if (total > 0.0) {
        inv = 1.0 / total;
    }
    for (var d = t; d < hd; d += WG) {
        var acc = 0.0;
        for (var p = 0u; p < np; p++) {
            let m = tmp_max[row + p];
            if (m != neg_inf()) {
                acc += tmp_out[(row + p) * hd + d] * exp(m - big);
            }
        }
        out[(r * H + h) * hd + d] = acc * inv;
    }
}
