//! The lesson drivers: the computations lessons 8–12 run over a model, each one the algorithm its
//! lesson teaches, driven through the KV engine and the backends' kernels, with no egui:
//!
//! - [`stream`]: lesson 8, a model streaming a text past its context through a bounded paged cache
//!   (dense, window, sinks + window, recompute);
//! - [`evict`]: lesson 9, eviction by importance (H2O, SnapKV, the baselines) one decode step a token;
//! - [`quant`]: lesson 10, the model decoding from an empty cache in each KV format;
//! - [`serve`]: lesson 12, continuous batching with chunked prefill under a token budget;
//! - [`spec`]: lesson 12, speculative decoding (prompt lookup and a draft model).
//!
//! `model/` holds the models themselves (loading, the forward pass, decode); these take one.

pub mod evict;
pub mod quant;
pub mod serve;
pub mod spec;
pub mod stream;

/// The model a stored table ran on when it does not say: the tiny model (the only one before SmolLM2).
pub(crate) fn tiny_name() -> String {
    "tiny".to_string()
}
