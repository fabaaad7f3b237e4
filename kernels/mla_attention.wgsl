// =======================================================================================
// kernels/mla_attention.wgsl -- WGSL twin of kernels/mla_attention.cu: MLA decode over a
// paged latent cache with absorbed projections (the latent-space output; W_UV after)
// =======================================================================================
//
// The latent pool is the K pool binding of the f16 read snippet (kernels/kv/f16_read_*.wgsl,
// prepended by the backend: k_at(i) is pool element i); V's binding is not used. Layouts,
// scale and the algorithm are those of the .cu file. One workgroup of 128 per (head,
// request), dispatch (H, R, 1); the probabilities live in `result` after the output. Like
// the .cu file it reads the latent once per head, where an MQA-style kernel reads it once.
// =======================================================================================

struct MlaParams {
    n_heads: u32,
    block_size: u32,
    max_blocks: u32,
    d_c: u32,
    d_r: u32,
    scale: f32,
    probs_at: u32,
    rope_at: u32,  // where q_rope starts in q
}

@group(0) @binding(0) var<uniform> P: MlaParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;  // q_abs [R, H, d_c], then q_rope at P.rope_at
// Binding 2 (k_pool: the latent pool) and k_at come from kernels/kv/f16_read_*.wgsl.
@group(0) @binding(4) var<storage, read> tables: array<i32>;
@group(0) @binding(5) var<storage, read> lens: array<i32>;
@group(0) @binding(7) var<storage, read_write> result: array<f32>;

const MLA_MAX_DIM: u32 = 1024u;
var<workgroup> s_q: array<f32, MLA_MAX_DIM>;
var<workgroup> s_len: u32;

// What decode_row (kernels/decode_row.wgsl) reads for this invocation's head.
var<private> d_tb: u32;

fn latent_row(j: u32) -> u32 {
    return (u32(tables[d_tb + j / P.block_size]) * P.block_size + j % P.block_size) * (P.d_c + P.d_r);
}

fn score_at(j: u32) -> f32 {
    let row = latent_row(j);
    var dot = 0.0;
    // EXERCISE mla-absorbed-score BEGIN
    for (var i = 0u; i < P.d_c + P.d_r; i += 1u) {
        dot += s_q[i] * k_at(row + i);
    }
    // EXERCISE mla-absorbed-score END
    return dot;
}

fn pv_term(pt: f32, j: u32, d: u32) -> f32 {
    return pt * k_at(latent_row(j) + d);
}

@compute @workgroup_size(128, 1, 1)
fn mla_decode_f16(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = w.x;
    let r = w.y;
    let H = P.n_heads;
    let dc = P.d_c;
    let dim = P.d_c + P.d_r;
    let T = P.max_blocks * P.block_size;
    if (t == 0u) {
        s_len = u32(max(lens[r], 0));
    }
    let len = workgroupUniformLoad(&s_len);
    d_tb = r * P.max_blocks;
    for (var i = t; i < dim; i += WG) {
        if (i < dc) {
            s_q[i] = q[(r * H + h) * dc + i] * P.scale;
        } else {
            s_q[i] = q[P.rope_at + (r * H + h) * P.d_r + (i - dc)] * P.scale;
        }
    }
    workgroupBarrier();

    decode_row(false, P.probs_at + (r * H + h) * T, (r * H + h) * dc, len, T, dc, t);
}
