//! The f64 oracle of paged decode.

use ndarray::{Array2, Array3};

use crate::compute::PagedDecodeInput;
use crate::math::decode_attention_f64;

/// Paged decode in f64: gather each request's K/V through its block table (the checking path), then
/// plain decode attention. Returns `[R, H, hd]`. Only the rows a request's context covers are read (through
/// the pool's format, [`crate::cache::PoolRef::read`]) and widened to f64, so a large pool that is mostly unused (lesson 4's static
/// cache at its longest) costs what the context costs.
pub fn paged_decode(inp: &PagedDecodeInput) -> Vec<f64> {
    let s = inp.shape;
    let (h, hd) = (inp.n_heads, s.head_dim);
    let mut out = Vec::with_capacity(inp.requests() * h * hd);
    let mut row = vec![0f32; hd];
    for (r, &len) in inp.context_lens.iter().enumerate() {
        let len = len as usize;
        let table = &inp.block_tables[r * inp.max_blocks..];
        let mut gather = |pool: crate::cache::PoolRef| {
            let mut a = Array3::<f64>::zeros((s.kv_heads, len, hd));
            for kv in 0..s.kv_heads {
                for pos in 0..len {
                    let (b, o) = (table[pos / s.block_size] as usize, pos % s.block_size);
                    pool.read(s.index(b, kv, o, 0), hd, &pool.scales[s.row_scales(b, kv, o)], &mut row);
                    for (d, &x) in row.iter().enumerate() {
                        a[(kv, pos, d)] = x as f64;
                    }
                }
            }
            a
        };
        let (k, v) = (gather(inp.k_pool), gather(inp.v_pool));
        let q = Array2::from_shape_fn((h, hd), |(head, d)| inp.q[(r * h + head) * hd + d] as f64);
        out.extend(decode_attention_f64(&q, &k, &v).iter());
    }
    out
}
