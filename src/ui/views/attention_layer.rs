//! The views lessons 1–3 share over an [`AttnOut`]: X and the weights, Q/K/V, scores, one softmax row,
//! probabilities, P·V and the output, each with hover text that shows the numbers behind a cell.

use std::sync::Arc;

use eframe::egui::{self, RichText, Ui};

use crate::lessons::attention_layer::AttnOut;
use crate::render::colormap::{Colormap, lut_color};
use crate::render::heatmap::{HeatmapData, Highlight};
use crate::ui::text::Lang;
use crate::ui::widgets::{Axes, ViewCtx, grid, heat_panel, view_id, view_in};
mod tokens;
pub use tokens::{head_label, pv_hover, rows_only, score_hover, seq_highlight, token_ticks};
use tokens::{spaced, token_name};

/// X, the token embeddings.
pub fn x(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let (t, d, x) = (a.shape.seq, a.w.x.ncols(), &a.w.x);
    let token = cx.t("token", "token");
    let title = match &a.trained {
        Some(m) => format!(
            "X = RMSNorm(h), {} {}  [T={t}, d={d}]",
            cx.t("the input of layer", "第"),
            match cx.lang {
                Lang::Zh => format!("{} 层的输入", m.layer),
                _ => m.layer.to_string(),
            }
        ),
        None => format!("X  [T={t}, d={d}]"),
    };
    token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id("x", 0),
        &title,
        &a.maps.x,
        Colormap::Diverging,
        None,
        Highlight::None,
        Axes::TokenDim,
        &|(i, j)| {
            format!(
                "X[{i},{j}] = {:.4}  ({token} {i}{})",
                x[[i, j]],
                spaced(token_name(a, i))
            )
        },
    );
}

/// W_Q, W_K and W_V side by side.
pub fn weights(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let m = &a.maps;
    let rects = grid(ui.available_rect_before_wrap(), 3);
    for (k, (name, data)) in [("W_Q", &m.wq), ("W_K", &m.wk), ("W_V", &m.wv)].into_iter().enumerate() {
        // A trained layer shows one head's columns: the query head's of W_Q, its KV head's of W_K, W_V.
        let of = a.trained.as_ref().map_or(String::new(), |t| match k {
            0 => format!(" ({} {})", cx.t("head", "头"), t.head),
            _ => format!(" (KV {} {})", cx.t("head", "头"), t.kv_head),
        });
        view_in(ui, rects[k], |ui| {
            heat_panel(
                cx,
                ui,
                view_id("w", k),
                &format!("{name}{of}  [{}, {}]", data.rows, data.cols),
                data,
                Colormap::Diverging,
                None,
                Highlight::None,
                Axes::InOut,
                &|_| String::new(),
            );
        });
    }
}

/// Which projection [`projection`] shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qkv {
    /// Queries.
    Q,
    /// Keys.
    K,
    /// Values.
    V,
}

/// Q, K or V of head 0: X·W.
pub fn projection(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut, which: Qkv) {
    let (t, hd, m) = (a.shape.seq, a.shape.head_dim(), &a.maps);
    let (id, name, maps, arr) = match which {
        Qkv::Q => ("q", "Q", &m.q, &a.qkv.q),
        Qkv::K => ("k", "K", &m.k, &a.qkv.k),
        Qkv::V => ("v", "V", &m.v, &a.qkv.v),
    };
    let hl = rows_only(seq_highlight(cx, a));
    // The model rotates Q and K by position (RoPE) before the dot product; V is not rotated.
    let rope = if a.trained.is_some() && which != Qkv::V {
        cx.t(", RoPE-rotated", "，经 RoPE 旋转")
    } else {
        ""
    };
    token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id(id, 0),
        &format!("{name} = X·W_{name}{rope}  [T={t}, {hd}]"),
        &maps[0],
        Colormap::Diverging,
        None,
        hl,
        Axes::TokenDim,
        &|(i, j)| format!("{name}[{i},{j}] = {:.4}{}", arr[[0, i, j]], spaced(token_name(a, i))),
    );
}

