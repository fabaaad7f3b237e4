//! What a heatmap says about itself: axis titles, tick labels that follow zoom and pan, the numbers
//! inside cells large enough to hold them, and the "masked" legend.
//!
//! How it works: everything here is drawn by egui's painter around (and over) the heatmap's paint
//! callback, so it is crisp at any zoom, localised, and part of every PNG the app saves. Positions come
//! from the same [`HeatmapView`] the renderer draws with, so a tick sits at its cell's centre.

use eframe::egui::{self, Color32, FontId, Painter, Rect, Ui};
use glam::Vec2;

use crate::render::colormap::{Colormap, lut_color, lut_index};
use crate::render::heatmap::{HeatmapData, HeatmapView, Highlight, MASK_COLOR};
use crate::style;
use crate::ui::text::Lang;

/// What a heatmap's rows and columns are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    /// Scores, probabilities, masks: rows are queries i, columns keys j.
    QueryKey,
    /// Embeddings and projections: rows are tokens, columns dimensions.
    TokenDim,
    /// Outputs: rows are queries i, columns dimensions.
    QueryDim,
    /// Weight matrices: rows are input dimensions, columns output dimensions.
    InOut,
    /// One row per head, columns keys j (a decode step's attention over the cache).
    HeadKey,
    /// One row per result being compared (lesson 6's partitions and their merge), columns dimensions.
    ResultDim,
    /// One row per (layer, KV head), columns dimensions (lesson 4's K/V rows written by a step).
    LayerHeadDim,
    /// One row per dimension (channel), columns the tokens of a text (lesson 10's error along the text).
    DimToken,
    /// One row per dimension (channel), columns (layer, KV head) (lesson 10's real-model channel maxima).
    DimLayerHead,
}

impl Axes {
    /// The row and column titles in `lang`.
    pub fn titles(self, lang: Lang) -> (&'static str, &'static str) {
        match self {
            Axes::QueryKey => (lang.t("query i", "查询 i"), lang.t("key j", "键 j")),
            Axes::TokenDim => (lang.t("token", "token"), lang.t("dim", "维度")),
            Axes::QueryDim => (lang.t("query i", "查询 i"), lang.t("dim", "维度")),
            Axes::InOut => (lang.t("input dim", "输入维度"), lang.t("output dim", "输出维度")),
            Axes::HeadKey => (lang.t("head", "头"), lang.t("key j", "键 j")),
            Axes::ResultDim => (lang.t("result", "结果"), lang.t("dim", "维度")),
            Axes::LayerHeadDim => (lang.t("layer·KV head", "层·KV 头"), lang.t("dim", "维度")),
            Axes::DimToken => (lang.t("dim", "维度"), lang.t("token", "token")),
            Axes::DimLayerHead => (lang.t("dim", "维度"), lang.t("layer·KV head", "层·KV 头")),
        }
    }
}

impl Axes {
    /// Whether the rows and the columns are tokens (so that a text's characters can label them).
    pub fn token_axes(self) -> (bool, bool) {
        match self {
            Axes::QueryKey => (true, true),
            Axes::TokenDim | Axes::QueryDim | Axes::ResultDim => (true, false),
            _ => (false, false),
        }
    }
}

/// How wide a tick label is, in digit widths (a CJK character is two).
fn label_width(s: &str) -> usize {
    s.chars().map(|c| if c as u32 >= 0x2e80 { 2 } else { 1 }).sum()
}

/// The tick spacing, in cells: the smallest of 1, 2, 5, 10, 20, 50, … whose ticks are at least
/// `label_px` apart when one cell is `cell_px` wide.
pub fn tick_step(cell_px: f32, label_px: f32) -> usize {
    // A step no axis reaches, and that the decades below cannot overflow (wasm32's usize is 32 bits).
    const LAST: usize = 1 << if usize::BITS >= 64 { 40 } else { 28 };
    let mut base = 1usize;
    loop {
        for m in [1, 2, 5] {
            let s = base * m;
            if s as f32 * cell_px >= label_px || s >= LAST {
                return s;
            }
        }
        base *= 10;
    }
}

