//! Lesson 8's views: KV memory and bits per byte against stream position for the four policies, the ring
//! buffer of the bounded paged cache slot by slot, the measured attention mass on the first bytes, the
//! positions the model sees under either scheme, and the cost-and-quality table.

mod common;
mod sinks;

use crate::ui::text::Slant as _;
use eframe::egui::{self, RichText, Ui};
use egui_plot::{Line, PlotPoints};

use crate::drivers::stream::{Positions, StreamPolicy, StreamRun};
use crate::lessons::streaming::{RUNS, StreamOut, Streaming, View, stored};
use crate::lessons::{LessonKind, Output};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, ViewCtx, check_line, kernel_panel, timeline, timeline_used};
use common::*;
use sinks::{sinks, sinks_real};
mod ring;
use ring::*;

impl LessonUi for Streaming {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(o), Some(view)) = (out.downcast_ref::<StreamOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
            View::Growth => growth(cx, ui, o),
            View::Ring => ring(cx, ui, o),
            View::Quality => quality(cx, ui, o),
            View::Sinks => sinks(cx, ui, o),
            View::SinksReal => sinks_real(cx, ui),
            View::Positions => positions(cx, ui, o),
            View::Costs => costs(cx, ui, o),
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(o) = out.downcast_ref::<StreamOut>() else {
            return;
        };
        let lang = cx.lang;
        let n = o.stream();
        let whole = match lang {
            Lang::Zh => format!("这一步的视图展示整个数据流：字节 0…{}", n - 1),
            _ => format!("This step's views show the whole stream: bytes 0…{}", n - 1),
        };
        if !timeline_used(cx, ui, &["ring", "positions"], &whole) {
            return;
        }
        timeline(
            cx,
            ui,
            n,
            |ui, c, n| {
                if ui.button(lang.t("< byte", "< 上一字节")).clicked() {
                    *c = c.saturating_sub(1);
                }
                if ui.button(lang.t("next byte >", "下一字节 >")).clicked() {
                    *c = (*c + 1).min(n - 1);
                }
                if ui.button(lang.t("+64 >>", "+64 >>")).clicked() {
                    *c = (*c + 64).min(n - 1);
                }
            },
            |c| {
                format!(
                    "{} {c} / {} · {} {}",
                    lang.t("reading byte", "读取字节"),
                    n - 1,
                    lang.t("trained context", "训练上下文"),
                    o.trained_context
                )
            },
        );
    }
}

fn growth(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    capped(cx, ui, o);
    let h = (ui.available_height() - 5.0 * size).max(120.0);
    let mib = |blocks: u32| f64::from(blocks) * (o.block_size * o.kv_per_byte) as f64 / (1024.0 * 1024.0);
    Chart::new(
        "streaming-growth",
        ChartAxis::linear(lang.t("bytes read", "已读字节")),
        ChartAxis::linear(lang.t("KV cache allocated (MiB, all layers)", "已分配 KV 缓存（MiB，所有层）")).from_zero(),
    )
    .height(h)
    .show(ui, size, |p| {
        for r in o.runs.iter().take(3) {
            let pts: PlotPoints = r
                .blocks_in_use
                .iter()
                .enumerate()
                .map(|(t, &b)| [(t + 1) as f64, mib(b)])
                .collect();
            p.line(
                Line::new(policy_name(lang, r.config.policy, r.config.positions), pts)
                    .color(policy_color(r.config.policy)),
            );
        }
        context_line(p, lang, o.trained_context);
    });
    let dense = &o.runs[0];
    note(
        ui,
        size,
        format!(
            "{}: {} {} {} → {:.2} MiB {} {} {}",
            lang.t("dense", "全量"),
            dense.blocks_in_use.last().copied().unwrap_or(0),
            lang.t("blocks of", "个块，每块"),
            crate::ui::widgets::bytes((o.block_size * o.kv_per_byte) as f64),
            mib(dense.blocks_in_use.last().copied().unwrap_or(0)),
            lang.t("after", "，读完"),
            o.stream(),
            lang.t("bytes; the bounded policies stay flat.", "字节；有界策略保持不变。")
        ),
    );
}