/// Head 0's scores `QKᵀ/√d_k`: `data` is the masked or the unmasked matrix, `masked` says which.
pub fn scores(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut, id: &str, data: &Arc<HeatmapData>, masked: bool) {
    let lang = cx.lang;
    let t = a.shape.seq;
    let title = match (masked, a.scaled) {
        (true, _) => format!(
            "{}  [T={t}, T={t}]",
            cx.t(
                "masked scores QK^T/√d_k (−∞ hatched)",
                "掩码后的分数 QK^T/√d_k（−∞ 为斜纹）"
            )
        ),
        (false, true) => format!("{}  [T={t}, T={t}]", cx.t("scores QK^T/√d_k", "分数 QK^T/√d_k")),
        (false, false) => format!(
            "{}  [T={t}, T={t}]",
            cx.t("scores QK^T, not scaled", "分数 QK^T（未缩放）")
        ),
    };
    let hl = seq_highlight(cx, a);
    token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id(id, 0),
        &title,
        data,
        Colormap::Diverging,
        None,
        hl,
        Axes::QueryKey,
        &|c| score_hover(lang, a, 0, &a.core.probs, masked, c),
    );
}

/// Head 0's probabilities: `data`/`probs` are the masked or unmasked result (`mask_on` says which).
pub fn probs(
    cx: &mut ViewCtx,
    ui: &mut Ui,
    a: &AttnOut,
    data: &Arc<HeatmapData>,
    probs: &ndarray::Array3<f32>,
    mask_on: bool,
) {
    let lang = cx.lang;
    let t = a.shape.seq;
    let mut title = format!(
        "P = softmax(scores)  [T={t}, T={t}]  {}",
        cx.t("each row sums to 1", "每行之和为 1")
    );
    if let Some(m) = a.trained.as_ref().filter(|_| mask_on) {
        title = format!("{title} · {}", head_label(lang, m.label, m.profile));
    }
    let hl = seq_highlight(cx, a);
    cx.widgets.heat.row_sums = true;
    token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id(if mask_on { "probs" } else { "probs-off" }, 0),
        &title,
        data,
        Colormap::Sequential,
        Some((0.0, 1.0)),
        hl,
        Axes::QueryKey,
        &|c| score_hover(lang, a, 0, probs, mask_on, c),
    );
}

/// P, V and P·V side by side.
pub fn pv(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let m = &a.maps;
    let rects = grid(ui.available_rect_before_wrap(), 3);
    #[allow(clippy::type_complexity)]
    let pairs: [(&str, &Arc<HeatmapData>, Colormap, Option<(f32, f32)>, Axes); 3] = [
        ("P", &m.probs[0], Colormap::Sequential, Some((0.0, 1.0)), Axes::QueryKey),
        ("V", &m.v[0], Colormap::Diverging, None, Axes::TokenDim),
        ("P·V", &m.out[0], Colormap::Diverging, None, Axes::QueryDim),
    ];
    for (k, (name, data, cm, range, axes)) in pairs.into_iter().enumerate() {
        view_in(ui, rects[k], |ui| {
            let title = format!("{name}  [{}, {}]", data.rows, data.cols);
            let hover = |c| if k == 2 { pv_hover(a, 0, c) } else { String::new() };
            cx.widgets.heat.row_sums = k == 0;
            token_ticks(cx, a);
            heat_panel(
                cx,
                ui,
                view_id("pv", k),
                &title,
                data,
                cm,
                range,
                Highlight::None,
                axes,
                &hover,
            );
        });
    }
}

/// Head 0's output P·V.
pub fn out(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let (t, hd) = (a.shape.seq, a.shape.head_dim());
    let hl = rows_only(seq_highlight(cx, a));
    let title = format!(
        "{}  [T={t}, {hd}]",
        cx.t(
            "output P·V: each row mixes the V rows",
            "输出 P·V：每行是 V 各行的加权混合"
        )
    );
    token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id("out", 0),
        &title,
        &a.maps.out[0],
        Colormap::Diverging,
        None,
        hl,
        Axes::QueryDim,
        &|c| pv_hover(a, 0, c),
    );
}

/// The query row a softmax view explains: the step's highlighted row, or the middle one.
pub fn highlighted_row(cx: &ViewCtx, a: &AttnOut) -> usize {
    match seq_highlight(cx, a) {
        Highlight::Row(r) | Highlight::Cell(r, _) => r,
        _ => a.shape.seq / 2,
    }
}

