//! Lesson 9's views: one head's attention over the text, H2O's accumulated scores with the kept set, the
//! keep sets of every layer and KV head, SnapKV's pooled votes, the cache's growth, the holes eviction
//! leaves in paged blocks, and the stored quality table against the budget.

mod common;
mod quality;

use eframe::egui::{self, Ui};
use egui_plot::{Bar, BarChart, Line, PlotPoints, Points, Polygon};

use crate::drivers::evict::{EvictPolicy, EvictRun};
use crate::lessons::eviction::{EvictOut, Eviction, View};
use crate::lessons::{LessonKind, Output};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{
    Chart, ChartAxis, HeadGrid, Motion, ViewCtx, head_grid, kernel_panel, legend, sim_capped, timeline, timeline_used,
};
use common::*;
use quality::{quality, quality_real};

impl LessonUi for Eviction {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(o), Some(view)) = (out.downcast_ref::<EvictOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Kernel => {
                costs(cx, ui, o);
                kernel_panel(cx, ui, self.ops(), out);
            }
            View::Attention => attention(cx, ui, o),
            View::Scores => scores(cx, ui, o),
            View::Keep => keep(cx, ui, o),
            View::Snapkv => snapkv(cx, ui, o),
            View::Growth => growth(cx, ui, o),
            View::Holes => holes(cx, ui, o),
            View::Quality => quality(cx, ui),
            View::QualityReal => quality_real(cx, ui),
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(o) = out.downcast_ref::<EvictOut>() else {
            return;
        };
        let lang = cx.lang;
        let (n, prompt) = (o.len(), o.prompt());
        let whole = match lang {
            Lang::Zh => format!("这一步的视图展示整段文本：字节 0…{}", n - 1),
            _ => format!("This step's views show the whole text: bytes 0…{}", n - 1),
        };
        if !timeline_used(cx, ui, &["attention", "scores", "keep", "holes"], &whole) {
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
                if ui.button(lang.t("+16 >>", "+16 >>")).clicked() {
                    *c = (*c + 16).min(n - 1);
                }
            },
            |c| {
                format!(
                    "{} {c} / {} · {} {prompt}",
                    lang.t("reading byte", "读取字节"),
                    n - 1,
                    lang.t("prompt ends at", "提示词结束于"),
                )
            },
        );
    }
}

/// The share of mass on the top 10% of tokens, per layer and query head, as a grid of cells.
fn share_grid(cx: &ViewCtx, ui: &mut Ui, o: &EvictOut, height: f32) {
    let r = o.run(EvictPolicy::Full);
    let value = |l: usize, h: usize| r.top10_share[l * r.heads + h];
    let grid = HeadGrid {
        layers: r.layers,
        heads: r.heads,
        value: &value,
        full_at: 1.0,
        decimals: 0,
        height,
        row_cap: cx.size * 2.2,
        font: cx.size * 0.8,
        selected: (o.layer, o.head),
    };
    head_grid(ui, cx.lang, cx.size, &grid);
}

fn attention(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let t = step(cx, o);
    let r = o.run(EvictPolicy::Full);
    let (n, hn) = (o.len(), r.heads);
    let (l, h) = (o.layer, o.head);
    title(
        ui,
        size,
        match lang {
            Lang::En => "share of each head's mass on its top 10% of tokens (full cache, mean over steps)".to_string(),
            Lang::Zh => "每个头放在前 10% token 上的注意力质量占比（全量缓存，各步平均）".to_string(),
        },
    );
    share_grid(cx, ui, o, size * 9.0);
    let Some(p) = r.probs.get(t) else {
        return;
    };
    let bars: Vec<Bar> = (0..=t)
        .map(|i| {
            let v = f64::from(p[(l * hn + h) * n + i]);
            let fill = if i == t { style::CURRENT } else { style::READ };
            Bar::new(i as f64, v).width(0.9).fill(style::c32(fill))
        })
        .collect();
    let hp = (ui.available_height() - 2.5 * size).max(100.0);
    let name = match lang {
        Lang::En => format!("L{l} H{h}: weights of the query at byte {t}"),
        Lang::Zh => format!("L{l} H{h}：第 {t} 字节的查询的注意力权重"),
    };
    let entries = vec![
        (style::READ, name.clone()),
        (
            style::CURRENT,
            lang.t("the byte read now", "当前读取的字节").to_string(),
        ),
    ];
    Chart::new(
        "eviction-attention",
        ChartAxis::linear(lang.t("byte of the text (key)", "文本字节（键）"))
            .from_zero()
            .include(n as f64),
        ChartAxis::linear(lang.t("attention weight", "注意力权重")).from_zero(),
    )
    .height(hp)
    .legend(entries)
    .show(ui, size, |pl| {
        pl.bar_chart(BarChart::new(name, bars).color(style::c32(style::READ)));
    });
}