/// The ticks along one axis of `n` cells: `(index, pixel of the cell's centre)` for every index that
/// is a multiple of the step and whose centre lies within `0..=extent` pixels (relative to the
/// heatmap's rectangle). `origin` and `cells_per_px` are the view's along this axis.
pub fn ticks(n: usize, origin: f32, cells_per_px: f32, extent: f32, label_px: f32) -> Vec<(usize, f32)> {
    if n == 0 || cells_per_px.is_nan() || cells_per_px <= 0.0 {
        return Vec::new();
    }
    let cell_px = 1.0 / cells_per_px;
    let step = tick_step(cell_px, label_px);
    let first = (origin.max(0.0) as usize) / step * step;
    let last = ((origin + extent * cells_per_px).max(0.0) as usize).min(n - 1);
    (first..=last)
        .step_by(step)
        .map(|i| (i, (i as f32 + 0.5 - origin) * cell_px))
        .filter(|&(_, p)| (-0.5..=extent + 0.5).contains(&p))
        .collect()
}

/// How wide the row gutter and how tall the column gutter are for a `rows × cols` matrix at text
/// size `size`: the rotated row title, the widest row label and a tick mark; the column labels, a
/// tick mark and the column title.
/// With `tokens` (a label per token, for the axes [`Axes::token_axes`] says are tokens), the row
/// gutter also holds the widest token and the column gutter a second line of labels.
pub fn gutters(ui: &Ui, rows: usize, cols: usize, size: f32, tokens: Option<(&[String], Axes)>) -> (f32, f32) {
    let (tick, title) = fonts(size);
    let (tok_rows, tok_cols) = tokens.map_or((false, false), |(_, a)| a.token_axes());
    let tok_w = tokens
        .filter(|_| tok_rows)
        .map_or(0, |(t, _)| t.iter().map(|s| label_width(s)).max().unwrap_or(0) + 1);
    let digits = (rows.max(1) - 1)
        .to_string()
        .len()
        .max((cols.max(1) - 1).to_string().len())
        + tok_w;
    let char_w = ui
        .painter()
        .layout_no_wrap("0".into(), tick.clone(), ui.visuals().text_color())
        .size()
        .x;
    let title_h = title.size * 1.25;
    let tick_h = tick.size * 1.25;
    let col_lines = if tok_cols { 2.0 } else { 1.0 };
    (
        title_h + 4.0 + digits as f32 * char_w + TICK_LEN + 3.0,
        TICK_LEN + col_lines * tick_h + title_h + 2.0,
    )
}

/// Length of a tick mark in points.
pub const TICK_LEN: f32 = 4.0;

/// The tick and title fonts at text size `size`.
pub fn fonts(size: f32) -> (FontId, FontId) {
    (
        FontId::monospace(crate::style::fit(size * 0.75)),
        FontId::proportional(crate::style::fit(size * 0.8)),
    )
}

