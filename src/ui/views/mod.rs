//! How each lesson kind draws its output: one module per kind of [`crate::lessons`], each implementing
//! [`crate::ui::lesson_ui::LessonUi`] for it. The kinds compute below, with no egui; their views live
//! here, above them, so the lessons never import the UI.

pub mod attention_layer;

/// One module per lesson kind, `ui/views/<module>.rs` or `ui/views/<module>/`, declared from the
/// registry's list (`lesson_table!`): a new kind's view needs no line here.
macro_rules! view_modules {
    ($($module:ident::$kind:ident),* $(,)?) => {
        $(mod $module;)*
    };
}

crate::lessons::lesson_table!(view_modules);
