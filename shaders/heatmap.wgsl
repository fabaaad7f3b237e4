// heatmap.wgsl -- a matrix of f32 values through a colormap (src/render/heatmap.rs).
//
// How it works: the values live in an R32Uint texture of order-preserving keys (key(a) < key(b)
// exactly when a < b, so integer max = float max; R32Uint is renderable on GL, R32Float is not)
// with a MAX-pooled mip chain (level n+1
// texel = max of the 2x2 texels below it, built by maxpool.wgsl). For each screen pixel the
// fragment shader works out which cells the pixel covers. When a pixel covers more than one cell,
// it reads the smallest mip level whose texels are at least as large as the pixel's footprint and
// takes the max of the (at most 2x2) texels the footprint overlaps, so a single bright cell (an attention
// sink) stays visible at any zoom. -inf marks a masked entry and is drawn hatched in the mask
// colour, never as a small value. Colours come from a 256-entry LUT texture (row 0 sequential,
// row 1 diverging) so the CPU can predict every pixel exactly.

struct Params {
    rect: vec4<f32>,       // target rectangle in framebuffer pixels: x0, y0, width, height
    view: vec4<f32>,       // cell coordinate at the rect's top-left (x = column, y = row), cells per pixel (x, y)
    range: vec4<f32>,      // vmin, vmax, 1/(vmax - vmin), unused
    dims: vec4<u32>,       // cols, rows, mip levels, colormap row in the LUT
    flags: vec4<u32>,      // grid lines (0/1), highlight bits (1 row, 2 column, 4 cell), colorbar mode (0/1), mip level to read
    highlight: vec4<i32>,  // highlighted row, highlighted column, unused, unused
    mask_color: vec4<f32>,
    grid_color: vec4<f32>,
    bg_color: vec4<f32>,
    hl_color: vec4<f32>,
};

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var values: texture_2d<u32>;
@group(0) @binding(2) var lut: texture_2d<f32>;

struct VsOut { @builtin(position) pos: vec4<f32> };

// One triangle that covers the whole viewport (egui sets the viewport to the callback rect).
@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> VsOut {
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    var o: VsOut;
    o.pos = vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
    return o;
}

const NEG_BIG: f32 = -3.0e38;

// Inverse of the host's key(): keys with the top bit set held non-negative floats.
fn unkey(k: u32) -> f32 {
    if ((k & 0x80000000u) != 0u) { return bitcast<f32>(k & 0x7fffffffu); }
    return bitcast<f32>(~k);
}

fn colormap(v: f32) -> vec4<f32> {
    let t = clamp((v - P.range.x) * P.range.z, 0.0, 0.99999);
    let idx = i32(floor(t * 256.0));
    return textureLoad(lut, vec2<i32>(idx, i32(P.dims.w)), 0);
}

fn masked(px: vec2<f32>) -> vec4<f32> {
    // Diagonal hatching: never mistaken for a colormap value.
    let stripe = (u32(px.x) + u32(px.y)) % 6u;
    if (stripe < 3u) { return P.mask_color; }
    return vec4<f32>(P.mask_color.rgb * 0.8, 1.0);
}

