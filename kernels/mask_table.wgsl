// =======================================================================================
// kernels/mask_table.wgsl -- WGSL twin of kernels/mask_table.cu: the kernels' mask predicate
// as a table (a test kernel, no op)
// =======================================================================================
//
//   out [rows, cols]  out[i, j] = 1 when key j is visible to query i, else 0
//
// mask_table_i32: workgroups (ceil(cols/16), ceil(rows/16), 1) of 16 x 16. It evaluates
// kvs_visible of kernels/common.wgsl, which every WGSL attention kernel uses.
// =======================================================================================

struct MaskParams {
    rows: u32,
    cols: u32,
    mask_kind: u32,
    window: u32,
    sinks: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> M: MaskParams;
@group(0) @binding(1) var<storage, read_write> table: array<i32>;

@compute @workgroup_size(16, 16, 1)
fn mask_table_i32(@builtin(global_invocation_id) g: vec3<u32>) {
    let j = g.x;
    let i = g.y;
    if (i >= M.rows || j >= M.cols) {
        return;
    }
    table[i * M.cols + j] = select(0, 1, kvs_visible(i, j, M.mask_kind, M.window, M.sinks));
}
