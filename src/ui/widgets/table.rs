//! A table that stays at the text floor: laid out from its cells' measured sizes, split into parts
//! when its columns do not fit the width (each part repeats the key columns), and paged by rows when it
//! does not fit the height in presentation mode. It replaces grids that were scaled down to fit (issue
//! #56: a table is never set under the floor; a long one splits or pages).
//!
//! How it works: every cell is laid out once at the table's size. If the columns fit side by side the
//! table is one grid; otherwise the non-key columns are packed greedily into parts, each drawn under
//! the previous one with the key columns first. A column wider than a part's room wraps. In
//! presentation mode (`style::views_may_scroll` false) rows that do not fit under the parts already
//! drawn go onto further pages, spread evenly, and a "rows a–b of n →" line says so; the presenter's
//! keys step through them (`style::view_page`) and the narration's foot counts them with its own pages.

use eframe::egui::{self, Color32, FontId, Ui};

use crate::ui::text::Lang;

/// One cell's text and look.
#[derive(Clone, Debug)]
pub struct Cell {
    pub text: String,
    pub mono: bool,
    pub color: Option<Color32>,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            mono: false,
            color: None,
        }
    }
    /// In the monospace font (numbers, hashes, code).
    pub fn mono(mut self) -> Self {
        self.mono = true;
        self
    }
    pub fn color(mut self, c: Color32) -> Self {
        self.color = Some(c);
        self
    }
    /// `color` when `on`.
    pub fn color_if(self, on: bool, c: Color32) -> Self {
        if on { self.color(c) } else { self }
    }
}

impl<S: Into<String>> From<S> for Cell {
    fn from(s: S) -> Self {
        Cell::new(s)
    }
}

/// A table: a header row and rows of cells. The first `keys` columns name a row and are repeated in
/// every part when the table splits.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<Cell>,
    pub rows: Vec<Vec<Cell>>,
    pub keys: usize,
    /// Rows to draw in the strong colour with a marker (the one the step is about).
    pub marked: Vec<usize>,
    /// Lines of text (at the table's size) the view draws under the table: presentation mode's pages
    /// leave room for them.
    pub below: f32,
}

impl Table {
    pub fn new(header: impl IntoIterator<Item = impl Into<Cell>>) -> Self {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            keys: 1,
            marked: Vec::new(),
            below: 0.0,
        }
    }
    /// Leave room for `lines` lines of text under the table when it pages.
    pub fn below(mut self, lines: f32) -> Self {
        self.below = lines;
        self
    }
    pub fn row(&mut self, cells: impl IntoIterator<Item = impl Into<Cell>>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }
    fn cols(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0)
    }
}

/// The column groups a table of natural column widths `widths` splits into within `room`: each group
/// lists its non-key columns; the keys (`widths[..keys]`) come first in every group. A group holds at
/// least one column, even one wider than the room (it wraps).
pub fn split_columns(widths: &[f32], keys: usize, gap: f32, room: f32) -> Vec<Vec<usize>> {
    let keys = keys.min(widths.len());
    let key_w: f32 = widths[..keys].iter().map(|w| w + gap).sum();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut used = key_w;
    for (c, &w) in widths.iter().enumerate().skip(keys) {
        if !cur.is_empty() && used + w > room {
            groups.push(std::mem::take(&mut cur));
            used = key_w;
        }
        cur.push(c);
        used += w + gap;
    }
    if !cur.is_empty() || groups.is_empty() {
        groups.push(cur);
    }
    groups
}

