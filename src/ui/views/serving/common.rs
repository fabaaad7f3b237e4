//! What lesson 12's views share: titles, notes and the request colours.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::style;

pub(super) fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(crate::style::fit(size))).wrap());
}

pub(super) fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(crate::style::fit(size * 0.85))).wrap());
}

/// A request's colour, lighter for its decode tokens.
pub(super) fn req_color(i: usize, decode: bool) -> Color32 {
    let c = style::c32(style::request(i));
    if decode { c.gamma_multiply(0.55) } else { c }
}
