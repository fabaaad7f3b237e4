//! The score-returning decode on the wgpu backend: the WGSL `score_decode_f16`.

use super::{ScoreDecodeInput, ScoreDecodeOut, launch};
use crate::compute::ops::decode_row::RowParams;
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, pack_f16};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&ScoreDecodeInput>) -> Result<ScoreDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd, cols) = (inp.requests(), inp.n_heads, s.head_dim, inp.columns());
    let (n_out, n_probs, n_scores) = (r * h * hd, r * h * cols, r * s.kv_heads * cols);
    let params = b.uniform(&RowParams::new(&inp.paged, n_out, n_out + n_probs)?);
    let q = b.storage(inp.q);
    let k_pool = b.storage(&pack_f16(f16_pool(inp.k_pool, "wgpu")?));
    let v_pool = b.storage(&pack_f16(f16_pool(inp.v_pool, "wgpu")?));
    let tables = b.storage(inp.block_tables);
    let lens = b.storage(inp.context_lens);
    let valid = b.storage(inp.valid);
    let total = n_out + n_probs + n_scores;
    let result = b.zeros(total);
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(s.kv_heads, r),
            bindings: vec![
                (0, &params),
                (1, &q),
                (2, &k_pool),
                (3, &v_pool),
                (4, &tables),
                (5, &lens),
                (6, &valid),
                (7, &result),
            ],
        }],
        &[(&result, total)],
    )?;
    let mut out = f32s(got.into_iter().next().unwrap_or_default());
    let mut probs = out.split_off(n_out.min(out.len()));
    let scores = probs.split_off(n_probs.min(probs.len()));
    Ok(ScoreDecodeOut { out, probs, scores })
}