/// Draw the axis titles, tick marks and tick labels around `heat` (the heatmap's rectangle), in the
/// gutters left of it (rows) and below it (columns), sized by [`gutters`].
#[allow(clippy::too_many_arguments)]
pub fn draw_axes(
    ui: &Ui,
    heat: Rect,
    view: &HeatmapView,
    data: &HeatmapData,
    axes: Axes,
    lang: Lang,
    size: f32,
    (gutter_w, gutter_h): (f32, f32),
    tokens: Option<&[String]>,
    highlight: Highlight,
) {
    let (hl_row, hl_col) = match highlight {
        Highlight::None => (None, None),
        Highlight::Row(r) => (Some(r), None),
        Highlight::Col(c) => (None, Some(c)),
        Highlight::Cell(r, c) => (Some(r), Some(c)),
    };
    let (tok_rows, tok_cols) = if tokens.is_some() {
        axes.token_axes()
    } else {
        (false, false)
    };
    let token = |i: usize| tokens.and_then(|t| t.get(i)).map_or("", String::as_str);
    let (tick_font, title_font) = fonts(size);
    let color = ui.visuals().text_color();
    let area = Rect::from_min_max(
        egui::pos2(heat.min.x - gutter_w, heat.min.y),
        egui::pos2(heat.max.x, heat.max.y + gutter_h),
    );
    let painter = ui.painter().with_clip_rect(area.intersect(ui.clip_rect()));
    let label_h = tick_font.size * 1.3;
    let char_w = painter.layout_no_wrap("0".into(), tick_font.clone(), color).size().x;
    let (row_title, col_title) = axes.titles(lang);
    // The highlighted row and column (the grammar's "current") get a bold tick in the highlight
    // colour and always their label; the regular labels that would collide with it are left out.
    let centre = |i: usize, origin: f32, cpp: f32| (i as f32 + 0.5 - origin) / cpp;
    let hl_y = hl_row
        .filter(|&r| r < data.rows)
        .map(|r| centre(r, view.origin.y, view.cells_per_px.y))
        .filter(|y| (-0.5..=heat.height() + 0.5).contains(y));
    let mut row_ticks = ticks(data.rows, view.origin.y, view.cells_per_px.y, heat.height(), label_h);
    if let (Some(r), Some(hy)) = (hl_row, hl_y) {
        row_ticks.retain(|&(_, y)| (y - hy).abs() >= label_h);
        row_ticks.push((r, hy));
    }
    // Rows: a tick mark and the index, right-aligned against the heatmap.
    for (i, y) in row_ticks {
        let y = heat.min.y + y;
        let bold = hl_row == Some(i);
        painter.line_segment(
            [egui::pos2(heat.min.x - TICK_LEN, y), egui::pos2(heat.min.x - 1.0, y)],
            if bold {
                egui::Stroke::new(4.0, style::CURRENT_32)
            } else {
                egui::Stroke::new(1.0, color)
            },
        );
        let text = if tok_rows && axes == Axes::ResultDim {
            token(i).to_string()
        } else if tok_rows {
            format!("{} {i}", token(i))
        } else {
            i.to_string()
        };
        // A label stays inside the axes' area: the first row's label is moved down, not cut.
        let g = painter.layout_no_wrap(text, tick_font.clone(), color);
        let half = g.size().y / 2.0;
        let cy = y.max(area.min.y + half);
        painter.galley(
            egui::pos2(heat.min.x - TICK_LEN - 2.0 - g.size().x, cy - half),
            g,
            color,
        );
    }
    // Columns: the widest label decides the spacing.
    let col_label_w = char_w * ((data.cols.max(1) - 1).to_string().len() as f32 + 1.5);
    let hl_x = hl_col
        .filter(|&c| c < data.cols)
        .map(|c| centre(c, view.origin.x, view.cells_per_px.x))
        .filter(|x| (-0.5..=heat.width() + 0.5).contains(x));
    let mut col_ticks = ticks(data.cols, view.origin.x, view.cells_per_px.x, heat.width(), col_label_w);
    if let (Some(c), Some(hx)) = (hl_col, hl_x) {
        col_ticks.retain(|&(_, x)| (x - hx).abs() >= col_label_w);
        col_ticks.push((c, hx));
    }
    for (j, x) in col_ticks {
        let x = heat.min.x + x;
        let bold = hl_col == Some(j);
        painter.line_segment(
            [egui::pos2(x, heat.max.y + 1.0), egui::pos2(x, heat.max.y + TICK_LEN)],
            if bold {
                egui::Stroke::new(4.0, style::CURRENT_32)
            } else {
                egui::Stroke::new(1.0, color)
            },
        );
        // Labels stay inside the axes' area: the last column's label is moved left, not cut.
        let centred = |g: &std::sync::Arc<egui::Galley>| {
            let half = g.size().x / 2.0;
            x.clamp(area.min.x + half, (area.max.x - half).max(area.min.x + half)) - half
        };
        let g = painter.layout_no_wrap(j.to_string(), tick_font.clone(), color);
        painter.galley(egui::pos2(centred(&g), heat.max.y + TICK_LEN + 1.0), g, color);
        if tok_cols {
            let g = painter.layout_no_wrap(token(j).to_string(), tick_font.clone(), color);
            painter.galley(egui::pos2(centred(&g), heat.max.y + TICK_LEN + 1.0 + label_h), g, color);
        }
    }
    // Titles: the column title under the labels (set smaller when wider than the area, and kept inside
    // it), the row title turned to read upwards. A title that would be set under the frame's text floor
    // is left out (the panel's title names the matrix; a 7-pixel axis title is not read).
    let smaller = |fraction: f32| {
        let size = title_font.size * fraction.min(1.0);
        (size + 0.5 >= crate::style::text_floor()).then(|| FontId::new(size, title_font.family.clone()))
    };
    let g = painter.layout_no_wrap(col_title.to_string(), title_font.clone(), color);
    let g = if g.size().x > area.width() {
        smaller(area.width() / g.size().x).map(|f| painter.layout_no_wrap(col_title.to_string(), f, color))
    } else {
        Some(g)
    };
    if let Some(g) = g {
        let half = g.size().x / 2.0;
        let cx = heat
            .center()
            .x
            .clamp(area.min.x + half, (area.max.x - half).max(area.min.x + half));
        painter.galley(egui::pos2(cx - half, heat.max.y + gutter_h - g.size().y), g, color);
    }
    let room = heat.height().max(1.0);
    // A Chinese row title is set upright, one character under the other, as CJK is set in a column
    // (a sideways CJK title makes the reader tilt their head); it is set smaller when taller than the rows.
    if row_title.chars().any(|c| c as u32 >= 0x2e80) {
        let column: String = row_title
            .split_whitespace()
            .flat_map(|w| w.chars())
            .map(String::from)
            .collect::<Vec<_>>()
            .join("\n");
        let mut g = painter.layout_no_wrap(column.clone(), title_font.clone(), color);
        if g.size().y > room {
            let Some(f) = smaller(room / g.size().y) else { return };
            g = painter.layout_no_wrap(column, f, color);
        }
        let y = (heat.center().y - g.size().y / 2.0).max(heat.min.y);
        painter.galley(egui::pos2(heat.min.x - gutter_w, y), g, color);
        return;
    }
    // The row title reads upwards beside the rows; one longer than the rows are tall is set smaller.
    let mut galley = painter.layout_no_wrap(row_title.to_string(), title_font.clone(), color);
    if galley.size().x > room {
        let Some(f) = smaller(room / galley.size().x) else {
            return;
        };
        galley = painter.layout_no_wrap(row_title.to_string(), f, color);
    }
    let pos = egui::pos2(
        heat.min.x - gutter_w,
        (heat.center().y + galley.size().x / 2.0).min(heat.max.y),
    );
    painter.add(egui::epaint::TextShape::new(pos, galley, color).with_angle(-std::f32::consts::FRAC_PI_2));
}

