// =======================================================================================
// kernels/stream_attention.wgsl -- WGSL twin of kernels/stream_attention.cu: decode
// attention over a paged f16 cache whose keys are stored before RoPE and rotated on read,
// each at the position the host chooses; key_pos < 0 masks a token (StreamingLLM)
// =======================================================================================
//
//     s_t = scale * rope(q, q_pos) . rope(K_t, key_pos[t])         (key_pos[t] >= 0)
//     p_t = softmax_t(s_t),      out[r,h,:] = sum_t p_t V_t,      result[r,h,t] = p_t
//
//     q, out [R, H, hd]   q_pos [R]   pools [N, KVH, B, hd] f16   tables [R, max_blocks]
//     key_pos, probs [R, (H,) max_blocks * B]   cos_sin [P, hd]
//     (the storage buffers are packed to fit WebGPU's default of 8 per stage: see the bindings)
//
// stream_decode_f16: one workgroup of 128 per (query head, request), dispatch (H, R, 1), as
// the CUDA kernel's blocks (which the host launches with 32 threads; WG, the size of the
// reductions in common.wgsl, is 128). The weights' part of `result` doubles as the scores'
// scratch; storageBarrier makes the probabilities visible to the whole workgroup before P.V.
// The context length is read with workgroupUniformLoad so that every barrier is in uniform
// control flow.
// =======================================================================================

struct StreamParams {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
    probs_at: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> P: StreamParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;
// Bindings 2 and 3 (k_pool, v_pool) and k_at/v_at come from kernels/kv/f16_read_*.wgsl,
// which the backend puts in front of this file.
@group(0) @binding(4) var<storage, read> tables: array<i32>;
// WebGPU's default limit is 8 storage buffers per stage: each request's length and query position share
// one buffer ([R, 2]: context_lens[r], q_pos[r]), and the output and the weights another (out [R, H, hd]
// first, then probs [R, H, max_blocks * B] from P.probs_at).
@group(0) @binding(5) var<storage, read> reqs: array<i32>;
@group(0) @binding(6) var<storage, read> key_pos: array<i32>;
@group(0) @binding(7) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(8) var<storage, read_write> result: array<f32>;

const STREAM_MAX_HD: u32 = 256u;
var<workgroup> s_q: array<f32, STREAM_MAX_HD>;
var<workgroup> s_len: u32;

// What decode_row (kernels/decode_row.wgsl) reads for this invocation's head.
var<private> d_tb: u32;
var<private> d_kb: u32;
var<private> d_kvh: u32;

fn score_at(i: u32) -> f32 {
    let hd = P.head_dim;
    let half = hd / 2u;
    let pos = key_pos[d_kb + i];
    if (pos < 0) {
        return neg_inf();  // masked: outside the window
    }
    let blk = u32(tables[d_tb + i / P.block_size]);
    let row = ((blk * P.kv_heads + d_kvh) * P.block_size + i % P.block_size) * hd;
    let kc = u32(pos) * hd;
    var dot = 0.0;
    for (var d = 0u; d < half; d += 1u) {
        let k1 = k_at(row + d);
        let k2 = k_at(row + d + half);
        let c = cos_sin[kc + d];
        let s = cos_sin[kc + half + d];
        // EXERCISE rope-on-read BEGIN
        dot += s_q[d] * (k1 * c - k2 * s);
        dot += s_q[d + half] * (k2 * c + k1 * s);
        // EXERCISE rope-on-read END
    }
    return dot;
}

fn pv_term(pt: f32, i: u32, d: u32) -> f32 {
    let blk = u32(tables[d_tb + i / P.block_size]);
    let row = ((blk * P.kv_heads + d_kvh) * P.block_size + i % P.block_size) * P.head_dim;
    return pt * v_at(row + d);
}

@compute @workgroup_size(128, 1, 1)
fn stream_decode_f16(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = w.x;
    let r = w.y;
    let hd = P.head_dim;
    let H = P.n_heads;
    let kvh = h / (H / P.kv_heads);
    let half = hd / 2u;
    let T = P.max_blocks * P.block_size;
    if (t == 0u) {
        s_len = u32(max(reqs[2u * r], 0));
    }
    let len = workgroupUniformLoad(&s_len);

    let qb = (r * H + h) * hd;
    let qc = u32(reqs[2u * r + 1u]) * hd;
    for (var d = t; d < half; d += WG) {
        let x1 = q[qb + d];
        let x2 = q[qb + d + half];
        let c = cos_sin[qc + d];
        let s = cos_sin[qc + half + d];
        s_q[d] = (x1 * c - x2 * s) * P.scale;
        s_q[d + half] = (x2 * c + x1 * s) * P.scale;
    }
    workgroupBarrier();

    d_kb = r * T;
    d_tb = r * P.max_blocks;
    d_kvh = kvh;
    decode_row(true, P.probs_at + (r * H + h) * T, (r * H + h) * hd, len, T, hd, t);
}
