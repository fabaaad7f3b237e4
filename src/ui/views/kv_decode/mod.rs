//! Lesson 4's views: prefill, the static cache as a memory strip, the growing attention matrix and the
//! new row of every head, and the timeline that moves them all one (token, layer) at a time.

mod plots;

use eframe::egui::{self, RichText, Ui};

use crate::cache::kv_bytes_per_token;
use crate::lessons::kv_decode::{DecodeOut, KvDecode, View};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::egui_glue;
use crate::render::heatmap::Highlight;
use crate::render::strip::{READ_COLOR, RESERVED_COLOR, StripData, USED_COLOR, WRITE_COLOR};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{
    Axes, ViewCtx, bytes, check_line, grid, heat_panel, kernel_panel, legend, legend_height, timeline, view_id, view_in,
};
mod model;
use model::*;

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
        // On the trained model's step the timeline counts the model's tokens (its text, all its layers
        // at once), not the random stack's positions and layers.
        let model = d
            .generation
            .as_ref()
            .filter(|_| cx.step_shows(View::ModelDecode.name()));
        timeline(
            cx,
            ui,
            d.frames.len(),
            |ui, c, n| {
                if model.is_some() {
                    if ui.button(lang.t("< token", "< 上一个 token")).clicked() {
                        // To the last layer of the previous token.
                        *c = if *c <= layers { 0 } else { ((*c - 1) / layers) * layers };
                    }
                } else {
                    if ui.button(lang.t("< layer", "< 上一层")).clicked() {
                        *c = c.saturating_sub(1);
                    }
                    if ui.button(lang.t("next layer >", "下一层 >")).clicked() {
                        *c = (*c + 1).min(n - 1);
                    }
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
                if let Some(g) = model {
                    // The model ran as many steps as the timeline has tokens, or fewer on a simulated GPU.
                    let t = f.token.min(g.tokens.len() - 1);
                    return if t == 0 {
                        format!(
                            "{} ({} {})",
                            lang.t("after prefill", "预填充完成"),
                            g.prompt_tokens,
                            match g.model_name() {
                                crate::model::ModelName::Tiny =>
                                    lang.t("prompt bytes, every layer", "个提示字节，所有层"),
                                crate::model::ModelName::Smollm2 =>
                                    lang.t("prompt tokens, every layer", "个提示 token，所有层"),
                            }
                        )
                    } else {
                        format!(
                            "{} {t} / {} · {} {}",
                            lang.t("decode token", "解码 token"),
                            g.tokens.len() - 1,
                            lang.t("position", "位置"),
                            g.prompt_tokens + t - 1
                        )
                    };
                }
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
                .size(crate::style::fit(size)),
            );
            let data = StripData {
                layers: d.layers,
                heads: d.batch * d.kv_heads,
                max_seq_len: d.max_seq_len,
                lens: f.lens.clone(),
                write: f.layer.map(|l| (l, f.pos)),
                read: f.layer.map(|l| (l, f.pos)),
            };
            let w = ui.available_width();
            let per_slot = kv_bytes_per_token(1, 1, d.head_dim as u64, crate::cache::KvDtype::F16) as usize; // K and V, f16
            let used: usize = f.lens.iter().sum::<usize>() * d.batch * d.kv_heads * per_slot;
            let mut lines = vec![format!(
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
            )];
            if f.layer.is_some() {
                lines.push(format!(
                    "{}: {} · {}: {}",
                    lang.t("this step writes", "本步写入"),
                    bytes((d.batch * d.kv_heads * per_slot) as f64),
                    lang.t("and its attention reads", "其注意力读取"),
                    bytes(f.bytes_read as f64)
                ));
            }
            let entries = [
                (USED_COLOR, lang.t("stored K/V", "已存 K/V")),
                (WRITE_COLOR, lang.t("written this step", "本步写入")),
                (
                    READ_COLOR,
                    lang.t("read by this step's attention (0..=pos)", "本步注意力读取 (0..=pos)"),
                ),
                (RESERVED_COLOR, lang.t("reserved, never used", "已预留但未使用")),
            ];
            // The strip takes what the legend and the lines below it leave (measured, wrapped to the
            // view's width), so nothing below it is cut off.
            let spacing = ui.spacing().item_spacing.y;
            let below: f32 = lines
                .iter()
                .map(|l| {
                    ui.painter()
                        .layout(
                            l.clone(),
                            egui::FontId::proportional(crate::style::fit(size * 0.9)),
                            ui.visuals().text_color(),
                            w,
                        )
                        .size()
                        .y
                        + spacing
                })
                .sum::<f32>()
                + legend_height(ui, &entries, size, w)
                + 2.0 * spacing
                + if d.dropped > 0 { 3.0 * size } else { 0.0 };
            let h = (ui.available_height() - below).clamp(60.0, 420.0);
            egui_glue::memory_strip(ui, view_id("strip", 0), &data, egui::vec2(w, h));
            legend(ui, &entries, size);
            for l in lines {
                ui.add(egui::Label::new(RichText::new(l).size(crate::style::fit(size * 0.9))).wrap());
            }
            if d.dropped > 0 {
                ui.label(
                    RichText::new(format!(
                        "{} {} {}",
                        lang.t("The cache is full at max_seq_len: ", "缓存在 max_seq_len 处已满："),
                        d.dropped,
                        lang.t("requested tokens cannot be generated.", "个请求的 token 无法生成。")
                    ))
                    .color(style::state_text(ui.visuals(), style::OOM))
                    .size(crate::style::fit(size * 0.9)),
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
                        format!(
                            "p[{i},{j}] = {v:.4}{}",
                            if i == pos {
                                lang.t("  (new row)", "  （新行）")
                            } else {
                                ""
                            }
                        )
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
                        .size(crate::style::fit(size)),
                    );
                }
            });
        }
        View::Intensity => plots::intensity(cx, ui, d),
        View::Bandwidth => plots::bandwidth(cx, ui),
        View::ModelDecode => {
            if let Some(g) = &d.generation {
                model_decode(cx, ui, f.token, g);
            }
        }
        View::Kernel => {}
    }
}
