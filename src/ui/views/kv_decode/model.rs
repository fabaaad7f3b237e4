//! Lesson 4's steps on the trained model: decode step by step (the text so far, every layer's static cache
//! filling, the K and V rows each step writes), the next-byte probabilities, and what recomputing without a
//! cache would cost.

use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::widgets::{Axes, ViewCtx, bytes, grid, heat_panel, legend, view_id, view_in};
use eframe::egui::{self, Color32, RichText, Ui};

/// The trained model at decode step `t` (0: the prefill has emitted the first byte): the text so far,
/// what the step read and emitted, every layer's static cache filling up, and the K and V rows the step
/// wrote into each layer.
pub(super) fn model_decode(
    cx: &mut ViewCtx,
    ui: &mut Ui,
    t: usize,
    g: &crate::lessons::kv_decode::generate::ModelDecode,
) {
    let (lang, size) = (cx.lang, cx.size);
    let t = t.min(g.tokens.len() - 1);
    let prompt_len = g.prompt_tokens;
    // The text: the prompt, the bytes generated so far, the newest one highlighted.
    let mut job = egui::text::LayoutJob::default();
    let font = egui::FontId::monospace(crate::style::fit(size * 1.05));
    let fmt = |c: Color32| egui::TextFormat::simple(font.clone(), c);
    job.append(&g.prompt, 0.0, fmt(style::muted(ui.visuals())));
    // Whole characters so far; the bytes of a character not yet complete (Chinese takes three) show as hex.
    let shown = crate::model::bytes_as_text(&g.text_bytes(t));
    let done = if t == 0 {
        String::new()
    } else {
        crate::model::bytes_as_text(&g.text_bytes(t - 1))
    };
    // The newest part: what differs from the text before this byte (a completed character replaces the
    // hex of its first bytes).
    let common: usize = shown
        .char_indices()
        .zip(done.chars())
        .take_while(|((_, a), b)| a == b)
        .last()
        .map_or(0, |((i, a), _)| i + a.len_utf8());
    let (old, new) = shown.split_at(common);
    // The prompt muted, generated text in the grammar's "generated", this step's new text underlined
    // with "current".
    let generated = style::state_text(ui.visuals(), style::GENERATED);
    job.append(old, 0.0, fmt(generated));
    let mut newest = fmt(generated);
    newest.underline = egui::Stroke::new(3.0, style::CURRENT_32);
    job.append(new, 0.0, newest);
    job.wrap.max_width = ui.available_width();
    ui.label(job);
    // In presentation mode a decode step takes two pages: the caches and the rows written, then the
    // distribution the byte came from at the size of the rest of the slide (beside the heatmaps it was
    // a column too narrow for its text at the floor).
    let page = (!crate::style::views_may_scroll() && t > 0).then(|| crate::style::view_page(2));
    if page == Some(1) {
        let rect = above_check_line(ui, size);
        view_in(ui, rect, |ui| next_byte_bars(cx, ui, g, t));
        move_under(ui, rect);
        recompute_line(cx, ui, g);
        return;
    }
    let emitted = format!("{} (p = {:.2})", g.label(g.tokens[t]), g.p[t]);
    let unit = match g.model_name() {
        crate::model::ModelName::Tiny => lang.t("prompt bytes", "个提示字节"),
        crate::model::ModelName::Smollm2 => lang.t("prompt tokens", "个提示 token"),
    };
    let line = if t == 0 {
        format!(
            "{} {prompt_len} {unit}{}{} {emitted}",
            lang.t("prefill: the", "预填充："),
            lang.t(" ", ""),
            lang.t(
                "go through every layer at once; their K and V fill the caches; the last position emits",
                "一次通过所有层，它们的 K 和 V 填入缓存；最后一个位置输出"
            )
        )
    } else {
        let (read, pos) = (g.label(g.tokens[t - 1]), prompt_len + t - 1);
        match lang {
            crate::ui::text::Lang::Zh => {
                format!("解码第 {t} 步：读入 {read}（位置 {pos}），把它的 K 和 V 写入每一层的缓存，输出 {emitted}")
            }
            _ => format!(
                "decode step {t}: reads {read} at position {pos}, writes its K and V into every layer's cache, emits {emitted}"
            ),
        }
    };
    ui.label(RichText::new(line).size(crate::style::fit(size * 0.95)));
    // Every layer's static cache: slots written, the newest one, slots still reserved.
    let filled = prompt_len + t;
    ui.label(
        RichText::new(format!(
            "{}: {filled} / {} {} · {} {}",
            lang.t("static cache, per layer", "静态缓存（每层）"),
            g.max_seq_len,
            lang.t("positions written", "个位置已写入"),
            bytes(g.bytes_per_token() as f64),
            lang.t(
                "per token over all layers (K + V, f16)",
                "每个 token（所有层，K + V，f16）"
            )
        ))
        .size(crate::style::fit(size * 0.9)),
    );
    let w = ui.available_width();
    let slot = (w / g.max_seq_len as f32).max(1.0);
    // Every layer fills the same slots: a bar per layer for a small model, one bar for all of a deep one
    // (SmolLM2's 30 would not fit a projected frame).
    let bars: Vec<String> = if g.layers <= 8 {
        (0..g.layers)
            .map(|l| format!("{} {l}", lang.t("layer", "层")))
            .collect()
    } else {
        vec![match lang {
            crate::ui::text::Lang::Zh => format!("第 0–{} 层（每层相同）", g.layers - 1),
            _ => format!("layers 0–{} (each the same)", g.layers - 1),
        }]
    };
    for name in bars {
        // As tall as the label it carries (presentation mode raises it to the text floor).
        let (r, _) = ui.allocate_exact_size(
            egui::vec2(w, (size * 0.9).max(crate::style::fit(size * 0.7) * 1.15)),
            egui::Sense::hover(),
        );
        let painter = ui.painter_at(r);
        painter.rect_filled(r, 2.0, style::c32(style::RESERVED));
        for pos in 0..filled {
            let x = r.min.x + pos as f32 * slot;
            let rect = egui::Rect::from_min_size(egui::pos2(x, r.min.y), egui::vec2((slot - 0.5).max(0.5), r.height()));
            let newest = t > 0 && pos + 1 == filled;
            let c = if newest {
                style::WRITTEN_32
            } else if pos < prompt_len {
                style::c32(style::request(0))
            } else {
                style::GENERATED_32
            };
            painter.rect_filled(rect, 0.0, c);
        }
        painter.text(
            r.left_center() + egui::vec2(4.0, 0.0),
            egui::Align2::LEFT_CENTER,
            name,
            egui::FontId::proportional(crate::style::fit(size * 0.7)),
            style::ink_on(style::request(0)),
        );
    }
    legend(
        ui,
        &[
            (style::request(0), lang.t("prompt (prefill)", "提示（预填充）")),
            (style::GENERATED, lang.t("generated, cached", "已生成并缓存")),
            (style::WRITTEN, lang.t("written by this step", "本步写入")),
            (style::RESERVED, lang.t("reserved, never used", "已预留但未使用")),
        ],
        size,
    );
    if page.is_some() {
        crate::ui::widgets::more_on_next_page(
            ui,
            lang,
            size,
            lang.t("the next byte's distribution", "下一个字节的分布"),
        );
    }
    let (kvh, hd) = (g.kv_heads, g.head_dim);
    let rect = above_check_line(ui, size);
    // The K and V rows this step wrote (none at prefill), and the distribution the byte came from.
    // The bars take a column on the right (at most a third); K and V share the rest side by side.
    let bars_w = if t == 0 {
        rect.width()
    } else if page.is_some() {
        0.0
    } else {
        (rect.width() / 3.0).min(size * 18.0)
    };
    let bars = egui::Rect::from_min_max(egui::pos2(rect.max.x - bars_w, rect.min.y), rect.max);
    let kv = egui::Rect::from_min_max(rect.min, egui::pos2(bars.min.x - 8.0, rect.max.y));
    if page.is_none() {
        view_in(ui, bars, |ui| next_byte_bars(cx, ui, g, t));
    }
    let cols = if t == 0 { Vec::new() } else { grid(kv, 2) };
    cx.widgets.heat.reserve_below = 0.0;
    for (k, r) in cols.into_iter().enumerate() {
        let step = &g.written[t - 1];
        view_in(ui, r, |ui| {
            let (name, map) = if k == 0 {
                ("K", &g.k_maps[t - 1])
            } else {
                ("V", &g.v_maps[t - 1])
            };
            let title = format!(
                "{name} {}  [{} × {hd}]",
                lang.t("written by this step, row = layer·KV head", "本步写入，行 = 层·KV 头"),
                g.layers * kvh
            );
            heat_panel(
                cx,
                ui,
                view_id("model-kv", k),
                &title,
                map,
                Colormap::Diverging,
                None,
                Highlight::None,
                Axes::LayerHeadDim,
                &|(row, d)| {
                    let (l, h) = (row / kvh, row % kvh);
                    let vals = if k == 0 { &step[l].0 } else { &step[l].1 };
                    format!("layer {l}, KV head {h}, dim {d}: {:.4}", vals[h * hd + d])
                },
            );
        });
    }
    move_under(ui, rect);
    recompute_line(cx, ui, g);
}