/// Draw `t` at text size `size` (raised to the floor) in the width available.
pub fn table(ui: &mut Ui, lang: Lang, size: f32, t: &Table) {
    let s = crate::style::fit(size);
    let cols = t.cols();
    if cols == 0 {
        return;
    }
    let keys = t.keys.min(cols.saturating_sub(1));
    let gap = (s * 0.9).round();
    let pad_y = (s * 0.18).round();
    let room = ui.available_width().max(40.0);
    let vis = ui.visuals().clone();
    let strong = vis.strong_text_color();
    let text = vis.text_color();
    let font = |c: &Cell| {
        if c.mono {
            FontId::monospace(s)
        } else {
            FontId::proportional(s)
        }
    };
    let color = |c: &Cell, header: bool| c.color.unwrap_or(if header { strong } else { text });
    let empty = Cell::new("");
    let cell = |r: Option<usize>, c: usize| -> &Cell {
        match r {
            None => t.header.get(c).unwrap_or(&empty),
            Some(r) => t.rows[r].get(c).unwrap_or(&empty),
        }
    };
    // The header row (None) when there is one, then the rows.
    let ids: Vec<Option<usize>> = (!t.header.is_empty())
        .then_some(None)
        .into_iter()
        .chain((0..t.rows.len()).map(Some))
        .collect();
    // Natural widths, unwrapped.
    let mut widths = vec![0.0f32; cols];
    let painter = ui.painter().clone();
    for r in ids.iter().copied() {
        for (c, w) in widths.iter_mut().enumerate() {
            let x = cell(r, c);
            if !x.text.is_empty() {
                let g = painter.layout_no_wrap(x.text.clone(), font(x), Color32::PLACEHOLDER);
                *w = w.max(g.size().x);
            }
        }
    }
    let groups = split_columns(&widths, keys, gap, room);
    // Pages: in presentation mode rows past the room left go onto the next page.
    let paged = !crate::style::views_may_scroll();
    let top = ui.cursor().top();
    let bottom = ui.max_rect().bottom().min(ui.clip_rect().bottom());
    // Lay out every part's rows (wrapping columns wider than the part's share of the room).
    struct Part {
        widths: Vec<f32>,
        rows: Vec<(Option<usize>, Vec<std::sync::Arc<egui::Galley>>, f32)>,
    }
    let mut parts: Vec<Part> = Vec::new();
    for g in &groups {
        let cs: Vec<usize> = (0..keys).chain(g.iter().copied()).collect();
        let mut ws: Vec<f32> = cs.iter().map(|&c| widths[c]).collect();
        let total: f32 = ws.iter().sum::<f32>() + gap * (ws.len().saturating_sub(1)) as f32;
        if total > room {
            // Shrink the widest columns to share what is left (they wrap).
            let mut excess = total - room;
            while excess > 0.5 {
                let (i, &w) = ws
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .expect("a part has a column");
                let second = ws.iter().copied().filter(|&x| x < w).fold(0.0f32, f32::max);
                let cut = (w - second).min(excess).max(0.5);
                if w - cut < s * 3.0 {
                    break;
                }
                ws[i] = w - cut;
                excess -= cut;
            }
        }
        let mut rows = Vec::new();
        for r in ids.iter().copied() {
            let mut gs = Vec::new();
            let mut h = s;
            for (k, &c) in cs.iter().enumerate() {
                let x = cell(r, c);
                let g = painter.layout(x.text.clone(), font(x), color(x, r.is_none()), ws[k] + 0.5);
                h = h.max(g.size().y);
                gs.push(g);
            }
            rows.push((r, gs, h + 2.0 * pad_y));
        }
        parts.push(Part { widths: ws, rows });
    }
    // Paging: every part shows the same rows; a page holds the rows that fit under all parts' headers.
    let n = t.rows.len();
    let part_gap = s * 0.6;
    let line_h = s * 1.3;
    let per_page = if paged {
        let heads = usize::from(!t.header.is_empty());
        let header_h: f32 = parts
            .iter()
            .map(|p| p.rows.iter().take(heads).map(|r| r.2).sum::<f32>())
            .sum::<f32>()
            + part_gap * (parts.len() - 1) as f32;
        let row_h = parts
            .iter()
            .map(|p| p.rows.iter().skip(heads).map(|r| r.2).fold(0.0f32, f32::max))
            .sum::<f32>()
            .max(1.0);
        let room_h = bottom - top - header_h - t.below * line_h;
        let all = (room_h / row_h).floor().max(1.0) as usize;
        if all >= n {
            n
        } else {
            (((room_h - line_h) / row_h).floor().max(1.0)) as usize
        }
    } else {
        n
    };
    let pages = n.div_ceil(per_page.max(1)).max(1);
    // The same number of pages with the rows spread evenly (7 rows in 2 pages: 4 and 3, not 6 and 1).
    let per_page = n.div_ceil(pages).max(1);
    let page = crate::style::view_page(pages);
    let shown = page * per_page..((page + 1) * per_page).min(n);
    let stripe = vis.faint_bg_color;
    let mut y = top;
    let left = ui.cursor().left();
    let mut right = left;
    for (pi, p) in parts.iter().enumerate() {
        if pi > 0 {
            y += part_gap;
        }
        let width: f32 = p.widths.iter().sum::<f32>() + gap * (p.widths.len().saturating_sub(1)) as f32;
        right = right.max(left + width);
        for (r, gs, h) in &p.rows {
            if let Some(r) = r
                && !shown.contains(r)
            {
                continue;
            }
            if r.is_some_and(|r| r % 2 == 1) {
                painter.rect_filled(
                    egui::Rect::from_min_size(egui::pos2(left, y), egui::vec2(width, *h)),
                    2.0,
                    stripe,
                );
            }
            if r.is_some_and(|r| t.marked.contains(&r)) {
                painter.rect_stroke(
                    egui::Rect::from_min_size(egui::pos2(left, y), egui::vec2(width, *h)),
                    2.0,
                    egui::Stroke::new(1.5, strong),
                    egui::StrokeKind::Inside,
                );
            }
            let mut x = left;
            for (k, g) in gs.iter().enumerate() {
                let at = egui::pos2(x, y + pad_y);
                // Each cell is a label to screen readers (and to the UI tests that query by label).
                if !g.text().is_empty() {
                    let id = ui.scope_id().with(("table-cell", pi, *r, k));
                    let resp = ui.interact(egui::Rect::from_min_size(at, g.size()), id, egui::Sense::hover());
                    let label = g.text().to_string();
                    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, &label));
                }
                painter.galley(at, g.clone(), text);
                x += p.widths[k] + gap;
            }
            y += h;
        }
    }
    if pages > 1 {
        let (a, b) = (shown.start + 1, shown.end);
        // The page count is the presenter's one, under the narration; here only which rows these are.
        let more = if page + 1 < pages { " →" } else { "" };
        let msg = match lang {
            Lang::En => format!("rows {a}–{b} of {n}{more}"),
            Lang::Zh => format!("第 {a}–{b} 行，共 {n} 行{more}"),
        };
        let g = painter.layout_no_wrap(msg, FontId::proportional(s), crate::style::muted(&vis));
        painter.galley(egui::pos2(left, y + pad_y), g, text);
        y += line_h;
    }
    ui.allocate_rect(
        egui::Rect::from_min_max(egui::pos2(left, top), egui::pos2(right.max(left + 1.0), y)),
        egui::Sense::hover(),
    );
}

#[cfg(test)]
mod tests {
    use super::split_columns;

    #[test]
    fn columns_split_into_parts_that_fit_with_the_keys_first() {
        // Keys 50 wide; room 200: 50+g + 60+g + 60 fits, the next 60 starts a new part.
        let parts = split_columns(&[50.0, 60.0, 60.0, 60.0, 60.0], 1, 10.0, 200.0);
        assert_eq!(parts, vec![vec![1, 2], vec![3, 4]]);
        // Everything fits: one part.
        assert_eq!(split_columns(&[10.0, 10.0, 10.0], 1, 2.0, 100.0), vec![vec![1, 2]]);
        // A column wider than the room still gets a part of its own.
        assert_eq!(
            split_columns(&[10.0, 500.0, 10.0], 1, 2.0, 100.0),
            vec![vec![1], vec![2]]
        );
        // No key column.
        assert_eq!(
            split_columns(&[60.0, 60.0, 60.0], 0, 0.0, 130.0),
            vec![vec![0, 1], vec![2]]
        );
    }
}
