//! Lesson 8's views: KV memory and bits per byte against stream position for the four policies, the ring
//! buffer of the bounded paged cache slot by slot, the measured attention mass on the first bytes, the
//! positions the model sees under either scheme, and the cost-and-quality table.

mod common;
mod sinks;

use eframe::egui::{self, RichText, Ui};
use crate::ui::text::Slant as _;
use egui_plot::{Line, PlotPoints};

use crate::drivers::stream::{Positions, StreamPolicy, StreamRun};
use crate::lessons::streaming::{RUNS, StreamOut, Streaming, View, stored};
use crate::lessons::{LessonKind, Output};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, ViewCtx, check_line, kernel_panel, legend, timeline, timeline_used};
use common::*;
use sinks::{sinks, sinks_real};

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
            p.line(Line::new(policy_name(lang, r.config.policy, r.config.positions), pts).color(policy_color(r.config.policy)));
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

/// The state of one slot in the ring view.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Sink,
    Window,
    Current,
    Masked,
    Empty,
}

fn ring(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
    let lang = cx.lang;
    let size = cx.size;
    let r = o.ring_run();
    let n = o.stream();
    let t = (*cx.cursor).min(n - 1);
    let Some((_, table)) = r.tables.iter().find(|(s, _)| *s == t) else {
        return;
    };
    let c = r.config;
    let bs = c.block_size;
    ui.label(
        RichText::new(format!(
            "{} · {} {t}: {} {} / {} {} · {} {} · {} {}",
            policy_name(lang, c.policy, c.positions),
            lang.t("reading byte", "读取字节"),
            r.blocks_in_use[t],
            lang.t("blocks in use", "个块在用"),
            r.pool_blocks,
            lang.t("in the pool", "个（池容量）"),
            lang.t("the cache stores", "缓存存放"),
            r.stored[t],
            lang.t("the model sees", "模型看到"),
            r.attended[t]
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let all_entries = [
        (style::SINK, lang.t("sink (pinned)", "sink（固定）")),
        (style::READ, lang.t("in the window: read", "窗口内：被读取")),
        (style::CURRENT, lang.t("the byte read now", "当前读取的字节")),
        (
            style::MASKED,
            lang.t("stored, masked (left the window)", "已存放但被掩码（离开窗口）"),
        ),
        (style::FREE, lang.t("empty / free", "空 / 空闲")),
    ];
    // The sinks' entry only where the policy keeps sinks.
    let entries: Vec<(style::Rgba, &str)> = all_entries
        .into_iter()
        .filter(|(col, _)| *col != style::SINK || c.policy == StreamPolicy::Sinks)
        .collect();
    let rect = ui.available_rect_before_wrap();
    let leg_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, rect.width() * 0.9) + size * 1.5;
    let area = egui::Rect::from_min_max(
        rect.min,
        egui::pos2(rect.max.x, (rect.max.y - leg_h).max(rect.min.y + 40.0)),
    );
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(size * 0.8));
    // Each slot's state at byte t.
    let slot_state = |owner: Option<usize>, o_: usize| match owner {
        None => Slot::Empty,
        Some(l) => {
            let i = l * bs + o_;
            if i > t {
                Slot::Empty
            } else if i == t {
                Slot::Current
            } else if !c.keeps(i, t) {
                Slot::Masked
            } else if i < c.sinks && c.policy == StreamPolicy::Sinks {
                Slot::Sink
            } else {
                Slot::Window
            }
        }
    };
    let fill_of = |state: Slot| match state {
        Slot::Sink => style::SINK,
        Slot::Window => style::READ,
        Slot::Current => style::CURRENT,
        Slot::Masked => style::MASKED,
        Slot::Empty => style::FREE,
    };
    // A block's slots, left to right, in `b`.
    let draw_block = |b: egui::Rect, owner: Option<usize>| {
        let w = b.width() / bs as f32;
        for o_ in 0..bs {
            let state = slot_state(owner, o_);
            let cell = egui::Rect::from_min_size(egui::pos2(b.min.x + o_ as f32 * w, b.min.y), egui::vec2((w - 1.0).max(1.0), b.height()));
            painter.rect_filled(cell, 1.0, style::c32(fill_of(state)));
            if state == Slot::Masked {
                painter.line_segment(
                    [cell.left_bottom(), cell.right_top()],
                    egui::Stroke::new(1.0, style::c32(style::MASKED_HATCH)),
                );
            }
        }
    };
    let pool = r.pool_blocks.max(1);
    let owner_of = |phys: usize| table.iter().find(|&&(_, p)| p as usize == phys).map(|&(l, _)| l);
    // Blocks pinned for the sinks (the sinks policy keeps the block of logical 0 for good); the rest
    // is the ring.
    let pinned: Vec<usize> = (0..pool)
        .filter(|&p| c.policy == StreamPolicy::Sinks && owner_of(p).is_some_and(|l| l * bs < c.sinks))
        .collect();
    let ring: Vec<usize> = (0..pool).filter(|p| !pinned.contains(p)).collect();
    let m = ring.len().max(1);
    if m <= 12 {
        // The ring: a block's place on it is its logical index mod the ring's size (a block reused for
        // the newest logical block held the one m behind it), clockwise from the top, so the write
        // pointer steps one place clockwise per block of bytes and the oldest block is the next ahead of it.
        let mut place: Vec<Option<usize>> = vec![None; m];
        let mut unplaced = Vec::new();
        for &p in &ring {
            match owner_of(p) {
                Some(l) if place[l % m].is_none() => place[l % m] = Some(p),
                _ => unplaced.push(p),
            }
        }
        for p in unplaced {
            if let Some(free) = place.iter_mut().find(|x| x.is_none()) {
                *free = Some(p);
            }
        }
        // The pinned sink blocks in a row above the ring, then a caption, then the ring.
        let box_h = (size * 1.3).min(area.height() / 9.0);
        let pinned_h = if pinned.is_empty() { 0.0 } else { box_h + font.size * 1.3 + size * 0.4 };
        let caption = painter.layout(
            lang.t(
                "a ring of blocks, #physical ← logical, written clockwise: the block after the write pointer is the oldest, freed next",
                "块组成的环，#物理块 ← 逻辑块，顺时针写入：写指针之后的那个块最旧，下一个被释放",
            )
            .to_string(),
            font.clone(),
            crate::style::muted(ui.visuals()),
            area.width(),
        );
        let caption_h = caption.size().y + size * 0.3;
        painter.galley(egui::pos2(area.min.x, area.min.y + pinned_h), caption, crate::style::muted(ui.visuals()));
        let ring_area = egui::Rect::from_min_max(egui::pos2(area.min.x, area.min.y + pinned_h + caption_h), area.max);
        let centre = ring_area.center();
        let radius = ((ring_area.width() / 2.0 - size * 3.5).min(ring_area.height() / 2.0 - box_h * 1.9)).max(box_h * 2.0);
        let chord = 2.0 * radius * (std::f32::consts::PI / m as f32).sin();
        let box_w = (chord * 0.8).min(radius * 1.1).min(ring_area.width() * 0.32).max(bs as f32 * 2.0);
        painter.circle_stroke(centre, radius, egui::Stroke::new(size * 0.5, crate::style::track(ui.visuals())));
        let at = |k: usize| {
            let a = -std::f32::consts::FRAC_PI_2 + std::f32::consts::TAU * k as f32 / m as f32;
            centre + radius * egui::vec2(a.cos(), a.sin())
        };
        let mut pointer = None;
        for (k, p) in place.iter().enumerate() {
            let Some(p) = *p else { continue };
            let owner = owner_of(p);
            let b = egui::Rect::from_center_size(at(k), egui::vec2(box_w, box_h));
            painter.rect_filled(b.expand(2.0), 2.0, style::c32(crate::style::canvas(!cx.light)));
            draw_block(b, owner);
            if owner.is_some_and(|l| (l * bs..(l + 1) * bs).contains(&t)) {
                pointer = Some(b);
            }
            let label = match owner {
                Some(l) => format!("#{p} ← {l}"),
                None => format!("#{p} {}", lang.t("free", "空闲")),
            };
            // Labels outside the ring, above the top half's blocks and below the bottom half's.
            let (pos, align) = if at(k).y <= centre.y + 1.0 {
                (b.center_top() - egui::vec2(0.0, 2.0), egui::Align2::CENTER_BOTTOM)
            } else {
                (b.center_bottom() + egui::vec2(0.0, 2.0), egui::Align2::CENTER_TOP)
            };
            painter.text(pos, align, label, font.clone(), text);
        }
        // The write pointer: from the centre to the block being written.
        if let Some(b) = pointer {
            let to = b.center() + (centre - b.center()).normalized() * (box_h * 0.6);
            let stroke = egui::Stroke::new(3.0, style::c32(style::CURRENT));
            painter.line_segment([centre, to], stroke);
            let dir = (to - centre).normalized();
            let n = egui::vec2(-dir.y, dir.x);
            let head = size * 0.5;
            painter.line_segment([to, to - dir * head + n * head * 0.6], stroke);
            painter.line_segment([to, to - dir * head - n * head * 0.6], stroke);
            painter.text(
                centre,
                egui::Align2::CENTER_TOP,
                lang.t("write pointer", "写指针"),
                font.clone(),
                style::state_text(ui.visuals(), style::CURRENT),
            );
        }
        // The pinned sink blocks, in a row above the ring, centred over it.
        let row_w = pinned.len() as f32 * box_w + pinned.len().saturating_sub(1) as f32 * size;
        for (i, &p) in pinned.iter().enumerate() {
            let x = centre.x - row_w / 2.0 + i as f32 * (box_w + size);
            let b = egui::Rect::from_min_size(egui::pos2(x, area.min.y + font.size * 1.3), egui::vec2(box_w, box_h));
            draw_block(b, owner_of(p));
            painter.rect_stroke(
                b.expand(2.0),
                2.0,
                egui::Stroke::new(2.0, style::c32(style::SINK)),
                egui::StrokeKind::Outside,
            );
        }
        if !pinned.is_empty() {
            let ids: Vec<String> = pinned.iter().map(|p| format!("#{p} ← 0")).collect();
            painter.text(
                egui::pos2(centre.x, area.min.y),
                egui::Align2::CENTER_TOP,
                format!(
                    "{} {}",
                    lang.t("sinks, never evicted:", "sink，永不驱逐："),
                    ids.join(", ")
                ),
                font.clone(),
                style::state_text(ui.visuals(), style::SINK),
            );
        }
    } else {
        // One row per pool block (physical id order), its slots left to right.
        let row_h = (area.height() / pool as f32).min(size * 2.6);
        let label_w = size * 7.5;
        let slot_w = ((area.width() - label_w) / bs as f32).clamp(2.0, size * 2.5);
        for phys in 0..pool {
            let y = area.min.y + phys as f32 * row_h;
            let owner = owner_of(phys);
            let label = match owner {
                Some(l) => format!("#{phys} ← {} {l}", lang.t("logical", "逻辑块")),
                None => format!("#{phys} {}", lang.t("free", "空闲")),
            };
            painter.text(
                egui::pos2(area.min.x, y + row_h * 0.45),
                egui::Align2::LEFT_CENTER,
                label,
                font.clone(),
                text,
            );
            let b = egui::Rect::from_min_size(
                egui::pos2(area.min.x + label_w, y),
                egui::vec2(slot_w * bs as f32, row_h * 0.85),
            );
            draw_block(b, owner);
        }
    }
    ui.allocate_rect(area, egui::Sense::hover());
    legend(ui, &entries, size * 0.85);
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
    .show(ui, size, |p| {
        for r in o.runs.iter().take(4) {
            p.line(Line::new(policy_name(lang, r.config.policy, r.config.positions), smooth(r)).color(policy_color(r.config.policy)));
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
    // Text positions and cache positions of the kept bytes, in two rows; the sinks and the newest few.
    // The sinks (at most four) and the newest three: the columns must fit half the window.
    let show: Vec<Option<usize>> = if kept.len() <= 9 {
        kept.iter().copied().map(Some).collect()
    } else {
        let s = c.sinks.min(4).min(kept.len());
        let mut v: Vec<Option<usize>> = kept[..s].iter().copied().map(Some).collect();
        v.push(None);
        v.extend(kept[kept.len() - 3..].iter().copied().map(Some));
        v
    };
    egui::Grid::new("streaming-positions").striped(true).show(ui, |ui| {
        let cell = |ui: &mut Ui, s: String, strong: bool| {
            let t = RichText::new(s).monospace().size(crate::style::fit(size * 0.9));
            ui.label(if strong { t.strong() } else { t });
        };
        let rank = |i: usize| kept.iter().position(|&k| k == i).unwrap_or(0);
        cell(ui, lang.t("byte", "字节").into(), true);
        cell(ui, lang.t("text position", "文本位置").into(), true);
        cell(ui, lang.t("cache position", "缓存位置").into(), true);
        ui.end_row();
        for i in &show {
            match *i {
                None => {
                    // The rows left out, counted (an ellipsis would read as text cut off).
                    let hidden = kept.len() + 1 - show.len();
                    // In the text-position column, the widest: the grid keeps its width.
                    cell(ui, String::new(), false);
                    cell(
                        ui,
                        match lang {
                            crate::ui::text::Lang::En => format!("+{hidden} bytes"),
                            crate::ui::text::Lang::Zh => format!("另 {hidden} 个"),
                        },
                        false,
                    );
                    cell(ui, String::new(), false);
                }
                Some(i) => {
                    cell(ui, crate::model::byte_label(r.tokens[i]), false);
                    cell(ui, i.to_string(), scheme == Positions::Text);
                    cell(ui, rank(i).to_string(), scheme == Positions::Cache);
                }
            }
            ui.end_row();
        }
    });
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
    let (lo, hi) = pts.iter().fold((f64::MAX, f64::MIN), |m, p| (m.0.min(p.2[1]), m.1.max(p.2[1])));
    let pad = (hi - lo).max(0.01) * 0.15;
    let far = pts.iter().fold(0.0f64, |m, p| m.max(p.2[0]));
    Chart::new(
        "streaming-costs-chart",
        ChartAxis::log10(lang.t("query–key pairs per byte read (log axis)", "每读一个字节的查询–键对数（对数坐标）"))
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
