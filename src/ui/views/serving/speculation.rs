//! Lesson 12's speculative-decoding views: the draft and verify passes, what they buy, and the stored
//! measurement on SmolLM2 beside the tiny model's.

use eframe::egui::{self, Color32, RichText, Ui};

use super::common::*;
use crate::lessons::format_bytes;
use crate::lessons::serving::{ServingOut, measure};
use crate::style;
use crate::ui::widgets::{Chart, ChartAxis, Motion, ViewCtx, compare_bars, legend};

pub(super) fn speculative(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let sp = &o.spec;
    title(
        ui,
        size,
        format!(
            "{} · k = {} · {}",
            match o.drafter {
                "draft" => lang.t("draft model", "草稿模型"),
                _ => lang.t("prompt lookup (n-gram)", "提示查找（n-gram）"),
            },
            sp.k,
            lang.t("each row is one target pass", "每行是目标模型的一次前向"),
        ),
    );
    let font = egui::FontId::monospace(crate::style::fit(size * 0.95));
    // The passes up to the timeline's, the latest rows that fit, the timeline's pass outlined.
    let n = sp.steps.len();
    let cur = (*cx.cursor).min(n.saturating_sub(1));
    let max_rows = ((ui.available_height() / (size * 1.5)).floor() as usize).clamp(4, 14);
    let first = (cur + 1).saturating_sub(max_rows);
    if first > 0 {
        note(
            ui,
            size,
            match lang {
                crate::ui::text::Lang::Zh => format!("… 之前的 {first} 次前向"),
                _ => format!("… {first} earlier passes"),
            },
        );
    }
    // The pass just taken, while it runs: its drafts come in unjudged and the verify pass colours them
    // accepted or rejected; tests and renders draw the settled frame.
    let motion = Motion::of(
        ui,
        egui::Id::unique(("kvscope-spec-motion", cx.lesson.id())),
        cur,
        cx.sync,
        1,
    );
    let judged = if motion.moving() && motion.to > motion.from {
        motion.ease()
    } else {
        1.0
    };
    for (i, s) in sp.steps.iter().enumerate().take(cur + 1).skip(first) {
        let judged = if i == cur { judged } else { 1.0 };
        let row = ui.horizontal(|ui| {
            ui.label(
                RichText::new(format!("@{:<4}", s.pos))
                    .monospace()
                    .size(crate::style::fit(size * 0.85))
                    .color(style::muted(ui.visuals())),
            );
            let chip = |ui: &mut Ui, b: u8, rgba: style::Rgba| {
                let fill = style::c32(style::FREE).lerp_to_gamma(style::c32(rgba), judged);
                let text = crate::model::byte_label(b);
                let ink = style::ink_on(if judged < 0.5 { style::FREE } else { rgba });
                let g = ui.painter().layout_no_wrap(text, font.clone(), ink);
                let (r, _) = ui.allocate_exact_size(
                    egui::vec2(g.size().x.max(size * 0.8) + 6.0, size * 1.3),
                    egui::Sense::hover(),
                );
                ui.painter().rect_filled(r, 3.0, fill);
                ui.painter()
                    .galley(r.center() - g.size() / 2.0, g, Color32::PLACEHOLDER);
            };
            for (i, &b) in s.proposed.iter().enumerate() {
                let fill = if i < s.accepted {
                    style::ACCEPTED
                } else {
                    style::REJECTED
                };
                chip(ui, b, fill);
            }
            ui.label(RichText::new("→").size(crate::style::fit(size)));
            chip(ui, *s.emitted.last().unwrap_or(&b'?'), style::GENERATED);
            ui.label(
                RichText::new(format!(
                    "{} {}/{}{}",
                    lang.t("kept", "接受"),
                    s.accepted,
                    s.proposed.len(),
                    if s.freed.is_empty() {
                        String::new()
                    } else {
                        format!(", {} {:?}", lang.t("freed blocks", "释放块"), s.freed)
                    }
                ))
                .size(crate::style::fit(size * 0.85)),
            );
        });
        if i == cur {
            ui.painter().rect_stroke(
                row.response.rect.expand(2.0),
                3.0,
                egui::Stroke::new(2.0, style::CURRENT_32),
                egui::StrokeKind::Outside,
            );
        }
    }
    if cur + 1 < n {
        note(
            ui,
            size,
            match lang {
                crate::ui::text::Lang::Zh => format!("… 还有 {} 次前向（沿时间线向后）", n - 1 - cur),
                _ if n - 1 - cur == 1 => "… 1 pass to come (move the timeline on)".to_string(),
                _ => format!("… {} passes to come (move the timeline on)", n - 1 - cur),
            },
        );
    }
    legend(
        ui,
        &[
            (style::ACCEPTED, lang.t("draft accepted", "草稿被接受").to_string()),
            (
                style::REJECTED,
                lang.t(
                    "draft rejected: its slot is cut from the cache",
                    "草稿被拒绝：其槽位从缓存中截掉",
                )
                .to_string(),
            ),
            (
                style::CURRENT,
                lang.t("the timeline's pass (outlined)", "时间线所在的这次前向（描边）")
                    .to_string(),
            ),
            (
                style::GENERATED,
                lang.t("the target's own next byte", "目标模型自己的下一个字节")
                    .to_string(),
            ),
        ],
        size,
    );
}

