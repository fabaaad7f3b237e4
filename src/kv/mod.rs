//! The KV engine: one owner of a paged cache's block manager and of its K/V pools (every layer), and
//! the one place that runs the KV kernels on them. It lives above [`crate::cache`] (blocks, tables,
//! prefix caching, dtypes) and [`crate::compute`] (the backends), and everything that stores K/V goes
//! through it: lessons 4 (the trained model's paged cache), 5 (the scheduler and the served model) and
//! 7 (prefix caching and copy-on-write), and the `.npy` export.
//!
//! - [`KvEngine`]: reserve and admit (with prefix hits), write through `paged_append`, append a token
//!   with copy-on-write through `copy_blocks`, fork, free, truncate (rejected drafts), evict with a
//!   policy, decode through `paged_decode` with its f64 reference check; every change is a [`KvEvent`].
//! - [`Scheduler`] and [`SchedulePolicy`]: which requests compute how many tokens each step. Today's
//!   policy is vLLM V1's reduced to whole prompts ([`WholePrompt`]); a step records prefill chunks and
//!   draft tokens too, for a token budget and for speculative decoding.
//! - [`EvictionPolicy`]: which tokens of a request stay. Today's ([`LruPrefix`]) keeps them all, and the
//!   cache reuses unused prefix-cached blocks least recently used first; a window with sinks
//!   (StreamingLLM) or heavy hitters (H2O) returns a keep set instead.
//!
//! There is one request type, [`Request`]: lengths, and token ids when prefix caching needs them.

mod engine;
mod evict;
mod group;
mod group_store;
mod schedule;

pub use engine::{EngineError, KvEngine, KvEvent, PoolLayout};
pub use evict::{EvictionPolicy, LruPrefix};
pub use group::GroupTables;
pub use schedule::{
    ChunkedPrefill, Live, Queues, Request, ScenarioError, SchedulePolicy, Scheduler, StepEvents, WholePrompt,
    WholeUnderBudget,
};
