//! Lesson 10's views: bytes per token, the interactive FP8/INT8 encoder, the trained model's channel
//! maxima, the quantisation error maps, KIVI's groups and residual, the table of quality, memory and
//! speed, and the kernels.

mod common;
mod real;

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Bar, BarChart};

use crate::cache::CacheFormat;
use crate::cache::KvDtype;
use crate::cache::group::GroupFormat;
use crate::lessons::quant::{CONTEXTS, Quant, QuantOut, View, format_label, stored, tokens_per_pool};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{
    Axes, Chart, ChartAxis, ViewCtx, bar, heat_panel, kernel_panel, sim_capped, view_id, view_in,
};
use common::*;
use real::real;
mod kivi;
use kivi::*;
mod fp8;
use fp8::*;

impl LessonUi for Quant {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(o), Some(view)) = (out.downcast_ref::<QuantOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Bytes => bytes(cx, ui, o),
            View::Encoder => encoder(cx, ui, o),
            View::Outliers => outliers(cx, ui, o),
            View::Error => error(cx, ui, o),
            View::Kivi => kivi(cx, ui, o),
            View::Table => table(cx, ui, o),
            View::Real => real(cx, ui),
            View::Kernel => {
                costs(cx, ui, o);
                kernel_panel(cx, ui, self.ops(), out);
            }
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    /// KIVI's cache filling byte by byte is the lesson's process; its other steps show the whole window.
    fn timeline_on(&self, cx: &ViewCtx) -> bool {
        cx.step_shows(View::Kivi.name())
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(o) = out.downcast_ref::<QuantOut>() else {
            return;
        };
        let lang = cx.lang;
        let fmt = GroupFormat::kivi(2, o.group, o.residual);
        crate::ui::widgets::timeline(
            cx,
            ui,
            o.bytes,
            |ui, c, n| {
                if ui.button(lang.t("< byte", "< 上一字节")).clicked() {
                    *c = c.saturating_sub(1);
                }
                if ui.button(lang.t("byte >", "下一字节 >")).clicked() {
                    *c = (*c + 1).min(n - 1);
                }
            },
            |c| kivi_label(lang, &fmt, o.bytes, c),
        );
    }
}

fn memory_formats(o: &QuantOut) -> Vec<CacheFormat> {
    let pool = |dtype| CacheFormat::Pool {
        dtype,
        calibrated: true,
    };
    vec![
        pool(KvDtype::F16),
        pool(KvDtype::INT8_TOKEN),
        CacheFormat::Int8Channel,
        pool(KvDtype::FP8_E4M3),
        CacheFormat::Kivi {
            bits: 4,
            group: o.group,
            residual: o.residual,
        },
        CacheFormat::Kivi {
            bits: 2,
            group: o.group,
            residual: o.residual,
        },
    ]
}

fn bytes(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    let (l, kvh, hd) = o.dims;
    title(
        ui,
        size,
        match lang {
            Lang::En => format!("bytes per token, all {l} layers ({kvh} KV heads × {hd}), K and V, scales included"),
            Lang::Zh => format!("每个 token 的字节数，全部 {l} 层（{kvh} 个 KV 头 × {hd}），K 与 V，含缩放因子"),
        },
    );
    let formats = memory_formats(o);
    let max = o.bytes_per_token(&formats[0], CONTEXTS[0]).ceil() as usize;
    for &ctx in CONTEXTS.iter() {
        ui.add_space(size * 0.3);
        ui.label(
            RichText::new(match lang {
                Lang::En => format!("context {ctx} tokens"),
                Lang::Zh => format!("上下文 {ctx} 个 token"),
            })
            .size(crate::style::fit(size * 0.95)),
        );
        for f in &formats {
            let b = o.bytes_per_token(f, ctx);
            let c = style::c32(style::kv_format(&crate::lessons::quant::format_key(f)));
            bar(ui, &format_label(f), b.round() as usize, max, c, size);
        }
    }
    ui.add_space(size * 0.3);
    let long = CONTEXTS[1];
    let line: Vec<String> = formats
        .iter()
        .map(|f| format!("{} {}", format_label(f), tokens_per_pool(o.bytes_per_token(f, long))))
        .collect();
    note(
        ui,
        size,
        match lang {
            Lang::En => format!("tokens in a 1 GiB pool at context {long}: {}", line.join(" · ")),
            Lang::Zh => format!("1 GiB 块池在上下文 {long} 时能放的 token：{}", line.join(" · ")),
        },
    );
}

