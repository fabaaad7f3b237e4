//! Lesson 11's memory views: the layer map (which layers hold full attention, a window or shared KV)
//! and the calculator (what fits in a GPU's memory).

use eframe::egui::{self, RichText, Ui};

use super::parts::{note, title};

use crate::calc::ModelSpec;
use crate::calc::context_limit;
use crate::lessons::arch::{ArchOut, CONTEXTS, HYBRID, gb, ktokens, params_text};
use crate::lessons::format_bytes;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Cell, Table, ViewCtx, legend, table};

/// One model's layers as cells: windowed layers in one colour, full ones in another; with CLA (`share`
/// > 1) the layers that read another's KV are drawn hollow.
pub(super) fn layer_cells(ui: &mut Ui, size: f32, m: &ModelSpec, share: usize) {
    let n = m.layers.max(1);
    let w = ui.available_width();
    let cell = (w / n as f32).min(size * 1.2);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(cell * n as f32, size * 1.1), egui::Sense::hover());
    let p = ui.painter();
    for l in 0..n {
        // Lessons 8 and 9's colours for a windowed cache and a full one.
        let c = if m.windows.get(l).copied().flatten().is_some() {
            style::policy("window")
        } else {
            style::policy("dense")
        };
        let r = egui::Rect::from_min_size(
            egui::pos2(rect.min.x + l as f32 * cell, rect.min.y),
            egui::vec2((cell - 1.0).max(1.0), rect.height()),
        );
        if l % share.max(1) == 0 {
            p.rect_filled(r, 1.0, style::c32(c));
        } else {
            p.rect_stroke(
                r.shrink(1.0),
                1.0,
                egui::Stroke::new(1.5, style::c32(c)),
                egui::StrokeKind::Inside,
            );
        }
    }
}

pub(super) fn layer_map(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let lang = cx.lang;
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "Layer maps, and the average KV per token of one request at {}, {} and {} tokens ({})",
                ktokens(CONTEXTS[0]),
                ktokens(CONTEXTS[1]),
                ktokens(CONTEXTS[2]),
                o.format.name
            ),
            Lang::Zh => format!(
                "层图，以及一个请求在 {}、{}、{} token 时每个 token 的平均 KV（{}）",
                ktokens(CONTEXTS[0]),
                ktokens(CONTEXTS[1]),
                ktokens(CONTEXTS[2]),
                o.format.name
            ),
        },
    );
    let mut rows: Vec<(String, &ModelSpec, usize, [f64; 3])> = Vec::new();
    for name in HYBRID {
        if let Some((i, m)) = o.named(name) {
            let w = m.windows.iter().flatten().next().copied().unwrap_or(0);
            let local = m.windows.iter().filter(|x| x.is_some()).count();
            let label = match lang {
                Lang::En => format!("{}: {local} of {} layers windowed ({w})", m.name, m.layers),
                Lang::Zh => format!("{}：{} 层中 {local} 层有窗口（{w}）", m.name, m.layers),
            };
            rows.push((label, m, 1, o.at_contexts[i]));
        }
    }
    let m = o.model();
    rows.push((
        match lang {
            Lang::En => format!("{} with CLA: {} adjacent layers share one KV", m.name, o.cla),
            Lang::Zh => format!("{} 加 CLA：每 {} 个相邻层共享一份 KV", m.name, o.cla),
        },
        m,
        o.cla,
        o.cla_at_contexts,
    ));
    // Contexts past what a model serves (context_limit) are marked: their figures are hypothetical.
    let mut past: Vec<String> = Vec::new();
    for (label, mm, share, at) in rows {
        ui.add_space(size * 0.25);
        ui.label(RichText::new(label).size(crate::style::fit(size * 0.9)));
        layer_cells(ui, size, mm, share);
        let limit = context_limit(mm);
        let cells: Vec<String> = (0..3)
            .map(|i| {
                let star = if limit.is_some_and(|l| CONTEXTS[i] > l) {
                    "*"
                } else {
                    ""
                };
                format!("{} {}{star}", ktokens(CONTEXTS[i]), format_bytes(at[i]))
            })
            .collect();
        if let Some(l) = limit.filter(|&l| l < CONTEXTS[2]) {
            let s = format!("{} {}", mm.name, ktokens(l));
            if !past.contains(&s) {
                past.push(s);
            }
        }
        ui.label(
            RichText::new(cells.join(" · "))
                .monospace()
                .size(crate::style::fit(size * 0.85)),
        );
    }
    ui.add_space(size * 0.3);
    legend(
        ui,
        &[
            (style::policy("dense"), lang.t("full attention", "全注意力")),
            (style::policy("window"), lang.t("sliding window", "滑动窗口")),
            (
                style::FREE,
                lang.t(
                    "hollow: reads the KV of the layer before (CLA)",
                    "空心：读取前一层的 KV（CLA）",
                ),
            ),
        ],
        size,
    );
    note(
        ui,
        size,
        lang.t(
            "Windows from each config (Gemma 2: even layers local; Gemma 3: every sixth layer global). CLA (Brandon et al. 2024) is a what-if here: none of these configs shares KV across layers.",
            "窗口取自各自的配置（Gemma 2：偶数层为局部；Gemma 3：每六层一层全局）。这里的 CLA（Brandon 等，2024）是假设：这些配置都没有跨层共享 KV。",
        ),
    );
    if !past.is_empty() {
        let list = past.join(", ");
        note(
            ui,
            size,
            &match lang {
                Lang::En => format!("* past the longest context the model serves ({list}): hypothetical."),
                Lang::Zh => format!("* 超过模型能服务的最长上下文（{list}）：假设值。"),
            },
        );
    }
}

