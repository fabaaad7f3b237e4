//! The heatmap panel: a titled heatmap (the wgpu renderer in an egui paint callback) with its axes
//! (titles, ticks; `axes.rs`), numbers in cells large enough, its colorbar, row sums for probability
//! matrices and a hover line.
//!
//! How it works: a new result is swapped into a view within the frame's upload budget (so a 16-head
//! 1024² result arrives over a few frames instead of stalling one); until then the old data stays.
//! Colorbar ranges are cached per data generation, so frames never rescan the data.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ui::text::Slant as _;
use eframe::egui::{self, RichText, Ui};

use super::ViewCtx;
use super::axes::{self, Axes};
use crate::lesson_file::Highlight as StepHighlight;
use crate::render::colormap::Colormap;
use crate::render::egui_glue;
use crate::render::heatmap::{HeatmapData, HeatmapStyle, HeatmapView, Highlight};
use crate::ui::text::Lang;

/// What a heatmap's zoom and pan were made for: matrix rows and columns, widget width and height.
pub type HeatKey = (usize, usize, u32, u32);

/// Heatmap cells uploaded per frame at most when a new result arrives (4 × 1024²): a big result is
/// swapped in over a few frames instead of stalling one.
pub const UPLOAD_BUDGET: usize = 4 << 20;

/// The heatmaps' state across frames.
#[derive(Default)]
pub struct HeatState {
    /// Zoom/pan by view id, with the matrix and widget size it was made for.
    pub zoom: HashMap<u64, (HeatKey, Option<HeatmapView>)>,
    /// The data each view shows now (a new result is swapped in within the upload budget).
    pub shown: HashMap<u64, Arc<HeatmapData>>,
    /// Points the next heatmap leaves free below itself (for a line the caller adds).
    pub reserve_below: f32,
    /// The next heatmap shows each row's sum next to its colorbar (probability matrices), taken once.
    pub row_sums: bool,
    /// The next heatmap fills its room, its cells as wide and tall as that takes (a long, flat matrix
    /// such as channels × bytes would otherwise be a thin strip), taken once.
    pub stretch: bool,
    /// The next heatmap labels its token axes with these (a trained model's text), taken once.
    pub tokens: Option<Arc<Vec<String>>>,
    /// Cells that may still be uploaded this frame.
    pub upload_budget: usize,
    /// Finite value range per data generation (for colorbars), and whether it has masked (−∞) entries.
    pub ranges: HashMap<u64, (f32, f32, bool)>,
    /// Where each heatmap (by view id) was drawn in the last frame (tests read ticks against it).
    pub rects: HashMap<u64, egui::Rect>,
    /// The user switched the numbers in cells off.
    pub hide_numbers: bool,
    /// Row sums per data generation (computed once per result, not every frame).
    pub sums: HashMap<u64, Arc<Vec<f64>>>,
}

impl HeatState {
    /// Start a frame: `sync` frames (tests, headless renders) upload everything at once.
    pub fn begin_frame(&mut self, sync: bool) {
        self.upload_budget = if sync { usize::MAX } else { UPLOAD_BUDGET };
        if self.ranges.len() > 512 {
            self.ranges.clear();
        }
        if self.sums.len() > 512 {
            self.sums.clear();
        }
    }
}

