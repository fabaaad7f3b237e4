// kernels/kv/f16_write_native.wgsl -- how kv_cache.wgsl writes f16 K/V where the adapter has the
// shader-f16 feature: the same bytes as array<f16>; each element is its own memory location, so no
// atomics are needed. The 16 bits are the ones f16_bits computed (round to nearest even). The
// backend prepends `enable f16;` and this file to kv_cache.wgsl.

@group(0) @binding(4) var<storage, read_write> k_dst: array<f16>;
@group(0) @binding(5) var<storage, read_write> v_dst: array<f16>;

// unpack2x16float gives the exact f32 value of the 16 bits, and converting a value that f16 holds
// exactly back to f16 is exact: the stored bits are the ones f16_bits rounded.
fn store_k(idx: u32, bits: u32) {
    let pair = unpack2x16float(bits);
    k_dst[idx] = f16(pair.x);
}

fn store_v(idx: u32, bits: u32) {
    let pair = unpack2x16float(bits);
    v_dst[idx] = f16(pair.x);
}

// The 16 bits of element idx (copy_blocks reads the pools it writes; f16 -> f32 -> f16 is exact).
fn load_k(idx: u32) -> u32 {
    return pack2x16float(vec2<f32>(f32(k_dst[idx]), 0.0)) & 0xffffu;
}

fn load_v(idx: u32) -> u32 {
    return pack2x16float(vec2<f32>(f32(v_dst[idx]), 0.0)) & 0xffffu;
}
