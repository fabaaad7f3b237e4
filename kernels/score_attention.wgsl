// =======================================================================================
// kernels/score_attention.wgsl -- WGSL twin of kernels/score_attention.cu: decode attention
// over a paged f16 cache that also returns the attention weights, summed per KV head over
// its query group, with a validity mask per (KV head, slot) (token-level eviction, H2O)
// =======================================================================================
//
//     s_t = scale * q[r,h,:] . K_t            (valid[blk, k, off] != 0)
//     p_t = softmax_t(s_t),  out[r,h,:] = sum_t p_t V_t,  probs[r,h,t] = p_t
//     scores[r,k,t] = sum over the group's heads of probs[r,h,t]
//
//     q, out [R, H, hd] (q rotated)   pools [N, KVH, B, hd] f16   tables [R, max_blocks]
//     lens [R]   valid [N, KVH, B] i32   probs [R, H, max_blocks * B]   scores [R, KVH, ...]
//     (out, probs and scores share one buffer, `result`, at 0, P.probs_at and P.scores_at)
//
// score_decode_f16: one workgroup of 128 per (KV head, request), dispatch (KVH, R, 1), as
// the CUDA kernel's blocks (which the host launches with 32 threads). Each workgroup walks
// its G query heads in turn; storageBarrier makes each head's probabilities visible to the
// whole workgroup before P.V and before the group sum. The context length is read with
// workgroupUniformLoad so that every barrier is in uniform control flow.
// =======================================================================================

struct ScoreParams {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
    probs_at: u32,
    scores_at: u32,
}

@group(0) @binding(0) var<uniform> P: ScoreParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;
// Bindings 2 and 3 (k_pool, v_pool) and k_at/v_at come from kernels/kv/f16_read_*.wgsl,
// which the backend puts in front of this file.
@group(0) @binding(4) var<storage, read> tables: array<i32>;
@group(0) @binding(5) var<storage, read> lens: array<i32>;
@group(0) @binding(6) var<storage, read> valid: array<i32>;
@group(0) @binding(7) var<storage, read_write> result: array<f32>;

const SCORE_MAX_HD: u32 = 256u;
var<workgroup> s_q: array<f32, SCORE_MAX_HD>;
var<workgroup> s_len: u32;

// What decode_row (kernels/decode_row.wgsl) reads for this invocation's head.
var<private> d_tb: u32;
var<private> d_kvh: u32;

fn score_at(i: u32) -> f32 {
    let blk = u32(tables[d_tb + i / P.block_size]);
    let slot = (blk * P.kv_heads + d_kvh) * P.block_size + i % P.block_size;
    if (valid[slot] == 0) {
        return neg_inf();  // evicted for this KV head
    }
    let row = slot * P.head_dim;
    var dot = 0.0;
    for (var d = 0u; d < P.head_dim; d += 1u) {
        dot += s_q[d] * k_at(row + d);
    }
    return dot;
}

fn pv_term(pt: f32, i: u32, d: u32) -> f32 {
    let blk = u32(tables[d_tb + i / P.block_size]);
    let row = ((blk * P.kv_heads + d_kvh) * P.block_size + i % P.block_size) * P.head_dim;
    return pt * v_at(row + d);
}

@compute @workgroup_size(128, 1, 1)
fn score_decode_f16(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let kvh = w.x;
    let r = w.y;
    let hd = P.head_dim;
    let H = P.n_heads;
    let G = H / P.kv_heads;
    let T = P.max_blocks * P.block_size;
    if (t == 0u) {
        s_len = u32(max(lens[r], 0));
    }
    let len = workgroupUniformLoad(&s_len);
    let tb = r * P.max_blocks;
    d_tb = tb;
    d_kvh = kvh;

    for (var g = 0u; g < G; g += 1u) {
        let h = kvh * G + g;
        let qb = (r * H + h) * hd;
        for (var d = t; d < hd; d += WG) {
            s_q[d] = q[qb + d] * P.scale;
        }
        workgroupBarrier();

        let pb = P.probs_at + (r * H + h) * T;
        decode_row(true, pb, (r * H + h) * hd, len, T, hd, t);
        storageBarrier();
        workgroupBarrier();
    }

    let sb = P.scores_at + (r * P.kv_heads + kvh) * T;
    for (var i = t; i < T; i += WG) {
        var acc = 0.0;
        for (var g = 0u; g < G; g += 1u) {
            // EXERCISE group-mass BEGIN
            acc += result[P.probs_at + (r * H + kvh * G + g) * T + i];
            // EXERCISE group-mass END
        }
        result[sb + i] = acc;
    }
}
