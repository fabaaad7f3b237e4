//! Lesson 4's views: prefill, the static cache as a memory strip, the growing attention matrix and the
//! new row of every head, and the timeline that moves them all one (token, layer) at a time.

use eframe::egui::{self, Color32, RichText, Ui};

use super::{DecodeOut, KvDecode, View, view_plots};
use crate::cache::kv_bytes_per_token;
use crate::lessons::ui::LessonUi;
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::egui_glue;
use crate::render::heatmap::Highlight;
use crate::render::strip::{READ_COLOR, RESERVED_COLOR, StripData, USED_COLOR, WRITE_COLOR};
use crate::ui::widgets::{Axes, ViewCtx, bytes, check_line, grid, heat_panel, kernel_panel, legend_chip, timeline, view_id, view_in};

impl LessonUi for KvDecode {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(d), Some(view)) = (out.downcast_ref::<DecodeOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
            view => show(cx, ui, d, view),
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(d) = out.downcast_ref::<DecodeOut>() else {
            return;
        };
        let lang = cx.lang;
        let layers = d.layers;
        timeline(
            cx,
            ui,
            d.frames.len(),
            |ui, c, n| {
                if ui.button(lang.t("< layer", "< 上一层")).clicked() {
                    *c = c.saturating_sub(1);
                }
                if ui.button(lang.t("next layer >", "下一层 >")).clicked() {
                    *c = (*c + 1).min(n - 1);
                }
                if ui.button(lang.t("next token >>", "下一个 token >>")).clicked() {
                    // To the last layer of the next token.
                    let next = if *c == 0 {
                        layers
                    } else {
                        ((*c - 1) / layers + 2) * layers
                    };
                    *c = next.min(n - 1);
                }
            },
            |c| {
                let f = &d.frames[c];
                match f.layer {
                    None => format!(
                        "{} ({} {})",
                        lang.t("after prefill", "预填充完成"),
                        d.prompt,
                        lang.t("prompt tokens", "个提示 token")
                    ),
                    Some(l) => format!(
                        "{} {} / {} · pos {} · {} {} / {}",
                        lang.t("decode token", "解码 token"),
                        f.token,
                        d.generate,
                        f.pos,
                        lang.t("layer", "层"),
                        l,
                        d.layers
                    ),
                }
            },
        );
    }
}