fn quality(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    capped(cx, ui, o);
    let h = (ui.available_height() - 3.5 * size).max(120.0);
    // A rolling mean over 64 predictions (fewer at the start), in bits.
    let smooth = |r: &StreamRun| -> PlotPoints {
        let k = 64usize;
        let mut acc = 0f64;
        let mut pts = Vec::with_capacity(r.nll.len());
        for (i, &x) in r.nll.iter().enumerate() {
            acc += f64::from(x);
            if i >= k {
                acc -= f64::from(r.nll[i - k]);
            }
            let m = (i + 1).min(k) as f64;
            pts.push([(i + 1) as f64, acc / m / std::f64::consts::LN_2]);
        }
        PlotPoints::new(pts)
    };
    Chart::new(
        "streaming-quality",
        ChartAxis::linear(lang.t("byte predicted (position in the stream)", "被预测的字节（流中位置）")),
        ChartAxis::linear(lang.t(
            "bits per byte (mean of the last 64)",
            "每字节比特数（最近 64 个的均值）",
        ))
        .from_zero(),
    )
    .height(h)
    // The legend in the runs' order (the lines are drawn in the reverse one).
    .legend(
        o.runs
            .iter()
            .take(4)
            .map(|r| {
                (
                    style::policy(r.config.policy.name()),
                    policy_name(lang, r.config.policy, r.config.positions).to_string(),
                )
            })
            .collect(),
    )
    .show(ui, size, |p| {
        // The bounded policies score within a few thousandths of a bit of one another, so their lines
        // coincide: drawn from the last to the first, each narrower than the one under it, they nest
        // (an outer band, a middle one, a centre line) and every colour of the legend stays visible.
        let runs: Vec<_> = o.runs.iter().take(4).collect();
        for (i, r) in runs.iter().enumerate().rev() {
            let width = if i == 0 { 2.0 } else { 1.5 + 2.5 * (i - 1) as f32 };
            p.line(
                Line::new(policy_name(lang, r.config.policy, r.config.positions), smooth(r))
                    .color(policy_color(r.config.policy))
                    .width(width),
            );
        }
        context_line(p, lang, o.trained_context);
    });
    let mut line = String::new();
    for r in o.runs.iter().take(4) {
        line.push_str(&format!(
            "{} {:.3} · ",
            policy_name(lang, r.config.policy, r.config.positions),
            r.bits_per_byte()
        ));
    }
    note(
        ui,
        size,
        format!(
            "{} {} {}: {}",
            lang.t("bits per byte over", "在"),
            o.stream(),
            lang.t("bytes", "字节上的每字节比特数"),
            line.trim_end_matches(" · ")
        ),
    );
}

