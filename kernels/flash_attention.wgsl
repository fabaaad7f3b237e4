// =======================================================================================
// kernels/flash_attention.wgsl -- the WGSL twin of kernels/flash_attention.cu (read that
// header first): FlashAttention's tiled forward pass, f32, one head per dispatch row
// =======================================================================================
//
//   q     [H, T, hd]      queries          k, v  [KVH, T, hd]  keys and values (GQA: query
//   out   [H, T, hd]      output                                head h reads KV head h / (H/KVH))
//
// flash_attention_f32: workgroup (128, 1, 1), dispatch (ceil(T / Br), H, 1); Br = block_q
// query rows and Bc = block_k keys per tile.
//   1. The workgroup's Br query rows (scaled by 1/sqrt(hd)) go to workgroup memory once.
//   2. For every key tile the mask does not hide entirely, K's and V's tiles go to workgroup
//      memory, the Br x Bc scores are computed there, and each row updates its running max m,
//      running sum l and unnormalised accumulator (the online softmax):
//        m_new = max(m, rowmax S);  c = exp(m - m_new);  l = l*c + sum exp(S - m_new);
//        acc = acc*c + exp(S - m_new) * V
//      Tiles wholly above the diagonal (causal) or wholly left of every row's window (window
//      without sinks there) are skipped: their K and V are never read.
//   3. After the last tile the row block's output acc / l is written once.
//
// Differences from CUDA, because WGSL and WebGPU's default limits require them: workgroup
// memory is 16 KiB, so the tiles get FA_SMEM = 3904 floats (the CUDA kernel has 10240); the
// host refuses tiles with (2*Br + 2*Bc)*hd + Br*Bc > FA_SMEM or Br > FA_MAX_BR and the kernel
// returns at once for them; -inf is written as a bit pattern and exp() is never fed -inf.
// Every workgroupBarrier is in uniform control flow: the early return and the tile skip
// depend only on workgroup_id and uniforms.
// =======================================================================================

