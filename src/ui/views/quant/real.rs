//! Lesson 10's real-model view: SmolLM2's stored per-channel maxima of K and V, and every format's errors
//! and bits per byte.

use eframe::egui::{self, Ui};

use super::common::*;
use crate::cache::CacheFormat;
use crate::lessons::quant::{format_label, stored};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Axes, Chart, ChartAxis, ViewCtx, heat_panel, view_id, view_in};
use egui_plot::{Bar, BarChart};

/// SmolLM2-135M's stored measurements: its keys' and values' channel maxima, side by side, and every
/// format's errors and bits per byte.
pub(super) fn real(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let (Some(s), Some(heat)) = (stored::embedded_smollm2(), stored::smollm2_channel_heat()) else {
        note(
            ui,
            size,
            lang.t(
                "SmolLM2's stored table (assets/measurements/smollm2/quant.json) is missing or has no channel maxima.",
                "缺少 SmolLM2 的存储表（assets/measurements/smollm2/quant.json），或其中没有通道最大值。",
            ),
        );
        return;
    };
    let kvh = s.channels.as_ref().map_or(1, |c| c.kv_heads);
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "SmolLM2-135M-Instruct, stored: kvscope export quant-table --model smollm2 on {}, {} windows of 256 tokens",
                s.backend, s.windows
            ),
            Lang::Zh => format!(
                "SmolLM2-135M-Instruct，存储的结果：kvscope export quant-table --model smollm2，在 {} 上，{} 个 256 token 的窗口",
                s.backend, s.windows
            ),
        },
    );
    let full = ui.available_rect_before_wrap();
    let split = full.min.x + full.width() * 0.5;
    let gap = 12.0;
    let maps = stacked(egui::Rect::from_min_max(
        full.min,
        egui::pos2(split - gap / 2.0, full.max.y),
    ));
    for (i, name) in ["K", "V"].into_iter().enumerate() {
        view_in(ui, maps[i], |ui| {
            let t = match lang {
                Lang::En => format!("{name}: largest |value| per channel (columns: layer·KV head)"),
                Lang::Zh => format!("{name}：每个通道的最大绝对值（列：层·KV 头）"),
            };
            heat_panel(
                cx,
                ui,
                view_id("quant-real", i),
                &t,
                &heat[i],
                Colormap::Sequential,
                None,
                Highlight::None,
                Axes::DimLayerHead,
                &|(r, c)| format!("L{} KV{} ch {r}", c / kvh, c % kvh),
            );
        });
    }
    let right = egui::Rect::from_min_max(egui::pos2(split + gap / 2.0, full.min.y), full.max);
    view_in(ui, right, |ui| errors_chart(cx, ui, s));
}

/// Every format's K and V error on SmolLM2 as horizontal bars on a log axis (f16 on top), and its bits per
/// byte (the quality) summed up under them: per channel against per token is the gap the maps explain.
fn errors_chart(cx: &ViewCtx, ui: &mut Ui, s: &crate::drivers::quant::QuantTable) {
    let (lang, size) = (cx.lang, cx.size);
    // (label, bits per byte, K error, V error), f16 first.
    let rows: Vec<(String, f64, Option<f64>, Option<f64>)> = CacheFormat::all(s.group, s.residual)
        .iter()
        .filter_map(|f| {
            let c = s.cell(&f.name())?;
            Some((format_label(f), c.bits_per_byte, c.k_rel_err, c.v_rel_err))
        })
        .collect();
    let n = rows.len();
    // Row i is drawn at n − 1 − i, so the first (f16) is on top.
    let cats: Vec<String> = rows.iter().rev().map(|r| r.0.clone()).collect();
    let series = [
        (style::request(0), lang.t("K error", "K 误差"), 0.2),
        (style::request(1), lang.t("V error", "V 误差"), -0.2),
    ];
    let logs: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.2, r.3])
        .flatten()
        .filter(|&e| e > 0.0)
        .map(|e| (100.0 * e).log10())
        .collect();
    let lo = logs.iter().copied().fold(f64::MAX, f64::min).floor();
    let hi = logs.iter().copied().fold(f64::MIN, f64::max);
    let h = (ui.available_height() - size * 6.5).max(size * 12.0);
    Chart::new(
        "quant-real-errors",
        ChartAxis::log10(lang.t("error, % (log axis)", "误差，%（对数坐标）"))
            .include(lo)
            .include(hi)
            .fmt(|v| {
                let p = 10f64.powf(v);
                if p >= 1.0 { format!("{p:.0}") } else { format!("{p}") }
            }),
        ChartAxis::categories(lang.t("format", "格式"), cats),
    )
    .height(h)
    .legend(series.iter().map(|(c, name, _)| (*c, name.to_string())).collect())
    .show(ui, size, |p| {
        for (k, (c, name, dy)) in series.iter().enumerate() {
            let bars = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let e = if k == 0 { r.2 } else { r.3 }?;
                    (e > 0.0).then(|| {
                        let v = (100.0 * e).log10();
                        Bar::new((n - 1 - i) as f64 + dy, v - lo)
                            .base_offset(lo)
                            .width(0.38)
                            .fill(style::c32(*c))
                    })
                })
                .collect();
            p.bar_chart(BarChart::new(*name, bars).horizontal().color(style::c32(*c)));
        }
    });
    // The quality, summed up: f16's bits per byte, how many formats stay within 0.01 of it, the worst.
    if let Some(base) = rows.first().map(|r| r.1) {
        let near = rows[1..].iter().filter(|r| r.1 - base <= 0.01).count();
        let worst = rows[1..].iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some(w) = worst {
            note(
                ui,
                size,
                match lang {
                    Lang::En => format!(
                        "Error: RMS of x − dequant(x) over RMS of x. Quality, bits per byte (lower is better): f16 {base:.3}; {near} of {} others within 0.01; worst {} {:.3}.",
                        n - 1,
                        w.0,
                        w.1
                    ),
                    Lang::Zh => format!(
                        "误差：x − dequant(x) 的均方根除以 x 的均方根。质量（每字节比特数，越低越好）：f16 为 {base:.3}；其余 {} 种中 {near} 种相差不到 0.01；最差 {} 为 {:.3}。",
                        n - 1,
                        w.0,
                        w.1
                    ),
                },
            );
        }
    }
}
