//! What the engine holds for the cache quantised in groups (a leaf: `engine.rs` keeps one, `group.rs`
//! drives it).

use std::collections::BTreeMap;

use crate::cache::{GroupCache, GroupShape, RequestId};

/// Every layer's cache quantised in groups, and which ring each request holds.
#[derive(Debug, Clone)]
pub(super) struct GroupStore {
    /// The shape (blocks, KV heads, head_dim, rings, the rule).
    pub(super) shape: GroupShape,
    /// One cache per layer.
    pub(super) layers: Vec<GroupCache>,
    /// The ring of each request that has written.
    pub(super) rings: BTreeMap<RequestId, usize>,
}
