//! Lesson 3's views: the head split, every head's probabilities, concatenation and W_O, the GQA/MQA
//! grouping and the KV-cache bytes it saves.

use eframe::egui::{self, RichText, Ui};

use crate::lessons::attention_layer::AttnOut;
use crate::lessons::multi_head::{MultiHead, View};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::views::attention_layer::{head_label, score_hover};
use crate::ui::widgets::{Axes, ViewCtx, bytes, check_line, grid, heat_panel, kernel_panel, view_id, view_in};

impl LessonUi for MultiHead {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(a), Some(view)) = (out.downcast_ref::<AttnOut>(), View::from_name(view)) else {
            return;
        };
        let (t, hd, d, m) = (a.shape.seq, a.shape.head_dim(), a.shape.d_model, &a.maps);
        let lang = cx.lang;
        match view {
            View::HeadSplit => head_split(cx, ui, a),
            View::HeadsGrid => {
                let h = a.shape.n_heads;
                let rects = grid(ui.available_rect_before_wrap(), h);
                for (k, r) in rects.into_iter().enumerate() {
                    view_in(ui, r, |ui| {
                        let kv = a.shape.kv_head_of(k);
                        let title = format!("{} {k} (KV {kv})", cx.t("head", "头"));
                        cx.widgets.heat.row_sums = true;
                        heat_panel(
                            cx,
                            ui,
                            view_id("head", k),
                            &title,
                            &m.probs[k],
                            Colormap::Sequential,
                            Some((0.0, 1.0)),
                            Highlight::None,
                            Axes::QueryKey,
                            &|c| score_hover(lang, a, k, &a.core.probs, true, c),
                        );
                    });
                }
            }
            View::Concat => {
                let head = cx.t("head", "头");
                heat_panel(
                    cx,
                    ui,
                    view_id("concat", 0),
                    &format!(
                        "concat(head_0 … head_{})  [T={t}, {}]",
                        a.shape.n_heads - 1,
                        a.shape.n_heads * hd
                    ),
                    &m.concat,
                    Colormap::Diverging,
                    None,
                    Highlight::None,
                    Axes::TokenDim,
                    &|(i, j)| format!("{head} {} · dim {}: {:.4}", j / hd, j % hd, a.concat[[i, j]]),
                );
            }
            View::Y => {
                heat_panel(
                    cx,
                    ui,
                    view_id("y", 0),
                    &format!("Y = concat · W_O  [T={t}, d={d}]"),
                    &m.y,
                    Colormap::Diverging,
                    None,
                    Highlight::None,
                    Axes::TokenDim,
                    &|(i, j)| format!("Y[{i},{j}] = {:.4}", a.y[[i, j]]),
                );
            }
            View::KvGroups => kv_groups(cx, ui, a),
            View::KvBytes => kv_bytes(cx, ui, a),
            View::ModelTable => model_table(cx, ui),
            View::ModelHeads => {
                if let Some(m) = &a.model {
                    model_heads(cx, ui, m);
                }
            }
            View::Lines => {
                if let Some(m) = &a.model {
                    model_lines(cx, ui, m);
                }
            }
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
        }
    }
}

