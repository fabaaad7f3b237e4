//! Eviction policies: which tokens of a request stay in its cache.
//!
//! A policy answers, for a request that is now `len` tokens long, which of its token positions stay
//! valid. [`super::KvEngine::evict`] then drops every full block (but the last) none of whose tokens
//! stay, returning it to the pool, and clears the validity of the dropped tokens that share a block with
//! kept ones. StreamingLLM keeps the first tokens (attention sinks, their blocks pinned) and a window of
//! the newest; H2O keeps the heavy hitters by accumulated attention. Both are keep sets.

use crate::cache::RequestId;

/// Which tokens of a request stay.
pub trait EvictionPolicy {
    /// The policy's name, for views and logs.
    fn name(&self) -> &'static str;

    /// For `req`, now `len` tokens long: `Some(valid)` with one flag per position (`valid.len() ==
    /// len`), or `None` to keep every token.
    fn keep(&mut self, req: RequestId, len: usize) -> Option<Vec<bool>>;
}

/// Today's policy: every token of a live request stays. What the prefix cache evicts is decided inside
/// the cache: blocks nobody uses stay cached for later hits, and when the free list is empty the least
/// recently used one is reused first (the deepest on ties), as vLLM's free-block queue does.
#[derive(Debug, Clone, Copy, Default)]
pub struct LruPrefix;

impl EvictionPolicy for LruPrefix {
    fn name(&self) -> &'static str {
        "LRU prefix cache"
    }

    fn keep(&mut self, _req: RequestId, _len: usize) -> Option<Vec<bool>> {
        None
    }
}