/// A titled heatmap with axis titles and ticks, numbers in large cells, a colorbar and a hover line
/// (with the "masked" legend when the matrix has masked entries); returns the hovered cell.
#[allow(clippy::too_many_arguments)]
pub fn heat_panel(
    cx: &mut ViewCtx,
    ui: &mut Ui,
    id: u64,
    title: &str,
    data: &Arc<HeatmapData>,
    colormap: Colormap,
    range: Option<(f32, f32)>,
    highlight: Highlight,
    axes: Axes,
    hover: &dyn Fn((usize, usize)) -> String,
) -> Option<(usize, usize)> {
    let size = cx.size;
    let lang = cx.lang;
    let st = &mut cx.widgets.heat;
    ui.label(RichText::new(title).strong().size(size));
    // Swap a new result in within this frame's upload budget; until then the old one stays.
    let newest = data;
    let current = st.shown.get(&id).cloned();
    let data = match current {
        Some(c) if c.generation == newest.generation => c,
        current => {
            let cells = newest.rows * newest.cols;
            if st.upload_budget >= cells || st.upload_budget == UPLOAD_BUDGET {
                st.upload_budget = st.upload_budget.saturating_sub(cells);
                st.shown.insert(id, newest.clone());
                newest.clone()
            } else {
                ui.ctx().request_repaint();
                match current {
                    Some(c) => c,
                    None => {
                        ui.label(RichText::new(lang.t("loading…", "加载中…")).slant());
                        return None;
                    }
                }
            }
        }
    };
    let stale = data.generation != newest.generation;
    let data = &data;
    let avail = ui.available_size();
    let row_sums = std::mem::take(&mut st.row_sums);
    // Cell numbers and row sums at the frame's text floor (`style::fit`): cells too small for a number
    // at that size show none (hover shows it), rather than a number too small to read.
    let small = crate::style::fit(size * 0.8);
    let sums_w = if row_sums { 4.4 * small } else { 0.0 };
    let (tick_font, _) = axes::fonts(size);
    let (lo, hi, has_masked) = *st.ranges.entry(data.generation).or_insert_with(|| {
        let (lo, hi) = data.finite_range();
        (lo, hi, data.values.contains(&f32::NEG_INFINITY))
    });
    let range_shown = range.unwrap_or_else(|| {
        if colormap == Colormap::Diverging {
            let m = lo.abs().max(hi.abs()).max(1e-6);
            (-m, m)
        } else if hi > lo {
            (lo, hi)
        } else {
            (lo, lo + 1.0)
        }
    });
    // The colorbar: an 18-point bar, a 4-point gap and its widest tick label, measured.
    let label_w = (0..=4)
        .map(|k| {
            let v = range_shown.0 + k as f32 / 4.0 * (range_shown.1 - range_shown.0);
            let text = egui_glue::tick_label(v);
            let font = egui::FontId::proportional(tick_font.size);
            ui.painter()
                .layout_no_wrap(text, font, ui.visuals().text_color())
                .size()
                .x
        })
        .fold(0.0f32, f32::max);
    let colorbar_w = 18.0 + 4.0 + label_w + 4.0;
    let bar_w = 8.0 + colorbar_w + sums_w;
    let line = size + 8.0;
    let tokens = std::mem::take(&mut st.tokens);
    let token_axes = tokens.as_deref().map(|t| (t.as_slice(), axes));
    let (gutter_w, gutter_h) = axes::gutters(ui, data.rows, data.cols, size, token_axes);
    let spacing = ui.spacing().item_spacing;
    // Room the caller keeps below the heatmap (a check line), taken once.
    let below = std::mem::take(&mut st.reserve_below);
    let h = (avail.y - line - below - gutter_h - spacing.y).max(20.0);
    let w = (avail.x - bar_w - gutter_w).max(20.0);
    // Keep cells square when the matrix is small.
    let cell = (w / data.cols as f32).min(h / data.rows as f32);
    let (w, h) = if data.rows * data.cols <= 64 * 64 {
        (cell * data.cols as f32, cell * data.rows as f32)
    } else {
        (w, h)
    };
    let style = HeatmapStyle {
        colormap,
        range,
        grid: true,
        highlight,
    };
    let key = (data.rows, data.cols, w.round() as u32, h.round() as u32);
    let entry = st.zoom.entry(id).or_insert((key, None));
    if entry.0 != key {
        *entry = (key, None);
    }
    let mut view = entry.1;
    if std::mem::take(&mut st.stretch) && view.is_none() {
        view = Some(crate::render::heatmap::HeatmapView::fill(data.rows, data.cols, w, h));
    }
    let sums = row_sums.then(|| {
        st.sums
            .entry(data.generation)
            .or_insert_with(|| Arc::new(data.row_sums()))
            .clone()
    });
    let mut hovered = None;
    let mut heat_rect = egui::Rect::NOTHING;
    ui.horizontal(|ui| {
        // The row gutter (row title and tick labels); the item spacing after it is part of it.
        ui.allocate_exact_size(egui::vec2((gutter_w - spacing.x).max(0.0), h), egui::Sense::hover());
        let r = egui_glue::heatmap(ui, id, data, &mut view, &style, egui::vec2(w, h));
        hovered = r.hovered;
        heat_rect = r.response.rect;
        egui_glue::colorbar(
            ui,
            id ^ 0x5a5a,
            range_shown,
            colormap,
            egui::vec2(colorbar_w, h),
            tick_font.size,
        );
        if let (Some(sums), Some(v)) = (&sums, &view) {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(sums_w, h), egui::Sense::hover());
            draw_row_sums(ui, sums, v, heat_rect.min.y, rect, small, lang);
        }
    });
    // The column gutter (tick labels and column title).
    ui.allocate_exact_size(egui::vec2(gutter_w + w, gutter_h), egui::Sense::hover());
    if let Some(v) = &view {
        axes::draw_axes(
            ui,
            heat_rect,
            v,
            data,
            axes,
            lang,
            size,
            (gutter_w, gutter_h),
            tokens.as_deref().map(Vec::as_slice),
            highlight,
        );
        if !st.hide_numbers {
            axes::draw_cell_numbers(ui.painter(), heat_rect, v, data, colormap, range_shown, small, row_sums);
        }
    }
    st.rects.insert(id, heat_rect);
    if let Some(e) = st.zoom.get_mut(&id) {
        e.1 = view;
    }
    let text = match hovered {
        Some(_) if stale => lang.t("updating…", "更新中…").to_string(),
        Some(c) => hover(c),
        // Presentation mode: no interaction hints on the projector.
        None if cx.presentation => String::new(),
        // The whole hint where it fits on its line, else its first part, else none (never elided).
        None => {
            let font = egui::FontId::monospace(crate::style::fit(size * 0.85));
            let room = ui.available_width() - 2.0;
            [
                lang.t(
                    "hover: numbers · scroll: zoom · drag: pan",
                    "悬停看数值 · 滚轮缩放 · 拖动平移",
                ),
                lang.t("hover: numbers", "悬停看数值"),
            ]
            .into_iter()
            .find(|t| {
                let w = ui
                    .painter()
                    .layout_no_wrap(t.to_string(), font.clone(), ui.visuals().text_color())
                    .size()
                    .x;
                w <= room
            })
            .unwrap_or_default()
            .to_string()
        }
    };
    // Wrapped: the legend entry moves to its own line when the view is narrow; a hover line is elided.
    ui.horizontal_wrapped(|ui| {
        if has_masked {
            // Set smaller when the view is narrower than the legend.
            let lw = axes::masked_legend_width(ui.painter(), size, lang);
            let room = ui.available_width().min(ui.clip_rect().max.x - ui.cursor().min.x);
            let fit = crate::style::fit(size * (room.max(1.0) / (lw + 8.0)).min(1.0));
            let lw = axes::masked_legend_width(ui.painter(), fit, lang);
            let (rect, _) = ui.allocate_exact_size(egui::vec2(lw + 8.0, fit * 1.2), egui::Sense::hover());
            let color = ui.visuals().text_color();
            axes::masked_legend(ui.painter(), rect.min, fit, lang, color);
        }
        if !text.is_empty() {
            ui.add(egui::Label::new(RichText::new(text).size(crate::style::fit(size * 0.85)).monospace()).truncate());
        }
    });
    hovered
}

