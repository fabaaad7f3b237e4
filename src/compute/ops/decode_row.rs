//! The end of a decode row on the CPU backend, written once for the decodes that materialise a row of
//! weights (`score_decode` and `stream_decode`), as `decode_row` is in the kernels
//! (`kernels/common.cuh`, `kernels/decode_row.wgsl`).

use half::f16;

/// `p[..len]` holds a query's scores over a request's tokens (−∞ where a token is masked) and `m` their
/// maximum: turn them into weights (0 where masked; the row sums to 1, or is all 0 when every token is
/// masked) and add `Σ_t p_t · v_t` to `o`, reading token t's value row through `v`.
pub(crate) fn softmax_pv<'a>(p: &mut [f32], len: usize, m: f32, o: &mut [f32], v: impl Fn(usize) -> &'a [f16]) {
    let mut l = 0f32;
    for pt in &mut p[..len] {
        *pt = if *pt == f32::NEG_INFINITY {
            0.0
        } else {
            crate::math::exp_f32(*pt - m)
        };
        l += *pt;
    }
    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
    for pt in &mut p[..len] {
        *pt *= inv;
    }
    for (t, &pt) in p[..len].iter().enumerate() {
        if pt == 0.0 {
            continue;
        }
        for (od, vd) in o.iter_mut().zip(v(t)) {
            *od += pt * vd.to_f32();
        }
    }
}

/// The uniforms of the WGSL kernels that end in `decode_row` (`score_attention.wgsl`'s `ScoreParams`,
/// `stream_attention.wgsl`'s `StreamParams`): the decode's shape, the scale, where the weights start in
/// the result buffer and, for the score decode, where the group scores start (0 where unused).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RowParams {
    n_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
    probs_at: u32,
    scores_at: u32,
}

const _: () = assert!(std::mem::size_of::<RowParams>() == 32);

impl RowParams {
    /// The uniforms of `inp`, with the weights at `probs_at` and the group scores at `scores_at`.
    pub(crate) fn new(
        inp: &crate::compute::PagedDecodeInput,
        probs_at: usize,
        scores_at: usize,
    ) -> Result<Self, crate::compute::BackendError> {
        use crate::compute::wgpu::u;
        let s = inp.shape;
        Ok(Self {
            n_heads: u(inp.n_heads)?,
            kv_heads: u(s.kv_heads)?,
            head_dim: u(s.head_dim)?,
            block_size: u(s.block_size)?,
            max_blocks: u(inp.max_blocks)?,
            scale: 1.0 / (s.head_dim as f32).sqrt(),
            probs_at: u(probs_at)?,
            scores_at: u(scores_at)?,
        })
    }
}
