//! KV-cache models: the static preallocated cache and the paged cache (allocator, block tables,
//! accounting, prefix caching with copy-on-write). Pure data structures over host memory; the backends in `compute` run kernels on them.

mod paged;
pub mod pool;
pub mod prefix;
pub mod scheduler;
mod static_cache;

pub use paged::{BlockAllocator, OutOfBlocks, PagedError, PagedKvCache, PagedShape, PagedStats, RequestId};
pub use pool::Pool;
pub use scheduler::{RequestSpec, ScenarioError, Scheduler, StepEvents};
pub use static_cache::{StaticCacheError, StaticKvCache, StaticShape};

/// K and V bytes one token occupies in a model's cache: 2 (K and V) · layers · kv_heads · head_dim ·
/// bytes per value. Llama-3-8B (32 layers, 8 KV heads, head_dim 128, fp16) → 131 072 B = 128 KiB.
pub fn kv_bytes_per_token(layers: u64, kv_heads: u64, head_dim: u64, dtype_bytes: u64) -> u64 {
    2 * layers * kv_heads * head_dim * dtype_bytes
}

#[cfg(test)]
mod tests {
    #[test]
    fn llama3_8b_needs_128_kib_per_token() {
        assert_eq!(super::kv_bytes_per_token(32, 8, 128, 2), 128 * 1024);
    }
}