fn head_split(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let lang = cx.lang;
    let size = cx.size;
    let (h, hd, d) = (a.shape.n_heads, a.shape.head_dim(), a.shape.d_model);
    ui.label(
        RichText::new(format!(
            "d_model = {d} = {h} × {hd}  ({} × head_dim)",
            lang.t("heads", "头数")
        ))
        .strong()
        .size(size * 1.2),
    );
    let w = ui.available_width();
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, 56.0), egui::Sense::hover());
    let p = ui.painter_at(rect);
    for k in 0..h {
        let x0 = rect.left() + w * k as f32 / h as f32;
        let x1 = rect.left() + w * (k + 1) as f32 / h as f32;
        let r = egui::Rect::from_min_max(egui::pos2(x0 + 1.0, rect.top()), egui::pos2(x1 - 1.0, rect.bottom()));
        p.rect_filled(r, 2.0, crate::style::series(k));
        if r.width() > 40.0 {
            p.text(
                r.center(),
                egui::Align2::CENTER_CENTER,
                format!("{} {k}\n{hd} {}", lang.t("head", "头"), lang.t("dims", "维")),
                egui::FontId::proportional(size * 0.8),
                crate::style::ink_on(crate::style::request(k)),
            );
        }
    }
    ui.add_space(8.0);
    ui.label(lang.t(
        "Q of every head, side by side (columns = d_model):",
        "各个头的 Q 并排（列 = d_model）：",
    ));
    let q = &a.qkv.q;
    let t = a.shape.seq;
    let data = a.maps.q_heads.clone();
    heat_panel(
        cx,
        ui,
        view_id("split", 0),
        &format!("Q  [T={t}, {h}×{hd}]"),
        &data,
        Colormap::Diverging,
        None,
        Highlight::None,
        Axes::TokenDim,
        &|(i, j)| {
            format!(
                "token {i}, {} {} dim {}: {:.4}",
                lang.t("head", "头"),
                j / hd,
                j % hd,
                q[[j / hd, i, j % hd]]
            )
        },
    );
}

fn kv_groups(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let lang = cx.lang;
    let size = cx.size;
    let (h, kvh) = (a.shape.n_heads, a.shape.n_kv_heads);
    let name = if kvh == h {
        "MHA"
    } else if kvh == 1 {
        "MQA"
    } else {
        "GQA"
    };
    ui.label(
        RichText::new(format!(
            "{name}: {h} {} · {kvh} {} · {} {}",
            lang.t("query heads", "个 query 头"),
            lang.t("KV heads", "个 KV 头"),
            lang.t("group size", "组大小"),
            a.shape.group()
        ))
        .strong()
        .size(size * 1.15),
    );
    let w = ui.available_width();
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, 170.0), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let qy = rect.top() + 30.0;
    let ky = rect.bottom() - 30.0;
    let tc = ui.visuals().text_color();
    p.text(
        egui::pos2(rect.left(), rect.top()),
        egui::Align2::LEFT_TOP,
        lang.t("query heads", "query 头"),
        egui::FontId::proportional(size * 0.8),
        tc,
    );
    p.text(
        egui::pos2(rect.left(), rect.bottom()),
        egui::Align2::LEFT_BOTTOM,
        lang.t("K/V heads (cached)", "K/V 头（缓存）"),
        egui::FontId::proportional(size * 0.8),
        tc,
    );
    let qx = |k: usize| rect.left() + 40.0 + (w - 80.0) * (k as f32 + 0.5) / h as f32;
    let kx = |k: usize| rect.left() + 40.0 + (w - 80.0) * (k as f32 + 0.5) / kvh as f32;
    for k in 0..h {
        let g = a.shape.kv_head_of(k);
        p.line_segment(
            [egui::pos2(qx(k), qy + 12.0), egui::pos2(kx(g), ky - 14.0)],
            egui::Stroke::new(1.5, crate::style::series(g)),
        );
    }
    let qs = ((w - 80.0) / h as f32 * 0.4).clamp(3.0, 12.0);
    for k in 0..h {
        let c = egui::pos2(qx(k), qy);
        p.circle_filled(c, qs, crate::style::series(a.shape.kv_head_of(k)));
    }
    for g in 0..kvh {
        let r = egui::Rect::from_center_size(
            egui::pos2(kx(g), ky),
            egui::vec2(((w - 80.0) / kvh as f32 * 0.6).clamp(10.0, 80.0), 26.0),
        );
        p.rect_filled(r, 3.0, crate::style::series(g));
        p.text(
            r.center(),
            egui::Align2::CENTER_CENTER,
            format!("K,V {g}"),
            egui::FontId::proportional(size * 0.75),
            crate::style::ink_on(crate::style::request(g)),
        );
    }
    kv_bytes(cx, ui, a);
}

