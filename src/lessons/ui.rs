//! The UI side of a lesson kind.
//!
//! Modelled on egui's `egui_demo_lib`: a kind implements [`super::LessonKind`] (what it computes) and
//! [`LessonUi`] (how it draws), and [`super::REGISTRY`] lists each kind on one line.

use std::fmt;

use eframe::egui::Ui;

use super::{LessonKind, Output, REGISTRY};
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

/// The kind lesson files call `name`.
pub fn kind_named(name: &str) -> Option<&'static dyn LessonUi> {
    REGISTRY.iter().copied().find(|k| k.name() == name)
}
