//! Lesson 9's quality views: the stored quality table against the budget, for the tiny model and for
//! SmolLM2 (bits per byte and recall).

use eframe::egui::Ui;
use egui_plot::{HLine, Line, Plot, PlotPoints, Points};

use super::common::*;
use crate::drivers::evict::{BUDGETS, EvictPolicy};
use crate::lessons::eviction::stored;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{ViewCtx, legend, plot_title_room};

pub(super) fn quality(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let Some(s) = stored::embedded() else {
        note(ui, size, lang.t("The stored table is missing.", "缺少存储的表。"));
        return;
    };
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "stored: kvscope export eviction-table on {}, {} held-out windows, {} recall trials",
                s.backend, s.windows, s.trials
            ),
            Lang::Zh => format!(
                "存储的结果：kvscope export eviction-table，在 {} 上，{} 个留出窗口，{} 次回忆试验",
                s.backend, s.windows, s.trials
            ),
        },
    );
    quality_plots(cx, ui, s, "eviction-quality");
}

pub(super) fn quality_real(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let Some(s) = stored::embedded_smollm2() else {
        note(
            ui,
            size,
            lang.t(
                "SmolLM2's stored table (assets/measurements/smollm2/eviction.json) is missing.",
                "缺少 SmolLM2 的存储表（assets/measurements/smollm2/eviction.json）。",
            ),
        );
        return;
    };
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "SmolLM2-135M-Instruct, stored: kvscope export eviction-table --model smollm2 on {}, {} windows of 256 tokens, {} recall trials",
                s.backend, s.windows, s.trials
            ),
            Lang::Zh => format!(
                "SmolLM2-135M-Instruct，存储的结果：kvscope export eviction-table --model smollm2，在 {} 上，{} 个 256 token 的窗口，{} 次回忆试验",
                s.backend, s.windows, s.trials
            ),
        },
    );
    quality_plots(cx, ui, s, "eviction-quality-real");
}

/// Bits per byte and recall against the budget, every policy, from table `s` (plot ids from `id`).
pub(super) fn quality_plots(cx: &mut ViewCtx, ui: &mut Ui, s: &crate::drivers::evict::QualityTable, id: &str) {
    let lang = cx.lang;
    let size = cx.size;
    // One legend for both plots, under them: inside a plot it covered the curves' ends (H2O's recall at
    // the largest budget on SmolLM2).
    let mut entries: Vec<(style::Rgba, &str)> = EvictPolicy::ALL
        .iter()
        .map(|&p| (policy_rgba(p), policy_name(lang, p)))
        .collect();
    entries.push((
        style::MASKED,
        lang.t("chance: 1 in 26 (recall)", "随机猜测：1/26（回忆）"),
    ));
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    let hp = ((ui.available_height() - 2.0 * size - legend_h) / 2.0 - size).max(90.0);
    let series = |f: fn(&crate::drivers::evict::QualityCell) -> f64, p: EvictPolicy| -> PlotPoints {
        BUDGETS
            .iter()
            .filter_map(|&k| s.cell(p.name(), k).map(|c| [(k as f64).log2(), f(c)]))
            .collect()
    };
    let x_fmt = |m: egui_plot::GridMark, _r: &std::ops::RangeInclusive<f64>| format!("{:.0}", 2f64.powf(m.value));
    plot_title_room(ui);
    Plot::new(format!("{id}-bpb"))
        .height(hp)
        .allow_scroll(false)
        .x_axis_label(lang.t(
            "budget K (tokens per KV head per layer)",
            "预算 K（每层每个 KV 头的 token 数）",
        ))
        .y_axis_label(lang.t("bits per byte", "每字节比特数"))
        .x_axis_formatter(x_fmt)
        .show(ui, |pl| {
            for p in EvictPolicy::ALL {
                pl.line(Line::new(policy_name(lang, p), series(|c| c.bits_per_byte, p)).color(policy_color(p)));
                pl.points(
                    Points::new("", series(|c| c.bits_per_byte, p))
                        .radius(3.0)
                        .color(policy_color(p)),
                );
            }
        });
    plot_title_room(ui);
    Plot::new(format!("{id}-recall"))
        .height(hp)
        .allow_scroll(false)
        .x_axis_label(lang.t(
            "budget K (tokens per KV head per layer)",
            "预算 K（每层每个 KV 头的 token 数）",
        ))
        .y_axis_label(lang.t("recall: top-1 on the repeat", "回忆：重复部分的 top-1"))
        .x_axis_formatter(x_fmt)
        .include_y(0.0)
        .show(ui, |pl| {
            for p in EvictPolicy::ALL {
                pl.line(Line::new(policy_name(lang, p), series(|c| c.recall, p)).color(policy_color(p)));
                pl.points(
                    Points::new("", series(|c| c.recall, p))
                        .radius(3.0)
                        .color(policy_color(p)),
                );
            }
            pl.hline(
                HLine::new(lang.t("chance: 1 in 26", "随机猜测：1/26"), 1.0 / 26.0).color(style::c32(style::MASKED)),
            );
        });
    legend(ui, &entries, size * 0.85);
}
