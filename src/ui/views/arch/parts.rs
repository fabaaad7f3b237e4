//! Text helpers lesson 11's views share.

use eframe::egui::{self, RichText, Ui};

pub(super) fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(crate::style::fit(size))).wrap());
}

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.9))).wrap());
}