/// KIVI's figure on this model: |K| and |V| over every channel and byte of the text for one layer and
/// KV head (K's outlier channels are bright rows; V's rows are even), and under them K's INT8 error
/// with one scale per token against one scale per channel, on one colour scale (a per-token scale is set
/// by the token's outlier channel, so every other channel of that token is rounded coarsely).
fn outliers(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let lang = cx.lang;
    let full = ui.available_rect_before_wrap();
    let gap = 10.0;
    let half = (full.width() - gap) / 2.0;
    let cols = [
        egui::Rect::from_min_size(full.min, egui::vec2(half, full.height())),
        egui::Rect::from_min_size(full.min + egui::vec2(half + gap, 0.0), egui::vec2(half, full.height())),
    ];
    let at = match lang {
        Lang::En => format!("layer {}, KV head {}", o.layer, o.kv_head),
        Lang::Zh => format!("第 {} 层 KV 头 {}", o.layer, o.kv_head),
    };
    let err_max = o
        .k_err_token
        .values
        .iter()
        .chain(&o.k_err_channel.values)
        .copied()
        .fold(0f32, f32::max)
        .max(1e-9);
    let panels = [
        (
            0,
            0,
            &o.k_abs,
            None,
            match lang {
                Lang::En => format!("|K|, {at}: outlier channels are bright rows (own colours)"),
                Lang::Zh => format!("|K|，{at}：离群通道是亮的行（独立色标）"),
            },
        ),
        (
            1,
            0,
            &o.v_abs,
            None,
            match lang {
                Lang::En => format!("|V|, {at}: no row stands out as far (own colours)"),
                Lang::Zh => format!("|V|，{at}：没有哪一行那么突出（独立色标）"),
            },
        ),
        (
            0,
            1,
            &o.k_err_token,
            Some((0.0, err_max)),
            lang.t(
                "K's INT8 error, one scale per token",
                "K 的 INT8 误差，每个 token 一个缩放因子",
            )
            .to_string(),
        ),
        (
            1,
            1,
            &o.k_err_channel,
            Some((0.0, err_max)),
            lang.t(
                "K's INT8 error, one scale per channel (same colours)",
                "K 的 INT8 误差，每个通道一个缩放因子（同一色标）",
            )
            .to_string(),
        ),
    ];
    for (i, (col, row, data, range, t)) in panels.into_iter().enumerate() {
        let r = stacked(cols[col])[row];
        view_in(ui, r, |ui| {
            cx.widgets.heat.stretch = true;
            heat_panel(
                cx,
                ui,
                view_id("quant-outliers", i),
                &t,
                data,
                Colormap::Sequential,
                range,
                Highlight::None,
                Axes::DimToken,
                &|(d, t)| format!("byte {t} ch {d}"),
            );
        });
    }
}

fn error(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let lang = cx.lang;
    let size = cx.size;
    let (f, r) = o.chosen();
    let full = ui.available_rect_before_wrap();
    let plot_h = (full.height() * 0.3).max(8.0 * size);
    let top = egui::Rect::from_min_max(full.min, egui::pos2(full.max.x, full.max.y - plot_h));
    let rects = stacked(top);
    let max = o
        .k_err
        .values
        .iter()
        .chain(&o.v_err.values)
        .copied()
        .fold(0f32, f32::max)
        .max(1e-9);
    for (i, (name, data)) in [("K", &o.k_err), ("V", &o.v_err)].into_iter().enumerate() {
        view_in(ui, rects[i], |ui| {
            let t = match lang {
                Lang::En => format!(
                    "|{name} − dequant({name})|, {}, layer {} KV head {}",
                    format_label(f),
                    o.layer,
                    o.kv_head
                ),
                Lang::Zh => format!(
                    "|{name} − dequant({name})|，{}，第 {} 层 KV 头 {}",
                    format_label(f),
                    o.layer,
                    o.kv_head
                ),
            };
            cx.widgets.heat.stretch = true;
            heat_panel(
                cx,
                ui,
                view_id("quant-error", i),
                &t,
                data,
                Colormap::Sequential,
                Some((0.0, max)),
                Highlight::None,
                Axes::DimToken,
                &|(d, t)| format!("byte {t} ch {d}"),
            );
        });
    }
    let bottom = egui::Rect::from_min_max(egui::pos2(full.min.x, full.max.y - plot_h + 4.0), full.max);
    view_in(ui, bottom, |ui| {
        sim_capped(cx, ui, o.bytes, o.capped_from);
        ui.label(
            RichText::new(lang.t(
                "attention output through the cache: error RMS over output RMS, per layer",
                "经由缓存的注意力输出：误差均方根 / 输出均方根，按层",
            ))
            .strong()
            .size(crate::style::fit(size)),
        );
        let bars: Vec<Bar> = r
            .out_rel_rms
            .iter()
            .enumerate()
            .map(|(l, &e)| Bar::new(l as f64, 100.0 * e).width(0.6))
            .collect();
        let layers = r.out_rel_rms.len();
        Chart::new(
            "quant-out-err",
            ChartAxis::categories(lang.t("layer", "层"), (0..layers).map(|l| l.to_string()).collect()),
            ChartAxis::linear("").from_zero().suffix("%"),
        )
        .height(ui.available_height())
        .no_legend()
        .show(ui, size, |pl| {
            pl.bar_chart(BarChart::new("", bars).color(style::c32(style::WRITTEN)));
        });
    });
}

