//! Lesson 8's sink views: the attention mass on the first bytes of the tiny model, and SmolLM2's stored
//! sink mass per layer and head with StreamingLLM's four policies along its stream.

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Line, Plot, PlotPoints, VLine};

use super::common::*;
use crate::drivers::stream::{Positions, StreamPolicy};
use crate::lessons::streaming::{StreamOut, stored};
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{HeadGrid, ViewCtx, head_grid, head_grid_by_layer, legend, plot_title_room};

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
    let grid_h = (ui.available_rect_before_wrap().height() * 0.45).max(size * 6.0);
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
    // Room under the plot for the stored variant's line (up to four lines on a projector).
    let below = if stored::file().is_some_and(|f| f.start.is_some()) {
        6.0
    } else {
        2.5
    };
    let entries = runs_legend(lang, o, 3, &format!(" · L{l} H{h}"));
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    let h_plot = (ui.available_height() - below * size - legend_h).max(80.0);
    plot_title_room(ui);
    Plot::new("streaming-sinks")
        .height(h_plot)
        .allow_scroll(false)
        .x_axis_label(lang.t("byte read", "读取的字节"))
        .y_axis_label(lang.t("mass on the first S bytes", "前 S 个字节上的质量"))
        .include_y(0.0)
        .show(ui, |p| {
            for (i, run) in o.runs.iter().enumerate().take(3) {
                let pts: PlotPoints = (0..o.stream())
                    .map(|t| [t as f64, f64::from(run.sink_mass_at(l, h, t))])
                    .collect();
                p.line(
                    Line::new(
                        format!(
                            "{} · L{l} H{h}",
                            policy_name(lang, run.config.policy, run.config.positions)
                        ),
                        pts,
                    )
                    .color(policy_color(i)),
                );
            }
            p.vline(context_line(lang, o.trained_context));
        });
    legend(ui, &entries, size * 0.85);
    if let Some(s) = stored::file().and_then(|f| f.start.as_ref()) {
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
        note(
            ui,
            size,
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
            },
        );
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
        .map(|(i, p, r)| {
            (
                style::request(*i),
                format!("{} {:.3}", policy_name(lang, *p, Positions::Cache), r.bits_per_byte),
            )
        })
        .chain(std::iter::once((
            style::WHOLE,
            match lang {
                Lang::En => format!("W + S = {}: the window starts dropping tokens", w + k),
                Lang::Zh => format!("W + S = {}：窗口开始丢弃 token", w + k),
            },
        )))
        .collect();
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    // Room under the plot for the legend and the source line (up to three lines on a projector).
    let h_plot = (ui.available_height() - 4.5 * size - legend_h).max(80.0);
    let bucket = s.curve_bucket.max(1);
    let tokens = s.tokens.unwrap_or(0);
    let (lo, hi) = runs
        .iter()
        .flat_map(|(_, _, r)| r.curve.iter().copied())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    plot_title_room(ui);
    Plot::new("streaming-sinks-real")
        .height(h_plot)
        .allow_scroll(false)
        .allow_drag(false)
        .allow_zoom(false)
        .x_axis_label(match lang {
            Lang::En => format!("token predicted (SmolLM2-135M, W = {w}, S = {k}; a point per {bucket} tokens)"),
            Lang::Zh => format!("被预测的 token（SmolLM2-135M，W = {w}，S = {k}；每 {bucket} 个 token 一个点）"),
        })
        .y_axis_label(lang.t("bits per byte", "每字节比特"))
        // The curves' own range, not from 0: sinks + window runs a few hundredths above dense.
        .include_y(lo - 0.05)
        .include_y(hi + 0.05)
        // A labelled tick every 0.2 bits (the plot is short: the default spacing labels one; 0.2 keeps
        // every label exact at one decimal).
        .y_grid_spacer(move |_| {
            let (a, b) = (((lo - 0.05) * 5.0).ceil() as i64, ((hi + 0.05) * 5.0).floor() as i64);
            (a..=b)
                .map(|i| egui_plot::GridMark {
                    value: i as f64 / 5.0,
                    step_size: 0.2,
                })
                .collect()
        })
        .include_x(0.0)
        // Ticks every 100 tokens up to the last point only: a tick past it sits at the plot's edge, where
        // its number is cut.
        .x_grid_spacer(move |_| {
            (0..=tokens / 100)
                .map(|i| egui_plot::GridMark {
                    value: (i * 100) as f64,
                    step_size: 100.0,
                })
                .collect()
        })
        .show(ui, |p| {
            // Sinks + window last and heaviest: it is the step's point, and it runs close to dense.
            let last = |p: &StreamPolicy| *p == StreamPolicy::Sinks;
            let order = runs
                .iter()
                .filter(|r| !last(&r.1))
                .chain(runs.iter().filter(|r| last(&r.1)));
            for (i, policy, r) in order {
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
                        .color(policy_color(*i))
                        .width(width),
                );
                p.points(
                    egui_plot::Points::new(name, PlotPoints::new(pts))
                        .color(policy_color(*i))
                        .radius(4.0),
                );
            }
            // Where the window starts to drop tokens.
            p.vline(
                VLine::new(lang.t("W + S tokens", "W + S 个 token"), (w + k) as f64)
                    .color(style::c32(style::WHOLE))
                    .style(egui_plot::LineStyle::dashed_loose()),
            );
        });
    legend(ui, &entries, size * 0.85);
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
