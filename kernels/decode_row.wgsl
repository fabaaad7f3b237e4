// =======================================================================================
// kernels/decode_row.wgsl -- the decode body of the WGSL kernels that materialise a score
// row (score_attention, stream_attention, quant_kv, group_kv, mla_attention); the twin of
// decode_row in kernels/common.cuh
// =======================================================================================
//
// For one query head, with its scaled query already in workgroup memory:
//
//     result[pb + i] = score_at(i)             i < len   (-inf: masked, masked kernels only)
//     result[pb + i] = softmax_i(...)          in place: the head's probs row
//     result[ob + d] = sum_i pv_term(p_i, i, d)    d < out_dim, tokens in order
//
// WGSL has no generics and no function pointers, so the file that calls decode_row defines
// what it reads: `score_at(i) -> f32` and `pv_term(p, i, d) -> f32` (from the invocation's
// context, which it keeps in `var<private>`s), and the `result` buffer. The backend puts this
// file in front of every kernel file that calls decode_row, after kernels/common.wgsl's
// reductions (wg_max, wg_sum). Masked kernels give masked tokens weight 0, skip them in P.V
// and write 0 in the row's columns from len to T. Every invocation of the workgroup calls it,
// in uniform control flow (it contains barriers).
// =======================================================================================

fn decode_row(masked: bool, pb: u32, ob: u32, len: u32, T: u32, out_dim: u32, t: u32) {
    var m = neg_inf();
    for (var i = t; i < len; i += WG) {
        let s = score_at(i);
        result[pb + i] = s;
        m = max(m, s);
    }
    m = wg_max(m, t);
    var l = 0.0;
    for (var i = t; i < len; i += WG) {
        let sc = result[pb + i];
        var e = 0.0;
        if (!masked || sc != neg_inf()) {
            e = exp(sc - m);
        }
        result[pb + i] = e;
        l += e;
    }
    l = wg_sum(l, t);
    var inv = 0.0;
    if (l > 0.0) {
        inv = 1.0 / l;
    }
    if (masked) {
        for (var i = t; i < T; i += WG) {
            if (i < len) {
                result[pb + i] = result[pb + i] * inv;
            } else {
                result[pb + i] = 0.0;
            }
        }
    } else {
        for (var i = t; i < len; i += WG) {
            result[pb + i] = result[pb + i] * inv;
        }
    }
    storageBarrier();
    workgroupBarrier();

    for (var d = t; d < out_dim; d += WG) {
        var acc = 0.0;
        for (var i = 0u; i < len; i += 1u) {
            let pt = result[pb + i];
            if (masked && pt == 0.0) {
                continue;
            }
            acc += pv_term(pt, i, d);
        }
        result[ob + d] = acc;
    }
}
