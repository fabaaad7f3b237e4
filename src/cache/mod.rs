//! KV-cache models: the static preallocated cache and the paged cache (allocator, block tables,
//! accounting, prefix caching with copy-on-write), the cache quantised in groups ([`group`]), and the one
//! list of KV formats ([`formats`]). Pure data structures over host memory; the backends in `compute` run
//! kernels on them.

pub mod dtype;
pub mod formats;
pub mod group;
pub mod paged;
pub mod pool;
pub mod prefix;
mod prefix_state;
mod request;
mod static_cache;

pub use dtype::{KvDtype, KvFormat, PoolGeometry, ScaleLayout};
pub use formats::CacheFormat;
pub use group::{GroupCache, GroupFormat, GroupShape};
pub use paged::{BlockAllocator, OutOfBlocks, PagedError, PagedKvCache, PagedShape, PagedStats, RequestId};
pub use pool::{Pool, PoolMut, PoolRef};
pub use static_cache::{StaticCacheError, StaticKvCache, StaticShape};

/// K and V bytes one token occupies in a model's cache: 2 (K and V) · layers · kv_heads · the bytes
/// of one row of `head_dim` values of `dtype` (with the row's own scales, for a dtype that keeps scales
/// per token; scales shared by a block, a head or the pool are not counted per token).
/// Llama-3-8B (32 layers, 8 KV heads, head_dim 128, f16) → 131 072 B = 128 KiB.
pub fn kv_bytes_per_token(layers: u64, kv_heads: u64, head_dim: u64, dtype: KvDtype) -> u64 {
    let f = dtype.format();
    let g = PoolGeometry {
        blocks: 1,
        heads: 1,
        block_size: 1,
        row: head_dim as usize,
    };
    let row_scales = match f.scales {
        ScaleLayout::PerToken { .. } => f.scales.count(g),
        _ => 0,
    };
    let row = f.bytes_for(head_dim as usize) + row_scales * std::mem::size_of::<f32>();
    2 * layers * kv_heads * row as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn llama3_8b_needs_128_kib_per_token() {
        assert_eq!(super::kv_bytes_per_token(32, 8, 128, super::KvDtype::F16), 128 * 1024);
    }
}