fn kv_bytes(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let lang = cx.lang;
    let size = cx.size;
    let (h, kvh, hd) = (
        a.shape.n_heads as u64,
        a.shape.n_kv_heads as u64,
        a.shape.head_dim() as u64,
    );
    let per = |k: u64| crate::cache::kv_bytes_per_token(1, k, hd, crate::cache::KvDtype::F16);
    ui.add_space(6.0);
    ui.label(
        RichText::new(lang.t(
            "KV-cache bytes per token, one layer, fp16:",
            "每个 token、每层的 KV 缓存字节数（fp16）：",
        ))
        .strong()
        .size(size),
    );
    crate::ui::widgets::fitted_table(ui, "kvbytes", size, |ui, size| {
        egui::Grid::new("kvbytes")
            .min_col_width(0.0)
            .striped(true)
            .show(ui, |ui| {
                ui.label("");
                ui.label("2 · kv_heads · head_dim · 2 B");
                ui.label(lang.t("vs MHA", "相对 MHA"));
                ui.end_row();
                for (name, k) in [("MHA", h), (lang.t("this setting", "当前设置"), kvh), ("MQA", 1)] {
                    let mark = if k == kvh { "> " } else { "" };
                    ui.label(RichText::new(format!("{mark}{name}")).size(size));
                    ui.label(
                        RichText::new(format!("2 · {k} · {hd} · 2 = {}", bytes(per(k) as f64)))
                            .size(size)
                            .monospace(),
                    );
                    ui.label(RichText::new(format!("{:.3}×", per(k) as f64 / per(h) as f64)).size(size));
                    ui.end_row();
                }
            })
    });
}

fn model_table(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let l = cx.lesson;
    ui.label(
        RichText::new(lang.t(
            "KV cache of real models (computed from their configs, fp16):",
            "真实模型的 KV 缓存（由其配置计算，fp16）：",
        ))
        .strong()
        .size(size),
    );
    crate::ui::widgets::fitted_table(ui, "models", size, |ui, size| {
        egui::Grid::new("models")
            .min_col_width(0.0)
            .striped(true)
            .show(ui, |ui| {
                for hdr in [
                    lang.t("model", "模型"),
                    lang.t("layers", "层数"),
                    lang.t("heads / KV", "头数 / KV"),
                    "head_dim",
                    lang.t("per token", "每 token"),
                    lang.t("4k-token context", "4k token 上下文"),
                ] {
                    ui.label(RichText::new(hdr).strong().size(size * 0.9));
                }
                ui.end_row();
                // The configs are quoted (published, drawn in the quote colour); the byte counts are computed.
                let quote = crate::ui::text::quote_color(ui.visuals());
                for m in &l.file.models {
                    let b = m.kv_bytes_per_token();
                    ui.label(RichText::new(&m.name).size(size * 0.9));
                    ui.label(
                        RichText::new(m.layers.to_string())
                            .size(size * 0.9)
                            .italics()
                            .color(quote),
                    );
                    ui.label(
                        RichText::new(format!("{} / {}", m.heads, m.kv_heads))
                            .size(size * 0.9)
                            .italics()
                            .color(quote),
                    );
                    ui.label(
                        RichText::new(m.head_dim.to_string())
                            .size(size * 0.9)
                            .italics()
                            .color(quote),
                    );
                    ui.label(RichText::new(bytes(b as f64)).size(size * 0.9).monospace());
                    ui.label(RichText::new(bytes(b as f64 * 4096.0)).size(size * 0.9).monospace());
                    ui.end_row();
                }
            })
    });
    ui.label(
        RichText::new("2 · layers · kv_heads · head_dim · bytes")
            .size(size * 0.85)
            .monospace(),
    );
    ui.label(
        RichText::new(lang.t(
            "configs quoted from each model's published config.json (GPT-3: its paper), in assets/facts.toml",
            "配置引自各模型公开的 config.json（GPT-3 引自其论文），见 assets/facts.toml",
        ))
        .size(size * 0.72)
        .italics()
        .color(crate::ui::text::quote_color(ui.visuals())),
    );
}

