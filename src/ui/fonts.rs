//! Fonts: egui's default fonts for Latin text, plus the bundled CJK subset (`assets/fonts`,
//! SIL OFL 1.1) as a fallback, so Chinese renders on machines without CJK system fonts.

use std::sync::Arc;

use eframe::egui::{self, FontData, FontDefinitions, FontFamily};

/// The bundled simplified-Chinese subset (see `scripts/make-cjk-subset.sh`).
pub const CJK_FONT: &[u8] = include_bytes!("../../assets/fonts/kvscope-sans-sc.otf");

/// egui's default fonts with the CJK subset appended as a fallback to both families.
pub fn definitions() -> FontDefinitions {
    let mut fonts = FontDefinitions::default();
    fonts
        .font_data
        .insert("kvscope-sans-sc".into(), Arc::new(FontData::from_static(CJK_FONT)));
    for family in [FontFamily::Proportional, FontFamily::Monospace] {
        fonts.families.entry(family).or_default().push("kvscope-sans-sc".into());
    }
    fonts
}

/// Install [`definitions`] into `ctx`.
pub fn install(ctx: &egui::Context) {
    ctx.set_fonts(definitions());
}
