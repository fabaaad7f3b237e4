//! The data the views draw, as plain values: what a lesson's computation hands its views, with no GPU
//! and no egui. `render` draws them ([`crate::render::heatmap`], [`crate::render::blocks`]); lessons
//! and drivers build them, and import nothing from `render` (`tests/layering.rs`).

use crate::cache::PagedKvCache;

/// A matrix to draw. `generation` changes whenever `values` change; the GPU copy is refreshed then.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatmapData {
    /// Rows (queries).
    pub rows: usize,
    /// Columns (keys).
    pub cols: usize,
    /// Row-major values; −∞ marks a masked entry.
    pub values: Vec<f32>,
    /// Changes when the values change.
    pub generation: u64,
}

impl HeatmapData {
    /// A matrix; `values.len()` must be `rows × cols` (checked).
    pub fn new(rows: usize, cols: usize, values: Vec<f32>, generation: u64) -> Result<Self, String> {
        if rows == 0 || cols == 0 || values.len() != rows * cols {
            return Err(format!(
                "heatmap needs rows·cols = {} values, got {}",
                rows * cols,
                values.len()
            ));
        }
        if rows > MAX_SIDE || cols > MAX_SIDE {
            return Err(format!("heatmap sides are limited to {MAX_SIDE} (got {rows}×{cols})"));
        }
        Ok(Self {
            rows,
            cols,
            values,
            generation,
        })
    }

    /// Min and max over finite values ((0, 1) when there are none; widened when equal).
    pub fn finite_range(&self) -> (f32, f32) {
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for &v in self.values.iter().filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if lo > hi {
            return (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            return (lo - 0.5, hi + 0.5);
        }
        (lo, hi)
    }

    /// Each row's sum over its finite values, in f64.
    pub fn row_sums(&self) -> Vec<f64> {
        self.values
            .chunks(self.cols.max(1))
            .take(self.rows)
            .map(|row| row.iter().filter(|x| x.is_finite()).map(|&x| f64::from(x)).sum())
            .collect()
    }
}

/// Largest matrix side (the texture limit every adapter gives kvscope).
pub const MAX_SIDE: usize = 8192;

/// The pool as the block grid draws it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockGridData {
    /// Slots per block.
    pub block_size: usize,
    /// Owner request of each block, or −1 for a free block.
    pub owners: Vec<i32>,
    /// Tokens held by each block.
    pub filled: Vec<i32>,
    /// The (block, slot) being written, if any.
    pub written: Option<(usize, usize)>,
}

/// Most blocks one grid shows.
pub const MAX_BLOCKS: usize = 8192;

impl BlockGridData {
    /// Read a paged cache: owners from the block tables, fill counts from each request's length.
    pub fn from_cache(cache: &PagedKvCache, written: Option<(usize, usize)>) -> Self {
        let s = cache.shape();
        let mut owners = vec![-1i32; s.num_blocks];
        let mut filled = vec![0i32; s.num_blocks];
        for (&req, table) in cache.tables() {
            let len = cache.len(req);
            for (i, &b) in table.iter().enumerate() {
                owners[b as usize] = req as i32;
                filled[b as usize] = len.saturating_sub(i * s.block_size).min(s.block_size) as i32;
            }
        }
        Self {
            block_size: s.block_size,
            owners,
            filled,
            written,
        }
    }
}
