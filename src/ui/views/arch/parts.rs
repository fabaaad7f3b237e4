//! Helpers lesson 11's views share: text and the attention kinds' colours.

use eframe::egui::{self, RichText, Ui};

pub(super) fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(crate::style::fit(size))).wrap());
}

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.9))).wrap());
}

/// Attention kind `k`'s colour (`style::ATTENTION_KINDS`).
pub(super) fn kind(k: &str) -> crate::style::Rgba {
    crate::style::request(crate::style::attention_kind(k))
}
