//! kvscope: transformer attention and the KV cache, taught by running real kernels on small tensors.
//!
//! Layers, each depending only on those above it:
//! - [`math`]: the f64 oracle and the f32 fast path (masks, softmax, multi-head/GQA/MQA attention);
//! - [`cache`]: the static and paged KV-cache models (allocator, block tables, accounting);
//! - [`compute`]: the `Backend` trait, the CPU backend, the reference ops and the shared checker;
//! - [`kv`]: the KV engine over both (pools of every layer, the kernels that write, copy and read them,
//!   scheduling and eviction policies): everything that stores K/V goes through it;
//! - [`model`]: the tiny trained Llama-style model, run on a backend (prefill, cached decode through
//!   the engine);
//! - [`export`] and [`bench`]: the `.npy` exports and the benchmarks behind the CLI;
//! - [`lesson_file`]: the lesson-file loader (typed, validated `lessons/*.toml`); [`lessons`]: one module per lesson kind (computation, then views);
//! - [`render`]: the wgpu renderers; [`ui`]: the eframe app and its shared widgets.

pub mod bench;
pub mod cache;
pub mod compute;
pub mod export;
pub mod kv;
pub mod lesson_file;
pub mod lessons;
pub mod math;
pub mod model;
pub mod render;
pub mod simd;
pub mod ui;