fn table(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    // In presentation mode the chart is the first page and the measured table the second; the window
    // shows both.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(2));
    if page != Some(1) {
        let h = if page == Some(0) {
            ui.available_height() - size * 5.5
        } else {
            (ui.available_height() * 0.45).max(size * 10.0)
        };
        quality_chart(cx, ui, o, h.max(size * 8.0));
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("the measured table", "实测表"));
        return;
    }
    let s = stored::embedded();
    title(
        ui,
        size,
        match (lang, s) {
            (Lang::En, Some(s)) => format!(
                "bits per byte: this text (measured now) and stored (kvscope export quant-table on {}, {} windows)",
                s.backend, s.windows
            ),
            (Lang::Zh, Some(s)) => format!(
                "每字节比特数：这段文本（现在测得）与存储的结果（kvscope export quant-table，在 {} 上，{} 个窗口）",
                s.backend, s.windows
            ),
            _ => lang
                .t(
                    "bits per byte: this text (the stored table is missing)",
                    "每字节比特数：这段文本（缺少存储的表）",
                )
                .to_string(),
        },
    );
    let long = CONTEXTS[1];
    let bench = s.and_then(|s| s.bench.as_ref());
    let mut t = crate::ui::widgets::Table::new([
        lang.t("format", "格式"),
        lang.t("bits/byte here", "本文本 比特/字节"),
        lang.t("stored", "存储"),
        lang.t("output error", "输出误差"),
        lang.t("bytes/token", "字节/token"),
        lang.t("tokens / 1 GiB", "token / 1 GiB"),
        lang.t("decode vs f16", "解码 vs f16"),
    ])
    .below(3.0);
    for (i, (f, r)) in o.runs.iter().enumerate() {
        use crate::ui::widgets::Cell;
        let mark = if i == o.selected { "> " } else { "" };
        let stored_bpb = s
            .and_then(|s| s.cell(&r.format))
            .map_or("—".to_string(), |c| format!("{:.3}", c.bits_per_byte));
        let err = r.out_rel_rms.iter().sum::<f64>() / r.out_rel_rms.len().max(1) as f64;
        let b = o.bytes_per_token(f, long);
        let speed = bench
            .and_then(|b| b.lines.iter().find(|l| l.format == r.format))
            .map_or("—".to_string(), |l| format!("{:.2}×", l.speedup));
        let host = if r.kernel {
            ""
        } else {
            lang.t(" (host)", "（主机）")
        };
        t.row([
            Cell::new(format!("{mark}{}{host}", format_label(f))),
            Cell::new(format!("{:.3}", r.bits_per_byte())).mono(),
            Cell::new(stored_bpb).mono(),
            Cell::new(format!("{:.2}%", 100.0 * err)).mono(),
            Cell::new(crate::lessons::format_bytes(b)).mono(),
            Cell::new(tokens_per_pool(b)).mono(),
            Cell::new(speed).mono(),
        ]);
        if i == o.selected {
            t.marked.push(i);
        }
    }
    crate::ui::widgets::table(ui, lang, size, &t);
    sim_capped(cx, ui, o.bytes, o.capped_from);
    if let Some(b) = bench {
        note(
            ui,
            size,
            match lang {
                Lang::En => format!(
                    "decode: {} requests × {} context on {} ({}), stored; memory at context {long}",
                    b.requests, b.context, b.backend, b.machine
                ),
                Lang::Zh => format!(
                    "解码：{} 个请求 × {} 上下文，在 {}（{}）上，存储的结果；显存按上下文 {long} 计",
                    b.requests, b.context, b.backend, b.machine
                ),
            },
        );
    }
}

fn costs(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    let (f, _) = o.chosen();
    let (_, kvh, hd) = o.dims;
    let f16 = CacheFormat::Pool {
        dtype: KvDtype::F16,
        calibrated: true,
    };
    let per = |f: &CacheFormat| f.bytes_per_token(kvh, hd, CONTEXTS[0]);
    note(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "Per token and layer the decode reads {} in {} against {} in f16 (codes, scales and, for \
                 the grouped formats, zero points and the f16 residual).",
                crate::lessons::format_bytes(per(f)),
                format_label(f),
                crate::lessons::format_bytes(per(&f16)),
            ),
            Lang::Zh => format!(
                "每个 token 每层，解码在 {} 下读取 {}，f16 下读取 {}（编码、缩放因子；分组格式还有零点和 f16 残差）。",
                format_label(f),
                crate::lessons::format_bytes(per(f)),
                crate::lessons::format_bytes(per(&f16)),
            ),
        },
    );
}
