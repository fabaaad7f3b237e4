// =======================================================================================
// kernels/kv_cache.wgsl -- the WGSL twin of kernels/kv_cache.cu: writing new K/V rows (f32)
// into an f16 KV cache
// =======================================================================================
//
//   static_cache_append   caches [L, B, KVH, S, hd] f16; k_new, v_new [B, KVH, hd] f32 written
//                         at (layer, pos): dst = ((((layer*B + b)*KVH + h)*S + pos)*hd + d)
//   paged_append          pools [num_blocks, KVH, block_size, hd] f16; k, v [tokens, KVH, hd]
//                         f32; slot_mapping [tokens] i32 (slot = block * block_size + offset,
//                         a negative slot is skipped): dst = ((block*KVH + h)*bs + off)*hd + d
//   copy_blocks           pools as above; slots holds (src, dst) block pairs; P.n = pairs * per
//                         values, P.num_slots = per = KVH*block_size*hd values of one block:
//                         pool[dst*per + e] = pool[src*per + e] for K and V (copy-on-write).
//                         No dst is also a src (the host validates), so invocations never read a
//                         half-word another one writes.
// One invocation per element written, workgroup 64; the host dispatches ceil(n / 64)
// workgroups (in x, and in y past 65535).
//
// f32 -> f16 is done bit by bit with round-to-nearest-even, as __float2half does, so the
// result is exact on every adapter; store_k/store_v then write the 16 bits: into u32 pairs on
// every adapter (f16_write_packed.wgsl: two invocations may write the two halves of one word,
// so each half is set with atomicAnd/atomicOr on its own bits), or into array<f16> where the
// adapter has shader-f16 (f16_write_native.wgsl).
// =======================================================================================

struct Params {
    n: u32,           // elements to write
    kv_heads: u32,
    head_dim: u32,
    // static cache
    layers: u32,
    batch: u32,
    max_seq_len: u32,
    layer: u32,
    pos: u32,
    // paged pool
    block_size: u32,
    num_slots: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> k_src: array<f32>;
@group(0) @binding(2) var<storage, read> v_src: array<f32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
// Bindings 4 and 5 (k_dst, v_dst) and store_k/store_v come from kernels/f16_write_packed.wgsl or
// kernels/f16_write_native.wgsl, which the backend puts in front of this file.

// f32 -> IEEE binary16 bits, round to nearest, ties to even (NaN stays NaN, overflow -> inf).
fn f16_bits(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xffu;
    var man = x & 0x7fffffu;
    if (e == 0xffu) {
        return sign | 0x7c00u | select(0u, 0x200u, man != 0u);
    }
    let ee = i32(e) - 112;  // - 127 + 15
    if (ee >= 31) {
        return sign | 0x7c00u;
    }
    if (ee <= 0) {
        if (ee < -10) {
            return sign;
        }
        man = man | 0x800000u;
        let shift = u32(14 - ee);  // 14 ..= 24
        var h = man >> shift;
        let rem = man & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u) == 1u)) {
            h += 1u;
        }
        return sign | h;
    }
    var h = (u32(ee) << 10u) | (man >> 13u);
    let rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) {
        h += 1u;  // a carry into the exponent is correct, up to inf
    }
    return sign | h;
}

fn element(w: vec3<u32>, nw: vec3<u32>, l: u32) -> u32 {
    return (w.y * nw.x + w.x) * 64u + l;
}

@compute @workgroup_size(64, 1, 1)
fn static_cache_append_f16(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let e = element(w, nw, l);
    if (e >= P.n) {
        return;
    }
    let hd = P.head_dim;
    let d = e % hd;
    let bh = e / hd;  // b * KVH + h
    let b = bh / P.kv_heads;
    let h = bh % P.kv_heads;
    // EXERCISE static-append-slot BEGIN
    let dst = (((P.layer * P.batch + b) * P.kv_heads + h) * P.max_seq_len + P.pos) * hd + d;
    // EXERCISE static-append-slot END
    store_k(dst, f16_bits(k_src[e]));
    store_v(dst, f16_bits(v_src[e]));
}

@compute @workgroup_size(64, 1, 1)
fn paged_append_f16(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let e = element(w, nw, l);
    if (e >= P.n) {
        return;
    }
    let hd = P.head_dim;
    let row = P.kv_heads * hd;
    let t = e / row;
    let h = (e % row) / hd;
    let d = e % hd;
    let slot = slots[t];
    if (slot < 0) {
        return;  // padding: do not store this token
    }
    let s = u32(slot);
    // EXERCISE paged-slot BEGIN
    let block = s / P.block_size;
    let off = s % P.block_size;
    // EXERCISE paged-slot END
    let dst = ((block * P.kv_heads + h) * P.block_size + off) * hd + d;
    store_k(dst, f16_bits(k_src[e]));
    store_v(dst, f16_bits(v_src[e]));
}

@compute @workgroup_size(64, 1, 1)
fn copy_blocks_f16(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let e = element(w, nw, l);
    if (e >= P.n || P.num_slots == 0u) {
        return;
    }
    let per = P.num_slots;
    let pair = e / per;
    let i = e % per;
    // EXERCISE copy-on-write BEGIN
    let src = u32(slots[2u * pair]) * per + i;
    let dst = u32(slots[2u * pair + 1u]) * per + i;
    // EXERCISE copy-on-write END
    store_k(dst, load_k(src));
    store_v(dst, load_v(src));
}