/// The trained model's heads in one layer on one text: a heatmap per head titled with its KV head and
/// its measured label, the text above, the check below.
/// Every head's attention from the last token as lines (BertViz's view), each head in its colour.
fn model_lines(cx: &mut ViewCtx, ui: &mut Ui, m: &crate::lessons::attention_layer::heads::ModelHeads) {
    let (lang, size) = (cx.lang, cx.size);
    let t = m.probs.shape()[1];
    if t == 0 {
        return;
    }
    let q = t - 1;
    let rows: Vec<Vec<f32>> = (0..m.n_heads)
        .map(|h| (0..t).map(|j| m.probs[[h, q, j]]).collect())
        .collect();
    let tok = m.ticks.get(q).cloned().unwrap_or_default();
    ui.add(
        egui::Label::new(
            RichText::new(match lang {
                crate::ui::text::Lang::Zh => {
                    format!("最后一个 token（{q}，{tok}）在各头中读取的键：每个头一种颜色，线宽 = 权重")
                }
                _ => {
                    format!("what the last token ({q}, {tok}) reads in each head: one colour per head, width = weight")
                }
            })
            .strong()
            .size(size),
        )
        .wrap(),
    );
    ui.horizontal_wrapped(|ui| {
        for h in 0..m.n_heads {
            crate::ui::widgets::legend_chip(
                ui,
                crate::style::request(h),
                &format!("{} {h}", cx.t("head", "头")),
                size,
            );
        }
    });
    let heads: Vec<crate::ui::widgets::LineHead> = rows
        .iter()
        .enumerate()
        .map(|(h, row)| crate::ui::widgets::LineHead {
            row,
            color: crate::style::series(h),
        })
        .collect();
    crate::ui::widgets::attention_lines(ui, &m.ticks, q, &heads, size);
}

fn model_heads(cx: &mut ViewCtx, ui: &mut Ui, m: &crate::lessons::attention_layer::heads::ModelHeads) {
    let (lang, size) = (cx.lang, cx.size);
    let (l, p, h, kv) = (m.layer, &m.prompt, m.n_heads, m.n_kv_heads);
    let title = match lang {
        crate::ui::text::Lang::Zh => format!("训练好的模型，第 {l} 层 · 文本：{p} · H {h} / KV {kv}"),
        _ => format!("trained model, layer {l} · text: {p} · H {h} / KV {kv}"),
    };
    ui.label(RichText::new(title).strong().size(size));
    cx.widgets.heat.reserve_below = 1.6 * size;
    let rect = ui.available_rect_before_wrap();
    let rect = egui::Rect::from_min_max(rect.min, egui::pos2(rect.max.x, rect.max.y - 1.8 * size));
    let group = m.n_heads / m.n_kv_heads.max(1);
    for (k, r) in grid(rect, m.n_heads).into_iter().enumerate() {
        view_in(ui, r, |ui| {
            let label = head_label(lang, m.labels[k], m.profiles[k]);
            let title = format!("{} {k} (KV {}): {label}", cx.t("head", "头"), k / group.max(1));
            let probs = &m.probs;
            let tokens = &m.tokens;
            cx.widgets.heat.tokens = Some(m.ticks.clone());
            heat_panel(
                cx,
                ui,
                view_id("model-head", k),
                &title,
                &m.maps[k],
                Colormap::Sequential,
                Some((0.0, 1.0)),
                Highlight::None,
                Axes::QueryKey,
                &|(i, j)| {
                    let ch = crate::model::byte_label;
                    format!(
                        "query {i} {} → key {j} {}: p = {:.4}",
                        ch(tokens[i]),
                        ch(tokens[j]),
                        probs[[k, i, j]]
                    )
                },
            );
        });
    }
    ui.allocate_rect(
        egui::Rect::from_min_max(
            egui::pos2(rect.min.x, rect.max.y),
            egui::pos2(rect.max.x, rect.max.y + 0.2),
        ),
        egui::Sense::hover(),
    );
    check_line(
        cx,
        ui,
        Some(&m.check),
        lang.t("trained model's attention", "训练好的模型的注意力"),
    );
}
