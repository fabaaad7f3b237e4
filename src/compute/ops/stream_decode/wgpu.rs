//! The streaming decode on the wgpu backend: the WGSL `stream_decode_f16`.

use super::{StreamDecodeInput, StreamDecodeOut, launch};
use crate::compute::ops::decode_row::RowParams;
use crate::compute::wgpu::{Dispatch, WgpuBackend, f32s, pack_f16};
use crate::compute::{BackendError, Valid, f16_pool};

pub(crate) fn run(b: &WgpuBackend, inp: Valid<&StreamDecodeInput>) -> Result<StreamDecodeOut, BackendError> {
    let s = inp.shape;
    let (r, h, hd) = (inp.requests(), inp.n_heads, s.head_dim);
    let (n_out, n_probs) = (r * h * hd, r * h * inp.columns());
    let params = b.uniform(&RowParams::new(&inp.paged, n_out, 0)?);
    let q = b.storage(inp.q);
    let k_pool = b.storage(&pack_f16(f16_pool(inp.k_pool, "wgpu")?));
    let v_pool = b.storage(&pack_f16(f16_pool(inp.v_pool, "wgpu")?));
    let tables = b.storage(inp.block_tables);
    let reqs: Vec<i32> = inp
        .context_lens
        .iter()
        .zip(inp.q_pos)
        .flat_map(|(&l, &p)| [l, p])
        .collect();
    let reqs = b.storage(&reqs);
    let key_pos = b.storage(inp.key_pos);
    let cos_sin = b.storage(inp.cos_sin);
    let result = b.zeros(n_out + n_probs);
    let got = b.run(
        &[Dispatch {
            dims: launch::wgsl(h, r),
            bindings: vec![
                (0, &params),
                (1, &q),
                (2, &k_pool),
                (3, &v_pool),
                (4, &tables),
                (5, &reqs),
                (6, &key_pos),
                (7, &cos_sin),
                (8, &result),
            ],
        }],
        &[(&result, n_out + n_probs)],
    )?;
    let mut all = f32s(got.into_iter().next().unwrap_or_default());
    let probs = all.split_off(n_out.min(all.len()));
    Ok(StreamDecodeOut { out: all, probs })
}
