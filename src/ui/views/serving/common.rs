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

/// A muted line under a view that continues on the next page: what is there, and "on the next page →".
pub(super) fn more_on_next_page(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, what: &str) {
    let text = match lang {
        crate::ui::text::Lang::En => format!("{what}: on the next page →"),
        crate::ui::text::Lang::Zh => format!("{what}：见下一页 →"),
    };
    ui.add_space(size * 0.5);
    ui.add(
        egui::Label::new(
            RichText::new(text)
                .size(crate::style::fit(size * 0.85))
                .color(style::muted(ui.visuals())),
        )
        .wrap(),
    );
}