/// A value formatted to fit `chars` characters (see the order below), or nothing when not even the
/// value rounded to one decimal fits. Masked entries (−∞) read "−∞" in a score matrix and nothing in a probability matrix
/// (`probs`), where the hatching and the legend say p = 0.
pub fn cell_text(v: f32, chars: usize, probs: bool) -> Option<String> {
    let fits = |s: String| (s.chars().count() <= chars).then_some(s);
    if v == f32::NEG_INFINITY {
        return if probs { None } else { fits("−∞".into()) };
    }
    if v.is_nan() {
        return fits("NaN".into());
    }
    // The most decimals that fit and still show a nonzero digit ("0.000" would hide 2e-5); then
    // without the leading zero (".034"), the integer part, scientific, and last the value rounded to
    // one decimal even if that reads 0.0.
    let nonzero = |s: &str| v == 0.0 || s.chars().any(|c| ('1'..='9').contains(&c));
    let mut candidates = Vec::new();
    for decimals in [3, 2, 1] {
        candidates.push(format!("{v:.decimals$}"));
    }
    if v.abs() < 1.0 {
        for decimals in [3, 2, 1] {
            candidates.push(format!("{v:.decimals$}").replacen("0.", ".", 1));
        }
    }
    if v.abs() >= 1.0 && v.abs() < 1e4 {
        candidates.push(format!("{v:.0}"));
    }
    candidates.push(format!("{v:.0e}"));
    candidates
        .into_iter()
        .find(|s| nonzero(s) && s.chars().count() <= chars)
        .or_else(|| fits(format!("{v:.1}")))
}

/// Black or white, whichever reads better on `bg` (relative luminance of the sRGB colour).
pub fn text_on(bg: [u8; 4]) -> Color32 {
    style::ink_on(bg)
}