pub(super) fn spec_stats(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let sp = &o.spec;
    title(
        ui,
        size,
        lang.t(
            "Acceptance α at each draft position (accepted ÷ reached)",
            "每个草稿位置的接受率 α（接受数 ÷ 到达数）",
        ),
    );
    for (i, a) in sp.alpha().iter().enumerate() {
        ui.horizontal(|ui| {
            ui.label(
                RichText::new(format!("{} {}", lang.t("position", "位置"), i + 1)).size(crate::style::fit(size * 0.9)),
            );
            let w = (ui.available_width() - size * 8.0).max(20.0);
            let (r, _) = ui.allocate_exact_size(egui::vec2(w, size * 0.9), egui::Sense::hover());
            ui.painter().rect_filled(r, 2.0, style::track(ui.visuals()));
            if let Some(a) = a {
                let f = egui::Rect::from_min_size(r.min, egui::vec2(r.width() * *a as f32, r.height()));
                ui.painter().rect_filled(f, 2.0, style::c32(style::ACCEPTED));
            }
            ui.label(
                RichText::new(match a {
                    Some(a) => format!("{a:.2} ({}/{})", sp.accepted_at[i], sp.reached_at[i]),
                    None => lang.t("never reached", "从未到达").to_string(),
                })
                .monospace()
                .size(crate::style::fit(size * 0.85)),
            );
        });
    }
    ui.add_space(size * 0.6);
    // What it buys and what it does not: the target model's passes per byte, and the memory at peak,
    // plain decode's bar above speculation's, each pair on one scale.
    let (kv, plain_kv) = sp.kv_bytes();
    let plain_c = style::WHOLE;
    let spec_c = style::REQUESTS[0];
    let weights_c = style::REQUESTS[1];
    let plain_name = lang.t("plain decode", "普通解码");
    let spec_name = lang.t("speculative", "投机解码");
    let passes = [
        (plain_name, vec![(o.plain.passes_per_byte(), plain_c)]),
        (spec_name, vec![(sp.passes_per_byte(), spec_c)]),
    ];
    compare_bars(
        ui,
        size,
        lang.t(
            "It saves target passes: forward passes of the target model per generated byte",
            "它省下的是目标模型的前向次数：每生成一个字节的目标模型前向次数",
        ),
        &passes,
        &|v| format!("{v:.2}"),
    );
    let memory = [
        (plain_name, vec![(plain_kv as f64, plain_c)]),
        (
            spec_name,
            vec![(kv as f64, spec_c), (sp.draft_weight_bytes as f64, weights_c)],
        ),
    ];
    compare_bars(
        ui,
        size,
        lang.t(
            "It does not save memory: bytes at peak (the KV of both models, and the draft model's weights)",
            "它没有省下内存：峰值字节数（两个模型的 KV，以及草稿模型的权重）",
        ),
        &memory,
        &|v| format_bytes(v),
    );
    legend(
        ui,
        &[
            (
                plain_c,
                lang.t("plain decode (its KV)", "普通解码（其 KV）").to_string(),
            ),
            (
                spec_c,
                match lang {
                    crate::ui::text::Lang::Zh => format!(
                        "投机解码（KV：目标 {} 块 + 草稿 {} 块）",
                        sp.target_peak_blocks, sp.draft_peak_blocks
                    ),
                    _ => format!(
                        "speculative (KV: {} target + {} draft blocks)",
                        sp.target_peak_blocks, sp.draft_peak_blocks
                    ),
                },
            ),
            (weights_c, lang.t("draft model weights", "草稿模型权重").to_string()),
        ],
        size,
    );
    note(
        ui,
        size,
        format!(
            "{}: {}",
            lang.t("output equals plain greedy decode", "输出与普通贪心解码相同"),
            match (sp.output == o.plain.output, lang) {
                (true, crate::ui::text::Lang::Zh) => "是",
                (false, crate::ui::text::Lang::Zh) => "否",
                (true, _) => "yes",
                (false, _) => "no",
            }
        ),
    );
    ui.add_space(size * 0.4);
    let speeds: Vec<String> = o
        .stored
        .speculative
        .iter()
        .filter(|r| r.drafter == o.drafter)
        .map(|r| {
            format!(
                "k={} {:.2}×",
                r.k,
                r.bytes_per_second / r.plain_bytes_per_second.max(1e-12)
            )
        })
        .collect();
    note(
        ui,
        size,
        format!(
            "{} {} ({} {} · {} · {}, {} {} {})",
            lang.t("Bytes/s against plain decode:", "字节/秒相对普通解码："),
            speeds.join("  "),
            lang.t("stored,", "存储的实测，"),
            o.stored.machine,
            o.stored.backend,
            o.stored.date,
            lang.t("best of three,", "三次取最好，"),
            measure::SPEC_BYTES,
            lang.t("bytes", "字节"),
        ),
    );
}