/// One row's scores and probabilities as bars, with the sum of the probabilities.
pub fn softmax_row(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut, row: usize, causal_note: bool) {
    let lang = cx.lang;
    let size = cx.size;
    let t = a.shape.seq;
    let scores: Vec<f32> = (0..t).map(|j| a.core.scores[[0, row, j]]).collect();
    let probs: Vec<f32> = (0..t).map(|j| a.core.probs[[0, row, j]]).collect();
    let sum: f64 = probs.iter().map(|&p| p as f64).sum();
    ui.label(
        RichText::new(format!(
            "{} {row}: softmax(s)_j = exp(s_j − max s) / Σ_k exp(s_k − max s)",
            lang.t("query row", "查询行")
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let avail = ui.available_size();
    // Below the bars: the sum, and the masked-keys note (wrapped to the view's width); the bars take the
    // rest, so the note is never cut off at the bottom.
    let masked = scores.iter().filter(|s| !s.is_finite()).count();
    let note = (causal_note || masked > 0).then(|| {
        format!(
            "{masked} {} {}",
            lang.t(
                "keys masked (exp(−∞) = 0); the visible",
                "个键被掩码（exp(−∞) = 0）；其余"
            ),
            lang.t("ones share the whole probability mass", "可见的键分享全部概率")
        )
    });
    let text_h = |text: &str, s: f32| {
        ui.painter()
            .layout(
                text.to_string(),
                egui::FontId::proportional(crate::style::fit(s)),
                ui.visuals().text_color(),
                avail.x,
            )
            .size()
            .y
    };
    let spacing = ui.spacing().item_spacing.y;
    let below = text_h("Σ", size) + spacing + note.as_deref().map_or(0.0, |n| text_h(n, size * 0.9) + spacing);
    let h = ((avail.y - size - below - spacing) / 2.0).max(40.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(avail.x, 2.0 * h + size), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let n = t.max(1) as f32;
    let bw = rect.width() / n;
    let finite: Vec<f32> = scores.iter().copied().filter(|s| s.is_finite()).collect();
    let smax = finite.iter().fold(1e-6f32, |m, s| m.max(s.abs()));
    let base = rect.top() + h / 2.0;
    let text_color = ui.visuals().text_color();
    p.text(
        rect.left_top(),
        egui::Align2::LEFT_TOP,
        lang.t("scores s", "分数 s"),
        egui::FontId::proportional(crate::style::fit(size * 0.8)),
        text_color,
    );
    for (j, s) in scores.iter().enumerate() {
        let x0 = rect.left() + j as f32 * bw + bw * 0.1;
        let x1 = x0 + bw * 0.8;
        if s.is_finite() {
            let y = base - s / smax * (h / 2.0 - 4.0);
            // Positive scores in the diverging colormap's red, negative in its blue.
            let c = crate::style::c32(lut_color(Colormap::Diverging, if *s >= 0.0 { 230 } else { 25 }));
            p.rect_filled(
                egui::Rect::from_two_pos(egui::pos2(x0, base), egui::pos2(x1, y)),
                0.0,
                c,
            );
        } else {
            p.text(
                egui::pos2((x0 + x1) / 2.0, base),
                egui::Align2::CENTER_CENTER,
                "−∞",
                egui::FontId::proportional(crate::style::fit(size * 0.75)),
                crate::style::muted(ui.visuals()),
            );
        }
    }
    let pbase = rect.top() + 2.0 * h + size * 0.2;
    p.text(
        egui::pos2(rect.left(), rect.top() + h + 2.0),
        egui::Align2::LEFT_TOP,
        lang.t("probabilities p", "概率 p"),
        egui::FontId::proportional(crate::style::fit(size * 0.8)),
        text_color,
    );
    for (j, pr) in probs.iter().enumerate() {
        let x0 = rect.left() + j as f32 * bw + bw * 0.1;
        let x1 = x0 + bw * 0.8;
        let y = pbase - pr * (h - size);
        p.rect_filled(
            egui::Rect::from_two_pos(egui::pos2(x0, pbase), egui::pos2(x1, y)),
            0.0,
            crate::style::series(0),
        );
        if bw > 28.0 {
            p.text(
                egui::pos2((x0 + x1) / 2.0, y - 2.0),
                egui::Align2::CENTER_BOTTOM,
                format!("{pr:.2}"),
                egui::FontId::proportional(crate::style::fit(size * 0.7)),
                text_color,
            );
        }
    }
    ui.label(
        RichText::new(format!("Σ_j p_j = {sum:.6}"))
            .size(crate::style::fit(size))
            .strong(),
    );
    if let Some(note) = note {
        ui.add(egui::Label::new(RichText::new(note).size(crate::style::fit(size * 0.9))).wrap());
    }
}

/// Lessons 1–2's account of their weights: which head of the trained model the layer is, on which
/// text, and what the head does there (its measured label and shares); or, with random weights, how
/// to switch the model on.
/// The trained head's attention as lines (BertViz's view): from the step's query (the highlighted row,
/// or the last token) to every key, as thick and opaque as its weight.
pub fn lines(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let (lang, size) = (cx.lang, cx.size);
    let Some(m) = &a.trained else {
        ui.label(
            RichText::new(lang.t(
                "The line view shows a trained model's text: tick “Weights: trained model”.",
                "连线视图显示训练好的模型处理的文本：请勾选“权重：训练好的模型”。",
            ))
            .size(crate::style::fit(size)),
        );
        return;
    };
    let t = a.core.probs.shape()[1];
    if t == 0 {
        return;
    }
    let q = match seq_highlight(cx, a) {
        Highlight::Row(r) | Highlight::Cell(r, _) => r.min(t - 1),
        // A step's row past this text's end (a BPE text has fewer tokens than bytes): its middle.
        _ if cx.highlight.and_then(|h| h.row).is_some() => t / 2,
        _ => t - 1,
    };
    // Lesson 2's toggle: with the mask off, the lines come from the layer computed without it.
    let unmasked = a
        .unmasked
        .as_ref()
        .filter(|_| crate::lessons::get(cx.params, "mask_on", 1) == 0);
    let probs = unmasked.map_or(&a.core.probs, |u| &u.probs);
    let row: Vec<f32> = (0..t).map(|j| probs[[0, q, j]]).collect();
    // The byte as a quoted label: the ticks' marks (‿ for a space) exist only in the monospace font.
    let tok = m.names.get(q).cloned().unwrap_or_default();
    // `+ 0.0`: an empty sum is −0.0, which would print as "-0.0%".
    let future: f32 = row[q + 1..].iter().sum::<f32>() + 0.0;
    let mask_note = match (a.unmasked.is_some(), unmasked.is_some(), lang) {
        (false, _, _) => String::new(),
        (true, false, Lang::Zh) => "；因果掩码开：没有线通向未来".to_string(),
        (true, false, _) => "; causal mask on: no line reaches the future".to_string(),
        (true, true, Lang::Zh) => format!("；因果掩码关：未来的键拿到 {:.1}% 的权重", 100.0 * future),
        (true, true, _) => format!(
            "; causal mask off: the future keys get {:.1}% of the weight",
            100.0 * future
        ),
    };
    ui.add(
        egui::Label::new(
            RichText::new(match lang {
                Lang::Zh => format!("查询 {q}（{tok}）读取的键：线的粗细与不透明度 = 权重 p{mask_note}"),
                _ => format!("query {q} ({tok}) and the keys it reads: line width and opacity = weight p{mask_note}"),
            })
            .strong()
            .size(crate::style::fit(size)),
        )
        .wrap(),
    );
    crate::ui::widgets::attention_lines(
        ui,
        &m.ticks,
        q,
        &[crate::ui::widgets::LineHead {
            row: &row,
            color: crate::style::series(0),
        }],
        size,
    );
}

/// A model as the views name it.
pub fn model_name(m: crate::model::ModelName, lang: Lang) -> &'static str {
    match m {
        crate::model::ModelName::Tiny => lang.t("tiny trained model (kvscope-tiny)", "小型训练模型（kvscope-tiny）"),
        crate::model::ModelName::Smollm2 => "SmolLM2-135M-Instruct",
    }
}

pub fn trained_info(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let (lang, size) = (cx.lang, cx.size);
    let Some(m) = &a.trained else {
        ui.label(
            RichText::new(lang.t(
                "Weights: random (seeded). Choose a trained model under Parameters (Model) to run it on \
                 a text instead.",
                "权重：随机（带种子）。在“参数”的“模型”中选择一个训练好的模型，即可改为在一段文本上运行它。",
            ))
            .size(crate::style::fit(size)),
        );
        return;
    };
    // Set smaller rather than cut when it runs past the view (presentation mode at 1280×720).
    let brief = cx.presentation;
    let key = crate::ui::widgets::fit_key((m.layer, m.head, &m.text, m.tokens.len(), lang == Lang::Zh, brief));
    crate::ui::widgets::fitted_height(ui, "trained-info", key, size, |ui, size| {
        trained_info_at(lang, ui, m, size, brief)
    });
}

/// The trained head's panel; `brief` (presentation mode) keeps the model, the text and what the head
/// was measured to do, and leaves out the token index (the heatmaps' ticks name the tokens), the
/// label rule's numbers and the note on X, W_Q and the sliders, which a slide has no room for.
fn trained_info_at(
    lang: Lang,
    ui: &mut Ui,
    m: &crate::lessons::attention_layer::heads::TrainedHead,
    size: f32,
    brief: bool,
) {
    let group = m.n_heads / m.n_kv_heads.max(1);
    let line = |ui: &mut Ui, text: String, strong: bool| {
        let t = RichText::new(text).size(crate::style::fit(size));
        ui.add(egui::Label::new(if strong { t.strong() } else { t }).wrap());
    };
    line(
        ui,
        match lang {
            Lang::Zh => format!(
                "{}：第 {} 层（共 {} 层）· 查询头 {}（共 {} 个）· 它的 KV 头 {}（每 {} 个查询头共用一个）",
                model_name(m.model, lang),
                m.layer,
                m.layers,
                m.head,
                m.n_heads,
                m.kv_head,
                group
            ),
            _ => format!(
                "{}: layer {} of {} · query head {} of {} · its KV head {} (shared by {} query heads)",
                model_name(m.model, lang),
                m.layer,
                m.layers,
                m.head,
                m.n_heads,
                m.kv_head,
                group
            ),
        },
        true,
    );
    line(
        ui,
        format!(
            "{}: «{}»  ({} {})",
            lang.t("text", "文本"),
            m.text,
            m.tokens.len(),
            match m.model {
                crate::model::ModelName::Tiny => lang.t("bytes = tokens", "字节 = token"),
                crate::model::ModelName::Smollm2 => lang.t("tokens (BPE pieces)", "token（BPE 片段）"),
            }
        ),
        false,
    );
    // The tokens as the heatmaps' ticks name them.
    if !brief {
        let toks: Vec<String> = m.ticks.iter().enumerate().map(|(i, t)| format!("{i}:{t}")).collect();
        let toks = RichText::new(toks.join("  "))
            .monospace()
            .size(crate::style::fit(size * 0.8));
        ui.add(egui::Label::new(toks).wrap());
    }
    ui.add_space(size * 0.4);
    line(
        ui,
        format!(
            "{}: {}",
            lang.t("measured on this text", "在这段文本上测得"),
            head_label(lang, m.label, m.profile)
        ),
        true,
    );
    if brief {
        return;
    }
    if let Some(p) = m.profile {
        let h = crate::model::heads::THRESHOLDS;
        line(
            ui,
            match lang {
                Lang::Zh => format!(
                    "第 i ≥ 2 行：权重最多的固定偏移是 i−{}，平均 {:.1}%，在 {:.0}% 的行里是最亮的键（argmax） · token 0 上 {:.1}% · |i−j| ≤ {} 内 {:.1}%（标签规则：某个偏移或 token 0 的平均权重至少 {}%，或在至少 {}% 的行里最亮）",
                    p.best_offset,
                    p.offset_share * 100.0,
                    p.offset_argmax * 100.0,
                    p.sink_share * 100.0,
                    crate::model::heads::BAND,
                    p.band * 100.0,
                    h.0,
                    h.1
                ),
                _ => format!(
                    "rows i ≥ 2: the fixed offset with most weight is i−{}, {:.1}% on average, the row's brightest key (argmax) in {:.0}% of rows · on token 0 {:.1}% · within |i−j| ≤ {} {:.1}% (label rule: at least {}% mean weight on one offset or on token 0, or brightest there in at least {}% of rows)",
                    p.best_offset,
                    p.offset_share * 100.0,
                    p.offset_argmax * 100.0,
                    p.sink_share * 100.0,
                    crate::model::heads::BAND,
                    p.band * 100.0,
                    h.0,
                    h.1
                ),
            },
            false,
        );
    }
    ui.add_space(size * 0.4);
    line(
        ui,
        lang.t(
            "X is this layer's input after RMSNorm; W_Q holds this head's columns, W_K and W_V its KV \
             head's; Q and K are rotated by position (RoPE) before the dot product, as in the model. \
             The backend's kernels compute the scores, softmax and P·V from them. The sliders for T, d \
             and the seed do not apply: T is the text's length and d the model's width.",
            "X 是该层经 RMSNorm 后的输入；W_Q 取这个头的列，W_K 与 W_V 取其 KV 头的列；与模型中一样，Q 和 K \
             在点积前按位置旋转（RoPE）。分数、softmax 和 P·V 由后端的内核据此计算。T、d 和随机种子的滑块此时不起作用：\
             T 是文本的长度，d 是模型的宽度。",
        )
        .to_string(),
        false,
    );
}
