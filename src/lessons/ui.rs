//! The UI side of a lesson kind, and the registry of every kind.
//!
//! Modelled on egui's `egui_demo_lib`: a kind implements [`super::LessonKind`] (what it computes) and
//! [`LessonUi`] (how it draws), and [`REGISTRY`] lists each kind on one line. The app, `kvscope render`,
//! the tests and `kvscope lessons check` all iterate it.

use std::fmt;

use eframe::egui::Ui;

use super::{LessonKind, Output, attention_matrix, causal_mask, kv_decode, multi_head, paged_cache};
use crate::ui::widgets::ViewCtx;

/// How a lesson kind draws its output.
pub trait LessonUi: LessonKind {
    /// Draw view `view` (one of [`LessonKind::view_names`]) of `out`, which this kind computed.
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str);

    /// Whether the lesson has a timeline bar above its views.
    fn has_timeline(&self) -> bool {
        false
    }

    /// Draw the timeline bar (only called when [`LessonUi::has_timeline`]).
    fn timeline(&self, _cx: &mut ViewCtx, _ui: &mut Ui, _out: &dyn Output) {}
}

impl fmt::Debug for dyn LessonUi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LessonKind({})", self.name())
    }
}

/// Every lesson kind, one line each.
pub static REGISTRY: [&'static dyn LessonUi; 5] = [
    &attention_matrix::AttentionMatrix,
    &causal_mask::CausalMask,
    &multi_head::MultiHead,
    &kv_decode::KvDecode,
    &paged_cache::PagedCache,
];

/// The kind lesson files call `name`.
pub fn kind_named(name: &str) -> Option<&'static dyn LessonUi> {
    REGISTRY.iter().copied().find(|k| k.name() == name)
}
