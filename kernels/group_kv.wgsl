// =======================================================================================
// kernels/group_kv.wgsl -- WGSL twin of kernels/group_kv.cu: a KV cache quantised in
// groups (INT8 per channel, KIVI 2-/4-bit), with the f16 residual rings
// =======================================================================================
//
// Layouts, formats and rounding are those of group_kv.cu. WGSL has neither 8-bit nor
// (portably) 16-bit types, so:
//   - the code pools are u32 words: code d of a row in bits d*bits.. of the row's words
//     (the byte order of the host's packed bytes); a row is whole words (hd*bits % 32 == 0,
//     checked by the host), so an invocation that owns a row writes whole words;
//   - the rings are u32 words holding two f16 values (element 2i in the low half), encoded
//     (round to nearest even) and decoded by hand: f16_bits / f16_value below;
//   - K's and V's codes, parameters and rings share one buffer each, V at an offset.
// round() rounds half to even, as rintf does.
//
// group_store_f16: one invocation per (new row, word of two values), 64 per workgroup.
// group_quant: one invocation per (job, KV head), 64 per workgroup.
// group_decode: one workgroup of 128 per (KV head, request), dispatch (KVH, R, 1); the
// probabilities live in `result` after the output, at P.probs_at.
// =======================================================================================

struct GroupParams {
    n_rows: u32,      // store: new rows
    n_jobs: u32,      // quant: jobs
    kv_heads: u32,
    head_dim: u32,
    group: u32,
    cap: u32,         // ring rows per request: R + 1
    bits: u32,
    sym: u32,
    v_per_token: u32,
    n_heads: u32,     // decode
    max_blocks: u32,  // decode
    scale: f32,       // decode: 1 / sqrt(hd)
    v_at: u32,        // store: where V's rows start in src
    jobs_at: u32,     // quant: where the jobs start in ints
    lens_at: u32,     // decode: where lens, kq, vq and rings start in ints
    kq_at: u32,
    vq_at: u32,
    rings_at: u32,
    vcodes_at: u32,   // word where V's codes start
    kz_at: u32,       // where K's zeros, V's scales and V's zeros start in params
    vs_at: u32,
    vz_at: u32,
    vring_at: u32,    // word where V's ring starts
    probs_at: u32,    // decode: where the probabilities start in result
    groups_x: u32,    // store, quant: workgroups in x (spilling into y)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> P: GroupParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;          // store: k, v at P.v_at; decode: q
@group(0) @binding(2) var<storage, read> ints: array<i32>;         // store: rows; quant: jobs; decode: tables...
@group(0) @binding(3) var<storage, read_write> codes: array<u32>;  // K's, then V's at P.vcodes_at
@group(0) @binding(4) var<storage, read_write> params: array<f32>; // k_scale, k_zero, v_scale, v_zero
@group(0) @binding(5) var<storage, read_write> ring: array<u32>;   // K's f16 pairs, then V's at P.vring_at
@group(0) @binding(6) var<storage, read_write> result: array<f32>; // decode: out, probs

// The f16 bits of x, rounded to nearest even (overflow to infinity, NaN kept).
fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) {  // >= 65520: rounds to infinity
        return sign | 0x7c00u;
    }
    if (a >= 0x38800000u) {  // normal f16 (>= 2^-14): keep 10 mantissa bits, ties to even
        let r = a + 0xfffu + ((a >> 13u) & 1u);
        return sign | ((r - 0x38000000u) >> 13u);
    }
    return sign | u32(round(bitcast<f32>(a) * 16777216.0));  // subnormal: multiples of 2^-24
}

// The value of f16 bits h (exact).
fn f16_value(h: u32) -> f32 {
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    var v = 0.0;
    if (e == 0u) {
        v = f32(m) * kvs_pow2(-24);
    } else if (e == 31u) {
        if (m == 0u) {
            v = f32_bits(0x7f800000u);
        } else {
            v = f32_bits(0x7fc00000u);
        }
    } else {
        v = bitcast<f32>(((e + 112u) << 23u) | (m << 13u));
    }
    if ((h & 0x8000u) != 0u) {
        return -v;
    }
    return v;
}

fn f16r(x: f32) -> f32 {
    return f16_value(f16_bits(x));
}

