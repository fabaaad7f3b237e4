//! Lesson 10's KIVI step: the cache filling byte by byte (its timeline's labels and jobs) and quality
//! against memory.

use super::common::*;
use crate::cache::CacheFormat;
use crate::cache::KvDtype;
use crate::cache::group::{GroupFormat, job};
use crate::lessons::quant::{CONTEXTS, QuantOut, format_key, format_label, stored};
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, Motion, ViewCtx, legend};
use eframe::egui::{self, RichText, Ui};
use egui_plot::{Bar, BarChart};

/// What the cache holds after byte `at` of `n`, and what that byte's step quantised.
pub(super) fn kivi_label(lang: Lang, fmt: &GroupFormat, n: usize, at: usize) -> String {
    let len = at + 1;
    let (k, v) = fmt.quantised(len);
    let (k_now, v_now) = kivi_jobs(fmt, at);
    let mut s = match lang {
        Lang::Zh => format!(
            "字节 {at} / {}：K {k} 个已量化、{} 个 f16；V {v} 个已量化、{} 个 f16",
            n - 1,
            len - k,
            len - v
        ),
        Lang::En => format!(
            "byte {at} / {}: K {k} quantised, {} f16 · V {v} quantised, {} f16",
            n - 1,
            len - k,
            len - v
        ),
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
pub(super) fn kivi(cx: &mut ViewCtx, ui: &mut Ui, o: &QuantOut) {
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
    // The byte just appended, while its step runs: each token's colour goes from the cache before it to
    // the cache after it (a group turning quantised); tests and renders draw the settled frame.
    let motion = Motion::of(
        ui,
        egui::Id::unique(("kvscope-kivi-motion", cx.lesson.id())),
        at,
        cx.sync,
        1,
    );
    let then = Some(motion.from).filter(|&b| motion.moving() && b < n);
    let (k_then, v_then) = then.map_or((k_done, v_done), |b| fmt.quantised(b + 1));
    let state = |t: usize, len: usize, done: usize| {
        if t >= len {
            style::FREE
        } else if t < done {
            quant_c
        } else {
            f16_c
        }
    };
    for (name, done, done_then, groups, now) in
        [("K", k_done, k_then, true, k_now), ("V", v_done, v_then, false, v_now)]
    {
        ui.horizontal(|ui| {
            ui.label(RichText::new(name).strong().size(crate::style::fit(size)));
            let (rect, _) = ui.allocate_exact_size(egui::vec2(cell * n as f32, size * 1.4), egui::Sense::hover());
            let p = ui.painter();
            for t in 0..n {
                let c = style::c32(state(t, len, done));
                let c = match then {
                    Some(b) => style::c32(state(t, b + 1, done_then)).lerp_to_gamma(c, motion.ease()),
                    None => c,
                };
                let x = rect.min.x + t as f32 * cell;
                p.rect_filled(
                    egui::Rect::from_min_size(egui::pos2(x, rect.min.y), egui::vec2(cell, rect.height())),
                    0.0,
                    c,
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
    ratio_chart(cx, ui, o, &pool, (g, r));
}

/// What 4 and 2 bits save against f16, counted step by step: the name's ratio, then with each group's
/// f16 scale and zero point, then with the f16 residual at each context (bytes per token computed by the
/// formats, scales and residual included). Each bar is labelled with its ratio.
fn ratio_chart(cx: &ViewCtx, ui: &mut Ui, o: &QuantOut, pool: &CacheFormat, (g, r): (usize, usize)) {
    let (lang, size) = (cx.lang, cx.size);
    let mut cats = vec![
        lang.t("nominal", "名义").to_string(),
        lang.t("+ scale + zero", "含缩放与零点").to_string(),
    ];
    for ctx in CONTEXTS {
        cats.push(match lang {
            Lang::En => format!("+ residual, ctx {ctx}"),
            Lang::Zh => format!("含残差·{ctx}"),
        });
    }
    let series: Vec<(String, style::Rgba, Vec<f64>)> = [4u32, 2]
        .iter()
        .map(|&bits| {
            let f = CacheFormat::Kivi {
                bits,
                group: g,
                residual: r,
            };
            // Bits a value costs with its group's two f16 numbers (scale and zero) spread over G values.
            let cost = bits as f64 + 32.0 / g as f64;
            let mut v = vec![16.0 / bits as f64, 16.0 / cost];
            v.extend(
                CONTEXTS
                    .iter()
                    .map(|&ctx| o.bytes_per_token(pool, ctx) / o.bytes_per_token(&f, ctx)),
            );
            let name = match lang {
                Lang::En => format!("KIVI {bits}-bit: {cost:.2} bits per value with scale + zero"),
                Lang::Zh => format!("KIVI {bits} 位：含缩放与零点每值 {cost:.2} 比特"),
            };
            (name, style::kv_format(&format!("kivi-{bits}")), v)
        })
        .collect();
    let top = series.iter().flat_map(|s| s.2.iter().copied()).fold(0.0, f64::max);
    let h = (ui.available_height() - size * 0.5).max(size * 9.0);
    Chart::new(
        "quant-kivi-ratios",
        ChartAxis::categories(lang.t("what is counted", "计入的部分（· 后为上下文长度）"), cats),
        ChartAxis::linear(lang.t("compression against f16 (×)", "相对 f16 的压缩比（×）"))
            .from_zero()
            .suffix("×")
            // Room over the tallest bar for its label.
            .include(top * 1.15),
    )
    .height(h)
    .legend(series.iter().map(|(n, c, _)| (*c, n.clone())).collect())
    .show(ui, size, |p| {
        for (k, (name, c, v)) in series.iter().enumerate() {
            let dx = if k == 0 { -0.2 } else { 0.2 };
            let bars = v
                .iter()
                .enumerate()
                .map(|(i, &y)| Bar::new(i as f64 + dx, y).width(0.38).fill(style::c32(*c)))
                .collect();
            p.bar_chart(BarChart::new(name.as_str(), bars).color(style::c32(*c)));
            for (i, &y) in v.iter().enumerate() {
                p.text(
                    egui_plot::Text::new(
                        "",
                        egui_plot::PlotPoint::new(i as f64 + dx, y),
                        RichText::new(format!("{y:.2}×")).size(crate::style::fit(size * 0.8)),
                    )
                    .anchor(egui::Align2::CENTER_BOTTOM),
                );
            }
        }
    });
}

/// Tokens `[a, b)`.
pub(super) type Span = (usize, usize);

/// The tokens the step that appends byte `at` quantises, as spans `[a, b)`: K's (the R tokens whose groups
/// complete) and V's (the token leaving the residual), from the jobs the engine gives the kernel.
pub(super) fn kivi_jobs(fmt: &GroupFormat, at: usize) -> (Option<Span>, Option<Span>) {
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
pub(super) fn quality_chart(cx: &ViewCtx, ui: &mut Ui, o: &QuantOut, h: f32) {
    let size = cx.size;
    let lang = cx.lang;
    let long = CONTEXTS[1];
    let s = stored::embedded();
    // A format's bits per byte: stored when the table has it, else measured on this text.
    let bpb = |r: &crate::drivers::quant::QuantRun| {
        s.and_then(|s| s.cell(&r.format))
            .map_or(r.bits_per_byte(), |c| c.bits_per_byte)
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
            (Lang::En, None) => {
                format!("Quality against memory: down and left is better (this text; bytes at context {long})")
            }
            (Lang::Zh, None) => format!("质量与显存：越靠左下越好（这段文本；字节按上下文 {long} 计）"),
        },
    );
    let far = pts
        .iter()
        .fold([0.0f64; 2], |m, p| [m[0].max(p.2[0]), m[1].max(p.2[1])]);
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
        let span = [
            far[0].max(1e-9),
            pts.iter().fold(0.0f64, |m, p| m.max(p.2[1].abs())).max(1e-9),
        ];
        let near =
            |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).abs() < 0.15 * span[0] && (a[1] - b[1]).abs() < 0.1 * span[1];
        for (i, (name, c, xy)) in pts.iter().enumerate() {
            p.points(
                egui_plot::Points::new(name.as_str(), vec![*xy])
                    .color(style::c32(*c))
                    .radius(size * 0.35),
            );
            let crowded = pts
                .iter()
                .enumerate()
                .any(|(j, q)| j != i && q.2[0] < xy[0] && near(q.2, *xy));
            p.text(
                egui_plot::Text::new("", egui_plot::PlotPoint::new(xy[0], xy[1]), format!("  {name}"))
                    .anchor(if crowded {
                        egui::Align2::LEFT_TOP
                    } else {
                        egui::Align2::LEFT_BOTTOM
                    })
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
