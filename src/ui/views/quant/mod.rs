//! Lesson 10's views: bytes per token, the interactive FP8/INT8 encoder, the trained model's channel
//! maxima, the quantisation error maps, KIVI's groups and residual, the table of quality, memory and
//! speed, and the kernels.

mod common;
mod real;

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Bar, BarChart};

use crate::cache::CacheFormat;
use crate::cache::KvDtype;
use crate::cache::group::{GroupFormat, job};
use crate::cache::dtype::quant::{E4M3, E5M2, Fp8};
use crate::lessons::quant::{
    CONTEXTS, Quant, QuantOut, View, format_key, format_label, show_value, stored, tokens_per_pool,
};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{Axes, Chart, ChartAxis, ViewCtx, bar, heat_panel, kernel_panel, legend, sim_capped, view_id, view_in};
use common::*;
use real::real;

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

/// What the cache holds after byte `at` of `n`, and what that byte's step quantised.
fn kivi_label(lang: Lang, fmt: &GroupFormat, n: usize, at: usize) -> String {
    let len = at + 1;
    let (k, v) = fmt.quantised(len);
    let (k_now, v_now) = kivi_jobs(fmt, at);
    let mut s = match lang {
        Lang::Zh => format!("字节 {at} / {}：K {k} 个已量化、{} 个 f16；V {v} 个已量化、{} 个 f16", n - 1, len - k, len - v),
        Lang::En => format!("byte {at} / {}: K {k} quantised, {} f16 · V {v} quantised, {} f16", n - 1, len - k, len - v),
    };
    if let Some((a, b)) = k_now {
        s += &match lang {
            Lang::Zh => format!(" · 本步量化 K 的字节 {a}…{}", b - 1),
            Lang::En => format!(" · this step quantises K of bytes {a}…{}", b - 1),
        };
    }
    if let Some((a, _)) = v_now {
        s += &match (lang, k_now.is_some()) {
            (Lang::Zh, true) => format!("，以及 V 的字节 {a}"),
            (Lang::Zh, false) => format!(" · 本步量化 V 的字节 {a}"),
            (Lang::En, true) => format!(" and V of byte {a}"),
            (Lang::En, false) => format!(" · this step quantises V of byte {a}"),
        };
    }
    s
}

/// The formats the memory views compare, at KIVI's G and R.
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

/// The fields of an FP8 code, as coloured bit boxes, with the code, its value and the error.
fn bit_row(ui: &mut Ui, size: f32, code: u8, fields: &[(usize, style::Rgba, &str)]) {
    let cell = size * 1.6;
    let (rect, _) = ui.allocate_exact_size(egui::vec2(cell * 8.0 + 4.0, cell + size * 0.9), egui::Sense::hover());
    let p = ui.painter();
    let mut bit = 0usize;
    for (n, color, name) in fields {
        let x0 = rect.min.x + bit as f32 * cell;
        for k in 0..*n {
            let b = 7 - (bit + k);
            let r = egui::Rect::from_min_size(
                egui::pos2(x0 + k as f32 * cell, rect.min.y),
                egui::vec2(cell - 2.0, cell - 2.0),
            );
            p.rect_filled(r, 2.0, style::c32(*color));
            let on = (code >> b) & 1;
            p.text(
                r.center(),
                egui::Align2::CENTER_CENTER,
                on.to_string(),
                egui::FontId::monospace(crate::style::fit(size)),
                style::ink_on(*color),
            );
        }
        p.text(
            egui::pos2(x0 + *n as f32 * cell / 2.0, rect.min.y + cell + size * 0.4),
            egui::Align2::CENTER_CENTER,
            *name,
            egui::FontId::proportional(crate::style::fit(size * 0.7)),
            ui.visuals().text_color(),
        );
        bit += n;
    }
}