/// H2O's recent set at step `t`: the first text index inside it.
fn first_recent(o: &EvictOut, t: usize) -> usize {
    (t + 1).saturating_sub(o.config.recent_tokens().min(o.config.budget))
}

fn scores(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let t = step(cx, o);
    let r = o.run(EvictPolicy::H2o);
    let (n, row) = (o.len(), o.row());
    let kept = &r.kept[t][row];
    let sc = &r.scores[t];
    let recent0 = first_recent(o, t);
    title(
        ui,
        size,
        format!(
            "H2O · L{} KV{} · {} · {} {t}",
            o.layer,
            o.kv_head,
            budget_label(lang, o.config.budget),
            lang.t("after step", "第")
        ) + lang.t("", " 步之后"),
    );
    let entries = [
        (
            style::READ,
            lang.t("kept: heavy hitter", "保留：重要 token（heavy hitter）"),
        ),
        (style::SINK, lang.t("kept: recent R", "保留：最近 R 个")),
        (style::CURRENT, lang.t("the byte read now", "当前读取的字节")),
        (
            style::EVICTED,
            lang.t("evicted (its score froze)", "已驱逐（分数不再增长）"),
        ),
    ];
    // A bar's colour at step `t`.
    let fill_at = |t: usize, i: usize| {
        if i == t {
            style::CURRENT
        } else if !has(&r.kept[t][row], i) {
            style::EVICTED
        } else if i >= first_recent(o, t) {
            style::SINK
        } else {
            style::READ
        }
    };
    // The step just taken, while it runs: each bar goes from its colour before to its colour now (the
    // evicted byte's turns grey); tests and renders draw the settled frame.
    let motion = Motion::of(
        ui,
        egui::Id::unique(("kvscope-scores-motion", cx.lesson.id())),
        t,
        cx.sync,
        1,
    );
    let before = Some(motion.from).filter(|&b| motion.moving() && b < r.kept.len());
    let bars: Vec<Bar> = (0..=t)
        .map(|i| {
            let (fill, score) = (style::c32(fill_at(t, i)), f64::from(sc[row * n + i]));
            // Before: its colour then, and its score then (scores only grow while a byte is kept).
            let (fill, score) = match before {
                Some(b) if i <= b => {
                    let e = motion.ease();
                    let then = f64::from(r.scores[b][row * n + i]);
                    (
                        style::c32(fill_at(b, i)).lerp_to_gamma(fill, e),
                        then + (score - then) * f64::from(e),
                    )
                }
                _ => (fill, score),
            };
            Bar::new(i as f64, score).width(0.9).fill(fill)
        })
        .collect();
    // The line: the lowest score still kept outside the recent set (what a newcomer must beat).
    let line = kept
        .iter()
        .map(|&i| i as usize)
        .filter(|&i| i < recent0)
        .map(|i| f64::from(sc[row * n + i]))
        .fold(f64::INFINITY, f64::min);
    let hp = (ui.available_height() - 5.0 * size).max(100.0);
    let entries: Vec<(style::Rgba, String)> = entries.iter().map(|(c, t)| (*c, t.to_string())).collect();
    let lowest = lang.t("lowest kept heavy hitter", "保留的最低分重要 token");
    let recent = lang.t("recent R starts", "最近 R 个的起点");
    Chart::new(
        "eviction-scores",
        ChartAxis::linear(lang.t("byte of the text", "文本字节"))
            .from_zero()
            .include(n as f64),
        ChartAxis::linear(lang.t("accumulated attention score", "累计注意力分数")).from_zero(),
    )
    .height(hp)
    .legend(entries)
    .show(ui, size, |pl| {
        pl.bar_chart(BarChart::new(lang.t("score", "分数"), bars).color(style::c32(style::READ)));
        if line.is_finite() {
            pl.threshold_y(line, lowest);
        }
        pl.threshold_x(recent0 as f64 - 0.5, recent);
    });
}

