// =======================================================================================
// kernels/quant_kv.wgsl -- WGSL twin of kernels/quant_kv.cu: a KV cache stored in 8 bits,
// the quantising append and the dequantising paged decode (INT8 per token, FP8 E4M3, E5M2)
// =======================================================================================
//
// WGSL has no 8-bit types: the pools are arrays of u32 with FOUR codes per word (code i in
// bits 8*(i%4) .. 8*(i%4)+7 of word i/4, the byte order of the host's pool), unpacked by
// hand, FP8 included. Formats, scales and rounding are those of quant_kv.cu (fmt 1 INT8
// per token, 2 E4M3, 3 E5M2; scale_mode 0 per row, 1 per KV head, 2 per tensor); round()
// rounds half to even, as rintf does.
//
// quant_append_u8: one invocation per (token, KV head) row, 64 per workgroup, dispatch
// (rows / 64 in x, spilling into y). Two rows may share a word when hd % 4 != 0, so each
// byte is set with atomicAnd/atomicOr on its own bits.
// quant_decode_u8: one workgroup of 128 per (KV head, request), dispatch (KVH, R, 1), the
// layout of quant_decode_u8 in the .cu (which the host launches with 32 threads); the
// probabilities live in `result` after the output, at P.probs_at.
// =======================================================================================

fn q_mbits(fmt: u32) -> i32 {
    return select(2, 3, fmt == 2u);
}

fn q_bias(fmt: u32) -> i32 {
    return select(15, 7, fmt == 2u);
}

fn fp8_decode(c: u32, fmt: u32) -> f32 {
    let mb = q_mbits(fmt);
    let emask = select(31u, 15u, fmt == 2u);
    let mmask = (1u << u32(mb)) - 1u;
    let e = (c >> u32(mb)) & emask;
    let m = c & mmask;
    let sign = select(1.0, -1.0, (c & 0x80u) != 0u);
    if (e == emask) {
        if (fmt == 3u) {
            if (m == 0u) {
                return sign * f32_bits(0x7f800000u);
            }
            return f32_bits(0x7fc00000u);
        }
        if (m == mmask) {
            return f32_bits(0x7fc00000u);
        }
    }
    let bias = q_bias(fmt);
    if (e == 0u) {
        return sign * f32(m) * kvs_pow2(1 - bias - mb);
    }
    return sign * f32((1u << u32(mb)) + m) * kvs_pow2(i32(e) - bias - mb);
}

fn fp8_encode(x: f32, fmt: u32) -> u32 {
    let xb = bitcast<u32>(x);
    if ((xb & 0x7fffffffu) > 0x7f800000u) {
        return 0x7fu;  // NaN
    }
    let sign = (xb >> 24u) & 0x80u;
    let a = bitcast<f32>(xb & 0x7fffffffu);
    let maxv = select(57344.0, 448.0, fmt == 2u);
    if (a >= maxv) {
        return sign | select(0x7bu, 0x7eu, fmt == 2u);  // saturate (+-Inf too)
    }
    let mb = q_mbits(fmt);
    let bias = q_bias(fmt);
    var e = max(i32((bitcast<u32>(a) >> 23u) & 0xffu) - 127, 1 - bias);
    var qm = u32(round(a * kvs_pow2(mb - e)));
    if (qm == (2u << u32(mb))) {
        qm = qm >> 1u;
        e += 1;
    }
    if (qm < (1u << u32(mb))) {
        return sign | qm;
    }
    return sign | ((u32(e + bias) << u32(mb)) | (qm - (1u << u32(mb))));
}

fn int8_encode(x: f32, scale: f32) -> u32 {
    if (!(scale > 0.0) || x != x) {
        return 0u;
    }
    // EXERCISE int8-round BEGIN
    let r = clamp(round(x / scale), -127.0, 127.0);
    // EXERCISE int8-round END
    return bitcast<u32>(i32(r)) & 0xffu;
}

fn q_decode(c: u32, fmt: u32) -> f32 {
    if (fmt == 1u) {
        return f32(bitcast<i32>(c << 24u) >> 24u);
    }
    return fp8_decode(c, fmt);
}

fn q_scale_index(mode: u32, row: u32, h: u32) -> u32 {
    if (mode == 0u) {
        return row;
    }
    if (mode == 1u) {
        return h;
    }
    return 0u;
}

