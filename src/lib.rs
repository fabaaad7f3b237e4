//! kvscope: transformer attention and the KV cache, taught by running real kernels on small tensors.
//!
//! Layers, each depending only on those listed before it:
//! - [`math`]: the f64 oracle and the f32 fast path (masks, softmax, multi-head/GQA/MQA attention);
//! - [`cache`]: the static and paged KV-cache models (allocator, block tables, accounting);
//! - [`compute`]: the `Backend` trait, the CPU backend, the reference ops and the shared checker;
//! - [`kv`]: the KV engine over both (pools of every layer, the kernels that write, copy and read them,
//!   scheduling and eviction policies): everything that stores K/V goes through it;
//! - [`model`]: the tiny trained Llama-style model, run on a backend (prefill, cached decode through
//!   the engine);
//! - [`drivers`]: the lesson drivers, the computations lessons 8–12 run over a model (streaming,
//!   eviction, quantised caches, serving, speculative decoding);
//!   (`compute::bench` holds the measurements that `kvscope bench` and lesson 4's sweep share);
//! - [`facts`]: the published facts the lessons quote (`assets/facts.toml`: device figures, papers'
//!   figures, model configurations, each with its source), drawn as quoted, never as measured;
//! - [`figure`]: the data the views draw (heatmaps, block grids) as plain values, for lessons to build;
//! - [`lesson_file`]: the lesson-file format and loader (typed `lessons/*.toml`, checked against each
//!   kind's schema), with no lesson code;
//! - [`exercises`]: kernel exercises, regions of the WGSL kernels blanked for a student and graded
//!   against the f64 reference by the ops' suites (no egui; native only for now);
//! - [`lessons`]: one module per lesson kind, what it computes (no egui), and `lessons::export`, the
//!   `.npy` arrays that lessons and `kvscope export` write;
//! - [`style`]: the visual grammar (what each colour means; every view and renderer takes its colours
//!   from it);
//! - [`render`]: the wgpu renderers; [`ui`]: the eframe app, its shared widgets, and each kind's views
//!   (`ui::views`), above the lessons with no way back. The layering test (`tests/layering.rs`) fails
//!   on any import cycle among these modules or among the files of `src/`.

/// `println!` to stdout that ends the process quietly when its reader has gone (the lessons' export
/// subcommands print through it, as the binary's commands do).
#[cfg(feature = "native")]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::command::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod cache;
pub mod calc;
#[cfg(feature = "native")]
pub mod command;
pub mod compute;
pub mod drivers;
pub mod exercises;
pub mod facts;
pub mod figure;
pub mod kv;
pub mod lesson_file;
pub mod lessons;
pub mod math;
pub mod model;
pub mod render;
pub mod simd;
pub mod style;
pub mod ui;
