//! Horizontal bars that compare a few quantities on one linear scale, so that a ratio reads as a length.

use eframe::egui::{self, RichText, Ui};

use crate::style;

/// A titled pair of horizontal bars on one scale, each made of segments `(value, colour)`, its total
/// written after it by `show`.
pub fn compare_bars(
    ui: &mut Ui,
    size: f32,
    title_text: &str,
    rows: &[(&str, Vec<(f64, style::Rgba)>)],
    show: &dyn Fn(f64) -> String,
) {
    ui.add(egui::Label::new(RichText::new(title_text).strong().size(crate::style::fit(size))).wrap());
    let max = rows
        .iter()
        .map(|(_, segs)| segs.iter().map(|s| s.0).sum::<f64>())
        .fold(0.0, f64::max)
        .max(1e-12);
    let label_w = rows
        .iter()
        .map(|(name, _)| {
            ui.painter()
                .layout_no_wrap(
                    name.to_string(),
                    egui::FontId::proportional(crate::style::fit(size * 0.9)),
                    ui.visuals().text_color(),
                )
                .size()
                .x
        })
        .fold(0.0f32, f32::max);
    for (name, segs) in rows {
        ui.horizontal(|ui| {
            ui.add_sized(
                [label_w, size * 1.3],
                egui::Label::new(RichText::new(*name).size(crate::style::fit(size * 0.9))),
            );
            let w = (ui.available_width() - size * 6.0).max(20.0);
            let (r, _) = ui.allocate_exact_size(egui::vec2(w, size * 1.3), egui::Sense::hover());
            let mut x = r.min.x;
            for &(v, c) in segs {
                let seg_w = r.width() * (v / max) as f32;
                let seg = egui::Rect::from_min_size(egui::pos2(x, r.min.y), egui::vec2(seg_w, r.height()));
                ui.painter()
                    .rect_filled(seg.shrink2(egui::vec2(0.5, 0.0)), 2.0, style::c32(c));
                x += seg_w;
            }
            let total: f64 = segs.iter().map(|s| s.0).sum();
            ui.label(
                RichText::new(show(total))
                    .monospace()
                    .size(crate::style::fit(size * 0.9)),
            );
        });
    }
    ui.add_space(size * 0.3);
}
