// =======================================================================================
// kernels/bandwidth.wgsl -- the WGSL twin of kernels/bandwidth.cu: a read-only stream, the
// roof of a kernel that only reads its data (decode attention reads its K/V)
// =======================================================================================
//
// read_stream_u32: every invocation sums 16-byte words in a grid-stride loop, the workgroup
// reduces its sums in workgroup memory, and invocation 0 writes one partial sum per workgroup.
// Workgroup 256, at most 4096 workgroups. The sums only keep the loads alive.
// =======================================================================================

struct Params {
    n_words: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> partial: array<u32>;

var<workgroup> s_sum: array<u32, 256>;

@compute @workgroup_size(256, 1, 1)
fn read_stream_u32(
    @builtin(workgroup_id) w: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    var acc = 0u;
    let stride = nw.x * 256u;
    for (var i = w.x * 256u + t; i < P.n_words; i += stride) {
        let x = data[i];
        acc += x.x + x.y + x.z + x.w;
    }
    s_sum[t] = acc;
    workgroupBarrier();
    for (var half = 128u; half > 0u; half = half / 2u) {
        if (t < half) {
            s_sum[t] = s_sum[t] + s_sum[t + half];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        partial[w.x] = s_sum[0];
    }
}
