//! Attention as lines (the view BertViz made familiar): the tokens twice, queries on the left and keys
//! on the right, and from the chosen query a line to every key it attends to, as thick and as opaque as
//! its weight. Several heads draw in their own colours over one another.

use eframe::egui::{self, Ui};

use crate::style;

/// One head's weights for the chosen query (a row of P) and its colour.
pub struct LineHead<'a> {
    /// The query's probabilities over the keys.
    pub row: &'a [f32],
    /// The head's colour.
    pub color: egui::Color32,
}

/// Draw the line view into the rest of `ui`'s rectangle: `tokens` label both columns, `query` is the
/// row whose weights `heads` hold.
pub fn attention_lines(ui: &mut Ui, tokens: &[String], query: usize, heads: &[LineHead], size: f32) {
    let rect = ui.available_rect_before_wrap();
    let n = tokens.len().max(1);
    let painter = ui.painter_at(rect);
    // Labels at the size of the rest of the text; when the rows are thinner than a label, only every
    // k-th is labelled (and the query always).
    let fs = size * 0.9;
    // Rows inside the rectangle with half a label of margin, so the first and last labels fit.
    let pad = fs * 0.7;
    let row_h = (rect.height() - 2.0 * pad).max(1.0) / n as f32;
    let font = egui::FontId::monospace(crate::style::fit(fs));
    let text = ui.visuals().text_color();
    let label_w = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| painter.layout_no_wrap(format!("{i} {t}"), font.clone(), text).size().x)
        .fold(0.0f32, f32::max)
        + 6.0;
    let (left, right) = (rect.min.x + label_w, rect.max.x - label_w);
    let y = |i: usize| rect.min.y + pad + (i as f32 + 0.5) * row_h;
    // Only every k-th label when rows are too thin to read them all; the query's always.
    let every = ((fs * 1.05 / row_h).ceil() as usize).max(1);
    for (i, t) in tokens.iter().enumerate() {
        let is_q = i == query;
        if !is_q && (i % every != 0 || i.abs_diff(query) < every) {
            continue;
        }
        let color = if is_q {
            style::state_text(ui.visuals(), style::CURRENT)
        } else {
            text
        };
        painter.text(
            egui::pos2(left - 4.0, y(i)),
            egui::Align2::RIGHT_CENTER,
            format!("{t} {i}"),
            font.clone(),
            color,
        );
        painter.text(
            egui::pos2(right + 4.0, y(i)),
            egui::Align2::LEFT_CENTER,
            format!("{i} {t}"),
            font.clone(),
            text,
        );
    }
    if query < n {
        painter.rect_stroke(
            egui::Rect::from_center_size(
                egui::pos2(left - label_w / 2.0, y(query)),
                egui::vec2(label_w, row_h.max(fs)),
            ),
            2.0,
            egui::Stroke::new(2.0, style::CURRENT_32),
            egui::StrokeKind::Inside,
        );
    }
    // Opacity relative to the head's largest weight, so a head's strongest key stands out even when
    // it holds a fifth of the mass; width absolute (p = 1 is 8 points), so heads compare.
    for h in heads {
        let top = h.row.iter().copied().fold(0.0f32, f32::max).max(1e-6);
        for (j, &p) in h.row.iter().enumerate().take(n) {
            if p < 0.01 {
                continue;
            }
            let c = h.color.gamma_multiply((p / top).clamp(0.12, 1.0));
            painter.line_segment(
                [egui::pos2(left, y(query)), egui::pos2(right, y(j))],
                egui::Stroke::new(0.75 + 8.0 * p, c),
            );
        }
    }
    ui.allocate_rect(rect, egui::Sense::hover());
}
