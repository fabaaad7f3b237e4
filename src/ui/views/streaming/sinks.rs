//! Lesson 8's sink views: the attention mass on the first bytes of the tiny model, and SmolLM2's stored
//! sink mass per layer and head with StreamingLLM's four policies along its stream.

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Line, PlotPoints};

use super::common::*;
use crate::drivers::stream::{Positions, StreamPolicy};
use crate::lessons::streaming::{SINK_FROM, SINK_TEST_MASS, StreamOut, stored};
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, HeadGrid, ViewCtx, head_grid, head_grid_by_layer};

pub(super) fn sinks(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    let r = &o.runs[0];
    let steps_end = o.trained_context.min(o.stream());
    let last_sink = o.sinks.saturating_sub(1);
    let title = match lang {
        Lang::En => format!(
            "mean attention mass on bytes 0…{last_sink}, dense steps 16…{} (measured on this text)",
            steps_end - 1
        ),
        Lang::Zh => format!(
            "全量解码第 16…{} 步放在字节 0…{last_sink} 上的平均注意力质量（在这段文本上实测）",
            steps_end - 1
        ),
    };
    ui.add(egui::Label::new(RichText::new(title).strong().size(crate::style::fit(size))).wrap());
    // On a slide the chart under the grid needs the room for its ticks.
    let share = if crate::style::views_may_scroll() { 0.45 } else { 0.36 };
    let grid_h = (ui.available_rect_before_wrap().height() * share).max(size * 6.0);
    let value = |l: usize, h: usize| o.dense_sink_mass(l, h);
    let grid = HeadGrid {
        layers: r.layers,
        heads: r.heads,
        value: &value,
        full_at: 0.5,
        decimals: 1,
        height: grid_h,
        row_cap: size * 2.4,
        font: size * 0.85,
        selected: (o.layer, o.head),
    };
    head_grid(ui, lang, size, &grid);
    let (l, h) = (o.layer, o.head);
    let stored_note = stored::file().and_then(|f| f.start.as_ref()).map(|s| {
        let best = s.strongest_sink();
        let w_at = s
            .runs
            .iter()
            .find(|r| r.policy == "sinks" && r.positions == "cache" && r.sinks == s.sink_mass_sinks)
            .map_or(0, |r| r.window);
        let bpb = |p: &str| {
            s.find(p, "cache", w_at, s.sink_mass_sinks)
                .map_or(f64::NAN, |r| r.bits_per_byte)
        };
        let (w, k) = (bpb("window"), bpb("sinks"));
        match lang {
            Lang::En => format!(
                "Stored, the variant trained with a start byte at the head of every window: its strongest head (L{} H{}) puts {:.1}% of its mass on bytes 0…{}; over {} bytes sinks + window scores {k:.3} bits per byte against {w:.3} for the window.",
                best.0,
                best.1,
                100.0 * best.2,
                s.sink_mass_sinks.saturating_sub(1),
                s.bytes
            ),
            Lang::Zh => format!(
                "存储的实测：每个训练窗口以起始字节开头的变体，最强的头（L{} H{}）把 {:.1}% 的质量放在字节 0…{} 上；在 {} 字节上 sink + 窗口每字节 {k:.3} 比特，单纯窗口 {w:.3}。",
                best.0,
                best.1,
                100.0 * best.2,
                s.sink_mass_sinks.saturating_sub(1),
                s.bytes
            ),
            }
    });
    // Room under the plot for the stored variant's note, as laid out at this width.
    let below = stored_note.as_ref().map_or(size * 2.5, |t| {
        let font = egui::FontId::proportional(crate::style::fit(size * 0.9));
        let wrapped = ui
            .painter()
            .layout(t.clone(), font, ui.visuals().text_color(), ui.available_width());
        wrapped.size().y + 2.0 * ui.spacing().item_spacing.y + size * 0.5
    });
    let h_plot = (ui.available_height() - below).max(80.0);
    Chart::new(
        "streaming-sinks",
        ChartAxis::linear(lang.t("byte read", "读取的字节")),
        ChartAxis::linear(match lang {
            Lang::Zh => format!("每一步前 S 个字节上的注意力质量（从第 {SINK_FROM} 步起；上表是其平均）"),
            _ => format!(
                "attention mass on the first S bytes at each step (from step {SINK_FROM}; the grid is its mean)"
            ),
        })
        .from_zero()
        .suffix("%"),
    )
    .height(h_plot)
    .show(ui, size, |p| {
        // In % as the grid above. The window's line is drawn last and dashed: until the window first
        // drops the first bytes it runs on the others', which would hide it.
        let mut runs: Vec<_> = o.runs.iter().take(3).collect();
        runs.sort_by_key(|run| run.config.policy == StreamPolicy::Window);
        for run in runs {
            // From SINK_FROM on, as the grid: at the first steps a query has only a few bytes to
            // attend, and a mass of 1 there would read as a sink.
            let pts: PlotPoints = (SINK_FROM.min(o.stream())..o.stream())
                .map(|t| [t as f64, 100.0 * f64::from(run.sink_mass_at(l, h, t))])
                .collect();
            let line = Line::new(
                format!(
                    "{} · L{l} H{h}",
                    policy_name(lang, run.config.policy, run.config.positions)
                ),
                pts,
            )
            .color(policy_color(run.config.policy));
            p.line(if run.config.policy == StreamPolicy::Window {
                line.width(2.5).style(egui_plot::LineStyle::dashed_loose())
            } else {
                line
            });
        }
        context_line(p, lang, o.trained_context);
        // The lesson's test is on the mean (the grid), not on single steps.
        p.threshold_y(100.0 * SINK_TEST_MASS, lang.t("sink test: mean", "汇聚标准：均值"));
    });
    if let Some(text) = stored_note {
        note(ui, size, text);
    }
}

