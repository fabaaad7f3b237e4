// kernels/kv/f16_read_packed.wgsl -- how paged_attention.wgsl reads f16 K/V on every adapter: the
// pools are arrays of u32, two f16 per word (element 2w in the low half), unpacked with
// unpack2x16float. The backend prepends this file to paged_attention.wgsl.

@group(0) @binding(2) var<storage, read> k_pool: array<u32>;
@group(0) @binding(3) var<storage, read> v_pool: array<u32>;

fn k_at(i: u32) -> f32 {
    let pair = unpack2x16float(k_pool[i >> 1u]);
    return select(pair.x, pair.y, (i & 1u) == 1u);
}

fn v_at(i: u32) -> f32 {
    let pair = unpack2x16float(v_pool[i >> 1u]);
    return select(pair.x, pair.y, (i & 1u) == 1u);
}
