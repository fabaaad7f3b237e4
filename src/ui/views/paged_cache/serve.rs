//! Lesson 5's view of the trained model serving the requests: each request's prompt and the bytes it
//! has emitted up to the shown scheduler step (this step's bytes highlighted), its state, and the check
//! of the step's batched decode against recomputing without a cache.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::cache::RequestId;
use crate::lessons::paged_cache::PagedOut;
use crate::model::bytes_as_text;
use crate::style;
use crate::ui::widgets::{ViewCtx, fitted_height};

/// Text for one line: newlines and tabs as spaces, so each request keeps to its row.
fn flat(b: &[u8]) -> String {
    bytes_as_text(b).replace(['\n', '\t'], " ")
}

/// The requests' texts at scheduler step `t` of `p` (when the model served them).
pub fn outputs(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, t: usize) {
    // Set smaller rather than cut when the texts run past the view (presentation mode at 1280×720).
    let key = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (t, p.specs.len(), p.frames.len(), cx.lang == crate::ui::text::Lang::Zh).hash(&mut h);
        if let Some(s) = &p.served {
            (&s.outputs, &s.prompts).hash(&mut h);
        }
        h.finish()
    };
    fitted_height(ui, "outputs", key, cx.size, |ui, size| outputs_at(cx, ui, p, t, size));
}

fn outputs_at(cx: &ViewCtx, ui: &mut Ui, p: &PagedOut, t: usize, size: f32) {
    let lang = cx.lang;
    let (Some(s), Some(f)) = (&p.served, p.frames.get(t)) else {
        ui.label(
            RichText::new(lang.t(
                "The requests carry seeded random K/V. Tick “Serve the trained model” under Parameters to have \
                 kvscope's tiny model generate real text for them.",
                "这些请求携带带种子的随机 K/V。在“参数”中勾选“用训练好的模型服务”，让 kvscope 的小模型为它们生成真实文本。",
            ))
            .size(crate::style::fit(size)),
        );
        return;
    };
    let Some(st) = s.steps.get(t) else { return };
    ui.label(
        RichText::new(match lang {
            crate::ui::text::Lang::Zh => format!(
                "训练好的模型在调度步 {t} 服务 {} 个请求：灰色为提示（取自留出集），绿色为已生成，下划线为本步生成",
                p.specs.len()
            ),
            _ => format!(
                "the trained model serving {} requests at scheduler step {t}: prompt (held-out text) in grey, \
                 generated in green, this step's bytes underlined",
                p.specs.len()
            ),
        })
        .strong()
        .size(crate::style::fit(size)),
    );
    ui.add_space(size * 0.3);
    let font = egui::FontId::monospace(crate::style::fit(size * 0.95));
    for (r, spec) in p.specs.iter().enumerate() {
        let id = r as RequestId;
        let state = if spec.arrive > f.events.step {
            lang.t("not arrived", "未到达")
        } else if f.events.preempted.iter().any(|(x, _)| *x == id) {
            lang.t("preempted", "被抢占")
        } else if f.events.recomputed.iter().any(|(x, _)| *x == id) {
            lang.t("recomputed", "重算")
        } else if f.running.contains(&id) {
            lang.t("running", "运行中")
        } else if f.waiting.contains(&id) {
            lang.t("waiting", "等待中")
        } else if f.events.finished.iter().any(|(x, _)| *x == id) {
            lang.t("finished now", "本步完成")
        } else if st.out_len.get(r).copied().unwrap_or(0) > 0 {
            lang.t("finished", "已完成")
        } else {
            lang.t("waiting", "等待中")
        };
        let n = st.out_len.get(r).copied().unwrap_or(0);
        let new = st.emitted.iter().filter(|(x, _)| *x == id).count();
        let out = &s.outputs[r][..n.min(s.outputs[r].len())];
        let mut job = egui::text::LayoutJob::default();
        let fmt = |c: Color32| egui::TextFormat::simple(font.clone(), c);
        job.append(
            &format!("r{r} "),
            0.0,
            fmt(style::request_text(ui.visuals(), id as usize)),
        );
        job.append(&format!("{state:<6} "), 0.0, fmt(style::muted(ui.visuals())));
        job.append(&flat(&s.prompts[r]), 0.0, fmt(style::muted(ui.visuals())));
        job.append(" │ ", 0.0, fmt(style::muted(ui.visuals())));
        let (old, fresh) = out.split_at(out.len() - new.min(out.len()));
        let generated = style::state_text(ui.visuals(), style::GENERATED);
        job.append(&flat(old), 0.0, fmt(generated));
        // This step's bytes underlined with "current" (as in lesson 4), so that a space shows too.
        let mut hot = fmt(generated);
        hot.underline = egui::Stroke::new(3.0, style::CURRENT_32);
        job.append(&flat(fresh), 0.0, hot);
        job.wrap.max_width = ui.available_width();
        ui.label(job);
        if let Some((_, dist)) = st.next.iter().find(|(x, _)| *x == id) {
            next_bytes(ui, dist, size, lang);
        }
    }
    ui.add_space(size * 0.3);
    let line =
        match &st.check {
            Some(c) => format!(
            "{}: max abs err {:.1e} {}",
            lang.t(
                "this step's batched decode vs recomputing each text without a cache on the CPU (logits, f16 cache)",
                "本步的批量解码与在 CPU 上不用缓存重算每段文本的对比（logits，f16 缓存）"
            ),
            c.max_abs,
            if c.passed() { "OK" } else { lang.t("MISMATCH", "不一致") }
        ),
            None => lang.t("no decode this step", "本步没有解码").to_string(),
        };
    ui.label(RichText::new(line).size(crate::style::fit(size * 0.9)));
    let agree = s.recompute_agrees.iter().filter(|x| x.2).count();
    if !s.recompute_agrees.is_empty() {
        ui.label(
            RichText::new(format!(
                "{}: {agree} / {}",
                lang.t(
                    "recomputes after a preemption that predicted the byte emitted before it",
                    "被抢占后重算、且预测出与抢占前相同字节的次数"
                ),
                s.recompute_agrees.len()
            ))
            .size(crate::style::fit(size * 0.9)),
        );
    }
}