fn show(cx: &mut ViewCtx, ui: &mut Ui, d: &DecodeOut, view: View) {
    let lang = cx.lang;
    let size = cx.size;
    let c = (*cx.cursor).min(d.frames.len() - 1);
    let f = &d.frames[c];
    match view {
        View::Prefill => {
            let p = d.prompt;
            cx.widgets.heat.reserve_below = 2.0 * size;
            cx.widgets.heat.row_sums = true;
            heat_panel(
                cx,
                ui,
                view_id("prefill", 0),
                &format!(
                    "{} [{p}×{p}]",
                    lang.t(
                        "prefill: causal attention of the prompt, layer 0, head 0",
                        "预填充：提示的因果注意力（第 0 层，第 0 头）"
                    )
                ),
                &d.prefill_probs,
                Colormap::Sequential,
                Some((0.0, 1.0)),
                Highlight::Row(p - 1),
                Axes::QueryKey,
                &|(i, j)| {
                    format!(
                        "p[{i},{j}] = {:.4}",
                        d.rows[0].get(i).and_then(|r| r.get(j)).copied().unwrap_or(0.0)
                    )
                },
            );
            check_line(
                cx,
                ui,
                Some(&d.prefill_check),
                lang.t("prefill attention", "预填充注意力"),
            );
        }
        View::StaticCache => {
            ui.label(
                RichText::new(format!(
                    "{} [layers={}, batch={}, kv_heads={}, max_seq_len={}, head_dim={}]",
                    lang.t("static KV cache", "静态 KV 缓存"),
                    d.layers,
                    d.batch,
                    d.kv_heads,
                    d.max_seq_len,
                    d.head_dim
                ))
                .strong()
                .size(size),
            );
            let data = StripData {
                layers: d.layers,
                heads: d.batch * d.kv_heads,
                max_seq_len: d.max_seq_len,
                lens: f.lens.clone(),
                write: f.layer.map(|l| (l, f.pos)),
                read: f.layer.map(|l| (l, f.pos)),
            };
            let h = (ui.available_height() - 7.0 * size).clamp(60.0, 420.0);
            let w = ui.available_width();
            egui_glue::memory_strip(ui, view_id("strip", 0), &data, egui::vec2(w, h));
            ui.horizontal_wrapped(|ui| {
                legend_chip(ui, USED_COLOR, lang.t("stored K/V", "已存 K/V"), size);
                legend_chip(ui, WRITE_COLOR, lang.t("written this step", "本步写入"), size);
                legend_chip(
                    ui,
                    READ_COLOR,
                    lang.t("read by this step's attention (0..=pos)", "本步注意力读取 (0..=pos)"),
                    size,
                );
                legend_chip(
                    ui,
                    RESERVED_COLOR,
                    lang.t("reserved, never used", "已预留但未使用"),
                    size,
                );
            });
            let per_slot = kv_bytes_per_token(1, 1, d.head_dim as u64, 2) as usize; // K and V, f16
            let used: usize = f.lens.iter().sum::<usize>() * d.batch * d.kv_heads * per_slot;
            ui.label(
                RichText::new(format!(
                    "{}: {} · {}: {} ({:.0}%) · {}: {}",
                    lang.t("reserved", "预留"),
                    bytes(d.reserved_bytes as f64),
                    lang.t("used", "已用"),
                    bytes(used as f64),
                    100.0 * used as f64 / d.reserved_bytes.max(1) as f64,
                    lang.t(
                        "K+V per token (all layers, batch)",
                        "每个 token 的 K+V（所有层、整个批次）"
                    ),
                    bytes(d.bytes_per_token as f64)
                ))
                .size(size * 0.9),
            );
            if f.layer.is_some() {
                ui.label(
                    RichText::new(format!(
                        "{}: {} · {}: {}",
                        lang.t("this step writes", "本步写入"),
                        bytes((d.batch * d.kv_heads * per_slot) as f64),
                        lang.t("and its attention reads", "其注意力读取"),
                        bytes(f.bytes_read as f64)
                    ))
                    .size(size * 0.9),
                );
            }
            if d.dropped > 0 {
                ui.label(
                    RichText::new(format!(
                        "{} {} {}",
                        lang.t("The cache is full at max_seq_len: ", "缓存在 max_seq_len 处已满："),
                        d.dropped,
                        lang.t("requested tokens cannot be generated.", "个请求的 token 无法生成。")
                    ))
                    .color(Color32::from_rgb(240, 150, 80))
                    .size(size * 0.9),
                );
            }
        }
        View::DecodeRow => {
            let (l, pos) = (f.layer.unwrap_or(0), f.pos);
            let m = d.matrix(c);
            let rects = grid(ui.available_rect_before_wrap(), 2);
            view_in(ui, rects[0], |ui| {
                let title = format!(
                    "{} {l}{}, head 0: {} {}",
                    lang.t("layer", "第"),
                    lang.t("", " 层"),
                    lang.t("rows 0..=", "行 0..="),
                    pos
                );
                cx.widgets.heat.row_sums = true;
                heat_panel(
                    cx,
                    ui,
                    view_id("dec-matrix", 0),
                    &title,
                    &m,
                    Colormap::Sequential,
                    Some((0.0, 1.0)),
                    Highlight::Row(pos),
                    Axes::QueryKey,
                    &|(i, j)| {
                        let v = d
                            .rows
                            .get(l)
                            .and_then(|r| r.get(i))
                            .and_then(|r| r.get(j))
                            .copied()
                            .unwrap_or(0.0);
                        format!("p[{i},{j}] = {v:.4}{}", if i == pos { lang.t("  (new row)", "  （新行）") } else { "" })
                    },
                );
            });
            view_in(ui, rects[1], |ui| {
                let title = format!(
                    "{} [{} heads × {}]",
                    lang.t("the new token's attention, every head", "新 token 在各头上的注意力"),
                    d.heads,
                    pos + 1
                );
                let row = f.row.clone();
                cx.widgets.heat.reserve_below = 3.0 * size;
                cx.widgets.heat.row_sums = true;
                heat_panel(
                    cx,
                    ui,
                    view_id("dec-row", 0),
                    &title,
                    &row,
                    Colormap::Sequential,
                    Some((0.0, 1.0)),
                    Highlight::None,
                    Axes::HeadKey,
                    &|(h, j)| {
                        format!(
                            "{} {h} (KV {}) → pos {j}: p = {:.4}",
                            lang.t("head", "头"),
                            h / (d.heads / d.kv_heads).max(1),
                            row.values[h * row.cols + j]
                        )
                    },
                );
                check_line(
                    cx,
                    ui,
                    f.check.as_ref(),
                    lang.t("decode kernel output", "解码 kernel 输出"),
                );
                if f.layer.is_none() {
                    ui.label(
                        RichText::new(lang.t(
                            "Press “next layer” to decode the first token.",
                            "按“下一层”开始解码第一个 token。",
                        ))
                        .size(size),
                    );
                }
            });
        }
        View::Intensity => view_plots::intensity(cx, ui, d),
        View::Bandwidth => view_plots::bandwidth(cx, ui),
        View::Kernel => {}
    }
}
