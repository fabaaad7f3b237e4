//! Lesson 6's views: the memory problem, one row's online softmax, the tile grid with what sits in
//! shared memory, the accumulator, the work the causal mask saves, the traffic, the split-K merge and the
//! kernel.

use eframe::egui::{self, RichText, Stroke, Ui};
use egui_plot::{Bar, BarChart, Line, PlotPoints};

use crate::compute::ops::flash::smem_floats;
use crate::lessons::flash_attention::{FlashAttention, FlashOut, MEMORY_TS, View};
use crate::lessons::{LessonKind, Output};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{
    Axes, Chart, ChartAxis, ViewCtx, bytes, heat_panel, kernel_panel, prev_next, timeline, view_id,
};

mod cost;
use cost::{io, split, work};

impl LessonUi for FlashAttention {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(f), Some(view)) = (out.downcast_ref::<FlashOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Memory => memory(cx, ui, f),
            View::Online => online(cx, ui, f),
            View::Tiles => tiles(cx, ui, f),
            View::Acc => acc(cx, ui, f),
            View::Work => work(cx, ui, f),
            View::Io => io(cx, ui, f),
            View::Split => split(cx, ui, f),
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(f) = out.downcast_ref::<FlashOut>() else {
            return;
        };
        let lang = cx.lang;
        let steps = &f.walk.steps;
        timeline(
            cx,
            ui,
            steps.len(),
            |ui, c, n| {
                prev_next(lang.t("< tile", "< 上一块"), lang.t("next tile >", "下一块 >"))(ui, c, n);
                // The first tile of the next row block.
                if ui.button(lang.t("next row block >>", "下一行块 >>")).clicked() {
                    let rb = steps.get(*c).map_or(0, |s| s.row_block);
                    *c = steps.iter().position(|s| s.row_block > rb).unwrap_or(n - 1);
                }
            },
            |c| {
                let s = &steps[c.min(steps.len() - 1)];
                format!(
                    "{} {} / {} · {} {} · {} {}",
                    lang.t("tile", "块"),
                    c,
                    steps.len() - 1,
                    lang.t("row block", "行块"),
                    s.row_block,
                    lang.t("key tile", "键块"),
                    s.col_tile
                )
            },
        );
    }
}

/// A power of ten of bytes in decimal units, for a log10 axis ("1 kB", "10 MB"); other ticks are left
/// blank.
fn decimal_bytes(log10: f64) -> String {
    let k = log10.round();
    if (log10 - k).abs() > 1e-6 || k < 0.0 {
        return String::new();
    }
    let k = k as i32;
    let unit = ["B", "kB", "MB", "GB", "TB"][(k / 3).min(4) as usize];
    format!("{} {unit}", 10i64.pow((k - 3 * (k / 3).min(4)) as u32))
}

fn cursor(cx: &ViewCtx, f: &FlashOut) -> usize {
    (*cx.cursor).min(f.walk.steps.len().saturating_sub(1))
}

