//! Block tables drawn as structure: each request's table as a row of boxes (logical block i holds the
//! number of its physical block), the physical pool below as numbered cells in their owners' colours,
//! and an arrow from every table entry to its physical block. The block being written this step is
//! outlined, and its arrow drawn thick, in the grammar's "written" colour.

use std::collections::BTreeMap;

use eframe::egui::{self, Ui};

use crate::style;

/// What [`block_tables`] draws.
pub struct Tables<'a> {
    /// Each request's block table (logical → physical).
    pub tables: &'a BTreeMap<u32, Vec<u32>>,
    /// Each request's length in tokens.
    pub lens: &'a BTreeMap<u32, usize>,
    /// Owner of every physical block (−1: free).
    pub owners: &'a [i32],
    /// The (request, logical block) written this step.
    pub written: Option<(u32, usize)>,
}

/// Draw `t` into the rest of `ui`'s rectangle (text size `size`), arrows recorded for the layout check.
pub fn block_tables(ui: &mut Ui, t: &Tables, size: f32, lang: crate::ui::text::Lang) {
    let rect = ui.available_rect_before_wrap();
    let (w, h) = (rect.width(), rect.height());
    let n = t.owners.len().max(1);
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::monospace(crate::style::fit(size * 0.8));
    let label_font = egui::FontId::proportional(crate::style::fit(size * 0.85));
    let tok = lang.t("tok", "个");
    let labels: Vec<(u32, String)> = t
        .tables
        .keys()
        .map(|r| (*r, format!("r{r} ({} {tok})", t.lens.get(r).copied().unwrap_or(0))))
        .collect();
    let label_w = labels
        .iter()
        .map(|(_, l)| painter.layout_no_wrap(l.clone(), label_font.clone(), text).size().x)
        .fold(0.0f32, f32::max)
        + size * 0.5;
    let longest = t.tables.values().map(Vec::len).max().unwrap_or(1).max(1);
    // Physical cells: rows of at most 16, each wide enough for its number.
    let per_row = n.min(16);
    let phys_rows = n.div_ceil(per_row);
    let cell_w = w / per_row as f32;
    let cell_h = (size * 1.5).min(h / 8.0).max(size);
    let phys_h = phys_rows as f32 * cell_h;
    // Logical boxes: one row per request above, the arrows' room between.
    let rows = t.tables.len().max(1);
    let box_w = ((w - label_w) / longest as f32).min(size * 3.2);
    let row_h = ((h - phys_h - size * 4.0) / rows as f32).clamp(size * 1.1, size * 2.0);
    let box_h = row_h * 0.8;
    // The arrows get room enough to fan out, and the pool sits under them (not at the view's bottom).
    let arrow_zone = (h - phys_h - size * 1.2 - rows as f32 * row_h).clamp(size * 3.0, size * 9.0);
    let phys_top = (rect.min.y + rows as f32 * row_h + arrow_zone + size * 1.2).min(rect.max.y - phys_h);
    // The physical pool.
    let mut phys_centre = vec![egui::Pos2::ZERO; n];
    for (b, centre) in phys_centre.iter_mut().enumerate() {
        let (c, r) = (b % per_row, b / per_row);
        let cell = egui::Rect::from_min_size(
            egui::pos2(rect.min.x + c as f32 * cell_w, phys_top + r as f32 * cell_h),
            egui::vec2(cell_w, cell_h),
        )
        .shrink(1.0);
        let fill = style::owner_fill(t.owners.get(b).copied().unwrap_or(-1));
        filled_box(&painter, cell, fill, &b.to_string(), &font);
        *centre = egui::pos2(cell.center().x, cell.min.y);
    }
    painter.text(
        egui::pos2(rect.min.x, phys_top - 2.0),
        egui::Align2::LEFT_BOTTOM,
        lang.t("physical blocks (the pool)", "物理块（块池）"),
        label_font.clone(),
        style::muted(ui.visuals()),
    );
    // The tables, and an arrow from each entry to its block.
    for (row, ((r, table), (_, label))) in t.tables.iter().zip(&labels).enumerate() {
        let y = rect.min.y + size * 0.3 + row as f32 * row_h;
        painter.text(
            egui::pos2(rect.min.x, y + box_h / 2.0),
            egui::Align2::LEFT_CENTER,
            label,
            label_font.clone(),
            style::request_text(ui.visuals(), *r as usize),
        );
        for (i, &b) in table.iter().enumerate() {
            let bx = egui::Rect::from_min_size(
                egui::pos2(rect.min.x + label_w + i as f32 * box_w, y),
                egui::vec2(box_w, box_h),
            )
            .shrink(1.5);
            let fill = style::request(*r as usize);
            filled_box(&painter, bx, fill, &b.to_string(), &font);
            let written = t.written == Some((*r, i));
            if written {
                painter.rect_stroke(
                    bx,
                    2.0,
                    egui::Stroke::new(3.0, style::WRITTEN_32),
                    egui::StrokeKind::Outside,
                );
            }
            let Some(&to) = phys_centre.get(b as usize) else {
                continue;
            };
            let from = egui::pos2(bx.center().x, bx.max.y);
            let (stroke, head) = if written {
                (egui::Stroke::new(3.0, style::WRITTEN_32), size * 0.45)
            } else {
                (egui::Stroke::new(1.5, style::c32(fill)), size * 0.3)
            };
            arrow(&painter, from, to, stroke, head);
            crate::ui::layout::record_arrow(ui.ctx(), from, to, format!("r{r}[{i}] -> {b}"));
        }
    }
    ui.allocate_rect(rect, egui::Sense::hover());
}