struct QuantParams {
    n_rows: u32,       // append: tokens * KVH rows
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,   // decode
    fmt: u32,
    scale_mode: u32,
    v_at: u32,         // append: where V starts in src
    vs_at: u32,        // where V's scales start in scales
    probs_at: u32,     // decode: where the probabilities start in result
    scale: f32,        // decode: 1 / sqrt(hd)
    groups_x: u32,     // append: workgroups in x (rows spill into y)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// One binding layout for both entry points (each binds what it uses).
@group(0) @binding(0) var<uniform> P: QuantParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;        // append: k, v at P.v_at; decode: q
@group(0) @binding(2) var<storage, read> tables: array<i32>;     // append: slot_mapping
@group(0) @binding(3) var<storage, read> lens: array<i32>;       // decode: context lengths
@group(0) @binding(4) var<storage, read_write> k_pool: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> v_pool: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> scales: array<f32>; // k's, then v's at P.vs_at
@group(0) @binding(7) var<storage, read_write> result: array<f32>; // decode: out, probs

fn put_k(i: u32, c: u32) {
    let sh = (i & 3u) * 8u;
    atomicAnd(&k_pool[i >> 2u], ~(0xffu << sh));
    atomicOr(&k_pool[i >> 2u], c << sh);
}

fn put_v(i: u32, c: u32) {
    let sh = (i & 3u) * 8u;
    atomicAnd(&v_pool[i >> 2u], ~(0xffu << sh));
    atomicOr(&v_pool[i >> 2u], c << sh);
}

fn code_k(i: u32) -> u32 {
    return (atomicLoad(&k_pool[i >> 2u]) >> ((i & 3u) * 8u)) & 0xffu;
}

fn code_v(i: u32) -> u32 {
    return (atomicLoad(&v_pool[i >> 2u]) >> ((i & 3u) * 8u)) & 0xffu;
}

// The scale of row `row` (KV head h) for K (off 0) or V (off P.vs_at).
fn scale_of(off: u32, row: u32, h: u32) -> f32 {
    return scales[off + q_scale_index(P.scale_mode, row, h)];
}

@compute @workgroup_size(64, 1, 1)
fn quant_append_u8(@builtin(global_invocation_id) g: vec3<u32>) {
    let idx = g.y * P.groups_x * 64u + g.x;  // row: token * KVH + h
    if (idx >= P.n_rows) {
        return;
    }
    let t = idx / P.kv_heads;
    let h = idx % P.kv_heads;
    let slot = tables[t];
    if (slot < 0) {
        return;
    }
    let hd = P.head_dim;
    let row = (u32(slot) / P.block_size * P.kv_heads + h) * P.block_size + u32(slot) % P.block_size;
    let si = q_scale_index(P.scale_mode, row, h);
    let sk = idx * hd;
    let sv = P.v_at + idx * hd;
    var ks = 0.0;
    var vs = 0.0;
    if (P.fmt == 1u) {
        var ka = 0.0;
        var va = 0.0;
        for (var d = 0u; d < hd; d += 1u) {
            // One scale per row: its largest |x| maps to 127.
            ka = max(ka, abs(src[sk + d]));
            va = max(va, abs(src[sv + d]));
        }
        ks = kvs_f16_ceil(ka / 127.0);
        vs = kvs_f16_ceil(va / 127.0);
        scales[si] = ks;
        scales[P.vs_at + si] = vs;
    } else {
        ks = scales[si];
        vs = scales[P.vs_at + si];
    }
    for (var d = 0u; d < hd; d += 1u) {
        var kc = 0u;
        var vc = 0u;
        if (P.fmt == 1u) {
            kc = int8_encode(src[sk + d], ks);
            vc = int8_encode(src[sv + d], vs);
        } else {
            kc = fp8_encode(src[sk + d] / ks, P.fmt);
            vc = fp8_encode(src[sv + d] / vs, P.fmt);
        }
        put_k(row * hd + d, kc);
        put_v(row * hd + d, vc);
    }
}

const QUANT_MAX_HD: u32 = 256u;
var<workgroup> s_q: array<f32, QUANT_MAX_HD>;
var<workgroup> s_len: u32;

// What decode_row (kernels/decode_row.wgsl) reads for this invocation's head.
var<private> d_tb: u32;
var<private> d_kvh: u32;

fn q_row(i: u32) -> u32 {
    return (u32(tables[d_tb + i / P.block_size]) * P.kv_heads + d_kvh) * P.block_size + i % P.block_size;
}

fn score_at(i: u32) -> f32 {
    let row = q_row(i);
    var dot = 0.0;
    for (var d = 0u; d < P.head_dim; d += 1u) {
        dot += s_q[d] * q_decode(code_k(row * P.head_dim + d), P.fmt);
    }
    dot = dot * scale_of(0u, row, d_kvh);
    return dot;
}

fn pv_term(pt: f32, i: u32, d: u32) -> f32 {
    let row = q_row(i);
    let wt = pt * scale_of(P.vs_at, row, d_kvh);
    return wt * q_decode(code_v(row * P.head_dim + d), P.fmt);
}

@compute @workgroup_size(128, 1, 1)
fn quant_decode_u8(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
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
    d_tb = r * P.max_blocks;
    d_kvh = kvh;

    for (var g = 0u; g < G; g += 1u) {
        let h = kvh * G + g;
        let qb = (r * H + h) * hd;
        for (var d = t; d < hd; d += WG) {
            s_q[d] = src[qb + d] * P.scale;
        }
        workgroupBarrier();

        decode_row(false, P.probs_at + (r * H + h) * T, (r * H + h) * hd, len, T, hd, t);
        storageBarrier();
        workgroupBarrier();
    }
}