/// Bytes of one head's S and P against T (log axes), next to the on-chip memory the tiles must fit in.
fn memory(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let (lang, size) = (cx.lang, cx.size);
    ui.label(
        RichText::new(lang.t(
            "one head, f32: bytes of S and P (T × T each) against bytes of Q, K, V and O (T × hd each)",
            "单个头，f32：S 与 P（各 T × T）的字节数，对比 Q、K、V、O（各 T × hd）",
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let sp = |t: usize| (2 * t * t * 4) as f64;
    let qkvo = |t: usize| (4 * t * f.hd * 4) as f64;
    let tile = (smem_floats(f.br, f.bc, f.hd) * 4) as f64;
    let hopper_fact = crate::facts::fact("hopper_smem_per_sm");
    let hopper = hopper_fact.number() * 1024.0;
    let quote = crate::ui::text::quote_color(ui.visuals());
    let device = f.device_smem.map(|(b, _)| b as f64);
    let h = (ui.available_height() - 5.5 * size).max(120.0);
    let xs = MEMORY_TS;
    let (x0, x1) = ((xs[0] as f64).log2(), (xs[xs.len() - 1] as f64).log2());
    let flat = |name: String, y: f64| Line::new(name, PlotPoints::new(vec![[x0, y.log10()], [x1, y.log10()]]));
    Chart::new(
        "flash-memory",
        ChartAxis::log2(lang.t("T (log2 axis)", "T（log2 坐标）")),
        ChartAxis::log10(lang.t("bytes (log10)", "字节（log10）")).fmt(|v| {
            let d = decimal_bytes(v);
            if d.is_empty() {
                format!("{}B", crate::ui::widgets::pow10_label(v))
            } else {
                d
            }
        }),
    )
    .height(h)
    .show(ui, size, |p| {
        let pts = |g: &dyn Fn(usize) -> f64| -> PlotPoints {
            xs.iter().map(|&t| [(t as f64).log2(), g(t).log10()]).collect()
        };
        p.line(
            Line::new(lang.t("S + P (T² each)", "S + P（各 T²）"), pts(&sp))
                .width(3.0)
                .color(style::series(1)),
        );
        p.line(
            Line::new(lang.t("Q, K, V, O (T·hd each)", "Q、K、V、O（各 T·hd）"), pts(&qkvo)).color(style::series(2)),
        );
        p.line(
            flat(
                format!(
                    "{} {} ({})",
                    lang.t("H100/H200 shared memory per SM:", "H100/H200 每个 SM 的共享内存："),
                    hopper_fact.shown(),
                    lang.t("quoted", "引用")
                ),
                hopper,
            )
            .color(quote)
            .style(egui_plot::LineStyle::dashed_dense()),
        );
        if let Some(d) = device {
            p.line(flat(lang.t("this backend reports", "当前后端报告").to_string(), d).color(style::series(3)));
        }
        p.line(
            flat(
                format!(
                    "{} Br={} Bc={}",
                    lang.t("this lesson's tiles,", "本课的块，"),
                    f.br,
                    f.bc
                ),
                tile,
            )
            .color(style::series(4)),
        );
    });
    let big = xs[xs.len() - 1];
    ui.label(
        RichText::new(format!(
            "T = {big}: S + P = {} {}; Q, K, V, O = {}",
            bytes(sp(big)),
            lang.t("per head", "每个头"),
            bytes(qkvo(big))
        ))
        .monospace()
        .size(crate::style::fit(size * 0.9)),
    );
    let backend_line = match f.device_smem {
        Some((b, [en, zh])) => format!("{}: {} — {}", lang.t("active backend", "当前后端"), bytes(b as f64), lang.t(en, zh)),
        None => lang
            .t(
                "active backend: no on-chip memory to report (the CPU and the cuda-sim shim keep \"shared memory\" in host memory)",
                "当前后端：没有片上内存可报告（CPU 与 cuda-sim 模拟把“共享内存”放在主机内存里）",
            )
            .to_string(),
    };
    ui.label(RichText::new(backend_line).size(crate::style::fit(size * 0.85)));
    ui.label(
        RichText::new(format!(
            "{} {} · {} {}",
            lang.t("tiles of this lesson:", "本课的块："),
            bytes(tile),
            lang.t(
                "the kernel's static shared memory for tiles:",
                "kernel 为块准备的静态共享内存："
            ),
            bytes((f.kernel_floats * 4) as f64)
        ))
        .size(crate::style::fit(size * 0.85)),
    );
}

/// One row's running max, sum and rescale factor after each key tile, next to the full softmax of
/// lesson 1's kernels.
fn online(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let (lang, size) = (cx.lang, cx.size);
    let c = cursor(cx, f);
    let row = f.row_at(c);
    let rb = f.walk.steps.get(c).map_or(0, |s| s.row_block);
    ui.label(
        RichText::new(format!(
            "{} {row} ({} {rb}): {}",
            lang.t("query row", "查询行"),
            lang.t("row block", "行块"),
            lang.t(
                "the online softmax, key tile by key tile",
                "在线 softmax，一个键块接一个键块"
            )
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let mono = |s: String| RichText::new(s).monospace().size(crate::style::fit(size * 0.9));
    let steps: Vec<(usize, &crate::math::flash::TileStep)> = f
        .walk
        .steps
        .iter()
        .enumerate()
        .filter(|(i, s)| s.row_block == rb && *i <= c)
        .collect();
    let total_tiles = f.walk.steps.iter().filter(|s| s.row_block == rb).count();
    let area = egui::ScrollArea::vertical()
        .id_salt("flash-online")
        .max_height((ui.available_height() * 0.4).max(60.0));
    crate::ui::layout::scroll(ui, area, |ui| {
        egui::Grid::new("flash-online-grid")
            .striped(true)
            .spacing([size, 4.0])
            .show(ui, |ui| {
                for h in [
                    lang.t("key tile", "键块"),
                    lang.t("keys", "键"),
                    "m",
                    "l",
                    lang.t("rescale exp(m_old − m_new)", "缩放 exp(m_old − m_new)"),
                ] {
                    ui.label(RichText::new(h).strong().size(crate::style::fit(size * 0.9)));
                }
                ui.end_row();
                for (i, s) in &steps {
                    let r = row - s.rows.start;
                    let color = if *i == c {
                        style::state_text(ui.visuals(), style::CURRENT)
                    } else {
                        ui.visuals().text_color()
                    };
                    ui.label(mono(s.col_tile.to_string()).color(color));
                    ui.label(mono(format!("{}–{}", s.cols.start, s.cols.end - 1)).color(color));
                    if s.skipped {
                        ui.label(mono(lang.t("skipped: masked", "跳过：全被掩码").to_string()).color(color));
                        ui.label("");
                        ui.label("");
                    } else {
                        let m = s.m[r];
                        let m_text = if m.is_finite() {
                            format!("{m:.4}")
                        } else {
                            "−∞".into()
                        };
                        ui.label(mono(m_text).color(color));
                        ui.label(mono(format!("{:.4}", s.l[r])).color(color));
                        // exp(m_old − m_new) with m_old = −∞: nothing was accumulated yet.
                        let first = !f.walk.steps[..*i]
                            .iter()
                            .any(|p| p.row_block == rb && !p.skipped && p.m[r].is_finite());
                        let text = if first {
                            lang.t("— (first tile: nothing to rescale)", "—（第一块：无需缩放）")
                                .to_string()
                        } else {
                            format!("{:.4}", s.rescale[r])
                        };
                        ui.label(mono(text).color(color));
                    }
                    ui.end_row();
                }
            });
    });
    // The full softmax of this row from lesson 1's kernels (S materialised).
    let srow: Vec<f32> = (0..f.t).map(|j| f.full.scores[[0, row, j]]).collect();
    let mx = srow.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = srow.iter().filter(|s| s.is_finite()).map(|s| (s - mx).exp()).sum();
    ui.label(
        RichText::new(format!(
            "{}: max = {mx:.4}, Σ exp(s − max) = {sum:.4}",
            lang.t(
                "full softmax of row (lesson 1's kernels)",
                "该行的完整 softmax（第 1 课的 kernel）"
            )
        ))
        .monospace()
        .size(crate::style::fit(size * 0.9)),
    );
    let done = steps.len() == total_tiles;
    if let Some((_, s)) = steps.last() {
        let r = row - s.rows.start;
        let (m, l) = (s.m[r], s.l[r]);
        if done {
            let ok = (m - mx).abs() <= 1e-4 * mx.abs().max(1.0) && (l - sum).abs() <= 1e-4 * sum.max(1.0);
            let err = (0..f.hd)
                .map(|d| (f.walk.out[[row, d]] - f.full.out[[0, row, d]]).abs())
                .fold(0f32, f32::max);
            ui.label(
                RichText::new(format!(
                    "{} m = {m:.4}, l = {l:.4} {}; O[{row}] = acc / l, max |Δ| {} = {err:.1e}",
                    lang.t("after the last tile:", "最后一块之后："),
                    if ok {
                        lang.t("= the full softmax's max and sum", "= 完整 softmax 的最大值与和")
                    } else {
                        lang.t("≠ the full softmax!", "≠ 完整 softmax！")
                    },
                    lang.t("against lesson 1", "与第 1 课相比")
                ))
                .size(crate::style::fit(size * 0.9))
                .color(if ok {
                    style::pass(ui.visuals())
                } else {
                    style::fail(ui.visuals())
                }),
            );
        } else {
            ui.label(
                RichText::new(format!(
                    "{} {} / {} {}",
                    lang.t("so far", "目前"),
                    steps.len(),
                    total_tiles,
                    lang.t(
                        "key tiles of this row block: m and l are the max and sum over the keys seen so far",
                        "个键块：m 与 l 是目前已见过的键上的最大值与和"
                    )
                ))
                .size(crate::style::fit(size * 0.9)),
            );
        }
        // The row's probabilities as they would be if the row ended here, exp(s − m)/l over the keys
        // seen so far, against the full softmax.
        let seen: Vec<usize> = steps
            .iter()
            .filter(|(_, s)| !s.skipped)
            .flat_map(|(_, s)| s.cols.clone())
            .filter(|&j| f.mask.visible(row, j))
            .collect();
        // The full softmax split in two: the keys the running softmax has seen, and (greyed) the
        // keys still to come.
        let full_bar = |j: usize| Bar::new(j as f64 - 0.2, f64::from(f.full.probs[[0, row, j]])).width(0.4);
        let p_full: Vec<Bar> = (0..f.t).filter(|j| seen.contains(j)).map(full_bar).collect();
        let p_unseen: Vec<Bar> = (0..f.t)
            .filter(|j| !seen.contains(j) && f.mask.visible(row, *j))
            .map(full_bar)
            .collect();
        let p_run: Vec<Bar> = seen
            .iter()
            .map(|&j| {
                let p = if l > 0.0 { (srow[j] - m).exp() / l } else { 0.0 };
                Bar::new(j as f64 + 0.2, f64::from(p)).width(0.4)
            })
            .collect();
        Chart::new(
            "flash-online-bars",
            ChartAxis::linear(lang.t("key j", "键 j")).from_zero(),
            ChartAxis::linear("p").from_zero(),
        )
        .height((ui.available_height() - size).max(80.0))
        .show(ui, size, |p| {
            p.bar_chart(
                BarChart::new(lang.t("full softmax (lesson 1)", "完整 softmax（第 1 课）"), p_full)
                    .color(style::series(0)),
            );
            if !p_unseen.is_empty() {
                p.bar_chart(
                    BarChart::new(
                        lang.t("full softmax, keys not seen yet", "完整 softmax：尚未见到的键"),
                        p_unseen,
                    )
                    .color(style::WHOLE_32),
                );
            }
            p.bar_chart(
                BarChart::new(
                    lang.t(
                        "running: exp(s − m) / l over keys seen",
                        "运行中：已见键上的 exp(s − m) / l",
                    ),
                    p_run,
                )
                .color(style::series(1)),
            );
        });
    }
}

/// The T×T grid cut into Br×Bc tiles over lesson 1's P (which FlashAttention never writes): tiles done,
/// the current one, those skipped and those to come.
fn tiles(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let lang = cx.lang;
    let c = cursor(cx, f);
    let id = view_id("flash-tiles", 0);
    let title = format!(
        "{}  [Br={}, Bc={}]",
        lang.t(
            "lesson 1's P in tiles (flash never writes it)",
            "第 1 课的 P 分成块（flash 从不写出它）"
        ),
        f.br,
        f.bc
    );
    let probs = &f.full.probs;
    // What the outlines mean, under the heatmap (room kept for it, measured as it will wrap).
    let legend = lang.t(
        "pink outline: the current tile · crossed out: skipped (every score masked) · dimmed: still to come",
        "粉色框：当前块 · 打叉：跳过（分数全被掩码）· 变暗：尚未处理",
    );
    let legend_font = egui::FontId::proportional(crate::style::fit(cx.size * 0.85));
    let legend_h = ui
        .painter()
        .layout(
            legend.to_string(),
            legend_font.clone(),
            ui.visuals().text_color(),
            ui.available_width(),
        )
        .size()
        .y;
    cx.widgets.heat.reserve_below = legend_h + 2.0 * ui.spacing().item_spacing.y;
    heat_panel(
        cx,
        ui,
        id,
        &title,
        &f.p_map,
        Colormap::Sequential,
        Some((0.0, 1.0)),
        Highlight::None,
        Axes::QueryKey,
        &|(i, j)| {
            format!(
                "P[{i},{j}] = {:.4} · {} ({}, {})",
                probs[[0, i, j]],
                lang.t("tile", "块"),
                i / f.br,
                j / f.bc
            )
        },
    );
    overlay_tiles(cx, ui, f, id, c);
    ui.add(egui::Label::new(RichText::new(legend).font(legend_font)).wrap());
}

/// Tile outlines over the heatmap `id`: tiles to come are dimmed, skipped tiles crossed out, the current
/// tile outlined in gold.
fn overlay_tiles(cx: &ViewCtx, ui: &Ui, f: &FlashOut, id: u64, c: usize) {
    let st = &cx.widgets.heat;
    let (Some(rect), Some((_, Some(view)))) = (st.rects.get(&id), st.zoom.get(&id)) else {
        return;
    };
    let painter = ui.painter().with_clip_rect(*rect);
    let at = |col: usize, row: usize| {
        let p = view.px_of(glam::Vec2::new(col as f32, row as f32));
        rect.min + egui::vec2(p.x, p.y)
    };
    for (i, s) in f.walk.steps.iter().enumerate() {
        let r = egui::Rect::from_min_max(at(s.cols.start, s.rows.start), at(s.cols.end, s.rows.end));
        if s.skipped {
            painter.rect_filled(r, 0.0, style::shade(if i <= c { 150 } else { 90 }));
            painter.line_segment([r.left_top(), r.right_bottom()], Stroke::new(1.0, style::STRIKE_32));
            painter.line_segment([r.right_top(), r.left_bottom()], Stroke::new(1.0, style::STRIKE_32));
        } else if i > c {
            painter.rect_filled(r, 0.0, style::shade(170));
        }
        painter.rect_stroke(r, 0.0, Stroke::new(1.0, style::HAIRLINE_32), egui::StrokeKind::Inside);
    }
    if let Some(s) = f.walk.steps.get(c) {
        let r = egui::Rect::from_min_max(at(s.cols.start, s.rows.start), at(s.cols.end, s.rows.end));
        painter.rect_stroke(r, 0.0, Stroke::new(3.0, style::CURRENT_32), egui::StrokeKind::Outside);
    }
}

/// The five tiles one thread block keeps in shared memory, to scale against the kernel's allocation.
fn shared_memory(cx: &ViewCtx, ui: &mut Ui, f: &FlashOut, s: &crate::math::flash::TileStep) {
    ui.spacing_mut().item_spacing.y = 2.0;
    let (lang, size) = (cx.lang, cx.size);
    ui.label(
        RichText::new(lang.t("shared memory of this thread block", "本线程块的共享内存"))
            .strong()
            .size(crate::style::fit(size)),
    );
    ui.label(
        RichText::new(format!(
            "{} {} ({} {}–{}) · {} {} ({} {}–{})",
            lang.t("row block", "行块"),
            s.row_block,
            lang.t("queries", "查询"),
            s.rows.start,
            s.rows.end - 1,
            lang.t("key tile", "键块"),
            s.col_tile,
            lang.t("keys", "键"),
            s.cols.start,
            s.cols.end - 1
        ))
        .size(crate::style::fit(size * 0.9))
        .color(style::state_text(ui.visuals(), style::CURRENT)),
    );
    if s.skipped {
        ui.label(
            RichText::new(lang.t(
                "the mask hides this whole tile: K and V are not loaded, nothing is computed",
                "掩码遮住了整个块：不加载 K 和 V，也不做任何计算",
            ))
            .size(crate::style::fit(size * 0.9)),
        );
    }
    let (br, bc, hd) = (f.br, f.bc, f.hd);
    let used = smem_floats(br, bc, hd);
    let budget = f.smem_kib * 1024 / 4;
    let parts = [
        (
            format!("Q   {br}×{hd}"),
            lang.t("queries, loaded once per row block", "查询，每个行块加载一次"),
            br * hd,
            style::series(0),
        ),
        (
            format!("K   {bc}×{hd}"),
            lang.t("this key tile's keys", "当前键块的键"),
            bc * hd,
            style::series(1),
        ),
        (
            format!("V   {bc}×{hd}"),
            lang.t("this key tile's values", "当前键块的值"),
            bc * hd,
            style::series(2),
        ),
        (
            format!("S   {br}×{bc}"),
            lang.t("scores, then probabilities, of the tile", "块内分数，随后变为概率"),
            br * bc,
            style::series(3),
        ),
        (
            format!("acc {br}×{hd}"),
            lang.t("output accumulator, rescaled every tile", "输出累加器，每块都会缩放"),
            br * hd,
            style::series(5),
        ),
    ];
    let label_w = size * 6.5;
    let bh = size * 0.9;
    for (name, what, n, color) in parts {
        ui.horizontal(|ui| {
            ui.add_sized(
                [label_w, bh + 4.0],
                egui::Label::new(RichText::new(name).monospace().size(crate::style::fit(size * 0.85))),
            )
            .on_hover_text(what);
            let bw = (ui.available_width() - size * 4.0).max(20.0);
            let (r, _) = ui.allocate_exact_size(egui::vec2(bw, bh), egui::Sense::hover());
            ui.painter().rect_filled(r, 2.0, style::track(ui.visuals()));
            let fill = egui::Rect::from_min_size(r.min, egui::vec2((bw * n as f32 / used.max(1) as f32).max(1.0), bh));
            ui.painter().rect_filled(fill, 2.0, color);
            ui.label(
                RichText::new(n.to_string())
                    .monospace()
                    .size(crate::style::fit(size * 0.85)),
            );
        });
    }
    // The tiles together against the slider's budget and the kernel's static allocation.
    for (name, cap) in [
        (lang.t("all tiles / slider budget", "全部块 / 滑块预算"), budget),
        (
            lang.t("all tiles / kernel's __shared__", "全部块 / kernel 的 __shared__"),
            f.kernel_floats,
        ),
    ] {
        ui.label(
            RichText::new(format!(
                "{name}: {} / {}",
                bytes((used * 4) as f64),
                bytes((cap * 4) as f64)
            ))
            .size(crate::style::fit(size * 0.8)),
        );
        let bw = (ui.available_width() - 8.0).max(20.0);
        let (r, _) = ui.allocate_exact_size(egui::vec2(bw, bh * 0.7), egui::Sense::hover());
        ui.painter().rect_filled(r, 2.0, style::track(ui.visuals()));
        let frac = (used as f32 / cap.max(1) as f32).min(1.0);
        let fill = egui::Rect::from_min_size(r.min, egui::vec2((bw * frac).max(1.0), r.height()));
        ui.painter().rect_filled(fill, 2.0, style::WHOLE_32);
    }
}

/// The current row block's accumulator after this tile, with m and l per row.
fn acc(cx: &mut ViewCtx, ui: &mut Ui, f: &FlashOut) {
    let lang = cx.lang;
    let c = cursor(cx, f);
    let Some(s) = f.walk.steps.get(c) else { return };
    let Some(map) = f.acc_maps.get(c) else { return };
    ui.scope(|ui| shared_memory(cx, ui, f, s));
    ui.add_space(cx.size * 0.5);
    let (a, b, ct) = (s.rows.start, s.rows.end - 1, s.col_tile);
    let title = match lang {
        crate::ui::text::Lang::Zh => format!("键块 {ct} 之后，查询 {a}–{b} 的累加器  [{}×{}]", s.rows.len(), f.hd),
        _ => format!(
            "accumulator of queries {a}–{b} after key tile {ct}  [{}×{}]",
            s.rows.len(),
            f.hd
        ),
    };
    let l_range =
        s.l.iter()
            .copied()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let note = format!(
        "{} · l ∈ [{:.3}, {:.3}] · {} ×{:.4}…×{:.4}",
        lang.t("not yet divided by l", "尚未除以 l"),
        l_range.0,
        l_range.1,
        lang.t("this tile rescaled rows by", "本块对各行的缩放"),
        s.rescale.iter().copied().fold(f32::INFINITY, f32::min),
        s.rescale.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    );
    // The heatmap leaves room for the note below it, measured as it will wrap.
    let note_font = egui::FontId::monospace(crate::style::fit(cx.size * 0.85));
    let note_h = ui
        .painter()
        .layout(
            note.clone(),
            note_font.clone(),
            ui.visuals().text_color(),
            ui.available_width(),
        )
        .size()
        .y;
    let hd = f.hd;
    cx.widgets.heat.reserve_below = note_h + 2.0 * ui.spacing().item_spacing.y;
    heat_panel(
        cx,
        ui,
        view_id("flash-acc", 0),
        &title,
        map,
        Colormap::Diverging,
        None,
        Highlight::None,
        Axes::QueryDim,
        &|(r, d)| {
            let (a, m, l) = (s.acc[r * hd + d], s.m[r], s.l[r]);
            let o = if l > 0.0 { a / l } else { 0.0 };
            format!(
                "query {}, dim {d}: acc = {a:.4}, m = {m:.4}, l = {l:.4}, acc/l = {o:.4}",
                s.rows.start + r
            )
        },
    );
    ui.add(egui::Label::new(RichText::new(note).font(note_font)).wrap());
}
#[cfg(test)]
mod tests {
    use super::cost::visible_scores;
    use crate::math::Mask;

    /// The "visible scores" bar counts what the mask lets through: all T² with the mask off, T(T+1)/2
    /// causal, fewer with a window.
    #[test]
    fn the_visible_score_bar_counts_what_the_mask_lets_through() {
        for t in [1, 7, 64] {
            assert_eq!(visible_scores(Mask::None, t), t * t);
            assert_eq!(visible_scores(Mask::Causal, t), t * (t + 1) / 2);
        }
        assert_eq!(visible_scores(Mask::Window { window: 2, sinks: 0 }, 4), 1 + 2 + 2 + 2);
    }
}
