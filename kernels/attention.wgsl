// =======================================================================================
// kernels/attention.wgsl -- the WGSL twin of kernels/attention.cu (read that header first)
// =======================================================================================
//
// Same ops, same names, same algorithms, for any GPU through wgpu (Vulkan, Metal, DX12, and
// later WebGPU in a browser):
//   attention_scores   s[h,i,j] = scale * q[h,i,:] . k[kvh,j,:], masked entries = -inf
//                      workgroup (16,16,1), dispatch (ceil(T/16), ceil(T/16), H):
//                      x -> key j, y -> query i, z -> head
//   softmax_rows       one workgroup of 128 per row; a row of only -inf gives zeros
//   attention_pv       out[h,i,d] = sum_j p[h,i,j] * v[kvh,j,d]; workgroup (16,16,1),
//                      dispatch (ceil(hd/16), ceil(T/16), H): x -> dim d, y -> query i
//   attention_fused    one workgroup of 128 per (query i, head h), dispatch (T, H, 1): the
//                      online softmax of the CUDA kernel (running max m, sum l, rescaled
//                      accumulator); scores never touch global memory. Like the CUDA kernel
//                      it is simplified next to FlashAttention: one query row per workgroup,
//                      so K and V are re-read once per query.
// GQA: query head h reads kv head h / (H / KVH). Masks: 0 none, 1 causal (j <= i), 2 window
// (j <= i and (j > i - W or j < S)).
//
// Differences from CUDA, because WGSL and WebGPU's default limits require them: no warp
// shuffles (reductions go through workgroup memory with workgroupBarrier, always reached by
// the whole workgroup: every barrier is in uniform control flow), at most 256 invocations and
// 16 KiB of workgroup memory, -inf written as a bit pattern, and exp() never fed -inf.
// =======================================================================================

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    seq: u32,
    head_dim: u32,
    scale: f32,
    mask_kind: u32,
    window: u32,
    sinks: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> s_in: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// neg_inf, kvs_visible, WG and the workgroup reductions wg_max and wg_sum come from
// kernels/common.wgsl, which the backend puts in front of this file.
const MAX_HEAD_DIM: u32 = 256u;

// The mask of this dispatch (kvs_visible with the uniforms' mask).
fn visible(i: u32, j: u32) -> bool {
    return kvs_visible(i, j, P.mask_kind, P.window, P.sinks);
}

fn kv_head(h: u32) -> u32 {
    // EXERCISE gqa-head BEGIN
    return h / (P.n_heads / P.n_kv_heads);
    // EXERCISE gqa-head END
}

// ---- 1. scores ------------------------------------------------------------------------
@compute @workgroup_size(16, 16, 1)
fn attention_scores_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    let j = g.x;
    let i = g.y;
    let h = g.z;
    if (i >= P.seq || j >= P.seq || h >= P.n_heads) {
        return;  // no barrier in this kernel: returning early is fine
    }
    let hd = P.head_dim;
    let qi = (h * P.seq + i) * hd;
    let kj = (kv_head(h) * P.seq + j) * hd;
    var s = neg_inf();
    if (visible(i, j)) {
        // EXERCISE scaled-scores BEGIN
        var dot = 0.0;
        for (var d = 0u; d < hd; d++) {
            dot += q[qi + d] * k[kj + d];
        }
        s = dot * P.scale;
        // EXERCISE scaled-scores END
    }
    out[(h * P.seq + i) * P.seq + j] = s;
}

// ---- 2. row softmax ---------------------------------------------------------------------
// Rows are numbered row = h * T + i; the workgroup's row comes from workgroup_id, so every
// branch on it is uniform.
@compute @workgroup_size(128, 1, 1)
fn softmax_rows_f32(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let rows = P.n_heads * P.seq;
    let row = w.x + w.y * 65535u;
    if (row >= rows) {
        return;  // uniform: the whole workgroup leaves before any barrier
    }
    let cols = P.seq;
    let base = row * cols;
    var m = neg_inf();
    for (var c = t; c < cols; c += WG) {
        m = max(m, s_in[base + c]);
    }
    m = wg_max(m, t);
    var sum = 0.0;
    if (m != neg_inf()) {
        for (var c = t; c < cols; c += WG) {
            let x = s_in[base + c];
            if (x != neg_inf()) {
                sum += exp(x - m);
            }
        }
    }
    sum = wg_sum(sum, t);
    var inv = 0.0;
    if (sum > 0.0) {
        // EXERCISE softmax-normalise BEGIN
        inv = 1.0 / sum;
        // EXERCISE softmax-normalise END
    }
    for (var c = t; c < cols; c += WG) {
        let x = s_in[base + c];
        var p = 0.0;
        if (x != neg_inf() && m != neg_inf()) {
            p = exp(x - m) * inv;
        }
        out[base + c] = p;
    }
}

