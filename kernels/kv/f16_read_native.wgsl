// kernels/kv/f16_read_native.wgsl -- how paged_attention.wgsl reads f16 K/V where the adapter has the
// shader-f16 feature: the same bytes as array<f16>, one element per index. The backend prepends
// `enable f16;` and this file to paged_attention.wgsl.

@group(0) @binding(2) var<storage, read> k_pool: array<f16>;
@group(0) @binding(3) var<storage, read> v_pool: array<f16>;

fn k_at(i: u32) -> f32 {
    return f32(k_pool[i]);
}

fn v_at(i: u32) -> f32 {
    return f32(v_pool[i]);
}