fn g_encode(x: f32, scale: f32, zero: f32) -> u32 {
    if (!(scale > 0.0) || x != x) {
        return 0u;
    }
    if (P.sym != 0u) {
        let r = clamp(round(x / scale), -127.0, 127.0);
        return bitcast<u32>(i32(r)) & 0xffu;
    }
    let levels = f32((1u << P.bits) - 1u);
    return u32(clamp(round((x - zero) / scale), 0.0, levels));
}

fn g_decode(c: u32, scale: f32, zero: f32) -> f32 {
    if (P.sym != 0u) {
        return f32(bitcast<i32>(c << 24u) >> 24u) * scale;
    }
    return f32(c) * scale + zero;
}

// Ring value at element index i (halves), V's ring when v.
fn ring_at(v: bool, i: u32) -> f32 {
    var w = i >> 1u;
    if (v) {
        w += P.vring_at;
    }
    return f16_value((ring[w] >> ((i & 1u) * 16u)) & 0xffffu);
}

// Code of value d in code row `row` (V's pool when v).
fn code_at(v: bool, row: u32, d: u32) -> u32 {
    let bit = d * P.bits;
    var w = row * (P.head_dim * P.bits / 32u) + bit / 32u;
    if (v) {
        w += P.vcodes_at;
    }
    return (codes[w] >> (bit % 32u)) & ((1u << P.bits) - 1u);
}

@compute @workgroup_size(64, 1, 1)
fn group_store_f16(@builtin(global_invocation_id) g: vec3<u32>) {
    let idx = g.y * P.groups_x * 64u + g.x;
    let per_row = P.kv_heads * P.head_dim / 2u;  // words of one token's row (hd is even)
    if (idx >= P.n_rows * per_row) {
        return;
    }
    let i = idx / per_row;
    let w = idx % per_row;
    let r = u32(ints[2u * i]);
    let t = u32(ints[2u * i + 1u]);
    let dst = (r * P.cap + t % P.cap) * per_row + w;
    let s = i * per_row * 2u + 2u * w;
    ring[dst] = f16_bits(src[s]) | (f16_bits(src[s + 1u]) << 16u);
    ring[P.vring_at + dst] = f16_bits(src[P.v_at + s]) | (f16_bits(src[P.v_at + s + 1u]) << 16u);
}

@compute @workgroup_size(64, 1, 1)
fn group_quant(@builtin(global_invocation_id) g: vec3<u32>) {
    let idx = g.y * P.groups_x * 64u + g.x;
    if (idx >= P.n_jobs * P.kv_heads) {
        return;
    }
    let j = idx / P.kv_heads;
    let h = idx % P.kv_heads;
    let jb = P.jobs_at + 4u * j;
    let kind = ints[jb];
    let rg = u32(ints[jb + 1u]);
    let t0 = u32(ints[jb + 2u]);
    let dst = u32(ints[jb + 3u]);
    let hd = P.head_dim;
    let G = P.group;
    let per = 32u / P.bits;  // codes per word
    let words = hd / per;    // words per row
    let ring_row = P.kv_heads * hd;
    if (kind == 2) {  // V per token, groups of G channels
        let vg = (hd + G - 1u) / G;
        let row = (dst / G * P.kv_heads + h) * G + dst % G;
        let base = (rg * P.cap + t0 % P.cap) * ring_row + h * hd;
        for (var gi = 0u; gi < vg; gi += 1u) {
            let c0 = gi * G;
            let c1 = min(hd, c0 + G);
            var lo = f32_bits(0x7f800000u);
            var hi = -lo;
            var amax = 0.0;
            for (var d = c0; d < c1; d += 1u) {
                let x = ring_at(true, base + d);
                lo = min(lo, x);
                hi = max(hi, x);
                amax = max(amax, abs(x));
            }
            var sc = 0.0;
            var z = 0.0;
            if (P.sym != 0u) {
                sc = kvs_f16_ceil(amax / 127.0);
            } else {
                // EXERCISE kivi-group-stats BEGIN
                z = f16r(lo);
                sc = f16r((hi - z) / f32((1u << P.bits) - 1u));
                // EXERCISE kivi-group-stats END
            }
            params[P.vs_at + row * vg + gi] = sc;
            params[P.vz_at + row * vg + gi] = z;
        }
        for (var w = 0u; w < words; w += 1u) {
            var word = 0u;
            for (var e = 0u; e < per; e += 1u) {
                let d = w * per + e;
                let pi = row * vg + d / G;
                word |= g_encode(ring_at(true, base + d), params[P.vs_at + pi], params[P.vz_at + pi]) << (e * P.bits);
            }
            codes[P.vcodes_at + row * words + w] = word;
        }
        return;
    }
    // Per channel: tokens t0 .. t0+G of the ring into block dst.
    let v = kind == 1;
    var s_at = 0u;
    var z_at = P.kz_at;
    var c_at = 0u;
    if (v) {
        s_at = P.vs_at;
        z_at = P.vz_at;
        c_at = P.vcodes_at;
    }
    let rbase = rg * P.cap * ring_row + h * hd;
    let pb = (dst * P.kv_heads + h) * hd;
    for (var d = 0u; d < hd; d += 1u) {
        var lo = f32_bits(0x7f800000u);
        var hi = -lo;
        var amax = 0.0;
        for (var i = 0u; i < G; i += 1u) {
            let x = ring_at(v, rbase + ((t0 + i) % P.cap) * ring_row + d);
            lo = min(lo, x);
            hi = max(hi, x);
            amax = max(amax, abs(x));
        }
        if (P.sym != 0u) {
            params[s_at + pb + d] = kvs_f16_ceil(amax / 127.0);
            params[z_at + pb + d] = 0.0;
        } else {
            let z = f16r(lo);
            params[z_at + pb + d] = z;
            params[s_at + pb + d] = f16r((hi - z) / f32((1u << P.bits) - 1u));
        }
    }
    for (var i = 0u; i < G; i += 1u) {
        let row = (dst * P.kv_heads + h) * G + i;
        let xb = rbase + ((t0 + i) % P.cap) * ring_row;
        for (var w = 0u; w < words; w += 1u) {
            var word = 0u;
            for (var e = 0u; e < per; e += 1u) {
                let d = w * per + e;
                word |= g_encode(ring_at(v, xb + d), params[s_at + pb + d], params[z_at + pb + d]) << (e * P.bits);
            }
            codes[c_at + row * words + w] = word;
        }
    }
}