/// The room left above the check line at the view's foot (two lines when it wraps).
pub(super) fn above_check_line(ui: &Ui, size: f32) -> egui::Rect {
    let rect = ui.available_rect_before_wrap();
    egui::Rect::from_min_max(rect.min, egui::pos2(rect.max.x, rect.max.y - 2.6 * size))
}

/// Move the cursor under `rect`, whose contents were drawn in child uis (`view_in`).
pub(super) fn move_under(ui: &mut Ui, rect: egui::Rect) {
    ui.allocate_rect(
        egui::Rect::from_min_max(
            egui::pos2(rect.min.x, rect.max.y),
            egui::pos2(rect.max.x, rect.max.y + 0.2),
        ),
        egui::Sense::hover(),
    );
}

/// The next-byte distribution of step `t`: the top 8 of softmax(logits / T), with a temperature slider
/// (the generation itself stays greedy: T changes what sampling would draw from, not the text).
pub(super) fn next_byte_bars(
    cx: &ViewCtx,
    ui: &mut Ui,
    g: &crate::lessons::kv_decode::generate::ModelDecode,
    t: usize,
) {
    let id = egui::Id::unique("kvscope-next-byte-temperature");
    let temp = ui.ctx().data(|d| d.get_temp::<f32>(id)).unwrap_or(1.0);
    // Set smaller rather than cut when the panel is short (presentation mode at 1280×720).
    let key = (t as u64) << 32 | u64::from(temp.to_bits()) | u64::from(cx.lang == crate::ui::text::Lang::Zh) << 63;
    crate::ui::widgets::fitted_height(ui, "next-byte", key, cx.size, |ui, size| {
        next_byte_bars_at(cx, ui, g, t, size, id, temp)
    });
}