/// One request's next-byte distribution this step, as three small bars on one line: the byte, a bar as
/// long as its probability under softmax(logits) (T = 1) and the probability; the greedy choice (the
/// first) outlined as current.
fn next_bytes(ui: &mut Ui, dist: &[(u8, f64)], size: f32, lang: crate::ui::text::Lang) {
    let font = egui::FontId::monospace(crate::style::fit(size * 0.8));
    let row_h = size * 1.1;
    let width = (ui.clip_rect().right() - ui.cursor().left() - 2.0)
        .min(ui.available_width())
        .max(40.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, row_h), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let head = painter.layout_no_wrap(
        lang.t("    next byte:", "    下一字节：").to_string(),
        font.clone(),
        style::muted(ui.visuals()),
    );
    let mut x = rect.min.x + head.size().x + size * 0.4;
    painter.galley(
        egui::pos2(rect.min.x, rect.center().y - head.size().y / 2.0),
        head,
        text,
    );
    let seg = ((rect.max.x - x) / dist.len().max(1) as f32).max(1.0);
    let gap = size * 0.25;
    for (k, &(b, p)) in dist.iter().enumerate() {
        let label = painter.layout_no_wrap(crate::model::byte_label(b), font.clone(), text);
        let value = painter.layout_no_wrap(format!("{p:.2}"), font.clone(), text);
        let (lw, vw) = (label.size().x, value.size().x);
        painter.galley(egui::pos2(x, rect.center().y - label.size().y / 2.0), label, text);
        // The bar takes what the label and the value leave of the segment; none when that is too little.
        let track_w = seg - lw - vw - 4.0 * gap;
        let mut vx = x + lw + gap;
        if track_w >= size {
            let track = egui::Rect::from_min_size(
                egui::pos2(x + lw + gap, rect.min.y + row_h * 0.2),
                egui::vec2(track_w, row_h * 0.6),
            );
            crate::ui::widgets::prob_bar(&painter, ui.visuals(), track, p, (k == 0).then_some(2.0));
            vx = track.max.x + gap;
        }
        painter.galley(egui::pos2(vx, rect.center().y - value.size().y / 2.0), value, text);
        x += seg;
    }
}