fn encoder(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    let x = o.value;
    title(
        ui,
        size,
        match lang {
            Lang::En => format!("x = {}", show_value(x)),
            Lang::Zh => format!("x = {}", show_value(x)),
        },
    );
    let sign = style::request(3);
    let expo = style::request(0);
    let mant = style::request(1);
    type Fields<'a> = Vec<(usize, style::Rgba, &'a str)>;
    let rows: [(&str, u8, f32, Fields); 3] = [
        (
            "INT8",
            o.int8.code,
            o.int8.value,
            vec![(8, style::request(2), lang.t("two's complement", "二进制补码"))],
        ),
        (
            "FP8 E4M3",
            o.e4m3.code,
            o.e4m3.value,
            vec![
                (1, sign, lang.t("S", "符号")),
                (4, expo, lang.t("exponent", "指数")),
                (3, mant, lang.t("mantissa", "尾数")),
            ],
        ),
        (
            "FP8 E5M2",
            o.e5m2.code,
            o.e5m2.value,
            vec![
                (1, sign, lang.t("S", "符号")),
                (5, expo, lang.t("exponent", "指数")),
                (2, mant, lang.t("mantissa", "尾数")),
            ],
        ),
    ];
    for (name, code, value, fields) in rows {
        ui.add_space(size * 0.2);
        let err = (value - x).abs();
        let rel = if x != 0.0 {
            format!(" ({:.2}%)", 100.0 * err / x.abs())
        } else {
            String::new()
        };
        let scale = if name == "INT8" {
            match lang {
                Lang::En => format!(", scale {:.3e} (row max {})", o.row.1, show_value(o.row.0)),
                Lang::Zh => format!("，缩放 {:.3e}（行最大 {}）", o.row.1, show_value(o.row.0)),
            }
        } else {
            match lang {
                Lang::En => ", scale 1".to_string(),
                Lang::Zh => "，缩放 1".to_string(),
            }
        };
        ui.label(
            RichText::new(format!(
                "{name}: {} 0x{code:02X} → {}{scale}; {} {}{rel}",
                lang.t("code", "编码"),
                show_value(value),
                lang.t("error", "误差"),
                show_value(err)
            ))
            .size(crate::style::fit(size)),
        );
        bit_row(ui, size, code, &fields);
    }
    ui.add_space(size * 0.3);
    range_table(cx, ui);
}

