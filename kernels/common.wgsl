// =======================================================================================
// kernels/common.wgsl -- what the kvscope WGSL kernels share: -infinity, the attention mask
// predicate and the workgroup reductions (the twin of kernels/common.cuh)
// =======================================================================================
//
// WGSL has no #include: the wgpu backend puts this file in front of every kernel file it
// compiles (compute::wgsl::sources), so these names are taken in every kernel file. The mask
// predicate is tested against src/math/mask.rs over every mask kind
// (kernels/mask_table.wgsl). Masks (mask_kind): 0 none; 1 causal, j <= i; 2 window,
// j <= i && (j + W > i || j < S): the last W keys and the first S (sinks).
// =======================================================================================

const NEG_INF_BITS: u32 = 0xff800000u;
// Invocations of every workgroup that calls the reductions.
const WG: u32 = 128u;

// The f32 with these bits, as a runtime value: WGSL makes an infinite or NaN const-expression an error,
// which Chrome's compiler (Tint) enforces on `bitcast<f32>(0x7f800000u)`; naga folds it. Every compiler
// still folds this one.
fn f32_bits(b: u32) -> f32 {
    var bits = b;
    return bitcast<f32>(bits);
}

fn neg_inf() -> f32 {
    return f32_bits(NEG_INF_BITS);
}

// Is key j visible to query i?
// 2^e as a float (e in the normal range).
fn kvs_pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

// The smallest f16 value >= s (s >= 0), as a float: the INT8 scales' rounding.
fn kvs_f16_ceil(s: f32) -> f32 {
    if (!(s > 0.0)) {
        return 0.0;
    }
    if (s >= 65504.0) {
        return 65504.0;
    }
    if (s < kvs_pow2(-14)) {
        return ceil(s * kvs_pow2(24)) * kvs_pow2(-24);
    }
    let b = bitcast<u32>(s);
    if ((b & 0x1fffu) == 0u) {
        return s;
    }
    return bitcast<f32>((b & ~0x1fffu) + 0x2000u);
}

fn kvs_visible(i: u32, j: u32, mask_kind: u32, window: u32, sinks: u32) -> bool {
    if (mask_kind == 1u) {
        // EXERCISE causal-mask BEGIN
        return j <= i;
        // EXERCISE causal-mask END
    }
    if (mask_kind == 2u) {
        return j <= i && (j + window > i || j < sinks);
    }
    return true;
}

// ---- workgroup reductions (WG invocations; every invocation must call them) ------------
var<workgroup> red: array<f32, WG>;

fn wg_max(x: f32, t: u32) -> f32 {
    red[t] = x;
    workgroupBarrier();
    for (var off = WG / 2u; off > 0u; off = off / 2u) {
        if (t < off) {
            red[t] = max(red[t], red[t + off]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();  // everyone has read red[0] before a later call overwrites it
    return r;
}

fn wg_sum(x: f32, t: u32) -> f32 {
    red[t] = x;
    workgroupBarrier();
    for (var off = WG / 2u; off > 0u; off = off / 2u) {
        if (t < off) {
            red[t] = red[t] + red[t + off];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
