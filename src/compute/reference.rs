//! The f64 oracle for every op of the [`super::Backend`] trait. Each op keeps its reference in its
//! folder (`ops/<op>/reference.rs`); this module gathers them, and holds what they share. Backends are
//! compared with these through [`super::check`].

use half::f16;

pub use super::ops::attention::reference::attention;
pub use super::ops::copy_blocks::reference::copy_blocks;
pub use super::ops::paged_append::reference::paged_append;
pub use super::ops::paged_decode::reference::paged_decode;
pub use super::ops::static_append::reference::static_cache_append;

/// Every value of a paged pool as f64, each row read through its dtype with its scales: what the
/// oracles compare and gather from.
pub fn pool_f64(p: crate::cache::PoolRef, s: crate::cache::PagedShape) -> Vec<f64> {
    let mut out = Vec::with_capacity(s.numel());
    let mut row = vec![0f32; s.head_dim];
    for b in 0..s.num_blocks {
        for h in 0..s.kv_heads {
            for o in 0..s.block_size {
                p.read(
                    s.index(b, h, o, 0),
                    s.head_dim,
                    &p.scales[s.row_scales(b, h, o)],
                    &mut row,
                );
                out.extend(row.iter().map(|&x| x as f64));
            }
        }
    }
    out
}

/// A row of f32 values as a pool of `dtype` keeps them (written and read back through its format), as
/// f64: for f16, each value rounded to nearest even.
pub fn round_row(dtype: crate::cache::KvDtype, src: &[f32]) -> Vec<f64> {
    let f = dtype.format();
    let mut words = vec![0u64; f.bytes_for(src.len()).div_ceil(8)];
    let bytes = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..f.bytes_for(src.len())];
    let mut scales = vec![
        0f32;
        f.scales.count(crate::cache::PoolGeometry {
            blocks: 1,
            heads: 1,
            block_size: 1,
            row: src.len()
        })
    ];
    (f.write)(src, bytes, &mut scales);
    let mut back = vec![0f32; src.len()];
    (f.read)(bytes, &scales, &mut back);
    back.into_iter().map(f64::from).collect()
}

/// `x` rounded to f16, as f64: what an f16 store keeps.
pub fn round_f16(x: f32) -> f64 {
    f16::from_f32(x).to_f64()
}