/// The colour the renderer gives value `v` (the LUT entry the shader picks; the hatching's base
/// grey for masked entries).
pub fn cell_color(v: f32, colormap: Colormap, (lo, hi): (f32, f32)) -> [u8; 4] {
    if v == f32::NEG_INFINITY || v.is_nan() {
        return MASK_COLOR;
    }
    lut_color(colormap, lut_index(v, lo, hi))
}

/// Cells narrower than this many points get no number.
pub const MIN_CELL_CHARS: usize = 3;

/// Write each visible cell's value inside it when the cells are large enough for a number at
/// `font_size`, in black or white for contrast (`probs`: a probability matrix, see [`cell_text`]).
/// Returns whether numbers were drawn.
#[allow(clippy::too_many_arguments)]
pub fn draw_cell_numbers(
    painter: &Painter,
    heat: Rect,
    view: &HeatmapView,
    data: &HeatmapData,
    colormap: Colormap,
    range: (f32, f32),
    font_size: f32,
    probs: bool,
) -> bool {
    let cell = Vec2::ONE / view.cells_per_px.max(Vec2::splat(1e-6));
    let font = FontId::monospace(font_size);
    let char_w = painter
        .layout_no_wrap("0".into(), font.clone(), style::c32(style::LABEL))
        .size()
        .x;
    let chars = ((cell.x - 4.0) / char_w).floor().max(0.0) as usize;
    if chars < MIN_CELL_CHARS || cell.y < font_size * 1.15 {
        return false;
    }
    let painter = painter.with_clip_rect(heat.intersect(painter.clip_rect()));
    let c0 = view.origin.max(Vec2::ZERO);
    let c1 = view.cell_at(Vec2::new(heat.width(), heat.height()));
    let (r0, r1) = (c0.y as usize, (c1.y.ceil().max(0.0) as usize).min(data.rows));
    let (k0, k1) = (c0.x as usize, (c1.x.ceil().max(0.0) as usize).min(data.cols));
    // Every visible cell's number, or none: a blank cell among numbers would read as a missing value
    // (masked cells of a probability matrix are blank by design, hatched).
    let mut texts = Vec::with_capacity((r1 - r0) * (k1 - k0));
    for r in r0..r1 {
        for c in k0..k1 {
            let v = data.values[r * data.cols + c];
            match cell_text(v, chars, probs) {
                Some(t) => texts.push((r, c, v, t)),
                None if probs && v == f32::NEG_INFINITY => {}
                None => return false,
            }
        }
    }
    for (r, c, v, text) in texts {
        let p = view.px_of(Vec2::new(c as f32 + 0.5, r as f32 + 0.5));
        painter.text(
            heat.min + egui::vec2(p.x, p.y),
            egui::Align2::CENTER_CENTER,
            text,
            font.clone(),
            text_on(cell_color(v, colormap, range)),
        );
    }
    true
}

/// The masked-legend text at text size `size`.
fn masked_legend_text(painter: &Painter, size: f32, lang: Lang, color: Color32) -> std::sync::Arc<egui::Galley> {
    let text = lang.t("masked (score −∞, p = 0)", "被掩码（分数 −∞，p = 0）");
    painter.layout_no_wrap(text.into(), FontId::proportional(crate::style::fit(size * 0.85)), color)
}

/// The width [`masked_legend`] takes at text size `size`.
pub fn masked_legend_width(painter: &Painter, size: f32, lang: Lang) -> f32 {
    size * 0.9
        + 6.0
        + masked_legend_text(painter, size, lang, style::c32(style::MASKED))
            .size()
            .x
}