pub(super) fn calculator(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let lang = cx.lang;
    let m = o.model();
    let r = o.report();
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "{} on {} · KV {} · context {}",
                m.name,
                gb(r.gpu_memory_bytes as f64),
                r.kv_format,
                r.context_tokens
            ),
            Lang::Zh => format!(
                "{}，{} · KV {} · 上下文 {}",
                m.name,
                gb(r.gpu_memory_bytes as f64),
                r.kv_format,
                r.context_tokens
            ),
        },
    );
    memory_bar(ui, size, lang, r);
    let rows: Vec<(&str, String)> = vec![
        (
            lang.t("GPU memory", "GPU 显存"),
            format!("{} ({})", gb(r.gpu_memory_bytes as f64), r.gpu_memory_source),
        ),
        (
            lang.t("weights", "权重"),
            format!(
                "{} params × {} = {}",
                params_text(r.parameters),
                r.weights_dtype,
                gb(r.weights_bytes)
            ),
        ),
        (lang.t("left for KV", "留给 KV"), gb(r.kv_budget_bytes)),
        (
            lang.t("KV per token", "每 token 的 KV"),
            format_bytes(r.kv_bytes_per_token),
        ),
        (
            lang.t("KV per request", "每个请求的 KV"),
            format_bytes(r.kv_bytes_per_request),
        ),
        (
            lang.t("blocks per request", "每个请求的块"),
            format!(
                "{} × {} {}",
                r.blocks_per_request,
                r.block_size,
                lang.t("tokens", "个 token")
            ),
        ),
        (lang.t("requests that fit", "能放下的请求"), r.requests_fit.to_string()),
        (lang.t("tokens that fit", "能放下的 token"), r.tokens_fit.to_string()),
    ];
    let mut t = Table::new(["", ""]);
    for (i, (k, v)) in rows.iter().enumerate() {
        t.row([Cell::new(*k), Cell::new(v).mono().color_if(i == 6, style::CURRENT_32)]);
    }
    t.header.clear();
    table(ui, lang, size, &t);
    if r.wrong.is_empty() {
        note(
            ui,
            size,
            lang.t(
                "No common shortcut changes this model's answer.",
                "常见捷径公式都不改变这个模型的答案。",
            ),
        );
    } else if !o.wrong {
        note(
            ui,
            size,
            match lang {
                Lang::En => format!(
                    "{} common wrong formula(s) differ here: the switch shows them.",
                    r.wrong.len()
                ),
                Lang::Zh => format!("这里有 {} 个常见错误公式结果不同：打开开关即可看到。", r.wrong.len()),
            },
        );
    } else {
        ui.add_space(size * 0.3);
        ui.label(
            RichText::new(lang.t("The common wrong formulas", "常见的错误公式"))
                .strong()
                .size(crate::style::fit(size)),
        );
        let bad = style::fail(ui.visuals());
        for w in &r.wrong {
            let fits = (r.kv_budget_bytes / w.kv_bytes_per_request).floor() as u64;
            let text = match lang {
                Lang::En => format!(
                    "{}: {} per request ({:.2}×), {} requests",
                    w.formula,
                    format_bytes(w.kv_bytes_per_request),
                    w.ratio,
                    fits
                ),
                Lang::Zh => format!(
                    "{}：每个请求 {}（{:.2} 倍），{} 个请求",
                    w.formula,
                    format_bytes(w.kv_bytes_per_request),
                    w.ratio,
                    fits
                ),
            };
            ui.add(egui::Label::new(RichText::new(text).size(crate::style::fit(size * 0.9)).color(bad)).wrap());
        }
    }
}