/// The tiny model's and SmolLM2's colours in the real-model step.
pub(super) const TINY: style::Rgba = style::REQUESTS[0];

pub(super) const REAL: style::Rgba = style::REQUESTS[2];

/// Lesson 12 on SmolLM2-135M: prompt lookup's speed-up over plain decode at each k, SmolLM2's stored
/// measurement beside the tiny model's, with the drafts each verification pass accepts.
pub(super) fn real(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    use egui_plot::{Bar, BarChart};
    let size = cx.size;
    let lang = cx.lang;
    title(
        ui,
        size,
        lang.t(
            "Prompt lookup against plain decode, by k: SmolLM2-135M-Instruct beside the tiny model (stored speeds)",
            "提示查找对比普通解码（按 k）：SmolLM2-135M-Instruct 与小模型，速度为存储的实测",
        ),
    );
    note(
        ui,
        size,
        lang.t(
            "One prompt each. SmolLM2's greedy continuation of this one loops on a sentence, which prompt lookup drafts exactly: this gain is the loop's, not speculation's in general.",
            "每个模型只有一个提示。SmolLM2 对这个提示的贪心续写在一句话上循环，提示查找能把循环完全猜中：这个加速来自循环，而不是投机解码的一般收益。",
        ),
    );
    let ratio = |s: &measure::StoredServing, k: usize| {
        s.speculative
            .iter()
            .find(|r| r.drafter == "ngram" && r.k == k)
            .map(|r| r.bytes_per_second / r.plain_bytes_per_second)
    };
    let entries = [
        (TINY, lang.t("tiny model (bytes)", "小模型（字节）")),
        (
            REAL,
            lang.t("SmolLM2-135M-Instruct (tokens)", "SmolLM2-135M-Instruct（token）"),
        ),
    ];
    // In presentation mode the chart is the first page and the table of what was measured the second.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(2));
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    let hp = if page == Some(0) {
        (ui.available_height() - legend_h - size * 3.0).max(120.0)
    } else {
        ((ui.available_height() - legend_h) * 0.5).max(120.0)
    };
    let ks = measure::SPEC_KS;
    let bars = |s: &measure::StoredServing, dx: f64, c: style::Rgba| -> Vec<Bar> {
        ks.iter()
            .enumerate()
            .filter_map(|(i, &k)| ratio(s, k).map(|v| Bar::new(i as f64 + dx, v).width(0.38).fill(style::c32(c))))
            .collect()
    };
    let (tiny, real) = (bars(&o.stored, -0.2, TINY), bars(&o.real, 0.2, REAL));
    if page != Some(1) {
        let entries = entries.iter().map(|(c, t)| (*c, t.to_string())).collect();
        Chart::new(
            "serve-real",
            ChartAxis::categories(
                lang.t("drafted tokens per pass, k", "每次验证的草稿数 k"),
                ks.iter().map(|k| format!("k = {k}")).collect(),
            ),
            ChartAxis::linear(lang.t("speed-up over plain decode (×)", "相对普通解码的加速（×）"))
                .from_zero()
                .suffix("×"),
        )
        .height(hp + legend_h)
        .legend(entries)
        .show(ui, size, |pl| {
            pl.bar_chart(BarChart::new(lang.t("tiny model", "小模型"), tiny).color(style::c32(TINY)));
            pl.bar_chart(BarChart::new("SmolLM2-135M-Instruct", real).color(style::c32(REAL)));
            // Plain decode's 1×, so a bar under it reads as a slow-down.
            pl.threshold_y(1.0, lang.t("plain decode", "普通解码"));
        });
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("the measured table", "实测表"));
        return;
    }
    ui.add_space(size * 0.3);
    let real_row = |k: usize| o.real.speculative.iter().find(|r| r.drafter == "ngram" && r.k == k);
    let mut t = crate::ui::widgets::Table::new([
        "k",
        lang.t("SmolLM2: speed-up", "SmolLM2：加速"),
        lang.t("accepted / pass", "每次验证接受"),
        lang.t("passes / token", "每 token 的前向次数"),
        lang.t("tiny: speed-up", "小模型：加速"),
        lang.t("tiny: accepted / pass", "小模型：每次验证接受"),
    ])
    .below(6.0);
    let f = |v: Option<f64>, suffix: &str| v.map_or("-".to_string(), |v| format!("{v:.2}{suffix}"));
    for &k in &ks {
        let r = real_row(k);
        let tn = o.tiny_ngram.iter().find(|t| t.0 == k);
        t.row(
            [
                k.to_string(),
                f(ratio(&o.real, k), "×"),
                f(r.and_then(|r| r.accepted_per_pass), ""),
                f(r.and_then(|r| r.passes_per_token), ""),
                f(ratio(&o.stored, k), "×"),
                f(tn.map(|t| t.1), ""),
            ]
            .map(|v| crate::ui::widgets::Cell::new(v).mono()),
        );
    }
    crate::ui::widgets::table(ui, lang, size, &t);
    note(
        ui,
        size,
        match lang {
            crate::ui::text::Lang::En => format!(
                "Stored: `{}` on {}, {}, {} (SmolLM2); `{}` on {}, {} (tiny). The tiny model's accepted drafts are counted live (greedy, CPU backend).",
                o.real.command,
                o.real.machine,
                o.real.backend,
                o.real.date,
                o.stored.command,
                o.stored.machine,
                o.stored.date
            ),
            crate::ui::text::Lang::Zh => format!(
                "存储的实测：`{}`，{}，{}，{}（SmolLM2）；`{}`，{}，{}（小模型）。小模型每次验证接受的草稿数在此实时统计（贪心解码，CPU 后端）。",
                o.real.command,
                o.real.machine,
                o.real.backend,
                o.real.date,
                o.stored.command,
                o.stored.machine,
                o.stored.date
            ),
        },
    );
}
