//! Lesson 1's views: every one is a shared attention-layer view.

use eframe::egui::Ui;

use crate::lessons::attention_layer::AttnOut;
use crate::lessons::attention_matrix::{AttentionMatrix, View};
use crate::lessons::{LessonKind, Output};
use crate::ui::lesson_ui::LessonUi;
use crate::ui::views::attention_layer::{self as attn, Qkv};
use crate::ui::widgets::{ViewCtx, kernel_panel};

impl LessonUi for AttentionMatrix {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(a), Some(view)) = (out.downcast_ref::<AttnOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::X => attn::x(cx, ui, a),
            View::Weights => attn::weights(cx, ui, a),
            View::Q => attn::projection(cx, ui, a, Qkv::Q),
            View::K => attn::projection(cx, ui, a, Qkv::K),
            View::V => attn::projection(cx, ui, a, Qkv::V),
            View::Scores => attn::scores(cx, ui, a, "scores", &a.maps.scores[0], false),
            View::Softmax => {
                let row = attn::highlighted_row(cx, a);
                attn::softmax_row(cx, ui, a, row, false);
            }
            View::Probs => attn::probs(cx, ui, a, &a.maps.probs[0], &a.core.probs, true),
            View::Pv => attn::pv(cx, ui, a),
            View::Out => attn::out(cx, ui, a),
            View::Trained => attn::trained_info(cx, ui, a),
            View::Lines => attn::lines(cx, ui, a),
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
        }
    }
}
