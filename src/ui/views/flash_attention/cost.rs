//! Lesson 6's cost views: the work of the naive path against the tiled one, the global-memory traffic
//! of both, and the split of the context across blocks (flash-decoding).

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Bar, BarChart};

use crate::lessons::flash_attention::FlashOut;
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::widgets::{Axes, Chart, ChartAxis, ViewCtx, bytes, check_line, heat_panel, view_id};

/// Tiles visited and skipped, and the score elements computed against T².
pub(super) fn work(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let (lang, size) = (cx.lang, cx.size);
    let (total, visited, skipped) = f.tile_counts();
    let elems = f.visited_elements();
    let t2 = f.t * f.t;
    ui.label(
        RichText::new(format!(
            "{} ({})",
            lang.t("work of the tiled kernel", "分块 kernel 的工作量"),
            if f.mask == crate::math::Mask::Causal {
                lang.t("causal", "因果掩码")
            } else {
                lang.t("no mask", "无掩码")
            }
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    crate::ui::widgets::bar(
        ui,
        lang.t("tiles in the grid", "网格中的块"),
        total,
        total,
        style::WHOLE_32,
        size,
    );
    crate::ui::widgets::bar(
        ui,
        lang.t("tiles computed", "计算的块"),
        visited,
        total,
        style::bar_fill(ui.visuals()),
        size,
    );
    crate::ui::widgets::bar(
        ui,
        lang.t("tiles skipped (masked)", "跳过的块（被掩码）"),
        skipped,
        total,
        style::bar_fill(ui.visuals()),
        size,
    );
    crate::ui::widgets::bar(
        ui,
        lang.t("scores, all of S (T²)", "全部分数 S（T²）"),
        t2,
        t2,
        style::WHOLE_32,
        size,
    );
    crate::ui::widgets::bar(
        ui,
        lang.t("scores in computed tiles", "计算块中的分数"),
        elems,
        t2,
        style::bar_fill(ui.visuals()),
        size,
    );
    crate::ui::widgets::bar(
        ui,
        match f.mask {
            crate::math::Mask::Causal => lang.t("visible scores, T(T+1)/2", "可见分数 T(T+1)/2"),
            crate::math::Mask::None => lang.t("visible scores, all T² (no mask)", "可见分数：全部 T²（无掩码）"),
            _ => lang.t("visible scores under the mask", "掩码下的可见分数"),
        },
        visible_scores(f.mask, f.t),
        t2,
        style::bar_fill(ui.visuals()),
        size,
    );
    ui.label(
        RichText::new(format!(
            "{}: {:.0}% {}",
            lang.t("computed", "计算量"),
            100.0 * elems as f64 / t2 as f64,
            lang.t(
                "of T² (diagonal tiles are computed whole, their upper part masked inside)",
                "的 T²（对角线上的块整块计算，块内上半部分被掩码）"
            )
        ))
        .size(crate::style::fit(size * 0.9)),
    );
}

/// Elements read and written, naive against flash, and both against T.
pub(super) fn io(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let (lang, size) = (cx.lang, cx.size);
    let n = f.naive;
    let fl = f.walk.io;
    ui.label(
        RichText::new(format!(
            "{} T = {}, hd = {}, Br = {}, Bc = {} ({})",
            lang.t(
                "global memory traffic of one head, in elements:",
                "单个头的全局内存读写量（元素数）："
            ),
            f.t,
            f.hd,
            f.br,
            f.bc,
            lang.t("counted by the walker as it runs", "由 walker 运行时计数")
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    {
        use crate::ui::widgets::Cell;
        let mut t = crate::ui::widgets::Table::new([
            "",
            lang.t("read", "读"),
            lang.t("write", "写"),
            lang.t("formula", "公式"),
        ]);
        t.row([
            Cell::new(lang.t("naive: S, softmax, P·V", "朴素：S、softmax、P·V")),
            Cell::new(n.read.to_string()).mono(),
            Cell::new(n.write.to_string()).mono(),
            Cell::new("R = 3·T·hd + 2·T², W = 2·T² + T·hd").mono(),
        ]);
        t.row([
            Cell::new(lang.t("flash (tiled)", "flash（分块）")),
            Cell::new(fl.read.to_string()).mono(),
            Cell::new(fl.write.to_string()).mono(),
            Cell::new(lang.t(
                "R = T·hd + 2·hd·Σ(keys of visited tiles), W = T·hd",
                "R = T·hd + 2·hd·Σ(访问块的键数)，W = T·hd",
            ))
            .mono(),
        ]);
        crate::ui::widgets::table(ui, lang, size * 0.9, &t);
    }
    ui.label(
        RichText::new(format!(
            "{} {:.1}× {} · f32: {} → {}",
            lang.t("the naive path moves", "朴素实现的读写元素数是 flash 的"),
            (n.read + n.write) as f64 / (fl.read + fl.write).max(1) as f64,
            lang.t(
                "as many elements as flash; bars: bytes, ratio above each pair",
                "倍；柱：字节数，每对柱上方是倍数"
            ),
            bytes(((n.read + n.write) * 4) as f64),
            bytes(((fl.read + fl.write) * 4) as f64)
        ))
        .size(crate::style::fit(size * 0.9)),
    );
    let h = (ui.available_height() - 1.5 * size).max(100.0);
    // Bytes of f32 on a log axis, with each T's ratio written over its pair so the log scale does not
    // hide it.
    let bar = |i: usize, off: f64, v: u64| {
        let fill = style::series(if off < 0.0 { 1 } else { 5 });
        Bar::new(i as f64 + off, ((4 * v).max(1) as f64).log10())
            .width(0.38)
            .fill(fill)
            .stroke(egui::Stroke::new(1.0, fill))
    };
    let ratios: Vec<(f64, f64, f64)> = f
        .io_sweep
        .iter()
        .enumerate()
        .map(|(i, (_, a, b))| {
            let (na, fl) = ((a.read + a.write) as f64, (b.read + b.write) as f64);
            (i as f64, (4.0 * na.max(fl)).max(1.0).log10(), na / fl.max(1.0))
        })
        .collect();
    let naive: Vec<Bar> = f
        .io_sweep
        .iter()
        .enumerate()
        .map(|(i, (_, a, _))| bar(i, -0.2, a.read + a.write))
        .collect();
    let flash: Vec<Bar> = f
        .io_sweep
        .iter()
        .enumerate()
        .map(|(i, (_, _, b))| bar(i, 0.2, b.read + b.write))
        .collect();
    let ts: Vec<usize> = f.io_sweep.iter().map(|x| x.0).collect();
    let top = ratios.iter().map(|r| r.1).fold(0.0, f64::max);
    Chart::new(
        "flash-io-bars",
        ChartAxis::categories(
            lang.t("T (same hd, tiles and mask)", "T（相同 hd、块大小与掩码）"),
            ts.iter().map(ToString::to_string).collect(),
        ),
        ChartAxis::log10(lang.t("bytes read + written, f32 (log axis)", "读写字节数，f32（对数坐标）"))
            .from_zero()
            // Room over the tallest pair for its ratio (a fifth of the range: a line of text on a
            // projector's short plot).
            .include(top * 1.25)
            .fmt(|v| format!("{}B", crate::ui::widgets::pow10_label(v))),
    )
    .height(h)
    .show(ui, size, |p| {
        p.bar_chart(BarChart::new(lang.t("naive", "朴素"), naive).color(style::series(1)));
        p.bar_chart(BarChart::new("flash", flash).color(style::series(5)));
        for &(x, top, r) in &ratios {
            p.text(
                egui_plot::Text::new(
                    "",
                    egui_plot::PlotPoint::new(x, top + 0.15),
                    RichText::new(format!("{r:.1}×"))
                        .size(crate::style::fit(size * 0.9))
                        .strong(),
                )
                .anchor(egui::Align2::CENTER_BOTTOM),
            );
        }
    });
}

/// Split-K: the last row's keys in two partitions, each reduced on its own, merged with the online
/// softmax's rescaling, against the full row.
pub(super) fn split(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let (lang, size) = (cx.lang, cx.size);
    let (a, b, m, [ca, cb]) = &f.split;
    let row = f.t - 1;
    let mono = |s: String| RichText::new(s).monospace().size(crate::style::fit(size * 0.9));
    let m_text = |m: f32| {
        if m.is_finite() {
            format!("{m:.4}")
        } else {
            "−∞".into()
        }
    };
    let title = match lang {
        crate::ui::text::Lang::Zh => format!("解码：只有一个查询（第 {row} 行），它的键被分成两个分区"),
        _ => format!("decode: one query (row {row}), its keys split into two partitions"),
    };
    ui.label(RichText::new(title).strong().size(crate::style::fit(size)));
    egui::Grid::new("flash-split")
        .striped(true)
        .spacing([size, 4.0])
        .show(ui, |ui| {
            for h in [
                lang.t("partition", "分区"),
                lang.t("keys", "键"),
                "m",
                "l",
                lang.t("factor exp(m_i − m)", "系数 exp(m_i − m)"),
            ] {
                ui.label(RichText::new(h).strong().size(crate::style::fit(size * 0.9)));
            }
            ui.end_row();
            for (name, p, c) in [
                ("1", a, Some(*ca)),
                ("2", b, Some(*cb)),
                (lang.t("merged", "合并"), m, None),
            ] {
                ui.label(mono(name.to_string()));
                ui.label(mono(if p.keys.is_empty() {
                    "—".into()
                } else {
                    format!("{}–{}", p.keys.start, p.keys.end - 1)
                }));
                ui.label(mono(m_text(p.m)));
                ui.label(mono(format!("{:.4}", p.l)));
                ui.label(mono(c.map_or("m = max(m₁, m₂)".into(), |c| format!("{c:.4}"))));
                ui.end_row();
            }
        });
    ui.label(mono(
        "l = l₁·exp(m₁ − m) + l₂·exp(m₂ − m),  O = (acc₁·exp(m₁ − m) + acc₂·exp(m₂ − m)) / l".into(),
    ));
    cx.widgets.heat.reserve_below = 1.6 * size;
    // The rows are named, not numbered.
    cx.widgets.heat.tokens = Some(std::sync::Arc::new(
        [
            lang.t("partition 1", "分区 1"),
            lang.t("partition 2", "分区 2"),
            lang.t("merged", "合并"),
            lang.t("lesson 1", "第 1 课"),
        ]
        .map(String::from)
        .to_vec(),
    ));
    heat_panel(
        cx,
        ui,
        view_id("flash-split", 0),
        lang.t(
            "rows: partition 1's own output, partition 2's, the merge, lesson 1's row",
            "各行：分区 1 自己的输出、分区 2 的、合并结果、第 1 课的该行",
        ),
        &f.split_map,
        Colormap::Diverging,
        None,
        Highlight::Row(2),
        Axes::ResultDim,
        &|(r, d)| {
            let names = [
                lang.t("partition 1", "分区 1"),
                lang.t("partition 2", "分区 2"),
                lang.t("merged", "合并"),
                lang.t("lesson 1", "第 1 课"),
            ];
            format!("{}, dim {d}: {:.4}", names[r.min(3)], f.split_values[r * f.hd + d])
        },
    );
    check_line(cx, ui, f.checks.get(3), lang.t("merged row", "合并后的行"));
}

/// The scores `mask` lets through in a `t`×`t` score matrix, counted entry by entry (so the bar is right
/// for every mask, not only the causal one whose count is T(T+1)/2).
pub(super) fn visible_scores(mask: crate::math::Mask, t: usize) -> usize {
    (0..t).map(|i| (0..t).filter(|&j| mask.visible(i, j)).count()).sum()
}