/// Each row's sum (`HeatmapData::row_sums` of the shown values) beside row `r`, following zoom and pan; when
/// the rows are too thin for a label, the range of the sums at the top instead.
fn draw_row_sums(ui: &Ui, sums: &[f64], view: &HeatmapView, top: f32, rect: egui::Rect, size: f32, lang: Lang) {
    let painter = ui.painter().with_clip_rect(rect);
    let color = ui.visuals().text_color();
    let font = egui::FontId::monospace(size);
    let row_px = 1.0 / view.cells_per_px.y.max(1e-6);
    if row_px >= size * 1.1 {
        for (r, s) in sums.iter().enumerate() {
            let y = top + view.px_of(glam::Vec2::new(0.0, r as f32 + 0.5)).y;
            if (rect.min.y..=rect.max.y).contains(&y) {
                painter.text(
                    egui::pos2(rect.min.x + 2.0, y),
                    egui::Align2::LEFT_CENTER,
                    format!("Σ{s:.3}"),
                    font.clone(),
                    color,
                );
            }
        }
    } else if let (Some(lo), Some(hi)) = (
        sums.iter().copied().reduce(f64::min),
        sums.iter().copied().reduce(f64::max),
    ) {
        // The range on three lines where they fit, else on one ("Σ 1.000" when all rows agree), else none.
        let one = if hi - lo < 5e-4 {
            format!("Σ{lo:.3}")
        } else {
            format!("Σ{lo:.2}…{hi:.2}")
        };
        for text in [format!("Σ {}\n{lo:.3}\n…{hi:.3}", lang.t("rows", "各行")), one] {
            let g = painter.layout_no_wrap(text, font.clone(), color);
            if g.size().x <= rect.width() - 2.0 && g.size().y <= rect.height() {
                painter.galley(rect.left_top() + egui::vec2(2.0, 0.0), g, color);
                break;
            }
        }
    }
}

/// The renderer highlight of a step's `highlight` on a `rows × cols` matrix (negative = from the end).
pub fn step_highlight(hl: Option<&StepHighlight>, rows: usize, cols: usize) -> Highlight {
    let row = hl.and_then(|h| h.row).map(|r| if r < 0 { rows as i64 + r } else { r });
    let col = hl.and_then(|h| h.col).map(|c| if c < 0 { cols as i64 + c } else { c });
    let ok = |v: i64, n: usize| v >= 0 && (v as usize) < n;
    match (row, col) {
        (Some(r), Some(c)) if ok(r, rows) && ok(c, cols) => Highlight::Cell(r as usize, c as usize),
        (Some(r), _) if ok(r, rows) => Highlight::Row(r as usize),
        (_, Some(c)) if ok(c, cols) => Highlight::Col(c as usize),
        _ => Highlight::None,
    }
}