/// The state of one (row, token) cell of a keep set at step `t`.
fn cell_fill(kept: &[u32], i: usize, t: usize) -> style::Rgba {
    if i > t {
        style::FREE
    } else if i == t {
        style::CURRENT
    } else if has(kept, i) {
        style::READ
    } else {
        style::EVICTED
    }
}

fn keep(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let t = step(cx, o);
    let policy = o.keep_policy();
    let r = o.run(policy);
    let n = o.len();
    title(
        ui,
        size,
        format!(
            "{} · {} · {} {t}",
            policy_name(lang, policy),
            budget_label(lang, o.config.budget),
            lang.t("step", "步")
        ),
    );
    // Which token left this step, in each row.
    let mut left = Vec::new();
    if t > 0 {
        for (row, (a, b)) in r.kept[t - 1].iter().zip(&r.kept[t]).enumerate() {
            for i in a.iter().filter(|i| !b.contains(i)) {
                left.push((row, *i as usize));
            }
        }
    }
    let entries = [
        (style::READ, lang.t("kept", "保留")),
        (
            style::CURRENT,
            lang.t(
                "the byte read now; outlined: each row's byte evicted this step",
                "当前读取的字节；加框：各行本步驱逐的字节",
            ),
        ),
        (style::EVICTED, lang.t("evicted", "已驱逐")),
        (style::FREE, lang.t("not read yet", "尚未读取")),
    ];
    let rect = ui.available_rect_before_wrap();
    let leg_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, rect.width() * 0.9) + size * 4.0;
    let rows = r.layers * r.kv_heads;
    let label_w = size * 5.0;
    let area_h = (rect.height() - leg_h).max(size * 4.0);
    let row_h = (area_h / rows as f32).min(size * 3.5);
    let cw = (rect.width() - label_w) / n as f32;
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(size * 0.8));
    // The step just taken, while it runs: every cell goes from its colour before to its colour now,
    // and each evicted byte's outline closes in on it (tests and renders draw the settled frame).
    let motion = Motion::of(
        ui,
        egui::Id::unique(("kvscope-keep-motion", cx.lesson.id())),
        t,
        cx.sync,
        1,
    );
    let e = motion.ease();
    let before = Some(motion.from).filter(|&b| motion.moving() && b < r.kept.len());
    for row in 0..rows {
        let y = rect.min.y + row as f32 * row_h;
        painter.text(
            egui::pos2(rect.min.x, y + row_h * 0.45),
            egui::Align2::LEFT_CENTER,
            format!("L{} KV{}", row / r.kv_heads, row % r.kv_heads),
            font.clone(),
            text,
        );
        let kept = &r.kept[t][row];
        for i in 0..n {
            let x = rect.min.x + label_w + i as f32 * cw;
            let cell = egui::Rect::from_min_size(egui::pos2(x, y), egui::vec2(cw.max(1.0), row_h * 0.8));
            let fill = style::c32(cell_fill(kept, i, t));
            let fill = match before {
                Some(b) => style::c32(cell_fill(&r.kept[b][row], i, b)).lerp_to_gamma(fill, e),
                None => fill,
            };
            painter.rect_filled(cell, 0.0, fill);
        }
        if row == o.row() {
            // The selected row's frame, open where this row's evicted byte has its box, so the two
            // outlines never cross (the frame ran through the middle of the box).
            let strip = egui::Rect::from_min_size(
                egui::pos2(rect.min.x + label_w, y),
                egui::vec2(cw * n as f32, row_h * 0.8),
            )
            .expand(0.75);
            let stroke = egui::Stroke::new(1.5, text);
            let gaps: Vec<(f32, f32)> = left
                .iter()
                .filter(|l| l.0 == row)
                .map(|&(_, i)| {
                    let x = rect.min.x + label_w + i as f32 * cw;
                    (x - 6.0, x + cw.max(1.0) + 6.0)
                })
                .collect();
            for y in [strip.top(), strip.bottom()] {
                let mut x0 = strip.left();
                for &(a, b) in gaps.iter().chain([&(strip.right(), strip.right())]) {
                    if a > x0 {
                        painter.line_segment([egui::pos2(x0, y), egui::pos2(a.min(strip.right()), y)], stroke);
                    }
                    x0 = x0.max(b);
                }
            }
            for x in [strip.left(), strip.right()] {
                painter.line_segment([egui::pos2(x, strip.top()), egui::pos2(x, strip.bottom())], stroke);
            }
        }
    }
    for &(row, i) in &left {
        let y = rect.min.y + row as f32 * row_h;
        let x = rect.min.x + label_w + i as f32 * cw;
        // As tall as the row, its stroke outside: boxes in neighbouring rows keep the rows' gap apart
        // (2 px more each way merged a column of them into one bar).
        let cell = egui::Rect::from_min_size(egui::pos2(x - 2.0, y), egui::vec2(cw.max(1.0) + 4.0, row_h * 0.8))
            // Closing in from the sides only, so it never reaches into the rows above and below.
            .expand2(egui::vec2(
                if before.is_some() { (1.0 - e) * size * 1.5 } else { 0.0 },
                0.0,
            ));
        painter.rect_stroke(
            cell,
            0.0,
            egui::Stroke::new(2.5, style::c32(style::CURRENT)),
            egui::StrokeKind::Outside,
        );
    }
    ui.allocate_rect(
        egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), row_h * rows as f32 + size * 0.5)),
        egui::Sense::hover(),
    );
    let row = o.row();
    let msg = match left.iter().find(|(r_, _)| *r_ == row) {
        Some(&(_, i)) if policy == EvictPolicy::H2o => {
            let s = r.scores[t - 1][row * n + i];
            match lang {
                Lang::En => format!(
                    "L{} KV{}: byte {i} left, score {s:.3}, the lowest outside the recent R (outlined). The other rows chose by their own scores.",
                    o.layer, o.kv_head
                ),
                Lang::Zh => format!(
                    "L{} KV{}：字节 {i} 被驱逐，分数 {s:.3}，是最近 R 个之外最低的（加框）。其他行按各自的分数选择。",
                    o.layer, o.kv_head
                ),
            }
        }
        Some(&(_, i)) => match lang {
            Lang::En => format!("L{} KV{}: byte {i} left this step (outlined).", o.layer, o.kv_head),
            Lang::Zh => format!("L{} KV{}：本步驱逐字节 {i}（加框）。", o.layer, o.kv_head),
        },
        None => lang
            .t(
                "Nothing left the outlined row this step (step with → to the next eviction).",
                "本步加框的行没有驱逐（用 → 前进到下一次驱逐）。",
            )
            .to_string(),
    };
    note(ui, size, msg);
    legend(ui, &entries, size * 0.85);
}