struct FlashParams {
    n_heads: u32,
    n_kv_heads: u32,
    seq: u32,
    head_dim: u32,
    scale: f32,
    mask_kind: u32,
    window: u32,
    sinks: u32,
    block_q: u32,
    block_k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> P: FlashParams;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const FA_SMEM: u32 = 3904u;   // floats for the Q, K, V, score and accumulator tiles
const FA_MAX_BR: u32 = 64u;   // most query rows per workgroup

var<workgroup> smem: array<f32, FA_SMEM>;
var<workgroup> s_m: array<f32, FA_MAX_BR>;     // running max per row
var<workgroup> s_l: array<f32, FA_MAX_BR>;     // running sum per row
var<workgroup> s_corr: array<f32, FA_MAX_BR>;  // this tile's rescale factor per row

// neg_inf, kvs_visible and WG come from kernels/common.wgsl, which the backend puts in front of
// this file. The mask of this dispatch:
fn fa_visible(i: u32, j: u32) -> bool {
    return kvs_visible(i, j, P.mask_kind, P.window, P.sinks);
}

// Whether the mask hides every (query, key) pair of rows i0..i1 and keys j0..j1 (inclusive).
fn fa_tile_hidden(i0: u32, i1: u32, j0: u32, j1: u32) -> bool {
    if (P.mask_kind == 0u) {
        return false;
    }
    if (j0 > i1) {
        return true;  // every key is in every row's future
    }
    // Window: keys at or before i0 - window are outside every row's window unless they are sinks.
    return P.mask_kind == 2u && j0 >= P.sinks && j1 + P.window <= i0;
}

@compute @workgroup_size(128, 1, 1)
fn flash_attention_f32(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let br = P.block_q;
    let bc = P.block_k;
    let hd = P.head_dim;
    let h = w.y;
    let i0 = w.x * br;
    // Uniform for the whole workgroup (workgroup_id and uniforms only): safe before any barrier.
    if (h >= P.n_heads || br < 1u || bc < 1u || br > FA_MAX_BR || hd < 1u ||
        (2u * br + 2u * bc) * hd + br * bc > FA_SMEM || i0 >= P.seq) {
        return;
    }
    let nr = min(br, P.seq - i0);  // rows of this workgroup (the last one may be short)
    let i1 = i0 + nr - 1u;
    let o_q = 0u;                 // [br, hd] scaled queries
    let o_k = o_q + br * hd;      // [bc, hd]
    let o_v = o_k + bc * hd;      // [bc, hd]
    let o_s = o_v + bc * hd;      // [br, bc] scores, then probabilities
    let o_a = o_s + br * bc;      // [br, hd] accumulator

    let kvh = h / (P.n_heads / P.n_kv_heads);
    let qb = (h * P.seq + i0) * hd;
    let kb = kvh * P.seq * hd;

    for (var e = tid; e < nr * hd; e += WG) {
        smem[o_q + e] = q[qb + e] * P.scale;
        smem[o_a + e] = 0.0;
    }
    for (var r = tid; r < nr; r += WG) {
        s_m[r] = neg_inf();
        s_l[r] = 0.0;
    }
    workgroupBarrier();  // BARRIER 1: Q tile, accumulators and row state are ready

    for (var j0 = 0u; j0 < P.seq; j0 += bc) {
        let nc = min(bc, P.seq - j0);
        if (fa_tile_hidden(i0, i1, j0, j0 + nc - 1u)) {
            continue;
        }
        for (var e = tid; e < nc * hd; e += WG) {
            smem[o_k + e] = k[kb + j0 * hd + e];
            smem[o_v + e] = v[kb + j0 * hd + e];
        }
        workgroupBarrier();  // BARRIER 2: K and V tiles are in workgroup memory

        for (var e = tid; e < nr * bc; e += WG) {
            let r = e / bc;
            let c = e % bc;
            var s = neg_inf();
            if (c < nc && fa_visible(i0 + r, j0 + c)) {
                var dot = 0.0;
                for (var d = 0u; d < hd; d++) {
                    dot += smem[o_q + r * hd + d] * smem[o_k + c * hd + d];
                }
                s = dot;
            }
            smem[o_s + e] = s;
        }
        workgroupBarrier();  // BARRIER 3: the score tile is complete

        for (var r = tid; r < nr; r += WG) {
            let m_old = s_m[r];
            var m_new = m_old;
            for (var c = 0u; c < nc; c++) {
                m_new = max(m_new, smem[o_s + r * bc + c]);
            }
            if (m_new == neg_inf()) {  // nothing visible in this row yet
                for (var c = 0u; c < nc; c++) {
                    smem[o_s + r * bc + c] = 0.0;
                }
                s_corr[r] = 1.0;
                continue;
            }
            var corr = 0.0;
            if (m_old != neg_inf()) {
                corr = exp(m_old - m_new);
            }
            var sum = 0.0;
            for (var c = 0u; c < nc; c++) {
                let s = smem[o_s + r * bc + c];
                var p = 0.0;
                if (s != neg_inf()) {
                    p = exp(s - m_new);
                }
                smem[o_s + r * bc + c] = p;
                sum += p;
            }
            s_l[r] = s_l[r] * corr + sum;
            s_m[r] = m_new;
            s_corr[r] = corr;
        }
        workgroupBarrier();  // BARRIER 4: probabilities and rescale factors are ready

        for (var e = tid; e < nr * hd; e += WG) {
            let r = e / hd;
            let d = e % hd;
            // EXERCISE flash-rescale BEGIN
            var a = smem[o_a + e] * s_corr[r];
            // EXERCISE flash-rescale END
            for (var c = 0u; c < nc; c++) {
                a += smem[o_s + r * bc + c] * smem[o_v + c * hd + d];
            }
            smem[o_a + e] = a;
        }
        workgroupBarrier();  // BARRIER 5: the next tile may overwrite K, V and the scores
    }

    let ob = (h * P.seq + i0) * hd;
    for (var e = tid; e < nr * hd; e += WG) {
        let l = s_l[e / hd];
        var o = 0.0;
        if (l > 0.0) {
            o = smem[o_a + e] / l;
        }
        out[ob + e] = o;
    }
}
