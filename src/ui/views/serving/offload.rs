//! Lesson 12's offload step: swap against recompute over context length, measured here, as a chart, then
//! the table it comes from (stored, measured on this machine, or from the quoted facts).

use super::common::*;
use crate::lessons::format_bytes;
use crate::lessons::serving::{ServingOut, crossover, device_rates, fact_costs};
use crate::style;
use crate::ui::widgets::{Cell, Chart, ChartAxis, Table, ViewCtx, table};
use eframe::egui::Ui;

pub(super) fn offload(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    let size = cx.size;
    let lang = cx.lang;
    // In presentation mode the measurement as a chart, then as a table, then the estimate from quoted
    // device facts take a page each; the window shows all three.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(3));
    if page.is_none_or(|p| p == 0) {
        offload_chart(cx, ui, o);
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("the measured table", "实测表"));
        return;
    }
    if page.is_none_or(|p| p == 1) {
        offload_measured(ui, lang, size, o);
    }
    if page == Some(1) {
        crate::ui::widgets::more_on_next_page(
            ui,
            lang,
            size,
            lang.t("on real GPUs, from quoted facts", "真实 GPU 上，由引用的参数估算"),
        );
        return;
    }
    if page.is_none() {
        ui.add_space(size * 0.4);
    }
    offload_from_facts(ui, lang, size, o);
}

/// The stored offload measurement as two lines over the request's length: swap out and back, and
/// recompute, on a log axis of milliseconds (the gap between them is the ratio the table lists).
pub(super) fn offload_chart(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    let (size, lang) = (cx.size, cx.lang);
    title(
        ui,
        size,
        lang.t(
            "Measured here: swap a request out and back against recomputing its KV (log axis)",
            "本机实测：换出再换回一个请求，对比重算它的 KV（对数坐标）",
        ),
    );
    let rows = &o.stored.offload;
    let swap: Vec<[f64; 2]> = rows
        .iter()
        .map(|r| [r.tokens as f64, (r.swap_seconds * 1e3).log10()])
        .collect();
    let recompute: Vec<[f64; 2]> = rows
        .iter()
        .map(|r| [r.tokens as f64, (r.recompute_seconds * 1e3).log10()])
        .collect();
    let (swap_name, recompute_name) = (
        lang.t("swap out + in (a copy)", "换出 + 换入（一次拷贝）"),
        lang.t("recompute (prefill)", "重算（预填充）"),
    );
    // A slide gives the chart its page; the window shares its height with the table and the estimate.
    let h = if crate::style::views_may_scroll() {
        ui.available_height() * 0.28
    } else {
        ui.available_height() - 6.0 * size
    }
    .max(8.0 * size);
    Chart::new(
        "serving-offload-measured",
        ChartAxis::linear(lang.t("request length (tokens)", "请求长度（token）")).from_zero(),
        ChartAxis::log10(lang.t("milliseconds (log axis)", "毫秒（对数坐标）")),
    )
    .height(h)
    .legend(vec![
        (style::SWAPPED, swap_name.to_string()),
        (style::REQUESTS[0], recompute_name.to_string()),
    ])
    .show(ui, size, |p| {
        p.line(
            egui_plot::Line::new(swap_name, swap.clone())
                .color(style::c32(style::SWAPPED))
                .width(2.5),
        );
        p.points(
            egui_plot::Points::new(swap_name, swap)
                .color(style::c32(style::SWAPPED))
                .radius(size * 0.25),
        );
        p.line(
            egui_plot::Line::new(recompute_name, recompute.clone())
                .color(style::series(0))
                .width(2.5),
        );
        p.points(
            egui_plot::Points::new(recompute_name, recompute)
                .color(style::series(0))
                .radius(size * 0.25),
        );
    });
    let ratios: Vec<f64> = rows.iter().map(|r| r.recompute_seconds / r.swap_seconds).collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |m, &r| (m.0.min(r), m.1.max(r)));
    let span = match lang {
        _ if ratios.is_empty() => String::new(),
        crate::ui::text::Lang::Zh => format!("重算是拷贝的 {lo:.0}–{hi:.0} 倍。"),
        _ => format!("Recompute takes {lo:.0}–{hi:.0}× the copy. "),
    };
    // (The window shows the table under it, which says where it was measured.)
    let source = if crate::style::views_may_scroll() {
        String::new()
    } else {
        stored_source(lang, o)
    };
    note(ui, size, format!("{span}{source}"));
}

/// Lesson 12's offload measurement on this machine: swap out and back against recompute.
pub(super) fn offload_measured(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, o: &ServingOut) {
    title(
        ui,
        size,
        lang.t(
            "Measured here: swap a request out and back (a copy between host pools) against recompute",
            "本机实测：换出再换回一个请求（主机内存池之间的拷贝）对比重算",
        ),
    );
    let mut t = Table::new([
        lang.t("tokens", "token 数"),
        lang.t("KV bytes", "KV 字节"),
        lang.t("swap out + in", "换出 + 换入"),
        lang.t("GB/s", "GB/s"),
        lang.t("recompute (prefill)", "重算（预填充）"),
        lang.t("recompute ÷ swap", "重算 ÷ 换入换出"),
    ]);
    for r in &o.stored.offload {
        t.row(
            [
                r.tokens.to_string(),
                format_bytes(r.bytes as f64),
                format!("{:.3} ms", r.swap_seconds * 1e3),
                format!("{:.1}", 2.0 * r.bytes as f64 / r.swap_seconds / 1e9),
                format!("{:.2} ms", r.recompute_seconds * 1e3),
                format!("{:.0}×", r.recompute_seconds / r.swap_seconds),
            ]
            .map(|v| Cell::new(v).mono()),
        );
    }
    table(ui, lang, size, &t);
    note(ui, size, stored_source(lang, o));
}