// Max of the values under the cell rectangle [c0, c1) at mip level `level`, whose texels are at
// least as large as the rectangle, so it overlaps at most 2x2 of them. Four clamped loads, no
// branches: this is the hot path when zoomed out.
fn pooled(c0: vec2<f32>, c1: vec2<f32>, level: u32) -> f32 {
    let scale = f32(1u << level);
    let last = vec2<i32>(i32((P.dims.x - 1u) >> level), i32((P.dims.y - 1u) >> level));
    let t0 = clamp(vec2<i32>(floor(c0 / scale)), vec2<i32>(0), last);
    let t1 = clamp(vec2<i32>(floor((c1 - vec2<f32>(1e-4)) / scale)), vec2<i32>(0), last);
    let l = i32(level);
    let m = max(max(textureLoad(values, t0, l).x, textureLoad(values, vec2<i32>(t1.x, t0.y), l).x),
                max(textureLoad(values, vec2<i32>(t0.x, t1.y), l).x, textureLoad(values, t1, l).x));
    return unkey(m);
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    let local = in.pos.xy - P.rect.xy;
    if (P.flags.z == 1u) {
        // Colorbar: the LUT from vmax (top) to vmin (bottom), with tick marks at quarters.
        let t = 1.0 - local.y / max(P.rect.w, 1.0);
        let tick = abs(fract(t * 4.0 + 0.5) - 0.5) * 4.0 * P.rect.w / 4.0;
        if (local.x > P.rect.z * 0.7 && tick < 1.0) { return P.grid_color; }
        return textureLoad(lut, vec2<i32>(i32(clamp(floor(t * 256.0), 0.0, 255.0)), i32(P.dims.w)), 0);
    }
    let cpp = P.view.zw;                            // cells per pixel
    // Footprint of this pixel (pos is its centre). c1 is computed exactly as the next pixel's c0, so
    // neighbouring footprints tile the line with no gap or overlap.
    let c0 = P.view.xy + (local - 0.5) * cpp;
    let c1 = P.view.xy + (local + 0.5) * cpp;
    let cols = f32(P.dims.x);
    let rows = f32(P.dims.y);
    if (c1.x <= 0.0 || c1.y <= 0.0 || c0.x >= cols || c0.y >= rows) { return P.bg_color; }
    let cover = max(cpp.x, cpp.y);
    // The smallest level whose texels are at least the footprint (uniform for the whole draw: the
    // host computes it): the footprint then overlaps at most 2x2 texels.
    let level = P.flags.w;
    var v: f32;
    if (level == 0u && cover <= 1.0) {
        let cell = vec2<i32>(floor(c0));
        v = unkey(textureLoad(values, clamp(cell, vec2<i32>(0), vec2<i32>(i32(P.dims.x) - 1, i32(P.dims.y) - 1)), 0).x);
    } else {
        v = pooled(max(c0, vec2<f32>(0.0)), min(c1, vec2<f32>(cols, rows)), level);
    }
    var color: vec4<f32>;
    if (v < NEG_BIG) { color = masked(in.pos.xy); } else { color = colormap(v); }

    // Highlights: the lesson's "this query" (row), "this key" (column) or one cell, drawn as a frame
    // of 3 px just outside the highlighted band, never over its cells (the visual grammar: a highlight
    // must not change the colour of the data it points at).
    let px_per_cell = 1.0 / max(cover, 1e-6);
    let centre = c0 + cpp * 0.5;                               // the pixel's centre, in cells
    let hl = vec2<f32>(f32(P.highlight.y), f32(P.highlight.x)); // (column, row)
    let before = (hl - centre) * px_per_cell;                   // > 0: left of / above the band, in px
    let after = (centre - (hl + vec2<f32>(1.0))) * px_per_cell; // > 0: right of / below the band
    // WGSL wants parentheses where comparisons meet `&` (Chrome's compiler enforces it; naga did not).
    let ring = ((before > vec2<f32>(0.0)) & (before <= vec2<f32>(3.0))) | ((after > vec2<f32>(0.0)) & (after <= vec2<f32>(3.0)));
    let inside = (before <= vec2<f32>(0.0)) & (after <= vec2<f32>(0.0));
    let row_on = (P.flags.y & 1u) != 0u;
    let col_on = (P.flags.y & 2u) != 0u;
    let cell_on = (P.flags.y & 4u) != 0u;
    if ((row_on && ring.y) || (col_on && ring.x)
        || (cell_on && ((ring.y && (inside.x || ring.x)) || (ring.x && inside.y)))) {
        return P.hl_color;
    }
    // Grid lines once cells are large enough to see them.
    // A pixel draws the line of cell boundary k when its footprint [c0, c1) contains k: exactly one
    // pixel per boundary, whatever the zoom.
    let crosses = ceil(c0) != ceil(c1);
    if (P.flags.x == 1u && px_per_cell >= 6.0 && (crosses.x || crosses.y)) { return P.grid_color; }
    return color;
}