/// A hatched swatch like the renderer's masked cells and what it means, at `pos` ([`masked_legend_width`]
/// wide).
pub fn masked_legend(painter: &Painter, pos: egui::Pos2, size: f32, lang: Lang, color: Color32) {
    let s = size * 0.9;
    let swatch = Rect::from_min_size(pos + egui::vec2(0.0, (size * 1.2 - s) / 2.0), egui::vec2(s, s));
    let grey = style::c32(MASK_COLOR);
    painter.rect_filled(swatch, 0.0, grey);
    let dark = style::c32(style::MASKED_HATCH);
    let clip = painter.with_clip_rect(swatch);
    let mut k = -s;
    while k < s {
        clip.line_segment(
            [
                swatch.left_bottom() + egui::vec2(k, 0.0),
                swatch.left_bottom() + egui::vec2(k + s, -s),
            ],
            egui::Stroke::new(s / 8.0, dark),
        );
        k += s / 3.0;
    }
    let galley = masked_legend_text(painter, size, lang, color);
    painter.galley(
        swatch.right_top() + egui::vec2(6.0, (s - galley.size().y) / 2.0),
        galley,
        color,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_grow_1_2_5() {
        assert_eq!(tick_step(40.0, 12.0), 1);
        assert_eq!(tick_step(8.0, 12.0), 2);
        assert_eq!(tick_step(3.0, 12.0), 5);
        assert_eq!(tick_step(1.0, 12.0), 20);
        assert_eq!(tick_step(0.1, 12.0), 200);
    }

    #[test]
    fn ticks_sit_at_cell_centres_and_follow_the_view() {
        // 8 cells of 10 px from cell 0.
        let t = ticks(8, 0.0, 0.1, 80.0, 9.0);
        assert_eq!(t.len(), 8);
        assert_eq!(t[0], (0, 5.0));
        assert_eq!(t[7], (7, 75.0));
        // Panned by 3 cells: the first visible tick is cell 3 at 5 px.
        let t = ticks(8, 3.0, 0.1, 50.0, 9.0);
        assert_eq!(t.first().copied(), Some((3, 5.0)));
        assert_eq!(t.last().copied(), Some((7, 45.0)));
        // 1000 cells in 100 px: every 100th... at 10 px per label, step 100.
        let t = ticks(1000, 0.0, 10.0, 100.0, 10.0);
        assert!(t.iter().all(|(i, _)| i % 100 == 0), "{t:?}");
        assert_eq!(t.len(), 10);
    }

    #[test]
    fn cell_text_fits_its_width() {
        assert_eq!(cell_text(0.12345, 6, false).as_deref(), Some("0.123"));
        assert_eq!(cell_text(-0.12345, 5, false).as_deref(), Some("-0.12"));
        assert_eq!(cell_text(0.12345, 3, false).as_deref(), Some("0.1"));
        assert_eq!(cell_text(f32::NEG_INFINITY, 3, false).as_deref(), Some("−∞"));
        assert_eq!(cell_text(f32::NEG_INFINITY, 3, true), None);
        assert_eq!(cell_text(0.0, 3, false).as_deref(), Some("0.0"));
        // A tiny nonzero value is not shown as 0.000.
        assert_eq!(cell_text(0.00002, 5, false).as_deref(), Some("2e-5"));
        assert_eq!(cell_text(1234.4, 4, false).as_deref(), Some("1234"));
        assert_eq!(cell_text(-1234.5, 3, false), None);
        // Small values in narrow cells drop the leading zero, then round.
        assert_eq!(cell_text(-0.034, 4, false).as_deref(), Some("-.03"));
        assert_eq!(cell_text(0.0042, 4, false).as_deref(), Some(".004"));
        assert_eq!(cell_text(-0.004, 4, false).as_deref(), Some("-0.0"));
        for chars in 1..10 {
            for v in [0.5f32, -3.25, 1e-7, 42.0, -1e9] {
                if let Some(s) = cell_text(v, chars, false) {
                    assert!(s.chars().count() <= chars, "{v} in {chars}: {s}");
                }
            }
        }
    }

    #[test]
    fn text_contrasts_with_the_colormap() {
        // Viridis: dark purple at 0 wants white text, yellow at 1 wants black.
        assert_eq!(
            text_on(cell_color(0.0, Colormap::Sequential, (0.0, 1.0))),
            Color32::WHITE
        );
        assert_eq!(
            text_on(cell_color(1.0, Colormap::Sequential, (0.0, 1.0))),
            Color32::BLACK
        );
        // The diverging map is near white at 0.
        assert_eq!(
            text_on(cell_color(0.0, Colormap::Diverging, (-1.0, 1.0))),
            Color32::BLACK
        );
    }
}
