//! Request ids: the one thing the block manager (`paged.rs`) and the prefix-caching state
//! (`prefix_state.rs`) both name.

/// A request's id.
pub type RequestId = u32;