/// A box filled with `fill` and `text` centred on it, in the ink that reads on the fill.
fn filled_box(painter: &egui::Painter, r: egui::Rect, fill: style::Rgba, text: &str, font: &egui::FontId) {
    painter.rect_filled(r, 2.0, style::c32(fill));
    painter.text(
        r.center(),
        egui::Align2::CENTER_CENTER,
        text,
        font.clone(),
        style::ink_on(fill),
    );
}

/// The font size of the labels drawn on pool block `block` (its ref-count badge, its hash), within the
/// view's label sizes `font` (smallest, largest), or `None` when the block is too small to hold them.
pub fn block_label_size(block: egui::Rect, font: (f32, f32)) -> Option<f32> {
    let fs = (block.height() * 0.28).clamp(font.0, font.1);
    (block.height() >= fs * 2.3 && block.width() >= fs * 2.8).then_some(fs)
}

/// The legend of a pool: one chip per request holding blocks, then free and "written this step".
pub fn pool_legend(
    requests: impl Iterator<Item = u32>,
    free: &str,
    lang: crate::ui::text::Lang,
) -> Vec<(style::Rgba, String)> {
    let mut entries: Vec<(style::Rgba, String)> = requests
        .map(|r| (style::request(r as usize), format!("r{r}")))
        .collect();
    entries.push((style::FREE, free.to_string()));
    entries.push((style::WRITTEN, lang.t("written this step", "本步写入").to_string()));
    entries
}

/// A line from `a` to `b` with a filled head of length `head` at `b`.
pub fn arrow(p: &egui::Painter, a: egui::Pos2, b: egui::Pos2, stroke: egui::Stroke, head: f32) {
    let v = b - a;
    let len = v.length();
    if len < 1.0 {
        return;
    }
    let dir = v / len;
    let base = b - dir * head;
    p.line_segment([a, base], stroke);
    let n = egui::vec2(-dir.y, dir.x) * head * 0.45;
    p.add(egui::Shape::convex_polygon(
        vec![b, base + n, base - n],
        stroke.color,
        egui::Stroke::NONE,
    ));
}

