//! Lesson 11 step 2: the course notes' table of model scales, filled from the bundled configs, led by a
//! chart of what it shows about the cache: KV bytes per token against parameters, one point per model,
//! coloured by attention kind (the KV heads, not the size, set the cache).

use eframe::egui::{self, RichText, Ui};

use super::parts::{kind, note, title};
use crate::lessons::arch::{ArchOut, SEED_TABLE, attention_kind, params_text};
use crate::lessons::format_bytes;
use crate::style;
use crate::ui::widgets::{Cell, Chart, ChartAxis, Table, ViewCtx, table};

pub(super) fn scale(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut) {
    let size = cx.size;
    let lang = cx.lang;
    // In presentation mode the chart is the first page and the table the second; the window shows both.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(2));
    if page != Some(1) {
        title(
            ui,
            size,
            lang.t(
                "The notes' example models: KV per token against size",
                "笔记中的示例模型：每 token 的 KV 与模型规模",
            ),
        );
        let h = match page {
            Some(_) => ui.available_height() - size * 3.0,
            None => ui.available_height() * 0.5,
        };
        scale_chart(cx, ui, o, h.max(size * 9.0));
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("the table, from each config", "表，来自各配置"));
        return;
    }
    title(
        ui,
        size,
        lang.t(
            "The course notes' scale table, filled from the bundled configs",
            "课程笔记中的规模表，用内置配置填写",
        ),
    );
    let bad = style::fail(ui.visuals());
    let mut t = Table::new([
        lang.t("model", "模型"),
        lang.t(
            "notes: class · layers · heads · d_model",
            "笔记：规模 · 层 · 头 · d_model",
        ),
        lang.t("layers", "层"),
        lang.t("heads", "头"),
        lang.t("KV heads", "KV 头"),
        "head_dim",
        "d_model",
        lang.t("params", "参数"),
        lang.t("KV / token", "KV / token"),
    ]);
    for row in SEED_TABLE {
        let Some((i, m)) = o.named(row.model) else { continue };
        let out = row.outside(m);
        let band = |(a, b): (usize, usize)| if a == b { a.to_string() } else { format!("{a}-{b}") };
        let cell = |v: String, wrong: bool| Cell::new(v).mono().color_if(wrong, bad);
        t.row([
            Cell::new(&m.name),
            Cell::new(format!(
                "{} · {} · {} · {}",
                row.class,
                band(row.layers),
                band(row.heads),
                row.d_model
            )),
            cell(m.layers.to_string(), out[0]),
            cell(m.heads.to_string(), out[1]),
            cell(m.kv_heads.to_string(), false),
            cell(m.head_dim.to_string(), false),
            cell(m.hidden.to_string(), out[2]),
            cell(params_text(o.reports[i].parameters), false),
            cell(format_bytes(o.bf16_bpt[i]), false),
        ]);
    }
    table(ui, lang, size, &t.below(2.0));
    note(
        ui,
        size,
        lang.t(
            "Red: outside the notes' figure. KV per token in bf16, all layers. Parameters counted from each config.",
            "红色：超出笔记给出的数值。每 token 的 KV 按 bf16、全部层计算。参数量由各配置计算得出。",
        ),
    );
}

