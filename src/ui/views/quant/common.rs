//! What lesson 10's views share: notes, titles and two stacked halves of a rectangle.

use eframe::egui::{self, RichText, Ui};

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.9))).wrap());
}

pub(super) fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(crate::style::fit(size))).wrap());
}

/// Two rectangles, one above the other, each the full width of `r`.
pub(super) fn stacked(r: egui::Rect) -> [egui::Rect; 2] {
    let gap = 8.0;
    let h = (r.height() - gap) / 2.0;
    [
        egui::Rect::from_min_size(r.min, egui::vec2(r.width(), h)),
        egui::Rect::from_min_size(r.min + egui::vec2(0.0, h + gap), egui::vec2(r.width(), h)),
    ]
}
