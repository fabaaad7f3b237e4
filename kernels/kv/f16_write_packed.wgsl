// kernels/kv/f16_write_packed.wgsl -- how kv_cache.wgsl writes f16 K/V on every adapter: the caches are
// arrays of u32, two f16 per word (element 2w in the low half). Two invocations may write the two
// halves of one word (an odd head_dim), so each half is set with atomicAnd/atomicOr on its own bits.
// The backend prepends this file to kv_cache.wgsl.

@group(0) @binding(4) var<storage, read_write> k_dst: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> v_dst: array<atomic<u32>>;

fn store_k(idx: u32, bits: u32) {
    let sh = (idx & 1u) * 16u;
    atomicAnd(&k_dst[idx >> 1u], ~(0xffffu << sh));
    atomicOr(&k_dst[idx >> 1u], bits << sh);
}

fn store_v(idx: u32, bits: u32) {
    let sh = (idx & 1u) * 16u;
    atomicAnd(&v_dst[idx >> 1u], ~(0xffffu << sh));
    atomicOr(&v_dst[idx >> 1u], bits << sh);
}

// The 16 bits of element idx (copy_blocks reads the pools it writes).
fn load_k(idx: u32) -> u32 {
    return (atomicLoad(&k_dst[idx >> 1u]) >> ((idx & 1u) * 16u)) & 0xffffu;
}

fn load_v(idx: u32) -> u32 {
    return (atomicLoad(&v_dst[idx >> 1u]) >> ((idx & 1u) * 16u)) & 0xffffu;
}