/// Where the stored offload measurement was made.
pub(super) fn stored_source(lang: crate::ui::text::Lang, o: &ServingOut) -> String {
    format!(
        "{} {} · {} · {}",
        lang.t("Stored measurement:", "存储的实测："),
        o.stored.machine,
        o.stored.backend,
        o.stored.date
    )
}

/// The same question on real GPUs, from quoted device facts: swap over PCIe against recompute at peak.
pub(super) fn offload_from_facts(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, o: &ServingOut) {
    let (pcie, flops) = device_rates();
    title(
        ui,
        size,
        format!(
            "{} {:.0} GB/s, {} {:.0} TFLOP/s",
            lang.t(
                "Estimated for a GPU server (not the CPU above) from quoted facts: PCIe Gen5 x16",
                "估算 GPU 服务器（不是上面的 CPU），由引用的参数：PCIe Gen5 x16"
            ),
            pcie / 1e9,
            lang.t("H100 SXM BF16 dense", "H100 SXM BF16 稠密"),
            flops / 1e12
        ),
    );
    // The crossover as a chart: recompute ÷ swap over the context, a line per model (solid where the
    // model serves that context, dashed past it); above 1× swapping is cheaper.
    let limit = |m: &crate::calc::ModelSpec| crate::calc::context_limit(m);
    let x_max = o
        .fact_models
        .iter()
        .flat_map(|m| [crossover(m, pcie, flops), limit(m)])
        .flatten()
        .max()
        .map_or(16_384, |n| (n * 5 / 4).max(8192));
    let ratio = |m: &crate::calc::ModelSpec, n: usize| {
        let (s, r) = fact_costs(m, n, pcie, flops);
        (r / s).log10()
    };
    let h = (ui.available_height() - 7.0 * size).max(8.0 * size);
    Chart::new(
        "serving-offload-crossover",
        ChartAxis::linear(lang.t("context (tokens)", "上下文（token）")).from_zero(),
        ChartAxis::log10(lang.t(
            "recompute ÷ swap (log axis; above 1×: swap is cheaper)",
            "重算 ÷ 换出换入（对数坐标；高于 1×：换出更便宜）",
        ))
        .suffix("×")
        .include(0.0),
    )
    .height(h)
    .show(ui, size, |p| {
        for (i, m) in o.fact_models.iter().enumerate() {
            let served = limit(m).unwrap_or(x_max).min(x_max);
            let pts = |lo: usize, hi: usize| -> egui_plot::PlotPoints {
                (lo / 64..=hi / 64)
                    .map(|k| (k * 64).max(16))
                    .map(|n| [n as f64, ratio(m, n)])
                    .collect()
            };
            p.line(
                egui_plot::Line::new(m.name.clone(), pts(0, served))
                    .color(style::series(i))
                    .width(2.5),
            );
            if served < x_max {
                p.line(
                    egui_plot::Line::new("", pts(served, x_max))
                        .color(style::series(i))
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
        }
        p.threshold_y(0.0, lang.t("1×: the same cost", "1×：代价相同"));
    });
    let cross: Vec<String> = o
        .fact_models
        .iter()
        .map(|m| {
            let c = crossover(m, pcie, flops).map_or_else(
                || {
                    lang.t("swap is cheaper at every length", "任何长度都是换出更便宜")
                        .to_string()
                },
                |n| match lang {
                    crate::ui::text::Lang::Zh => format!("超过 {n} 个 token 后换出更便宜"),
                    _ => format!("swap is cheaper beyond {n} tokens"),
                },
            );
            let past = match (crate::calc::context_limit(m), lang) {
                (Some(l), crate::ui::text::Lang::Zh) => format!("（它最多服务 {l} 个 token，超出部分为虚线）"),
                (Some(l), _) => format!(" (it serves at most {l} tokens: dashed past that)"),
                (None, _) => String::new(),
            };
            format!("{}: {c}{past}", m.name)
        })
        .collect();
    note(
        ui,
        size,
        format!("{} {}", lang.t("Crossover:", "交叉点："), cross.join("; ")),
    );
    note(
        ui,
        size,
        lang.t(
            "Swap: both ways over PCIe; recompute: 2 FLOPs per parameter per token plus causal attention; both at peak rates (the best case for each). vLLM V1 recomputes on preemption; CPU offload comes through KV connectors.",
            "换出换入：经 PCIe 往返一次；重算：每 token 每参数 2 FLOP 加因果注意力；两者都按峰值计算（对两者都是最好情况）。vLLM V1 在抢占时重算；CPU 卸载通过 KV connector 实现。",
        ),
    );
}