fn range_table(cx: &mut ViewCtx, ui: &mut Ui) {
    let size = cx.size;
    let lang = cx.lang;
    let fp = |f: Fp8| {
        let mb = f.mbits as i32;
        let min_normal = 2f64.powi(f.emin());
        let min_sub = 2f64.powi(f.emin() - mb);
        let nans = (0..=255u8).filter(|&c| f.decode(c).is_nan()).count();
        [
            show_value(f.max()),
            format!("{min_normal:.3e}"),
            format!("{min_sub:.3e}"),
            format!("{}", f.mbits),
            format!("{:.1}%", 100.0 * 2f64.powi(-mb)),
            if f.ieee {
                lang.t("yes", "有")
            } else {
                lang.t("no", "无")
            }
            .to_string(),
            nans.to_string(),
        ]
    };
    let (a, b) = (fp(E4M3), fp(E5M2));
    let names = [
        lang.t("largest", "最大值"),
        lang.t("smallest normal", "最小正规数"),
        lang.t("smallest subnormal", "最小次正规数"),
        lang.t("mantissa bits", "尾数位数"),
        lang.t("relative step", "相对步长"),
        lang.t("infinities", "无穷大"),
        lang.t("NaN codes", "NaN 编码数"),
    ];
    let mut t = crate::ui::widgets::Table::new(["", "E4M3", "E5M2"]);
    for (i, n) in names.iter().enumerate() {
        use crate::ui::widgets::Cell;
        t.row([Cell::new(*n), Cell::new(&a[i]).mono(), Cell::new(&b[i]).mono()]);
    }
    crate::ui::widgets::table(ui, lang, size, &t);
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

fn kivi(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
    let size = cx.size;
    let lang = cx.lang;
    let (g, r) = (o.group, o.residual);
    let n = o.bytes;
    // The cache after the timeline's byte: which tokens are quantised is the engine's own rule
    // (`GroupFormat::quantised`), and the tokens this step quantises are the jobs its `group_append`
    // gives the `group_quant` kernel (`GroupFormat::step_jobs`).
    let at = (*cx.cursor).min(n.saturating_sub(1));
    let len = at + 1;
    let fmt = GroupFormat::kivi(2, g, r);
    let (k_done, v_done) = fmt.quantised(len);
    let (k_now, v_now) = kivi_jobs(&fmt, at);
    title(
        ui,
        size,
        match (lang, len == n) {
            (Lang::En, true) => format!("KIVI after {n} bytes: G = {g}, R = {r}"),
            (Lang::En, false) => format!("KIVI after {len} of {n} bytes: G = {g}, R = {r}"),
            (Lang::Zh, true) => format!("读完 {n} 字节后的 KIVI：G = {g}，R = {r}"),
            (Lang::Zh, false) => format!("读完 {n} 字节中的 {len} 个后的 KIVI：G = {g}，R = {r}"),
        },
    );
    let quant_c = style::request(0);
    let f16_c = style::RESIDUAL;
    let w = ui.available_width() - size * 3.0;
    let cell = (w / n as f32).max(0.5);
    for (name, done, groups, now) in [("K", k_done, true, k_now), ("V", v_done, false, v_now)] {
        ui.horizontal(|ui| {
            ui.label(RichText::new(name).strong().size(crate::style::fit(size)));
            let (rect, _) = ui.allocate_exact_size(egui::vec2(cell * n as f32, size * 1.4), egui::Sense::hover());
            let p = ui.painter();
            for t in 0..n {
                let c = if t >= len {
                    style::FREE
                } else if t < done {
                    quant_c
                } else {
                    f16_c
                };
                let x = rect.min.x + t as f32 * cell;
                p.rect_filled(
                    egui::Rect::from_min_size(egui::pos2(x, rect.min.y), egui::vec2(cell, rect.height())),
                    0.0,
                    style::c32(c),
                );
                if groups && t % g == 0 && t > 0 && t <= done {
                    p.line_segment(
                        [egui::pos2(x, rect.min.y), egui::pos2(x, rect.max.y)],
                        egui::Stroke::new(2.0, style::c32(style::CANVAS)),
                    );
                }
            }
            if let Some((a, b)) = now {
                let x0 = rect.min.x + a as f32 * cell;
                let span = egui::Rect::from_min_max(
                    egui::pos2(x0, rect.min.y),
                    egui::pos2(rect.min.x + b as f32 * cell, rect.max.y),
                );
                p.rect_stroke(
                    span.expand(1.5),
                    1.0,
                    egui::Stroke::new(2.5, style::CURRENT_32),
                    egui::StrokeKind::Outside,
                );
            }
        });
    }
    legend(
        ui,
        &[
            (
                quant_c,
                lang.t(
                    "quantised (K: per channel, groups of G tokens; V: per token)",
                    "已量化（K：按通道，每组 G 个 token；V：按 token）",
                ),
            ),
            (f16_c, lang.t("f16 residual", "f16 残差")),
            (style::FREE, lang.t("not written yet", "尚未写入")),
            (
                style::CURRENT,
                lang.t(
                    "quantised by this byte's group_quant jobs (outlined)",
                    "本字节的 group_quant 作业量化的部分（描边）",
                ),
            ),
        ],
        size,
    );
    ui.add_space(size * 0.4);
    let pool = CacheFormat::Pool {
        dtype: KvDtype::F16,
        calibrated: true,
    };
    use crate::ui::widgets::Cell;
    let mut head = vec![
        Cell::new(""),
        Cell::new(lang.t("nominal", "名义")),
        Cell::new(lang.t("bits per value", "每值比特")),
        Cell::new(lang.t("with scale + zero", "含缩放与零点")),
    ];
    for ctx in CONTEXTS {
        head.push(Cell::new(match lang {
            Lang::En => format!("+ residual, ctx {ctx}"),
            Lang::Zh => format!("含残差，上下文 {ctx}"),
        }));
    }
    let mut t = crate::ui::widgets::Table::new(head);
    for bits in [4u32, 2] {
        let f = CacheFormat::Kivi {
            bits,
            group: g,
            residual: r,
        };
        let cost = bits as f64 + 32.0 / g as f64;
        let mut row = vec![
            Cell::new(format!("KIVI {bits}-bit")),
            Cell::new(format!("{:.0}×", 16.0 / bits as f64)).mono(),
            Cell::new(format!("{cost:.2}")).mono(),
            Cell::new(format!("{:.2}×", 16.0 / cost)).mono(),
        ];
        for ctx in CONTEXTS {
            let ratio = o.bytes_per_token(&pool, ctx) / o.bytes_per_token(&f, ctx);
            row.push(Cell::new(format!("{ratio:.2}×")).mono());
        }
        t.row(row);
    }
    crate::ui::widgets::table(ui, lang, size, &t);
}

/// Tokens `[a, b)`.
type Span = (usize, usize);

/// The tokens the step that appends byte `at` quantises, as spans `[a, b)`: K's (the R tokens whose groups
/// complete) and V's (the token leaving the residual), from the jobs the engine gives the kernel.
fn kivi_jobs(fmt: &GroupFormat, at: usize) -> (Option<Span>, Option<Span>) {
    let jobs = fmt.step_jobs(0, at, |i| i);
    let span = |kind: i32, width: usize| {
        let starts: Vec<usize> = jobs.iter().filter(|j| j[0] == kind).map(|j| j[2] as usize).collect();
        Some((*starts.iter().min()?, starts.iter().max()? + width))
    };
    (span(job::K_CHANNEL, fmt.group), span(job::V_TOKEN, 1))
}

/// Quality against memory: each format a point at (KV bytes per token, bits per byte above f16), down
/// and left better, the chosen format ringed. Bits per byte from the stored table (many windows) when it
/// is there, else from this text; bytes per token computed here.
fn quality_chart(cx: &ViewCtx, ui: &mut Ui, o: &QuantOut, h: f32) {
    let size = cx.size;
    let lang = cx.lang;
    let long = CONTEXTS[1];
    let s = stored::embedded();
    // A format's bits per byte: stored when the table has it, else measured on this text.
    let bpb = |r: &crate::drivers::quant::QuantRun| {
        s.and_then(|s| s.cell(&r.format)).map_or(r.bits_per_byte(), |c| c.bits_per_byte)
    };
    let base = o
        .runs
        .iter()
        .find(|(f, _)| format_key(f) == "f16")
        .map_or(0.0, |(_, r)| bpb(r));
    let pts: Vec<(String, style::Rgba, [f64; 2])> = o
        .runs
        .iter()
        .map(|(f, r)| {
            (
                format_label(f),
                style::kv_format(&format_key(f)),
                [o.bytes_per_token(f, long), bpb(r) - base],
            )
        })
        .collect();
    title(
        ui,
        size,
        match (lang, s) {
            (Lang::En, Some(s)) => format!(
                "Quality against memory: down and left is better (bits per byte stored, {} windows on {}; bytes at context {long})",
                s.windows, s.backend
            ),
            (Lang::Zh, Some(s)) => format!(
                "质量与显存：越靠左下越好（每字节比特数为存储的结果，{} 个窗口，在 {} 上；字节按上下文 {long} 计）",
                s.windows, s.backend
            ),
            (Lang::En, None) => format!("Quality against memory: down and left is better (this text; bytes at context {long})"),
            (Lang::Zh, None) => format!("质量与显存：越靠左下越好（这段文本；字节按上下文 {long} 计）"),
        },
    );
    let far = pts.iter().fold([0.0f64; 2], |m, p| [m[0].max(p.2[0]), m[1].max(p.2[1])]);
    let here = lang.t("the chosen format", "所选格式");
    let mut legend_entries: Vec<(style::Rgba, String)> = Vec::new();
    for (name, c, _) in &pts {
        if !legend_entries.iter().any(|e| e.0 == *c) {
            legend_entries.push((*c, name.clone()));
        }
    }
    legend_entries.push((style::CURRENT, here.to_string()));
    Chart::new(
        "quant-quality",
        ChartAxis::linear(lang.t("KV bytes per token (all layers)", "每个 token 的 KV 字节（所有层）"))
            .from_zero()
            .include(far[0] * 1.3),
        ChartAxis::linear(match lang {
            Lang::En => format!("bits per byte above f16's {base:.3}"),
            Lang::Zh => format!("比 f16（{base:.3}）多出的每字节比特数"),
        })
            .include(-0.15 * far[1].max(1e-9))
            .include(far[1] * 1.12),
    )
    .height(h)
    .legend(legend_entries)
    .show(ui, size, |p| {
        // A label goes right of its point, and below it when an earlier point (left of it) is close
        // enough for their labels to collide.
        let span = [far[0].max(1e-9), pts.iter().fold(0.0f64, |m, p| m.max(p.2[1].abs())).max(1e-9)];
        let near = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).abs() < 0.15 * span[0] && (a[1] - b[1]).abs() < 0.1 * span[1];
        for (i, (name, c, xy)) in pts.iter().enumerate() {
            p.points(
                egui_plot::Points::new(name.as_str(), vec![*xy])
                    .color(style::c32(*c))
                    .radius(size * 0.35),
            );
            let crowded = pts.iter().enumerate().any(|(j, q)| j != i && q.2[0] < xy[0] && near(q.2, *xy));
            p.text(
                egui_plot::Text::new("", egui_plot::PlotPoint::new(xy[0], xy[1]), format!("  {name}"))
                    .anchor(if crowded { egui::Align2::LEFT_TOP } else { egui::Align2::LEFT_BOTTOM })
                    .color(style::c32(*c)),
            );
        }
        if let Some((_, _, xy)) = pts.get(o.selected) {
            p.points(
                egui_plot::Points::new(here, vec![*xy])
                    .color(style::CURRENT_32)
                    .radius(size * 0.6)
                    .filled(false),
            );
        }
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
