// =======================================================================================
// kernels/rope.wgsl -- WGSL twin of kernels/rope.cu: rotary position embeddings (RoPE),
// "rotate half" layout, f32
// =======================================================================================
//
//   x        [N, H, hd]   rows          positions [N] (u32)
//   cos_sin  [P, hd]      row p: cos(p * theta_i) for i < hd/2, then sin(p * theta_i)
//   out      [N, H, hd]
//
//     out[d]        = x[d] * cos - x[d + hd/2] * sin          (d < hd/2)
//     out[d + hd/2] = x[d + hd/2] * cos + x[d] * sin
//
// rope_f32: one workgroup of 128 per row, as the CUDA kernel's blocks; rows past 65535 go
// to the second dimension of the dispatch (row = w.x + 65535 * w.y). No workgroup memory and
// no barrier.
// =======================================================================================

struct RopeParams {
    n: u32,
    n_heads: u32,
    head_dim: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> P: RopeParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;
@group(0) @binding(3) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(128, 1, 1)
fn rope_f32(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = w.x + 65535u * w.y;
    if (row >= P.n) {
        return;
    }
    let half = P.head_dim / 2u;
    let cs = positions[row] * P.head_dim;
    for (var i = t; i < P.n_heads * half; i += 128u) {
        let h = i / half;
        let d = i - h * half;
        let base = (row * P.n_heads + h) * P.head_dim;
        let x1 = x[base + d];
        let x2 = x[base + d + half];
        let c = cos_sin[cs + d];
        let s = cos_sin[cs + half + d];
        out[base + d] = x1 * c - x2 * s;
        out[base + d + half] = x2 * c + x1 * s;
    }
}