fn snapkv(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let r = o.run(EvictPolicy::SnapKv);
    let (n, prompt, row) = (o.len(), o.prompt(), o.row());
    let w = o.config.window_tokens();
    let k = o.config.budget;
    title(
        ui,
        size,
        format!(
            "SnapKV · L{} KV{} · {} · w = {w}, k = {}",
            o.layer,
            o.kv_head,
            budget_label(lang, k),
            o.config.pool_kernel
        ),
    );
    if prompt <= k || prompt < w + 1 {
        note(
            ui,
            size,
            lang.t(
                "The prompt fits in the budget: SnapKV keeps all of it.",
                "提示词不超过预算：SnapKV 全部保留。",
            ),
        );
        return;
    }
    let prefix = prompt - w;
    // The raw votes: the group mass the last w prompt steps put on each earlier token (the difference of
    // the accumulated scores across those steps).
    let at = |s: usize, i: usize| r.scores.get(s).map_or(0.0, |sc| f64::from(sc[row * n + i]));
    let votes: Vec<f64> = (0..prefix).map(|i| at(prompt - 1, i) - at(prompt - w - 1, i)).collect();
    let pooled = r.pooled_votes.get(row * prefix..(row + 1) * prefix).unwrap_or(&[]);
    let kept = r.kept.get(prompt).map(|s| &s[row]);
    let chosen = |i: usize| kept.is_some_and(|s| has(s, i));
    let bars: Vec<Bar> = pooled
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let fill = if chosen(i) { style::READ } else { style::EVICTED };
            Bar::new(i as f64, v).width(0.9).fill(style::c32(fill))
        })
        .collect();
    // The observation window: the last w prompt bytes, whose queries vote and which are kept, drawn as
    // a band over their place on the axis (they cast the votes; they receive none).
    let top = pooled.iter().chain(&votes).fold(0.0f64, |m, &v| m.max(v)).max(1e-9) * 1.05;
    let (x0, x1) = (prefix as f64 - 0.5, prompt as f64 - 0.5);
    let band = Polygon::new(
        lang.t("the observation window", "观察窗口"),
        PlotPoints::new(vec![[x0, 0.0], [x1, 0.0], [x1, top], [x0, top]]),
    )
    .fill_color(style::c32(style::SINK).gamma_multiply(0.18))
    .stroke(egui::Stroke::new(1.5, style::c32(style::SINK)));
    let entries = [
        (style::READ, lang.t("kept: top by pooled vote", "保留：池化投票最高")),
        (
            style::EVICTED,
            lang.t("evicted at the prompt's end", "提示词结束时驱逐"),
        ),
        (style::SINK, lang.t("the observation window (kept)", "观察窗口（保留）")),
    ];
    let mut entries: Vec<(style::Rgba, String)> = entries.iter().map(|(c, t)| (*c, t.to_string())).collect();
    entries.push((style::CURRENT, lang.t("raw vote", "原始投票").to_string()));
    let hp = (ui.available_height() - 4.5 * size).max(100.0);
    Chart::new(
        "eviction-snapkv",
        ChartAxis::linear(lang.t("prompt byte", "提示词字节")).include(prompt as f64),
        ChartAxis::linear(lang.t("votes of the last w queries", "最后 w 个查询的投票")).from_zero(),
    )
    .height(hp)
    .legend(entries)
    .show(ui, size, |pl| {
        pl.bar_chart(BarChart::new(lang.t("pooled vote", "池化后的投票"), bars).color(style::c32(style::READ)));
        pl.polygon(band);
        pl.threshold_x(x0, lang.t("the last w queries vote", "最后 w 个查询投票"));
        let raw: PlotPoints = votes.iter().enumerate().map(|(i, &v)| [i as f64, v]).collect();
        pl.points(
            Points::new(lang.t("raw vote", "原始投票"), raw)
                .radius(2.0)
                .color(style::c32(style::CURRENT)),
        );
    });
}