/// The GPU's memory as one bar: the weights, the requests that fit (one segment each, up to a few dozen),
/// and what is left.
pub(super) fn memory_bar(ui: &mut Ui, size: f32, lang: Lang, r: &crate::calc::Report) {
    let total = r.gpu_memory_bytes as f64;
    let w = ui.available_width() - size;
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, size * 1.6), egui::Sense::hover());
    let p = ui.painter();
    p.rect_filled(rect, 2.0, style::track(ui.visuals()));
    let x_of = |b: f64| rect.min.x + (b / total).clamp(0.0, 1.0) as f32 * rect.width();
    let weights = egui::Rect::from_min_max(rect.min, egui::pos2(x_of(r.weights_bytes), rect.max.y));
    p.rect_filled(weights, 2.0, style::WHOLE_32);
    // What the engine keeps back: the share it does not claim and the reserve, drawn at the right end.
    let kept_back = total * (1.0 - r.gpu_memory_utilization) + r.reserve_bytes;
    if kept_back > 0.0 {
        let back = egui::Rect::from_min_max(egui::pos2(x_of(total - kept_back), rect.min.y), rect.max);
        p.rect_filled(back, 2.0, style::c32(style::RESERVED));
    }
    let n = r.requests_fit as usize;
    let shown = n.min(64);
    for i in 0..shown {
        // Past 64 requests the last segment stands for the rest.
        let (a, b) = if i + 1 == shown && n > shown {
            (i as f64, n as f64)
        } else {
            (i as f64, i as f64 + 1.0)
        };
        let x0 = x_of(r.weights_bytes + a * r.kv_bytes_per_request);
        let x1 = x_of(r.weights_bytes + b * r.kv_bytes_per_request);
        let seg = egui::Rect::from_min_max(egui::pos2(x0, rect.min.y), egui::pos2(x1.max(x0 + 1.0), rect.max.y));
        p.rect_filled(
            seg.shrink2(egui::vec2(0.5, 0.0)),
            0.0,
            style::c32(style::request(i % 2)),
        );
    }
    legend(
        ui,
        &[
            (
                style::WHOLE,
                match lang {
                    Lang::En => format!("weights {}", gb(r.weights_bytes)),
                    Lang::Zh => format!("权重 {}", gb(r.weights_bytes)),
                },
            ),
            (
                style::request(0),
                match lang {
                    Lang::En => format!("{n} requests × {}", format_bytes(r.kv_bytes_per_request)),
                    Lang::Zh => format!("{n} 个请求 × {}", format_bytes(r.kv_bytes_per_request)),
                },
            ),
            (
                style::FREE,
                match lang {
                    Lang::En => format!(
                        "left over {}",
                        gb(r.kv_budget_bytes - n as f64 * r.kv_bytes_per_request)
                    ),
                    Lang::Zh => format!("剩余 {}", gb(r.kv_budget_bytes - n as f64 * r.kv_bytes_per_request)),
                },
            ),
        ],
        size,
    );
    if kept_back > 0.0 {
        legend(
            ui,
            &[(
                style::RESERVED,
                match lang {
                    Lang::En => format!(
                        "kept back {} (unclaimed {}, reserve {})",
                        gb(kept_back),
                        gb(total * (1.0 - r.gpu_memory_utilization)),
                        gb(r.reserve_bytes)
                    ),
                    Lang::Zh => format!(
                        "留出 {}（未占用 {}，预留 {}）",
                        gb(kept_back),
                        gb(total * (1.0 - r.gpu_memory_utilization)),
                        gb(r.reserve_bytes)
                    ),
                },
            )],
            size,
        );
    }
}
