// blocks.wgsl -- the physical KV block pool as a grid of blocks (src/render/blocks.rs).
//
// How it works: block b sits at grid cell (b % cols, b / cols). Each block is split into
// block_size slots laid out as a small sub-grid. A 1-row texture holds, per block, its owner
// (request id, or -1 when the block is on the free list) and how many of its slots hold tokens.
// A slot is drawn in its owner's colour when filled and faded when allocated but empty (the
// internal fragmentation the lesson counts); free blocks are dark. The block being written gets a
// white border and the slot being written is white. Owner colours come from a palette texture so
// the CPU can predict every pixel.

struct Params {
    rect: vec4<f32>,       // target rectangle in framebuffer pixels: x0, y0, width, height
    grid: vec4<u32>,       // num_blocks, block_size, columns, slot columns per block
    cell: vec4<f32>,       // block cell width, height (px), gap (px), unused
    highlight: vec4<i32>,  // written block (-1 none), written slot (-1 none), palette size, unused
    free_color: vec4<f32>,
    bg_color: vec4<f32>,
    hl_color: vec4<f32>,
};

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var blocks: texture_2d<i32>;   // (owner, filled) per block, width = num_blocks
@group(0) @binding(2) var palette: texture_2d<f32>;  // owner colours, 1 row

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let uv = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let local = pos.xy - P.rect.xy;
    let cw = P.cell.x;
    let ch = P.cell.y;
    let gap = P.cell.z;
    let bx = i32(floor(local.x / cw));
    let by = i32(floor(local.y / ch));
    let b = by * i32(P.grid.z) + bx;
    if (bx < 0 || by < 0 || bx >= i32(P.grid.z) || b >= i32(P.grid.x)) { return P.bg_color; }
    let inner = local - vec2<f32>(f32(bx) * cw, f32(by) * ch);   // position inside the block cell
    let w = cw - gap;
    let h = ch - gap;
    if (inner.x >= w || inner.y >= h) { return P.bg_color; }        // the gap between blocks
    let info = textureLoad(blocks, vec2<i32>(b, 0), 0);
    let owner = info.x;
    let filled = info.y;
    let written = b == P.highlight.x;
    // White border around the block being written.
    let border = max(1.0, min(w, h) * 0.08);
    if (written && (inner.x < border || inner.y < border || inner.x >= w - border || inner.y >= h - border)) {
        return P.hl_color;
    }
    let scols = i32(P.grid.w);
    let srows = (i32(P.grid.y) + scols - 1) / scols;
    let sw = w / f32(scols);
    let sh = h / f32(srows);
    let sx = i32(floor(inner.x / sw));
    let sy = i32(floor(inner.y / sh));
    let slot = sy * scols + sx;
    if (slot >= i32(P.grid.y)) { return vec4<f32>(P.bg_color.rgb * 0.9, 1.0); }
    // Slot separators when slots are big enough to see.
    let sin = inner - vec2<f32>(f32(sx) * sw, f32(sy) * sh);
    let sep = sw >= 5.0 && sh >= 5.0 && (sin.x < 1.0 || sin.y < 1.0);
    if (owner < 0) {
        if (sep) { return vec4<f32>(P.free_color.rgb * 1.25, 1.0); }
        return P.free_color;
    }
    if (written && slot == P.highlight.y) { return P.hl_color; }
    let n = max(P.highlight.z, 1);
    let c = textureLoad(palette, vec2<i32>(owner % n, 0), 0);
    var color: vec4<f32>;
    if (slot < filled) { color = c; } else { color = vec4<f32>(mix(P.bg_color.rgb, c.rgb, 0.3), 1.0); }
    if (sep) { color = vec4<f32>(color.rgb * 0.75, 1.0); }
    return color;
}