pub(super) fn next_byte_bars_at(
    cx: &ViewCtx,
    ui: &mut Ui,
    g: &crate::lessons::kv_decode::generate::ModelDecode,
    t: usize,
    size: f32,
    id: egui::Id,
    mut temp: f32,
) {
    let lang = cx.lang;
    let Some(logits) = g.logits.get(t) else { return };
    ui.add(
        egui::Label::new(
            RichText::new(if g.model_name() == crate::model::ModelName::Smollm2 {
                lang.t(
                    "next token: softmax(logits / T), the 8 most likely",
                    "下一个 token：softmax(logits / T)，概率最高的 8 个",
                )
            } else {
                lang.t(
                    "next byte: softmax(logits / T), the 8 most likely",
                    "下一个字节：softmax(logits / T)，概率最高的 8 个",
                )
            })
            .strong()
            .size(crate::style::fit(size)),
        )
        .wrap(),
    );
    ui.horizontal(|ui| {
        ui.label(RichText::new(lang.t("temperature T", "温度 T")).size(crate::style::fit(size * 0.9)));
        ui.spacing_mut().slider_width = (ui.available_width() - size * 4.0).clamp(40.0, 200.0);
        if ui
            .add(egui::Slider::new(&mut temp, 0.0..=2.0).step_by(0.05))
            .on_hover_text(lang.t(
                "T = 0 is greedy (this generation); higher T flattens the distribution",
                "T = 0 即贪心解码（本次生成）；T 越大分布越平",
            ))
            .changed()
        {
            ui.ctx().data_mut(|d| d.insert_temp(id, temp));
        }
    });
    let dist = crate::lessons::kv_decode::generate::next_token_dist(logits, temp, 8);
    let emitted = g.tokens.get(t).copied();
    let font = egui::FontId::monospace(crate::style::fit(size * 0.85));
    // A BPE piece (" where") needs more room than a byte ('a').
    let bpe = g.model_name() == crate::model::ModelName::Smollm2;
    let label_w = size * if bpe { 5.2 } else { 3.2 };
    let value_w = size * 3.4;
    let row_h = size * 1.25;
    // Bars stay inside the visible part of the view (a wide widget above may have widened this ui).
    let width = (ui.clip_rect().right() - ui.cursor().left() - 2.0)
        .min(ui.available_width())
        .max(40.0);
    for (b, p) in dist {
        let (rect, _) = ui.allocate_exact_size(egui::vec2(width, row_h), egui::Sense::hover());
        let painter = ui.painter_at(rect);
        let text = ui.visuals().text_color();
        painter.text(
            egui::pos2(rect.min.x, rect.center().y),
            egui::Align2::LEFT_CENTER,
            g.label(b),
            font.clone(),
            text,
        );
        let track = egui::Rect::from_min_max(
            egui::pos2(rect.min.x + label_w, rect.min.y + row_h * 0.15),
            egui::pos2(rect.max.x - value_w, rect.max.y - row_h * 0.15),
        );
        crate::ui::widgets::prob_bar(&painter, ui.visuals(), track, p, (Some(b) == emitted).then_some(2.5));
        painter.text(
            egui::pos2(rect.max.x, rect.center().y),
            egui::Align2::RIGHT_CENTER,
            format!("{p:.3}"),
            font.clone(),
            text,
        );
    }
    ui.add(
        egui::Label::new(
            RichText::new(if bpe {
                lang.t(
                    "outlined: the token the greedy decode emitted (the argmax, whatever T)",
                    "带框的是贪心解码输出的 token（argmax，与 T 无关）",
                )
            } else {
                lang.t(
                    "outlined: the byte the greedy decode emitted (the argmax, whatever T)",
                    "带框的是贪心解码输出的字节（argmax，与 T 无关）",
                )
            })
            .size(crate::style::fit(size * 0.9))
            .color(style::muted(ui.visuals())),
        )
        .wrap(),
    );
}

/// Whether decoding through the cache gave the logits of recomputing without one (f16 tolerance).
pub(super) fn recompute_line(cx: &ViewCtx, ui: &mut Ui, g: &crate::lessons::kv_decode::generate::ModelDecode) {
    let r = &g.check;
    let (text, color) = if r.passed() {
        (
            format!(
                "OK  {}: max abs {:.1e}",
                if g.model_name() == crate::model::ModelName::Smollm2 {
                    cx.t(
                        "last token's logits through the cache = recomputing the whole text without one (f16 cache)",
                        "经由缓存得到的最后一个 token 的 logits = 不用缓存重新计算整段文本（f16 缓存）",
                    )
                } else {
                    cx.t(
                        "last byte's logits through the cache = recomputing the whole text without one (f16 cache)",
                        "经由缓存得到的最后一个字节的 logits = 不用缓存重新计算整段文本（f16 缓存）",
                    )
                },
                r.max_abs
            ),
            style::pass(ui.visuals()),
        )
    } else {
        (
            format!("MISMATCH  {}", r.to_string().lines().next().unwrap_or_default()),
            style::fail(ui.visuals()),
        )
    };
    ui.label(RichText::new(text).size(crate::style::fit(cx.size * 0.9)).color(color));
}
