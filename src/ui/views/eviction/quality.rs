//! Lesson 9's quality views: the stored quality table against the budget, for the tiny model and for
//! SmolLM2 (bits per byte and recall).

use eframe::egui::Ui;
use egui_plot::{Line, PlotPoints, Points};

use super::common::*;
use crate::drivers::evict::{BUDGETS, EvictPolicy};
use crate::lessons::eviction::stored;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, ViewCtx};

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
    let entries: Vec<(style::Rgba, &str)> = EvictPolicy::ALL
        .iter()
        .map(|&p| (policy_rgba(p), policy_name(lang, p)))
        .collect();
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    let hp = ((ui.available_height() - 2.0 * size - legend_h) / 2.0 - size).max(90.0);
    let series = |f: fn(&crate::drivers::evict::QualityCell) -> f64, p: EvictPolicy| -> PlotPoints {
        BUDGETS
            .iter()
            .filter_map(|&k| s.cell(p.name(), k).map(|c| [(k as f64).log2(), f(c)]))
            .collect()
    };
    let budget = || {
        ChartAxis::log2(lang.t(
            "budget K (tokens per KV head per layer)",
            "预算 K（每层每个 KV 头的 token 数）",
        ))
    };
    let entries: Vec<(style::Rgba, String)> = entries.iter().map(|(c, t)| (*c, t.to_string())).collect();
    let chance = lang.t("chance: 1 in 26", "随机猜测：1/26");
    // The same plot width as the recall chart under it, whose chance line takes a gutter.
    Chart::new(
        format!("{id}-bpb"),
        budget(),
        ChartAxis::linear(lang.t("bits per byte", "每字节比特数")),
    )
    .height(hp)
    .legend_below(entries.clone())
    .gutter_for(chance)
    .show(ui, size, |pl| {
        for p in EvictPolicy::ALL {
            pl.line(
                Line::new(policy_name(lang, p), series(|c| c.bits_per_byte, p))
                    .color(policy_color(p))
                    .width(2.5),
            );
            pl.points(
                Points::new("", series(|c| c.bits_per_byte, p))
                    .radius(3.0)
                    .color(policy_color(p)),
            );
        }
    });
    Chart::new(
        format!("{id}-recall"),
        budget(),
        ChartAxis::linear(lang.t("recall: top-1 on the repeat", "回忆：重复部分的 top-1")).from_zero(),
    )
    .height(hp + legend_h)
    .legend(entries)
    .show(ui, size, |pl| {
        for p in EvictPolicy::ALL {
            pl.line(
                Line::new(policy_name(lang, p), series(|c| c.recall, p))
                    .color(policy_color(p))
                    .width(2.5),
            );
            pl.points(
                Points::new("", series(|c| c.recall, p))
                    .radius(3.0)
                    .color(policy_color(p)),
            );
        }
        pl.threshold_y(1.0 / 26.0, chance);
    });
}