/// KV bytes per token (bf16, all layers; log axis) against parameters (log axis): one point per model of
/// the table, coloured by attention kind and labelled with its name (models at the same point share a
/// label).
fn scale_chart(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, h: f32) {
    let (lang, size) = (cx.lang, cx.size);
    // (names, params, bytes per token, kind) of each point.
    let mut pts: Vec<(Vec<String>, f64, f64, &'static str)> = Vec::new();
    for row in SEED_TABLE {
        let Some((i, m)) = o.named(row.model) else { continue };
        let (p, b, k) = (o.reports[i].parameters as f64, o.bf16_bpt[i], attention_kind(m));
        match pts
            .iter_mut()
            .find(|q| q.2 == b && q.3 == k && (q.1 / p).log10().abs() < 0.15)
        {
            Some(q) => q.0.push(m.name.clone()),
            None => pts.push((vec![m.name.clone()], p, b, k)),
        }
    }
    let kinds: Vec<&'static str> = ["MHA", "GQA", "MQA", "MLA"]
        .into_iter()
        .filter(|k| pts.iter().any(|q| q.3 == *k))
        .collect();
    let name_of = |k: &str| match k {
        "MHA" => lang.t("MHA: a KV head per query head", "MHA：每个查询头一个 KV 头"),
        "GQA" => lang.t("GQA: query heads share KV heads", "GQA：查询头共享 KV 头"),
        "MQA" => lang.t("MQA: one KV head", "MQA：一个 KV 头"),
        _ => lang.t("MLA: one latent row", "MLA：一行潜向量"),
    };
    let (lo, hi) = pts.iter().fold((f64::MAX, f64::MIN), |m, q| {
        (m.0.min(q.1.log10()), m.1.max(q.1.log10()))
    });
    // Where each label goes: right of its point, else left, else under it, whichever first keeps clear
    // of the other points (in axis units, from the label's width in pixels over the plot's, estimated
    // from the view: the y axis's labels take about five text sizes, the x axis's about three).
    let (x0, x1) = (lo - 0.1, hi + 0.45);
    let (y0, y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |m, q| (m.0.min(q.2.log2()), m.1.max(q.2.log2())));
    let font = egui::FontId::proportional(crate::style::fit(size * 0.8));
    let per_px_x = (x1 - x0) / f64::from((ui.available_width() - size * 5.0).max(1.0));
    let per_px_y = ((y1 - y0) * 1.1).max(1.0) / f64::from((h - size * 3.0).max(1.0));
    let placed: Vec<egui::Align2> = pts
        .iter()
        .map(|(names, p, b, _)| {
            let text = ui
                .painter()
                .layout_no_wrap(names.join(", "), font.clone(), egui::Color32::PLACEHOLDER);
            let (w, dy) = (
                f64::from(text.size().x) * per_px_x + 0.05,
                f64::from(text.size().y) * per_px_y,
            );
            let (x, y) = (p.log10(), b.log2());
            let clear = |xa: f64, xb: f64, ya: f64, yb: f64| {
                pts.iter().all(|q| {
                    let (qx, qy) = (q.1.log10(), q.2.log2());
                    (qx == x && qy == y) || qx < xa || qx > xb || qy < ya || qy > yb
                })
            };
            if clear(x, x + w, y - dy / 2.0, y + dy / 2.0) {
                egui::Align2::LEFT_CENTER
            } else if x - w > x0 && clear(x - w, x, y - dy / 2.0, y + dy / 2.0) {
                egui::Align2::RIGHT_CENTER
            } else {
                egui::Align2::CENTER_TOP
            }
        })
        .collect();
    Chart::new(
        "arch-scale-chart",
        ChartAxis::log10(lang.t("parameters (log axis)", "参数量（对数坐标）"))
            .include(lo - 0.1)
            // Room on the right for the largest model's label.
            .include(hi + 0.45)
            .fmt(|v| {
                let b = 10f64.powf(v) / 1e9;
                if b >= 1.0 {
                    format!("{b:.0}B")
                } else {
                    format!("{:.0}M", b * 1e3)
                }
            }),
        ChartAxis::log2(lang.t(
            "KV bytes per token, bf16 (log axis)",
            "每 token 的 KV 字节，bf16（对数坐标）",
        ))
        .fmt(|v| format_bytes(2f64.powf(v).round())),
    )
    .height(h)
    .legend(kinds.iter().map(|k| (kind(k), name_of(k).to_string())).collect())
    .show(ui, size, |p| {
        for k in &kinds {
            let xy: Vec<[f64; 2]> = pts
                .iter()
                .filter(|q| q.3 == *k)
                .map(|q| [q.1.log10(), q.2.log2()])
                .collect();
            p.points(
                egui_plot::Points::new(name_of(k), xy)
                    .color(style::c32(kind(k)))
                    .radius(size * 0.4),
            );
        }
        for ((names, params, bytes, _), anchor) in pts.iter().zip(&placed) {
            let (x, y) = (params.log10(), bytes.log2());
            let at = match *anchor {
                egui::Align2::LEFT_CENTER => [x + 0.05, y],
                egui::Align2::RIGHT_CENTER => [x - 0.05, y],
                // Under the point, clear of its dot.
                _ => [x, y - f64::from(size * 0.7) * per_px_y],
            };
            p.text(
                egui_plot::Text::new(
                    "",
                    egui_plot::PlotPoint::new(at[0], at[1]),
                    RichText::new(names.join(", ")).size(crate::style::fit(size * 0.8)),
                )
                .anchor(*anchor),
            );
        }
    });
}