// ---- 3. P . V ---------------------------------------------------------------------------
@compute @workgroup_size(16, 16, 1)
fn attention_pv_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    let d = g.x;
    let i = g.y;
    let h = g.z;
    let hd = P.head_dim;
    if (d >= hd || i >= P.seq || h >= P.n_heads) {
        return;
    }
    let pi = (h * P.seq + i) * P.seq;
    let vb = kv_head(h) * P.seq * hd;
    var acc = 0.0;
    for (var j = 0u; j < P.seq; j++) {
        acc += s_in[pi + j] * v[vb + j * hd + d];
    }
    out[(h * P.seq + i) * hd + d] = acc;
}

// ---- 4. fused attention with an online softmax ------------------------------------------
var<workgroup> s_q: array<f32, MAX_HEAD_DIM>;
var<workgroup> s_p: array<f32, WG>;

@compute @workgroup_size(128, 1, 1)
fn attention_fused_f32(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = w.x;  // query position
    let h = w.y;  // query head
    if (i >= P.seq || h >= P.n_heads || P.head_dim > MAX_HEAD_DIM) {
        return;  // uniform (workgroup_id and uniforms only)
    }
    let hd = P.head_dim;
    let kvh = kv_head(h);
    let qi = (h * P.seq + i) * hd;
    let kb = kvh * P.seq * hd;
    for (var d = t; d < hd; d += WG) {
        s_q[d] = q[qi + d] * P.scale;
    }
    workgroupBarrier();  // the whole q row is in workgroup memory before it is read

    // Causal and window masks hide every key after i: those tiles are not visited.
    var j_end = P.seq;
    if (P.mask_kind != 0u) {
        j_end = min(P.seq, i + 1u);
    }
    var m = neg_inf();
    var l = 0.0;
    var acc0 = 0.0;  // dim t
    var acc1 = 0.0;  // dim t + 128 (head_dim <= 256)
    for (var j0 = 0u; j0 < j_end; j0 += WG) {
        let j = j0 + t;
        var s = neg_inf();
        if (j < j_end && visible(i, j)) {
            var dot = 0.0;
            for (var d = 0u; d < hd; d++) {
                dot += s_q[d] * k[kb + j * hd + d];
            }
            s = dot;
        }
        let m_new = max(m, wg_max(s, t));
        var p = 0.0;
        if (s != neg_inf()) {
            p = exp(s - m_new);
        }
        var corr = 0.0;
        if (m != neg_inf()) {
            corr = exp(m - m_new);
        }
        s_p[t] = p;
        workgroupBarrier();  // all p of this tile are in s_p before anyone reads them
        let n_keys = min(WG, j_end - j0);
        var l_tile = 0.0;
        acc0 *= corr;
        acc1 *= corr;
        for (var jj = 0u; jj < n_keys; jj++) {
            let pj = s_p[jj];
            l_tile += pj;
            if (pj != 0.0) {
                let vj = kb + (j0 + jj) * hd;
                if (t < hd) {
                    acc0 += pj * v[vj + t];
                }
                if (t + WG < hd) {
                    acc1 += pj * v[vj + t + WG];
                }
            }
        }
        l = l * corr + l_tile;
        m = m_new;
        workgroupBarrier();  // s_p is read by everyone before the next tile overwrites it
    }
    var inv = 0.0;
    if (l > 0.0) {
        inv = 1.0 / l;
    }
    let oi = (h * P.seq + i) * hd;
    if (t < hd) {
        out[oi + t] = acc0 * inv;
    }
    if (t + WG < hd) {
        out[oi + t + WG] = acc1 * inv;
    }
}
