//! Lesson 8's ring buffer: the bounded cache drawn as a ring of slots with its write pointer, the pinned
//! sinks, and the slot each byte of the stream lands in.

use super::common::*;
use crate::drivers::stream::StreamPolicy;
use crate::lessons::streaming::StreamOut;
use crate::style;
use crate::ui::widgets::{Motion, ViewCtx, legend};
use eframe::egui::{self, RichText, Ui};

/// The state of one slot in the ring view.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    Sink,
    Window,
    Current,
    Masked,
    Empty,
}

pub(super) fn ring(cx: &mut ViewCtx, ui: &mut Ui, o: &StreamOut) {
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
    // The move from the previous byte, when the timeline just stepped (a block freed and reused, the
    // write pointer turning): drawn as a brief crossfade; tests and renders draw the settled frame.
    let motion = Motion::of(
        ui,
        egui::Id::unique(("kvscope-ring-motion", cx.lesson.id())),
        t,
        cx.sync,
        bs,
    );
    let before = r
        .tables
        .iter()
        .find(|(s, _)| motion.moving() && *s == motion.from)
        .map(|(_, table)| table);
    let e = motion.ease();
    // Each slot's state at byte t.
    let slot_state = |owner: Option<usize>, o_: usize, t: usize| match owner {
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
    // A block's slots at byte `at`, left to right, in `b`, at opacity `alpha`.
    let draw_block_at = |b: egui::Rect, owner: Option<usize>, at: usize, alpha: f32| {
        let w = b.width() / bs as f32;
        for o_ in 0..bs {
            let state = slot_state(owner, o_, at);
            let cell = egui::Rect::from_min_size(
                egui::pos2(b.min.x + o_ as f32 * w, b.min.y),
                egui::vec2((w - 1.0).max(1.0), b.height()),
            );
            painter.rect_filled(cell, 1.0, style::c32(fill_of(state)).gamma_multiply(alpha));
            if state == Slot::Masked {
                painter.line_segment(
                    [cell.left_bottom(), cell.right_top()],
                    egui::Stroke::new(1.0, style::c32(style::MASKED_HATCH).gamma_multiply(alpha)),
                );
            }
        }
    };
    let draw_block = |b: egui::Rect, owner: Option<usize>| draw_block_at(b, owner, t, 1.0);
    let pool = r.pool_blocks.max(1);
    let owner_of = |phys: usize| table.iter().find(|&&(_, p)| p as usize == phys).map(|&(l, _)| l);
    let owner_before = |phys: usize| before.map(|tb| tb.iter().find(|&&(_, p)| p as usize == phys).map(|&(l, _)| l));
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
        let pinned_h = if pinned.is_empty() {
            0.0
        } else {
            box_h + font.size * 1.3 + size * 0.4
        };
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
        painter.galley(
            egui::pos2(area.min.x, area.min.y + pinned_h),
            caption,
            crate::style::muted(ui.visuals()),
        );
        let ring_area = egui::Rect::from_min_max(egui::pos2(area.min.x, area.min.y + pinned_h + caption_h), area.max);
        let centre = ring_area.center();
        let radius =
            ((ring_area.width() / 2.0 - size * 3.5).min(ring_area.height() / 2.0 - box_h * 1.9)).max(box_h * 2.0);
        let chord = 2.0 * radius * (std::f32::consts::PI / m as f32).sin();
        let box_w = (chord * 0.8)
            .min(radius * 1.1)
            .min(ring_area.width() * 0.32)
            .max(bs as f32 * 2.0);
        painter.circle_stroke(
            centre,
            radius,
            egui::Stroke::new(size * 0.5, crate::style::track(ui.visuals())),
        );
        let angle = |k: f32| -std::f32::consts::FRAC_PI_2 + std::f32::consts::TAU * k / m as f32;
        let at = |k: usize| {
            let a = angle(k as f32);
            centre + radius * egui::vec2(a.cos(), a.sin())
        };
        let holds = |owner: Option<usize>, byte: usize| owner.is_some_and(|l| (l * bs..(l + 1) * bs).contains(&byte));
        let (mut pointer, mut pointer_before) = (None, None);
        for (k, p) in place.iter().enumerate() {
            let Some(p) = *p else { continue };
            let owner = owner_of(p);
            let b = egui::Rect::from_center_size(at(k), egui::vec2(box_w, box_h));
            painter.rect_filled(b.expand(2.0), 2.0, style::c32(crate::style::canvas(!cx.light)));
            draw_block(b, owner);
            if holds(owner, t) {
                pointer = Some(k);
            }
            if holds(owner, motion.from) {
                pointer_before = Some(k);
            }
            // Labels outside the ring, above the top half's blocks and below the bottom half's.
            let (pos, align, out) = if at(k).y <= centre.y + 1.0 {
                (b.center_top() - egui::vec2(0.0, 2.0), egui::Align2::CENTER_BOTTOM, -1.0)
            } else {
                (b.center_bottom() + egui::vec2(0.0, 2.0), egui::Align2::CENTER_TOP, 1.0)
            };
            let label = |owner: Option<usize>| match owner {
                Some(l) => format!("#{p} ← {l}"),
                None => format!("#{p} {}", lang.t("free", "空闲")),
            };
            match owner_before(p) {
                // This step freed the block's old logical block and reused it: the old contents fade
                // out over the new, and the old label drifts away marked freed.
                Some(old) if old != owner => {
                    draw_block_at(b, old, motion.from, 1.0 - e);
                    let old_label = match old {
                        Some(_) => format!("{} · {}", label(old), lang.t("freed", "已释放")),
                        None => label(old),
                    };
                    let drift = egui::vec2(0.0, out * font.size * e);
                    painter.text(
                        pos + drift,
                        align,
                        old_label,
                        font.clone(),
                        // The labels take turns (the old one gone by halfway), so they never overlap legibly.
                        text.gamma_multiply((1.0 - 2.0 * e).max(0.0)),
                    );
                    painter.text(
                        pos,
                        align,
                        label(owner),
                        font.clone(),
                        text.gamma_multiply((2.0 * e - 1.0).max(0.0)),
                    );
                }
                _ => {
                    painter.text(pos, align, label(owner), font.clone(), text);
                }
            }
        }
        // The write pointer: from the centre to the block being written (turning there from the block
        // before while the timeline steps across a block boundary).
        if let Some(k) = pointer {
            let a = match pointer_before {
                Some(k0) if motion.moving() && k0 != k => {
                    let (a0, a1) = (angle(k0 as f32), angle(k as f32));
                    let mut d = a1 - a0;
                    if d > std::f32::consts::PI {
                        d -= std::f32::consts::TAU;
                    } else if d < -std::f32::consts::PI {
                        d += std::f32::consts::TAU;
                    }
                    a0 + d * e
                }
                _ => angle(k as f32),
            };
            let b =
                egui::Rect::from_center_size(centre + radius * egui::vec2(a.cos(), a.sin()), egui::vec2(box_w, box_h));
            let to = b.center() + (centre - b.center()).normalized() * (box_h * 0.6);
            let stroke = egui::Stroke::new(3.0, style::c32(style::CURRENT));
            painter.line_segment([centre, to], stroke);
            let dir = (to - centre).normalized();
            let n = egui::vec2(-dir.y, dir.x);
            let head = size * 0.5;
            painter.line_segment([to, to - dir * head + n * head * 0.6], stroke);
            painter.line_segment([to, to - dir * head - n * head * 0.6], stroke);
            // Its name at the centre, on the side away from the arrow, so the arrow never crosses it.
            let (at, align) = if dir.y > 0.5 {
                (centre - egui::vec2(0.0, size * 0.3), egui::Align2::CENTER_BOTTOM)
            } else if dir.y < -0.5 {
                (centre + egui::vec2(0.0, size * 0.3), egui::Align2::CENTER_TOP)
            } else if dir.x > 0.0 {
                (centre - egui::vec2(size * 0.4, 0.0), egui::Align2::RIGHT_CENTER)
            } else {
                (centre + egui::vec2(size * 0.4, 0.0), egui::Align2::LEFT_CENTER)
            };
            painter.text(
                at,
                align,
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