fn positions(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    let scheme = if o.text_positions {
        Positions::Text
    } else {
        Positions::Cache
    };
    let r = o.run(StreamPolicy::Sinks, scheme);
    let n = o.stream();
    let t = (*cx.cursor).min(n - 1);
    let c = r.config;
    let kept: Vec<usize> = (0..=t).filter(|&i| c.keeps(i, t)).collect();
    ui.label(
        RichText::new(format!(
            "{} · {} {t}: {} {}",
            policy_name(lang, c.policy, c.positions),
            lang.t("reading byte", "读取字节"),
            kept.len(),
            lang.t(
                "bytes attended, with the positions their keys are turned to",
                "个被关注的字节，及其键旋转到的位置"
            )
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    // Below the chart: the query's distance (two lines) and the bits-per-byte table (three rows).
    let h = (ui.available_height() - size * 7.5).clamp(size * 7.0, size * 14.0);
    positions_chart(cx, ui, r, &kept, o.trained_context, scheme, h);
    let q = r.max_position.get(t).copied().unwrap_or(0);
    note(
        ui,
        size,
        format!(
            "{} {q}, {} {q}; {} {}.",
            lang.t("The query is turned to", "查询旋转到位置"),
            lang.t("so its distance to the first sink is", "它与第一个 sink 的距离为"),
            lang.t("training saw distances below", "训练时见过的距离都小于"),
            o.trained_context
        ),
    );
    ui.add_space(size * 0.5);
    egui::Grid::new("streaming-positions-bpb").striped(true).show(ui, |ui| {
        let head = |ui: &mut Ui, s: &str| {
            ui.label(RichText::new(s).strong().size(crate::style::fit(size * 0.9)));
        };
        head(ui, lang.t("bits per byte", "每字节比特数"));
        head(ui, lang.t("cache positions", "缓存位置"));
        head(ui, lang.t("text positions", "文本位置"));
        ui.end_row();
        for p in [StreamPolicy::Window, StreamPolicy::Sinks] {
            ui.label(RichText::new(policy_name(lang, p, Positions::Cache)).size(crate::style::fit(size * 0.9)));
            for pos in [Positions::Cache, Positions::Text] {
                let run = o.run(p, pos);
                ui.label(
                    RichText::new(format!("{:.3}", run.bits_per_byte()))
                        .monospace()
                        .size(crate::style::fit(size * 0.9)),
                );
            }
            ui.end_row();
        }
    });
}

/// Where the kept bytes sit: the sinks and the window as spans at their text positions (top row) and at
/// their cache positions (bottom row), the ends joined, with the model's trained context as a threshold.
/// By cache slot the positions stay inside the trained context however long the stream; by text the
/// window runs past it.
fn positions_chart(
    cx: &ViewCtx,
    ui: &mut Ui,
    r: &StreamRun,
    kept: &[usize],
    trained: usize,
    scheme: Positions,
    h: f32,
) {
    let lang = cx.lang;
    let size = cx.size;
    let Some(&t) = kept.last() else { return };
    let rows = vec![
        lang.t("cache slot", "缓存槽位").to_string(),
        lang.t("text", "文本").to_string(),
    ];
    let used = match scheme {
        Positions::Cache => lang.t("positions (the model uses: cache slot)", "位置（模型所用：缓存槽位）"),
        Positions::Text => lang.t("positions (the model uses: text)", "位置（模型所用：文本）"),
    };
    let classes = [
        (style::SINK, lang.t("sinks", "sink"), 0),
        (style::READ, lang.t("the window", "窗口"), 1),
        (style::CURRENT, lang.t("the byte read now", "正在读取的字节"), 2),
    ];
    let class = |i: usize| {
        if i == t {
            2
        } else if i < r.config.sinks {
            0
        } else {
            1
        }
    };
    Chart::new(
        "streaming-positions-chart",
        ChartAxis::linear(lang.t("position", "位置"))
            .from_zero()
            .include((t.max(trained) + 1) as f64),
        ChartAxis::categories(used, rows),
    )
    .height(h)
    .legend(classes.iter().map(|(c, n, _)| (*c, n.to_string())).collect())
    .show(ui, size, |p| {
        // The window first, so the sinks' span (slots 0…S−1, beside the window's) and the byte read now
        // are drawn over it.
        for (c, name, k) in [classes[1], classes[0], classes[2]] {
            // (text position, cache position) of this class's bytes, in order: each class is one run.
            let mine: Vec<(f64, f64)> = kept
                .iter()
                .enumerate()
                .filter(|&(_, &i)| class(i) == k)
                .map(|(rank, &i)| (i as f64, rank as f64))
                .collect();
            let (Some(&first), Some(&last)) = (mine.first(), mine.last()) else {
                continue;
            };
            let color = style::c32(c);
            // The ends joined: where the class's first and last byte move to.
            for (text, slot) in [first, last] {
                p.line(
                    Line::new("", PlotPoints::new(vec![[text, 1.0], [slot, 0.0]]))
                        .color(color)
                        .width(1.5),
                );
            }
            // The span on each row.
            for (row, a, b) in [(1.0, first.0, last.0), (0.0, first.1, last.1)] {
                p.line(
                    Line::new("", PlotPoints::new(vec![[a, row], [b, row]]))
                        .color(color)
                        .width(size * 0.5),
                );
            }
            let ends: Vec<[f64; 2]> = [first, last]
                .iter()
                .flat_map(|&(text, slot)| [[text, 1.0], [slot, 0.0]])
                .collect();
            p.points(egui_plot::Points::new(name, ends).color(color).radius(size * 0.25));
        }
        context_line(p, lang, trained);
    });
}

/// Cost against quality: each policy a point at (query–key pairs per byte read, log axis; bits per byte on
/// this stream), labelled with the KV memory it held at most. Down and left is better.
fn cost_chart(cx: &ViewCtx, ui: &mut Ui, o: &StreamOut, h: f32) {
    let lang = cx.lang;
    let size = cx.size;
    let pts: Vec<(String, style::Rgba, [f64; 2])> = RUNS
        .iter()
        .enumerate()
        .take(4)
        .map(|(i, (p, pos))| {
            let r = &o.runs[i];
            let most = r.blocks_in_use.iter().max().copied().unwrap_or(0) as usize;
            let mem = crate::ui::widgets::bytes((most * o.block_size * o.kv_per_byte) as f64);
            (
                format!("{} · {mem}", policy_name(lang, *p, *pos)),
                style::policy(p.name()),
                [o.pairs_per_byte(r).max(1.0).log10(), r.bits_per_byte()],
            )
        })
        .collect();
    ui.label(
        RichText::new(match lang {
            Lang::Zh => format!("代价与质量，这段 {} 字节的流：越靠左下越好（标签：最多占用的 KV 内存）", o.stream()),
            _ => format!(
                "Cost against quality on this {}-byte stream: down and left is better (labels: the most KV memory held)",
                o.stream()
            ),
        })
        .strong()
        .size(crate::style::fit(size)),
    );
    let (lo, hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |m, p| (m.0.min(p.2[1]), m.1.max(p.2[1])));
    let pad = (hi - lo).max(0.01) * 0.15;
    let far = pts.iter().fold(0.0f64, |m, p| m.max(p.2[0]));
    Chart::new(
        "streaming-costs-chart",
        ChartAxis::log10(lang.t(
            "query–key pairs per byte read (log axis)",
            "每读一个字节的查询–键对数（对数坐标）",
        ))
        .include(far + 0.6),
        ChartAxis::linear(lang.t("bits per byte", "每字节比特数"))
            .include(lo - pad)
            .include(hi + pad),
    )
    .height(h)
    .legend(pts.iter().map(|(n, c, _)| (*c, n.clone())).collect())
    .show(ui, size, |p| {
        for (name, c, xy) in &pts {
            p.points(
                egui_plot::Points::new(name.as_str(), vec![*xy])
                    .color(style::c32(*c))
                    .radius(size * 0.4),
            );
        }
    });
}

fn costs(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    // In presentation mode the chart is the first page and the table the second; the window shows both.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(2));
    if page != Some(1) {
        let h = if page == Some(0) {
            ui.available_height() - size * 6.0
        } else {
            (ui.available_height() * 0.42).max(size * 9.0)
        };
        cost_chart(cx, ui, o, h.max(size * 8.0));
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("the table and the real models", "表与真实模型"));
        return;
    }
    let st = stored::embedded();
    egui::Grid::new("streaming-costs").striped(true).show(ui, |ui| {
        let head = |ui: &mut Ui, s: String| {
            ui.label(RichText::new(s).strong().size(crate::style::fit(size * 0.9)));
        };
        head(ui, lang.t("policy", "策略").into());
        head(ui, format!("{}\n({} B)", lang.t("bits/byte", "比特/字节"), o.stream()));
        if let Some(s) = st {
            head(
                ui,
                format!(
                    "{}\n({} B, {})",
                    lang.t("bits/byte", "比特/字节"),
                    s.bytes,
                    lang.t("stored", "存储")
                ),
            );
        }
        head(ui, lang.t("most\nblocks", "最多\n块数").into());
        head(ui, lang.t("KV\nmemory", "KV\n内存").into());
        head(ui, lang.t("tokens\n/ byte", "token\n/ 字节").into());
        head(ui, lang.t("pairs\n/ byte", "注意力对\n/ 字节").into());
        ui.end_row();
        for (i, (p, pos)) in RUNS.iter().enumerate().take(4) {
            let r = &o.runs[i];
            let cell = |ui: &mut Ui, s: String| {
                ui.label(RichText::new(s).monospace().size(crate::style::fit(size * 0.95)));
            };
            ui.label(
                RichText::new(policy_name(lang, *p, *pos))
                    .color(style::state_text(ui.visuals(), style::policy(p.name())))
                    .size(crate::style::fit(size * 0.95)),
            );
            cell(ui, format!("{:.3}", r.bits_per_byte()));
            if let Some(s) = st {
                cell(
                    ui,
                    s.find(p.name(), "cache", o.window, o.sinks)
                        .map_or("—".into(), |x| format!("{:.3}", x.bits_per_byte)),
                );
            }
            let most = r.blocks_in_use.iter().max().copied().unwrap_or(0);
            cell(ui, most.to_string());
            cell(
                ui,
                crate::ui::widgets::bytes((most as usize * o.block_size * o.kv_per_byte) as f64),
            );
            let through = if *p == StreamPolicy::Recompute {
                r.attended.iter().map(|&k| f64::from(k)).sum::<f64>() / r.attended.len().max(1) as f64
            } else {
                1.0
            };
            cell(ui, format!("{through:.1}"));
            cell(ui, format!("{:.0}", o.pairs_per_byte(r)));
            ui.end_row();
        }
    });
    note(
        ui,
        size,
        lang.t(
            "tokens / byte: bytes run through every layer for each byte read; pairs / byte: query–key pairs attended per byte read (summed over the window's rows for recompute).",
            "token / 字节：每读一个字节要过一遍所有层的字节数；注意力对 / 字节：每读一个字节计算的查询–键对数（重算时为窗口所有行之和）。",
        ),
    );
    if let Some(r) = o.checks.first() {
        check_line(
            cx,
            ui,
            Some(r),
            cx.t("stream_decode, every 16th step", "stream_decode（每 16 步抽查）"),
        );
    }
    ui.add_space(size * 0.6);
    let facts = [
        (
            "mistral_window",
            lang.t(
                "Mistral 7B: every layer attends to a window of",
                "Mistral 7B：每层只看最近的",
            ),
        ),
        (
            "gemma2_local_window",
            lang.t(
                "Gemma 2: local layers (every other layer) of",
                "Gemma 2：隔层的局部层窗口",
            ),
        ),
        (
            "gemma2_global_span",
            lang.t("Gemma 2: global layers span", "Gemma 2：全局层跨度"),
        ),
        (
            "gemma3_ratio",
            lang.t("Gemma 3: local to global layers", "Gemma 3：局部层与全局层之比"),
        ),
        (
            "gemma3_local_window",
            lang.t("Gemma 3: local layers span", "Gemma 3：局部层跨度"),
        ),
        ("streamingllm_sinks", lang.t("StreamingLLM keeps", "StreamingLLM 保留")),
    ];
    for (id, what) in facts {
        if let Some(f) = crate::facts::get(id) {
            ui.label(
                RichText::new(format!("{what} {}", f.shown_in(lang == crate::ui::text::Lang::Zh)))
                    .slant()
                    .color(style::quote(ui.visuals()))
                    .size(crate::style::fit(size * 0.95)),
            );
        }
    }
}