fn growth(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    sim_capped(cx, ui, o.len(), o.capped_from);
    let hp = (ui.available_height() - 5.5 * size).max(100.0);
    Chart::new(
        "eviction-growth",
        ChartAxis::linear(lang.t("byte read (step)", "读取的字节（步）")),
        ChartAxis::linear(lang.t("tokens attended per KV head per layer", "每层每个 KV 头关注的 token 数")).from_zero(),
    )
    .height(hp)
    .show(ui, size, |pl| {
        for p in EvictPolicy::ALL {
            let r = o.run(p);
            let pts: PlotPoints = r
                .attended
                .iter()
                .enumerate()
                .map(|(t, &a)| [t as f64, f64::from(a)])
                .collect();
            pl.line(Line::new(policy_name(lang, p), pts).color(policy_color(p)).width(2.5));
        }
        pl.threshold_x(o.prompt() as f64, lang.t("the prompt ends", "提示词结束"));
    });
    note(
        ui,
        size,
        budget_label(lang, o.config.budget)
            + lang.t(
                ". Lines of policies that keep the same count lie on top of each other.",
                "。保留数量相同的策略的线相互重叠。",
            ),
    );
}

/// Logical blocks of `r` at step `t`, each with whether the engine had dropped it (as recorded).
fn blocks_at(r: &EvictRun, t: usize, bs: usize) -> Vec<bool> {
    let dropped = r.dropped.get(t).map_or(&[][..], Vec::as_slice);
    (0..(t + 1).div_ceil(bs)).map(|lb| dropped.contains(&lb)).collect()
}

/// Whether keep set `set` (ascending text indices) holds byte `i`.
fn has(set: &[u32], i: usize) -> bool {
    set.binary_search(&(i as u32)).is_ok()
}

