//! Lesson 3's views: the head split, every head's probabilities, concatenation and W_O, the GQA/MQA
//! grouping and the KV-cache bytes it saves.

use crate::ui::text::Slant as _;
use eframe::egui::{self, RichText, Ui};

use crate::lessons::attention_layer::AttnOut;
use crate::lessons::multi_head::{MultiHead, View};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::views::attention_layer::{head_label, score_hover};
use crate::ui::widgets::{
    Axes, Cell, Table, ViewCtx, bytes, check_line, grid, heat_panel, kernel_panel, view_id, view_in,
};

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
        .size(crate::style::fit(size * 1.2)),
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
                egui::FontId::proportional(crate::style::fit(size * 0.8)),
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

/// MHA, GQA and MQA side by side for the layer's query heads: query heads on top, the cached K/V heads
/// below, a line from each query head to the K/V head it reads (query head `q` reads `q / (H / KVH)`),
/// coloured by group, with each layout's K/V bytes per token. The slider's layout is outlined as current.
fn kv_groups(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let lang = cx.lang;
    let size = cx.size;
    let (h, kvh, hd) = (a.shape.n_heads, a.shape.n_kv_heads, a.shape.head_dim());
    ui.label(
        RichText::new(format!(
            "{}: {h} {} · {kvh} {} · {} {}",
            a.shape.family(),
            lang.t("query heads", "个 query 头"),
            lang.t("KV heads", "个 KV 头"),
            lang.t("group size", "组大小"),
            a.shape.group()
        ))
        .strong()
        .size(crate::style::fit(size * 1.15)),
    );
    // The three layouts: MHA, a GQA (the slider's, or the middle divisor of H), MQA; duplicates dropped
    // (one head has only MHA = MQA).
    let divisors: Vec<usize> = (2..h).filter(|k| h.is_multiple_of(*k)).collect();
    let gqa = if crate::math::kv_family(h, kvh) == "GQA" {
        Some(kvh)
    } else {
        divisors.get(divisors.len() / 2).copied()
    };
    let mut layouts = vec![h];
    layouts.extend(gqa);
    if h > 1 {
        layouts.push(1);
    }
    let per = |k: usize| crate::cache::kv_bytes_per_token(1, k as u64, hd as u64, crate::cache::KvDtype::F16);
    let w = ui.available_width();
    let panel_h = (ui.available_height() * 0.55).clamp(6.0 * size, 16.0 * size);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, panel_h), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let tc = ui.visuals().text_color();
    let gap = size;
    let pw = (w - gap * (layouts.len() as f32 - 1.0)) / layouts.len() as f32;
    for (i, &k) in layouts.iter().enumerate() {
        let r = egui::Rect::from_min_size(
            egui::pos2(rect.left() + i as f32 * (pw + gap), rect.top()),
            egui::vec2(pw, panel_h),
        );
        let current = k == kvh;
        let stroke = if current {
            egui::Stroke::new(3.0, crate::style::CURRENT_32)
        } else {
            egui::Stroke::new(1.0, crate::style::muted(ui.visuals()))
        };
        p.rect_stroke(r.shrink(1.5), 4.0, stroke, egui::StrokeKind::Inside);
        let caption = format!(
            "{} · KV {k}{}",
            crate::math::kv_family(h, k),
            if current {
                lang.t(" · this layer", " · 当前层")
            } else {
                ""
            }
        );
        let font = egui::FontId::proportional(crate::style::fit(size * 0.9));
        let cap = p.layout(caption, font.clone(), tc, pw - 12.0);
        let cap_h = cap.size().y;
        p.galley(r.left_top() + egui::vec2(8.0, 6.0), cap, tc);
        let by = p.layout(
            format!(
                "{} {} · {:.3}× MHA",
                bytes(per(k) as f64),
                lang.t("/ token / layer", "/ token / 层"),
                per(k) as f64 / per(h) as f64
            ),
            font,
            tc,
            pw - 12.0,
        );
        let by_h = by.size().y;
        p.galley(egui::pos2(r.left() + 8.0, r.bottom() - 6.0 - by_h), by, tc);
        let inner = egui::Rect::from_min_max(
            egui::pos2(r.left() + 10.0, r.top() + 12.0 + cap_h),
            egui::pos2(r.right() - 10.0, r.bottom() - 12.0 - by_h),
        );
        let qy = inner.top() + size * 0.5;
        let ky = inner.bottom() - size * 0.6;
        let group = h / k;
        let qx = |q: usize| inner.left() + inner.width() * (q as f32 + 0.5) / h as f32;
        let kx = |g: usize| inner.left() + inner.width() * (g as f32 + 0.5) / k as f32;
        for q in 0..h {
            let g = q / group;
            p.line_segment(
                [egui::pos2(qx(q), qy), egui::pos2(kx(g), ky)],
                egui::Stroke::new(1.5, crate::style::series(g)),
            );
        }
        let qs = (inner.width() / h as f32 * 0.35).clamp(2.5, size * 0.4);
        for q in 0..h {
            p.circle_filled(egui::pos2(qx(q), qy), qs, crate::style::series(q / group));
        }
        let bw = (inner.width() / k as f32 * 0.7).clamp(6.0, 6.0 * size);
        for g in 0..k {
            let b = egui::Rect::from_center_size(egui::pos2(kx(g), ky), egui::vec2(bw, size * 1.1));
            p.rect_filled(b, 3.0, crate::style::series(g));
            let label = p.layout_no_wrap(
                format!("{g}"),
                egui::FontId::proportional(crate::style::fit(size * 0.75)),
                crate::style::ink_on(crate::style::request(g)),
            );
            if label.size().x < bw - 2.0 {
                p.galley(
                    b.center() - label.size() / 2.0,
                    label,
                    crate::style::ink_on(crate::style::request(g)),
                );
            }
        }
    }
    ui.label(
        RichText::new(lang.t(
            "dots: query heads · boxes: the K/V heads the cache stores · a line: which K/V head a query head reads",
            "圆点：query 头 · 方块：缓存中存储的 K/V 头 · 连线：query 头读取哪个 K/V 头",
        ))
        .size(crate::style::fit(size * 0.85)),
    );
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
        .size(crate::style::fit(size)),
    );
    let mut t = Table::new(["", "2 · kv_heads · head_dim · 2 B", lang.t("vs MHA", "相对 MHA")]);
    for (name, k) in [("MHA", h), (lang.t("this setting", "当前设置"), kvh), ("MQA", 1)] {
        let mark = if k == kvh { "> " } else { "" };
        t.row([
            Cell::new(format!("{mark}{name}")),
            Cell::new(format!("2 · {k} · {hd} · 2 = {}", bytes(per(k) as f64))).mono(),
            Cell::new(format!("{:.3}×", per(k) as f64 / per(h) as f64)),
        ]);
    }
    crate::ui::widgets::table(ui, lang, size, &t);
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
        .size(crate::style::fit(size)),
    );
    // The configs are quoted (published, drawn in the quote colour); the byte counts are computed.
    let quote = crate::ui::text::quote_color(ui.visuals());
    let mut t = Table::new([
        lang.t("model", "模型"),
        lang.t("layers", "层数"),
        lang.t("heads / KV", "头数 / KV"),
        "head_dim",
        lang.t("per token", "每 token"),
        lang.t("4k-token context", "4k token 上下文"),
    ]);
    for m in &l.file.models {
        let b = m.kv_bytes_per_token();
        t.row([
            Cell::new(&m.name),
            Cell::new(m.layers.to_string()).color(quote),
            Cell::new(format!("{} / {}", m.heads, m.kv_heads)).color(quote),
            Cell::new(m.head_dim.to_string()).color(quote),
            Cell::new(bytes(b as f64)).mono(),
            Cell::new(bytes(b as f64 * 4096.0)).mono(),
        ]);
    }
    crate::ui::widgets::table(ui, lang, size * 0.9, &t.below(5.0));
    ui.label(
        RichText::new("2 · layers · kv_heads · head_dim · bytes")
            .size(crate::style::fit(size * 0.85))
            .monospace(),
    );
    ui.label(
        RichText::new(lang.t(
            "configs quoted from each model's published config.json (GPT-3: its paper), in assets/facts.toml",
            "配置引自各模型公开的 config.json（GPT-3 引自其论文），见 assets/facts.toml",
        ))
        .size(crate::style::fit(size * 0.72))
        .slant()
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
    // The byte as a quoted label: the ticks' marks (‿ for a space) exist only in the monospace font.
    let tok = m.names.get(q).cloned().unwrap_or_default();
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
            .size(crate::style::fit(size)),
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

/// A head's label in a few words ("sink 53%", "i−1 69%"), for grids of many heads.
fn short_label(lang: crate::ui::text::Lang, label: Option<crate::model::heads::Label>) -> String {
    use crate::model::heads::Pattern;
    let zh = lang == crate::ui::text::Lang::Zh;
    match label {
        Some(l) => {
            let pct = (l.share * 100.0).round();
            match l.pattern {
                Pattern::FirstToken if zh => format!("汇聚头 {pct}%"),
                Pattern::FirstToken => format!("sink {pct}%"),
                p => format!("{} {pct}%", p.key(zh)),
            }
        }
        None => lang.t("no pattern tested", "不符合所测模式").to_string(),
    }
}

fn model_heads(cx: &mut ViewCtx, ui: &mut Ui, m: &crate::lessons::attention_layer::heads::ModelHeads) {
    let (lang, size) = (cx.lang, cx.size);
    let (l, p, h, kv) = (m.layer, &m.prompt, m.n_heads, m.n_kv_heads);
    let title = match lang {
        crate::ui::text::Lang::Zh => format!(
            "{}，第 {l} 层 · 文本：{p} · H {h} / KV {kv}",
            crate::ui::views::attention_layer::model_name(m.model, lang)
        ),
        _ => format!(
            "{}, layer {l} · text: {p} · H {h} / KV {kv}",
            crate::ui::views::attention_layer::model_name(m.model, lang)
        ),
    };
    ui.label(RichText::new(title).strong().size(crate::style::fit(size)));
    cx.widgets.heat.reserve_below = 1.6 * size;
    let rect = ui.available_rect_before_wrap();
    let rect = egui::Rect::from_min_max(rect.min, egui::pos2(rect.max.x, rect.max.y - 1.8 * size));
    let group = m.n_heads / m.n_kv_heads.max(1);
    for (k, r) in grid(rect, m.n_heads).into_iter().enumerate() {
        view_in(ui, r, |ui| {
            // Nine heads (SmolLM2) leave room for one line of title each: the short label.
            let label = if m.n_heads > 4 {
                short_label(lang, m.labels[k])
            } else {
                head_label(lang, m.labels[k], m.profiles[k])
            };
            let title = format!("{} {k} (KV {}): {label}", cx.t("head", "头"), k / group.max(1));
            let probs = &m.probs;
            let names = &m.names;
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
                    format!(
                        "query {i} {} → key {j} {}: p = {:.4}",
                        names[i],
                        names[j],
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