/// SmolLM2-135M's stored sink mass per layer and head, and its four policies' bits per byte.
pub(super) fn sinks_real(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let Some(s) = stored::smollm2() else {
        note(
            ui,
            size,
            lang.t(
                "SmolLM2's stored runs are missing from assets/measurements/streaming.json.",
                "assets/measurements/streaming.json 中缺少 SmolLM2 的存储实测。",
            ),
        );
        return;
    };
    let last_sink = s.sink_mass_sinks.saturating_sub(1);
    let title = match lang {
        Lang::En => format!(
            "SmolLM2-135M-Instruct (stored): mean attention mass on tokens 0…{last_sink}, full-cache steps 16…255, per layer and head (%)"
        ),
        Lang::Zh => format!(
            "SmolLM2-135M-Instruct（存储的实测）：全量缓存第 16…255 步放在 token 0…{last_sink} 上的平均注意力质量，按层和头（%）"
        ),
    };
    ui.add(egui::Label::new(RichText::new(title).strong().size(crate::style::fit(size))).wrap());
    let layers = s.dense_sink_mass.len();
    let heads = s.dense_sink_mass.first().map_or(0, Vec::len);
    let value = |l: usize, h: usize| s.dense_sink_mass[l][h];
    let (sl, sh, _) = s.strongest_sink();
    let grid = HeadGrid {
        layers,
        heads,
        value: &value,
        full_at: 0.5,
        decimals: 0,
        height: (ui.available_rect_before_wrap().height() * 0.42).max(size * 6.0),
        row_cap: size * 1.6,
        font: size * 0.7,
        selected: (sl, sh),
    };
    head_grid_by_layer(ui, lang, &grid);
    let (w, k) = s
        .runs
        .iter()
        .find(|r| r.policy == "sinks" && r.positions == "cache")
        .map_or((0, 0), |r| (r.window, r.sinks));
    const POLICIES: [StreamPolicy; 4] = [
        StreamPolicy::Dense,
        StreamPolicy::Window,
        StreamPolicy::Sinks,
        StreamPolicy::Recompute,
    ];
    // StreamingLLM's figure on this model: each policy's bits per byte along the stream (one point per
    // bucket of stored predictions, at the bucket's last token), its whole-text value in the legend.
    let runs: Vec<(usize, StreamPolicy, &stored::StoredRun)> = POLICIES
        .into_iter()
        .enumerate()
        .filter_map(|(i, p)| s.find(p.name(), "cache", w, k).map(|r| (i, p, r)))
        .collect();
    let entries: Vec<(style::Rgba, String)> = runs
        .iter()
        .map(|(_, p, r)| {
            (
                style::policy(p.name()),
                format!("{} {:.3}", policy_name(lang, *p, Positions::Cache), r.bits_per_byte),
            )
        })
        .collect();
    // Room under the chart for the source line (up to three lines on a projector).
    let h = (ui.available_height() - 4.5 * size).max(80.0);
    let bucket = s.curve_bucket.max(1);
    let tokens = s.tokens.unwrap_or(0);
    Chart::new(
        "streaming-sinks-real",
        ChartAxis::linear(match lang {
            Lang::En => format!("token predicted (SmolLM2-135M, W = {w}, S = {k}; a point per {bucket} tokens)"),
            Lang::Zh => format!("被预测的 token（SmolLM2-135M，W = {w}，S = {k}；每 {bucket} 个 token 一个点）"),
        })
        .from_zero(),
        // The curves' own range, not from 0: sinks + window runs a few hundredths above dense.
        ChartAxis::linear(lang.t("bits per byte", "每字节比特")),
    )
    .height(h)
    .legend(entries)
    .show(ui, size, |p| {
        // Sinks + window last and heaviest: it is the step's point, and it runs close to dense.
        let last = |p: &StreamPolicy| *p == StreamPolicy::Sinks;
        let order = runs
            .iter()
            .filter(|r| !last(&r.1))
            .chain(runs.iter().filter(|r| last(&r.1)));
        for (_, policy, r) in order {
            let width = if last(policy) { 4.0 } else { 2.5 };
            let pts: Vec<[f64; 2]> = r
                .curve
                .iter()
                .enumerate()
                .map(|(b, &v)| [((b + 1) * bucket).min(tokens.max(1)) as f64, v])
                .collect();
            let name = policy_name(lang, *policy, Positions::Cache);
            p.line(
                Line::new(name.clone(), PlotPoints::new(pts.clone()))
                    .color(policy_color(*policy))
                    .width(width),
            );
            p.points(
                egui_plot::Points::new(name, PlotPoints::new(pts))
                    .color(policy_color(*policy))
                    .radius(4.0),
            );
        }
        // Where the window starts to drop tokens.
        p.threshold_x((w + k) as f64, format!("W + S = {}", w + k));
    });
    note(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "Stored by {} on {}: {} tokens ({} bytes), inside the model's context.",
                s.command
                    .as_deref()
                    .unwrap_or("kvscope export streaming --model smollm2"),
                s.backend,
                s.tokens.unwrap_or(0),
                s.bytes
            ),
            Lang::Zh => format!(
                "由 {} 在 {} 上存储：{} 个 token（{} 字节），在模型的上下文之内。",
                s.command
                    .as_deref()
                    .unwrap_or("kvscope export streaming --model smollm2"),
                s.backend,
                s.tokens.unwrap_or(0),
                s.bytes
            ),
        },
    );
}