fn holes(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let t = step(cx, o);
    let policy = o.keep_policy();
    let r = o.run(policy);
    let bs = r.config.block_size;
    let rows = r.layers * r.kv_heads;
    let dropped = blocks_at(r, t, bs);
    title(
        ui,
        size,
        format!(
            "{} · {} {t} · {} {} · {} {:.0}%",
            policy_name(lang, policy),
            lang.t("step", "步"),
            lang.t("blocks in use", "在用块"),
            r.blocks_in_use[t],
            lang.t("dead slots", "死槽位"),
            100.0 * f64::from(r.dead_slots[t]) / f64::from(r.allocated_slots[t].max(1))
        ),
    );
    let entries = [
        (style::READ, lang.t("slot attended", "被关注的槽位")),
        (
            style::EVICTED,
            lang.t("dead slot: evicted, still allocated", "死槽位：已驱逐但仍占用"),
        ),
        (style::FREE, lang.t("empty (not written yet)", "空（尚未写入）")),
        (
            style::MASKED,
            lang.t("block freed: no head keeps a token", "块已释放：没有头保留其中的 token"),
        ),
    ];
    let rect = ui.available_rect_before_wrap();
    let table_h = size * 1.6 * (EvictPolicy::ALL.len() as f32 + 1.5);
    let leg_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, rect.width() * 0.9) + size;
    let area_h = (rect.height() - table_h - leg_h).max(size * 5.0);
    let nb = o.len().div_ceil(bs).max(1);
    let per_row = nb.min(8);
    let grid_rows = nb.div_ceil(per_row);
    let bw = rect.width() / per_row as f32;
    let bh = (area_h / grid_rows as f32).min(size * 12.0);
    let label_h = size * 1.0;
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(size * 0.75));
    for lb in 0..nb {
        let x = rect.min.x + (lb % per_row) as f32 * bw;
        let y = rect.min.y + (lb / per_row) as f32 * bh;
        painter.text(
            egui::pos2(x + 2.0, y),
            egui::Align2::LEFT_TOP,
            format!("{} {lb}", lang.t("block", "块")),
            font.clone(),
            text,
        );
        let inner = egui::Rect::from_min_size(
            egui::pos2(x + 2.0, y + label_h),
            egui::vec2(bw - 8.0, bh - label_h - 6.0),
        );
        let (sw, sh) = (inner.width() / bs as f32, inner.height() / rows as f32);
        let gone = dropped.get(lb).copied().unwrap_or(false);
        for row in 0..rows {
            for off in 0..bs {
                let i = lb * bs + off;
                let fill = if lb * bs > t {
                    style::FREE
                } else if gone {
                    style::MASKED
                } else if i > t {
                    style::FREE
                } else if has(&r.kept[t][row], i) {
                    style::READ
                } else {
                    style::EVICTED
                };
                let c = egui::Rect::from_min_size(
                    egui::pos2(inner.min.x + off as f32 * sw, inner.min.y + row as f32 * sh),
                    egui::vec2((sw - 0.5).max(0.5), (sh - 0.5).max(0.5)),
                );
                painter.rect_filled(c, 0.0, style::c32(fill));
            }
        }
    }
    ui.allocate_rect(
        egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), bh * grid_rows as f32)),
        egui::Sense::hover(),
    );
    note(
        ui,
        size,
        lang.t(
            "Each block: one row per (layer, KV head), one column per slot. Dead fraction over the whole run (dead slots over slots of allocated blocks):",
            "每个块：每行一个（层，KV 头），每列一个槽位。整个运行的死槽位比例（死槽位 / 已分配块的槽位）：",
        ),
    );
    let mut line = String::new();
    for p in EvictPolicy::ALL {
        line.push_str(&format!(
            "{} {:.0}% · ",
            policy_name(lang, p),
            100.0 * o.run(p).dead_fraction()
        ));
    }
    note(ui, size, line.trim_end_matches(" · ").to_string());
    legend(ui, &entries, size * 0.85);
}

fn costs(cx: &mut ViewCtx, ui: &mut Ui, o: &EvictOut) {
    let lang = cx.lang;
    let size = cx.size;
    let r = o.run(EvictPolicy::H2o);
    let n = o.len() as f64;
    let fmt = |b: f64| crate::lessons::format_bytes(b);
    note(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "Per step (H2O, all layers): the weights and scores write {} more, against the {} the decode reads \
                 (K, V and the mask; {:.1}%). A fused decode kernel writes neither.",
                fmt(r.score_bytes as f64 / n),
                fmt(r.read_bytes as f64 / n),
                100.0 * r.score_bytes as f64 / r.read_bytes.max(1) as f64
            ),
            Lang::Zh => format!(
                "每步（H2O，所有层）：权重和分数多写 {}，而解码读取 {}（K、V 和掩码；{:.1}%）。融合的解码 kernel 两者都不写。",
                fmt(r.score_bytes as f64 / n),
                fmt(r.read_bytes as f64 / n),
                100.0 * r.score_bytes as f64 / r.read_bytes.max(1) as f64
            ),
        },
    );
}
