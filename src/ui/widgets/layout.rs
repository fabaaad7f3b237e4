//! Fixed rectangles for views: a grid of them, and drawing into one without growing the parent.

use eframe::egui::{self, Ui};

/// Split `rect` into `n` view rectangles.
pub fn grid(rect: egui::Rect, n: usize) -> Vec<egui::Rect> {
    let n = n.max(1);
    let (cols, rows) = match n {
        1 => (1, 1),
        2 if rect.width() >= rect.height() * 1.1 => (2, 1),
        2 => (1, 2),
        3 if rect.width() >= rect.height() * 1.8 => (3, 1),
        3 | 4 => (2, 2),
        _ => (3, n.div_ceil(3)),
    };
    let gap = 8.0;
    let w = (rect.width() - gap * (cols - 1) as f32) / cols as f32;
    let h = (rect.height() - gap * (rows - 1) as f32) / rows as f32;
    (0..n)
        .map(|i| {
            let (c, r) = (i % cols, i / cols);
            let (c, w) = if n == 3 && cols == 2 && i == 2 {
                (0, rect.width())
            } else {
                (c, w)
            };
            egui::Rect::from_min_size(
                rect.min + egui::vec2(c as f32 * (w + gap), r as f32 * (h + gap)),
                egui::vec2(w, h),
            )
        })
        .collect()
}

/// Draw into a fixed rectangle, clipped, without growing the parent.
pub fn view_in(ui: &mut Ui, r: egui::Rect, f: impl FnOnce(&mut Ui)) {
    let mut child = ui.new_child(egui::UiBuilder::new().max_rect(r.shrink(2.0)));
    child.set_clip_rect(r.intersect(ui.clip_rect()));
    f(&mut child);
}
