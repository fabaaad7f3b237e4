//! How each lesson kind draws its output: one module per kind of [`crate::lessons`], each implementing
//! [`crate::ui::lesson_ui::LessonUi`] for it. The kinds compute below, with no egui; their views live
//! here, above them, so the lessons never import the UI.

mod arch;
pub mod attention_layer;
mod attention_matrix;
mod causal_mask;
mod eviction;
mod flash_attention;
mod kv_decode;
mod multi_head;
mod paged_cache;
mod prefix_cache;
mod quant;
mod serving;
mod streaming;
