//! KV-cache models: the static preallocated cache and the paged cache (allocator, block tables,
//! accounting). Pure data structures over host memory; the backends in `compute` run kernels on them.

mod paged;
mod static_cache;

pub use paged::{BlockAllocator, OutOfBlocks, PagedError, PagedKvCache, PagedShape, PagedStats, RequestId};
pub use static_cache::{StaticCacheError, StaticKvCache, StaticShape};
