//! The UI side of the lesson kinds: how each draws its output, in a table keyed by kind.
//!
//! Modelled on egui's `egui_demo_lib`, which keeps the demos' UI apart from what they compute: a kind
//! implements [`LessonKind`] (what it computes; `crate::lessons`, no egui, used by the lesson loader, the
//! worker and the CLI) and [`LessonUi`] (how it draws, here). [`LESSON_UIS`] is made from the same list as
//! [`crate::lessons::REGISTRY`] (`lesson_table!`), so the UI sits above the lessons with no way back.

use std::fmt;

use eframe::egui::Ui;

use crate::lessons::{LessonKind, Output};
use crate::ui::widgets::ViewCtx;

/// How a lesson kind draws its output.
pub trait LessonUi: LessonKind {
    /// Draw view `view` (one of [`LessonKind::view_names`]) of `out`, which this kind computed.
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str);

    /// Whether the lesson has a timeline bar above its views.
    fn has_timeline(&self) -> bool {
        false
    }

    /// Whether this step (`cx.step_views`) has the timeline bar: by default every step of a lesson that
    /// [`LessonUi::has_timeline`]; a lesson whose process is shown by some steps only says which.
    fn timeline_on(&self, _cx: &ViewCtx) -> bool {
        self.has_timeline()
    }

    /// Draw the timeline bar (only called when [`LessonUi::timeline_on`]).
    fn timeline(&self, _cx: &mut ViewCtx, _ui: &mut Ui, _out: &dyn Output) {}

    /// The lesson's hero view, when it has one that many steps share (lessons 5 and 7: the pool): it keeps
    /// the same place and size in every step that shows it ([`crate::ui::widgets::anchored`]).
    fn anchor_view(&self) -> Option<&'static str> {
        None
    }
}

impl fmt::Debug for dyn LessonUi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LessonUi({})", self.name())
    }
}

/// The UI table from the registry's list of kinds.
macro_rules! ui_table {
    ($($module:ident::$kind:ident),* $(,)?) => {
        /// Every kind's UI, in registry order.
        pub static LESSON_UIS: [&'static dyn LessonUi; [$(stringify!($kind)),*].len()] =
            [$(&crate::lessons::$module::$kind),*];
    };
}

crate::lessons::lesson_table!(ui_table);

/// The UI of `kind` (every registered kind has one: the table comes from the same list).
pub fn ui_of(kind: &dyn LessonKind) -> &'static dyn LessonUi {
    LESSON_UIS
        .iter()
        .copied()
        .find(|u| u.name() == kind.name())
        .expect("LESSON_UIS lists every kind of REGISTRY")
}
