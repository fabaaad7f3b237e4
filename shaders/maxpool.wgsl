// maxpool.wgsl -- builds one level of the heatmap's MAX-pooled mip chain (src/render/heatmap.rs).
//
// A full-viewport triangle is drawn into mip level n+1 of the value texture; each fragment reads
// the 2x2 texels of level n below it and writes their maximum. Values are stored as order-preserving
// u32 keys (see heatmap.wgsl), because R32Uint is renderable everywhere and R32Float is not on GL;
// the integer max of two keys is the key of the float max. Plain mipmaps would
// average a single hot cell away; the max keeps it. -inf (masked) only survives where all four
// inputs are masked. Written as a render pass, not a compute pass, so that it also runs on the GL
// backend, where egui-wgpu's default limits allow no compute shaders.

@group(0) @binding(0) var src: texture_2d<u32>;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<u32> {
    let dst = vec2<i32>(floor(pos.xy));
    let size = vec2<i32>(textureDimensions(src, 0));
    var m = 0u;
    for (var dy = 0; dy < 2; dy++) {
        for (var dx = 0; dx < 2; dx++) {
            let s = dst * 2 + vec2<i32>(dx, dy);
            if (s.x < size.x && s.y < size.y) {
                m = max(m, textureLoad(src, s, 0).x);
            }
        }
    }
    return vec4<u32>(m, 0u, 0u, 1u);
}
