//! Fixed rectangles for views: a grid of them, and drawing into one without growing the parent.

use eframe::egui::{self, Ui};

/// A lesson's fixed layout around its hero view `anchor` (lessons 5 and 7: the pool): in every step that
/// shows it, it takes the left half at full height, and the step's other views share the right half, one
/// row each, in their order; a step without it uses [`grid`]. So the pool never moves or changes size
/// from step to step.
pub fn anchored(rect: egui::Rect, views: &[&str], anchor: &str) -> Vec<egui::Rect> {
    let Some(a) = views.iter().position(|v| *v == anchor) else {
        return grid(rect, views.len());
    };
    if views.len() == 1 {
        return vec![rect];
    }
    let gap = 8.0;
    let w = (rect.width() - gap) / 2.0;
    let left = egui::Rect::from_min_size(rect.min, egui::vec2(w, rect.height()));
    let right = egui::Rect::from_min_max(egui::pos2(rect.min.x + w + gap, rect.min.y), rect.max);
    let n = views.len() - 1;
    let h = (right.height() - gap * (n - 1) as f32) / n as f32;
    let mut k = 0.0;
    (0..views.len())
        .map(|i| {
            if i == a {
                left
            } else {
                let r =
                    egui::Rect::from_min_size(right.min + egui::vec2(0.0, k * (h + gap)), egui::vec2(right.width(), h));
                k += 1.0;
                r
            }
        })
        .collect()
}

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
    // Widgets' own text (plot ticks, labels without a size) at this frame's text floor.
    raise_text_styles(&mut child, crate::style::text_floor());
    f(&mut child);
}

/// Lower every text style of `ui` to at most `size` points (content set smaller than the floor).
fn cap_text_styles(ui: &mut Ui, size: f32) {
    for font in ui.style_mut().text_styles.values_mut() {
        font.size = font.size.min(size);
    }
}

/// Raise every text style of `ui` to at least `floor` points.
pub fn raise_text_styles(ui: &mut Ui, floor: f32) {
    if floor > 0.0 {
        for font in ui.style_mut().text_styles.values_mut() {
            font.size = font.size.max(floor);
        }
    }
}

/// The key of what a [`fitted_height`] view draws: a hash of the values it depends on.
pub fn fit_key(what: impl std::hash::Hash) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    what.hash(&mut h);
    h.finish()
}

/// In the window (`style::views_may_scroll`), `content` at full size in a scroll area. In presentation
/// mode, draw `content` at a text size scaled (down to 0.4 of `size`) so that its height fits the height
/// available: a view whose text would run past the bottom of its rectangle (a projector at 1280×720) is
/// set smaller instead of cut. `key` names what is drawn (the step's data). For every new key, size and
/// rectangle the search starts again at full size: a frame that overflows gives an upper bound and a
/// first guess from the measured overflow, then three halvings between the largest scale that fitted
/// and the smallest that did not, and the largest that fitted is kept. So a frame depends on what it
/// shows and not on the frames before it, and the layout settles within five frames.
pub fn fitted_height(ui: &mut Ui, id: &str, key: u64, size: f32, content: impl FnOnce(&mut Ui, f32)) {
    if crate::style::views_may_scroll() {
        // The window: at full size, scrolling down when taller than the view.
        let area = egui::ScrollArea::vertical().id_salt(("fitted-height", id));
        crate::ui::layout::scroll(ui, area, |ui| content(ui, size));
        return;
    }
    #[derive(Clone, Copy)]
    struct Fit {
        stamp: u64,
        fits: f32,
        overflows: f32,
        cur: f32,
        halvings: u8,
    }
    let avail = ui.available_size();
    let state = egui::Id::unique(("fit-height", id));
    let stamp = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (key, avail.x.to_bits(), avail.y.to_bits(), size.to_bits()).hash(&mut h);
        h.finish()
    };
    let mut fit = ui
        .ctx()
        .data(|d| d.get_temp::<Fit>(state))
        .filter(|f| f.stamp == stamp)
        .unwrap_or(Fit {
            stamp,
            fits: 0.0,
            overflows: f32::INFINITY,
            cur: 1.0,
            halvings: 0,
        });
    let top = ui.cursor().top();
    let s = size * fit.cur;
    if fit.cur >= 1.0 {
        // Full size first, with the floor: a view's secondary text (`style::fit`) at the floor. Only a
        // view that overflows so is shrunk, under the floor (which the presentation check reports).
        content(ui, s);
    } else if crate::style::text_floor() > 0.0 {
        // Widgets' own text (a slider's value) shrinks with the content too.
        ui.scope(|ui| {
            cap_text_styles(ui, s);
            without_floor(|| content(ui, s))
        });
    } else {
        content(ui, s);
    }
    let used = ui.min_rect().bottom() - top;
    if used <= avail.y + 0.5 {
        fit.fits = fit.fits.max(fit.cur);
    } else {
        fit.overflows = fit.overflows.min(fit.cur);
    }
    let next = if fit.overflows.is_infinite() {
        fit.cur
    } else if fit.fits == 0.0 {
        if fit.cur <= 0.4 {
            0.4
        } else {
            (fit.cur * avail.y / used.max(1.0) * 0.97).clamp(0.4, fit.cur * 0.95)
        }
    } else if fit.halvings < 3 && fit.overflows - fit.fits > 0.02 {
        fit.halvings += 1;
        (fit.fits + fit.overflows) / 2.0
    } else {
        fit.fits
    };
    if next != fit.cur {
        fit.cur = next;
        ui.ctx().request_repaint();
    }
    ui.ctx().data_mut(|d| d.insert_temp(state, fit));
}

/// Run `f` with the text floor ([`crate::style::fit`]) lifted, and restore it after.
fn without_floor<R>(f: impl FnOnce() -> R) -> R {
    let floor = crate::style::text_floor();
    crate::style::set_text_floor(0.0);
    let r = f();
    crate::style::set_text_floor(floor);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool keeps one rectangle whatever the step shows beside it, and no two views overlap.
    #[test]
    fn the_anchor_view_keeps_its_place_and_size() {
        let canvas = egui::Rect::from_min_size(egui::pos2(10.0, 20.0), egui::vec2(1000.0, 600.0));
        let steps: [&[&str]; 4] = [
            &["pool", "stats"],
            &["occupancy", "pool"],
            &["events", "pool", "tables"],
            &["pool", "lists", "events"],
        ];
        let mut place = None;
        for views in steps {
            let rects = anchored(canvas, views, "pool");
            assert_eq!(rects.len(), views.len());
            let pool = rects[views.iter().position(|v| *v == "pool").unwrap()];
            assert_eq!(*place.get_or_insert(pool), pool, "{views:?}");
            for (i, a) in rects.iter().enumerate() {
                assert!(canvas.expand(0.01).contains_rect(*a), "{views:?}: {a:?}");
                for b in &rects[i + 1..] {
                    assert!(!a.intersects(*b), "{views:?}: {a:?} and {b:?}");
                }
            }
        }
        // Without the anchor, the grid.
        assert_eq!(anchored(canvas, &["check", "kernel"], "pool"), grid(canvas, 2));
    }
}