/// A block's reference count as a badge in its top-right corner (`block`: the block's rect, `fs`: the
/// font size): ×1 and more for a block in use, ×0 for a freed block that is still cached.
pub fn ref_badge(painter: &egui::Painter, block: egui::Rect, fs: f32, refs: u32) {
    let badge = egui::Rect::from_min_size(
        egui::pos2(block.max.x - fs * 1.9, block.min.y + 1.0),
        egui::vec2(fs * 1.8, fs * 1.2),
    );
    let (fill, ink) = style::badge(refs > 0);
    painter.rect_filled(badge, 3.0, fill);
    painter.text(
        badge.center(),
        egui::Align2::CENTER_CENTER,
        format!("×{refs}"),
        egui::FontId::monospace(crate::style::fit(fs)),
        ink,
    );
}

/// Each block's reference count from the block tables (how many tables hold it).
pub fn ref_counts(tables: &BTreeMap<u32, Vec<u32>>, n: usize) -> Vec<u32> {
    let mut refs = vec![0u32; n];
    for b in tables.values().flatten() {
        if let Some(r) = refs.get_mut(*b as usize) {
            *r += 1;
        }
    }
    refs
}

/// The rect (in points) of each of `n` blocks of `block_size` slots in a block grid drawn in `rect`, as
/// the renderer lays them out.
pub fn block_rects(ui: &Ui, rect: egui::Rect, n: usize, block_size: usize) -> Vec<egui::Rect> {
    let ppp = ui.ctx().pixels_per_point();
    let lay =
        crate::render::blocks::BlockGridLayout::new(n, block_size.max(1), rect.width() * ppp, rect.height() * ppp);
    (0..n)
        .map(|b| {
            let [x, y, w, h] = lay.block_rect(b).map(|v| v / ppp);
            egui::Rect::from_min_size(rect.min + egui::vec2(x, y), egui::vec2(w, h))
        })
        .collect()
}

/// One block drawn in a row of blocks ([`block_row`]).
pub struct BlockBox {
    /// The physical block id.
    pub id: u32,
    /// A second line (a short hash), if any.
    pub sub: Option<String>,
    /// Its fill (a grammar colour).
    pub fill: style::Rgba,
    /// Struck out (evicted this step).
    pub struck: bool,
}

/// Blocks as a wrapping row of numbered boxes, in order (a free list, the evictor in LRU order).
pub fn block_row(ui: &mut Ui, blocks: &[BlockBox], size: f32) {
    let two_lines = blocks.iter().any(|b| b.sub.is_some());
    let font = egui::FontId::monospace(crate::style::fit(size * 0.85));
    let small = egui::FontId::monospace(crate::style::fit(size * 0.7));
    let w = size * 3.6;
    let h = if two_lines { size * 2.3 } else { size * 1.4 };
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing = egui::vec2(4.0, 4.0);
        for b in blocks {
            let (r, _) = ui.allocate_exact_size(egui::vec2(w, h), egui::Sense::hover());
            let p = ui.painter();
            p.rect_filled(r, 3.0, style::c32(b.fill));
            let ink = style::ink_on(b.fill);
            let top = if two_lines { r.min.y + size * 0.75 } else { r.center().y };
            p.text(
                egui::pos2(r.center().x, top),
                egui::Align2::CENTER_CENTER,
                b.id.to_string(),
                font.clone(),
                ink,
            );
            if let Some(s) = &b.sub {
                p.text(
                    egui::pos2(r.center().x, r.max.y - size * 0.55),
                    egui::Align2::CENTER_CENTER,
                    s,
                    small.clone(),
                    ink,
                );
            }
            if b.struck {
                let stroke = egui::Stroke::new(2.5, style::c32(style::OOM));
                p.line_segment([r.left_top(), r.right_bottom()], stroke);
                p.line_segment([r.right_top(), r.left_bottom()], stroke);
            }
        }
    });
}
