//! Lesson 7's hash chain: each block's hash built from its parent's and its tokens, and which cached
//! block a request's chain finds.

use eframe::egui::{self, RichText, Ui};

use crate::lessons::prefix_cache::{Event, PrefixFrame, PrefixOut};

use super::common::*;
use crate::style;
use crate::ui::widgets::ViewCtx;

/// The request the chain view explains: the newest one admitted by this event, else the lowest id.
pub(super) fn chain_request(f: &PrefixFrame) -> Option<u32> {
    match f.event {
        Event::Admit { req, .. } if f.tables.contains_key(&req) => Some(req),
        _ => f.tables.keys().next().copied(),
    }
}

/// One request's blocks: tokens, parent hash → hash, and where it lives.
pub(super) fn chain(cx: &ViewCtx, ui: &mut Ui, p: &PrefixOut, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    let Some(req) = chain_request(f) else {
        ui.label(
            RichText::new(lang.t("(no request holds blocks)", "（没有请求持有块）")).size(crate::style::fit(size)),
        );
        return;
    };
    let bs = p.shape.block_size;
    let toks = f.tokens.get(&req).cloned().unwrap_or_default();
    let table = f.tables.get(&req).cloned().unwrap_or_default();
    ui.label(
        RichText::new(format!(
            "r{req}: {} {} · hash(i) = H(hash(i−1), tokens(i))",
            toks.len(),
            plural(lang, toks.len(), "token", "tokens", "个 token"),
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let hashes = crate::cache::prefix::chain_hashes(&toks, bs);
    chain_boxes(lang, ui, size, req, &toks, bs, &hashes, &table, f);
    if !style::views_may_scroll() {
        // Presentation mode: the boxes carry the table's facts (tokens, hash, block, reference count; the
        // parent hash is the arrow), and a slide has no room for both.
        return;
    }
    use crate::ui::widgets::Cell;
    let mut t = crate::ui::widgets::Table::new([
        lang.t("logical", "逻辑块"),
        lang.t("tokens", "token"),
        lang.t("parent", "父哈希"),
        lang.t("hash", "哈希"),
        lang.t("block", "物理块"),
    ]);
    let (strong, muted) = (ui.visuals().strong_text_color(), style::muted(ui.visuals()));
    for (i, chunk) in toks.chunks(bs.max(1)).enumerate() {
        let full = chunk.len() == bs;
        let parent = if i == 0 {
            "0".to_string()
        } else {
            hashes.get(i - 1).map_or("—".into(), |h| short(*h))
        };
        let hash = if full {
            hashes.get(i).map_or("—".into(), |h| short(*h))
        } else {
            lang.t("— (partial: not cached)", "—（未满：不缓存）").to_string()
        };
        let phys = table.get(i).copied();
        let cached = phys.and_then(|b| f.cached.get(b as usize)).is_some_and(Option::is_some);
        let shared = phys.is_some_and(|b| f.refs[b as usize] > 1);
        t.row([
            Cell::new(i.to_string()).mono(),
            Cell::new(format!("{chunk:?}")).mono(),
            Cell::new(parent).mono(),
            Cell::new(hash).mono().color(if cached { strong } else { muted }),
            Cell::new(match phys {
                Some(b) if shared => format!("{b} ×{}", f.refs[b as usize]),
                Some(b) => b.to_string(),
                None => "—".into(),
            })
            .mono(),
        ]);
    }
    crate::ui::widgets::table(ui, lang, size * 0.85, &t);
}

/// The chain drawn as linked boxes, one per logical block in order: its tokens, its hash (a full block)
/// or "partial" (the last, not cached), and the physical block it lives in with its reference count. An
/// arrow from each block to the next is the parent hash the next one's hash is computed from; a block
/// filled in the request's colour is cached (found by that hash), a grey one is not.
#[allow(clippy::too_many_arguments)]
pub(super) fn chain_boxes(
    lang: crate::ui::text::Lang,
    ui: &mut Ui,
    size: f32,
    req: u32,
    toks: &[u32],
    bs: usize,
    hashes: &[u64],
    table: &[u32],
    f: &PrefixFrame,
) {
    let bs = bs.max(1);
    let n = toks.len().div_ceil(bs);
    if n == 0 {
        return;
    }
    let font = egui::FontId::monospace(crate::style::fit(size * 0.85));
    let text = ui.visuals().text_color();
    let lines: Vec<[String; 3]> = toks
        .chunks(bs)
        .enumerate()
        .map(|(i, chunk)| {
            let phys = table.get(i).copied();
            let place = match phys {
                Some(b) => format!("L{i} → {b} ×{}", f.refs.get(b as usize).copied().unwrap_or(0)),
                None => format!("L{i}"),
            };
            let hash = if chunk.len() == bs {
                hashes.get(i).map_or("—".into(), |h| short(*h))
            } else {
                lang.t("partial", "未满").to_string()
            };
            [place, format!("{chunk:?}"), hash]
        })
        .collect();
    let measure = |s: &str| ui.painter().layout_no_wrap(s.to_string(), font.clone(), text).size();
    let pad = size * 0.3;
    let line_h = measure("0").y;
    let box_w = lines
        .iter()
        .flat_map(|l| l.iter().map(|s| measure(s).x))
        .fold(0.0f32, f32::max)
        + 2.0 * pad;
    let box_h = 3.0 * line_h + 2.0 * pad;
    let arrow_w = size * 1.4;
    let avail = ui.available_width();
    let per_row = (((avail + arrow_w) / (box_w + arrow_w)).floor() as usize).clamp(1, n);
    let rows = n.div_ceil(per_row);
    let row_gap = size * 0.8;
    let (rect, _) = ui.allocate_exact_size(egui::vec2(avail, rows as f32 * (box_h + row_gap)), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    let at = |i: usize| {
        let (r, c) = (i / per_row, i % per_row);
        egui::Rect::from_min_size(
            rect.min + egui::vec2(c as f32 * (box_w + arrow_w), r as f32 * (box_h + row_gap)),
            egui::vec2(box_w, box_h),
        )
    };
    let arrow = egui::Stroke::new(2.0, text);
    for (i, l) in lines.iter().enumerate() {
        let r = at(i);
        let cached = table
            .get(i)
            .and_then(|&b| f.cached.get(b as usize))
            .is_some_and(Option::is_some);
        let (fill, ink) = if cached {
            (
                style::c32(style::request(req as usize)),
                style::ink_on(style::request(req as usize)),
            )
        } else {
            (style::track(ui.visuals()), text)
        };
        painter.rect_filled(r, 4.0, fill);
        for (k, s) in l.iter().enumerate() {
            painter.text(
                r.min + egui::vec2(pad, pad + k as f32 * line_h),
                egui::Align2::LEFT_TOP,
                s,
                font.clone(),
                ink,
            );
        }
        if i > 0 {
            // Within a row, straight across; to the next row, an elbow down, back and down again.
            let prev = at(i - 1);
            let path = if prev.min.y == r.min.y {
                vec![prev.right_center(), r.left_center()]
            } else {
                let mid = prev.bottom() + row_gap * 0.5;
                vec![
                    prev.center_bottom(),
                    egui::pos2(prev.center().x, mid),
                    egui::pos2(r.center().x, mid),
                    r.center_top(),
                ]
            };
            let (a, b) = (path[path.len() - 2], path[path.len() - 1]);
            painter.add(egui::Shape::line(path[..path.len() - 1].to_vec(), arrow));
            crate::ui::widgets::arrow(&painter, a, b, arrow, size * 0.35);
        }
    }
}