// Token t's value of channel d (KV head h) of K (v false) or V for request r.
fn value_at(v: bool, r: u32, t: u32, h: u32, d: u32, quantised: u32) -> f32 {
    let G = P.group;
    let hd = P.head_dim;
    if (t < quantised) {
        let blk = u32(ints[r * P.max_blocks + t / G]);
        let row = (blk * P.kv_heads + h) * G + t % G;
        var pi = (blk * P.kv_heads + h) * hd + d;
        var s_at = 0u;
        var z_at = P.kz_at;
        if (v) {
            s_at = P.vs_at;
            z_at = P.vz_at;
            if (P.v_per_token != 0u) {
                pi = row * ((hd + G - 1u) / G) + d / G;
            }
        }
        return g_decode(code_at(v, row, d), params[s_at + pi], params[z_at + pi]);
    }
    let rg = u32(ints[P.rings_at + r]);
    return ring_at(v, ((rg * P.cap + t % P.cap) * P.kv_heads + h) * hd + d);
}

const GROUP_MAX_HD: u32 = 256u;
var<workgroup> s_q: array<f32, GROUP_MAX_HD>;
var<workgroup> s_len: u32;

// What decode_row (kernels/decode_row.wgsl) reads for this invocation's head.
var<private> d_r: u32;
var<private> d_kvh: u32;
var<private> d_kq: u32;
var<private> d_vq: u32;

fn score_at(i: u32) -> f32 {
    var dot = 0.0;
    for (var d = 0u; d < P.head_dim; d += 1u) {
        dot += s_q[d] * value_at(false, d_r, i, d_kvh, d, d_kq);
    }
    return dot;
}

fn pv_term(pt: f32, i: u32, d: u32) -> f32 {
    return pt * value_at(true, d_r, i, d_kvh, d, d_vq);
}

@compute @workgroup_size(128, 1, 1)
fn group_decode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let kvh = wid.x;
    let r = wid.y;
    let hd = P.head_dim;
    let H = P.n_heads;
    let QG = H / P.kv_heads;
    let T = P.max_blocks * P.group;
    if (t == 0u) {
        s_len = u32(max(ints[P.lens_at + r], 0));
    }
    let len = workgroupUniformLoad(&s_len);
    d_r = r;
    d_kvh = kvh;
    d_kq = u32(ints[P.kq_at + r]);
    d_vq = u32(ints[P.vq_at + r]);

    for (var g = 0u; g < QG; g += 1u) {
        let h = kvh * QG + g;
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
