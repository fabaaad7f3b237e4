// strip.wgsl -- the static KV cache [layers x heads x max_seq] as rows of slots (src/render/strip.rs).
//
// How it works: row r is (layer r / heads, head r % heads); column p is sequence position p. A
// slot is "used" when p < len[layer], otherwise reserved but empty (the waste a static cache pays
// for max_seq_len). The slot a decode step writes (layer, pos) is highlighted, and so is the
// region that step's attention reads (positions 0..=pos of the layer being computed), so a
// student sees the bytes read grow by one column per step. Layers are separated by a gap.

struct Params {
    rect: vec4<f32>,       // target rectangle in framebuffer pixels: x0, y0, width, height
    dims: vec4<u32>,       // layers, heads, max_seq, unused
    write: vec4<i32>,      // written layer (-1 none), written pos, read layer (-1 none), read end (inclusive)
    geom: vec4<f32>,       // row height (px), layer gap (px), slot width (px), unused
    used_color: vec4<f32>,
    reserved_color: vec4<f32>,
    write_color: vec4<f32>,
    read_color: vec4<f32>,
    bg_color: vec4<f32>,
    lens: array<vec4<u32>, 16>,   // filled length of each layer (64 layers at most)
};

@group(0) @binding(0) var<uniform> P: Params;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
}

fn layer_len(layer: u32) -> u32 {
    return P.lens[layer / 4u][layer % 4u];
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let local = pos.xy - P.rect.xy;
    let heads = P.dims.y;
    let row_h = P.geom.x;
    let gap = P.geom.y;
    let layer_h = row_h * f32(heads) + gap;
    let layer = i32(floor(local.y / layer_h));
    if (local.x < 0.0 || layer < 0 || layer >= i32(P.dims.x)) { return P.bg_color; }
    let in_layer = local.y - f32(layer) * layer_h;
    if (in_layer >= row_h * f32(heads)) { return P.bg_color; }      // gap between layers
    let p = i32(floor(local.x / P.geom.z));
    if (p >= i32(P.dims.z)) { return P.bg_color; }
    let len = i32(layer_len(u32(layer)));
    // A thin line between rows (heads) and slots when they are big enough.
    let fy = fract(in_layer / row_h) * row_h;
    let fx = fract(local.x / P.geom.z) * P.geom.z;
    let line = (row_h >= 6.0 && fy < 1.0) || (P.geom.z >= 6.0 && fx < 1.0);
    var color: vec4<f32>;
    if (layer == P.write.x && p == P.write.y) {
        color = P.write_color;
    } else if (layer == P.write.z && p <= P.write.w && p < len) {
        color = P.read_color;
    } else if (p < len) {
        color = P.used_color;
    } else {
        color = P.reserved_color;
    }
    if (line) { color = vec4<f32>(color.rgb * 0.7, 1.0); }
    return color;
}
