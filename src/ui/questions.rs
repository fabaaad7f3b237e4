//! Predict, then reveal, in the app. A step's questions (`lesson_file::Question`) sit under the narration;
//! in **class mode** (on by default in presentation mode, `Q` switches it, `&quiz=1` in a web link) the
//! step's views and narration are veiled until every question is answered or the presenter reveals them
//! (`R`): the canvas shows the questions with their answer boxes, and the side panel the step's title and
//! what to do. Answers are graded by `lessons::questions` against the value the lesson computed from the
//! run the step shows.

use eframe::egui::{self, RichText, Ui};

use super::KvscopeApp;
use super::text::Lang;
use crate::lesson_file::{PickOn, Question};
use crate::lessons::questions::{Answer, Answered, Guess, PickSurface, StepAnswers, answer, is_right};
use crate::style;

impl KvscopeApp {
    /// Whether class mode is on: questions veil their step until answered or revealed. It follows
    /// presentation mode unless switched (`Q`, [`Self::set_class_mode`]).
    pub fn class_mode(&self) -> bool {
        self.class_mode.unwrap_or(self.presentation)
    }

    /// Switch class mode on or off (from now on it no longer follows presentation mode).
    pub fn set_class_mode(&mut self, on: bool) {
        self.class_mode = Some(on);
    }

    /// Whether class mode was switched explicitly (what a link and the saved state carry).
    pub fn class_mode_setting(&self) -> Option<bool> {
        self.class_mode
    }

    /// The current step's questions (none when it has none).
    pub fn questions(&self) -> &[crate::lesson_file::Question] {
        self.lesson()
            .and_then(|l| l.file.steps.get(self.step))
            .map_or(&[], |s| s.questions.as_slice())
    }

    fn step_key(&self) -> (String, usize) {
        (self.lesson().map(|l| l.id().to_string()).unwrap_or_default(), self.step)
    }

    /// What was answered on the current step.
    pub fn step_answers(&self) -> StepAnswers {
        self.answers.get(&self.step_key()).cloned().unwrap_or_default()
    }

    /// Whether the current step is veiled: class mode, questions, and neither all answered nor revealed.
    pub fn veiled(&self) -> bool {
        let n = self.questions().len();
        if !self.class_mode() || n == 0 {
            return false;
        }
        let a = self.step_answers();
        let all = (0..n).all(|i| a.answered.get(i).is_some_and(|x| x.guess.is_some()));
        !(a.revealed || all)
    }

    /// Whether question `q` of the current step was answered right (None: not answered, or no answer
    /// computed yet).
    pub fn graded(&self, q: usize) -> Option<bool> {
        let guess = self.step_answers().answered.get(q)?.guess.clone()?;
        let answer = self.question_answers().get(q)?.clone().ok()?;
        Some(is_right(&answer, &guess))
    }

    /// Reveal the current step (the presenter's `R`).
    pub fn reveal(&mut self) {
        let key = self.step_key();
        self.answers.entry(key).or_default().revealed = true;
    }

    /// Forget what was answered on every step (a new class).
    pub fn clear_answers(&mut self) {
        self.answers.clear();
    }

    /// The lesson's placeholder values for the shown run (none while it computes or on a step without
    /// questions): what the questions' answers and texts are read from, once per drawing.
    fn question_values(&self) -> Vec<(&'static str, String)> {
        match self.lesson() {
            Some(l) if !self.questions().is_empty() && !self.computing() => {
                l.kind.values(l, self.output().map(|o| o.as_ref()))
            }
            _ => Vec::new(),
        }
    }

    /// The shape of the view question `q` picks on, from the shown run (None: not a pick, or nothing
    /// computed yet).
    pub fn pick_surface(&self, q: &Question) -> Option<PickSurface> {
        let view = &q.pick.as_ref()?.get_ref().view;
        if self.computing() {
            return None;
        }
        self.output()?.pick_surface(view)
    }

    /// The answers of the current step's questions, from the lesson's result for the shown run (an
    /// error while it is computing or when the lesson did not fill the placeholder).
    pub fn question_answers(&self) -> Vec<Result<Answer, String>> {
        let values = self.question_values();
        self.questions().iter().map(|q| answer(q, &values)).collect()
    }

    /// What choice `k` of question `q` of the current step says, filled from the shown run (the label of
    /// its button).
    pub fn choice_label(&self, q: usize, k: usize) -> Option<String> {
        let c = self.questions().get(q)?.choices.get(k)?;
        Some(self.question_text(c.label.get_ref(), &self.question_values()))
    }

    /// Check `guess` for question `q` of the current step.
    pub fn answer(&mut self, q: usize, guess: Guess) {
        let key = self.step_key();
        let n = self.questions().len();
        let a = self.answers.entry(key).or_default();
        a.answered.resize(n.max(a.answered.len()), Answered::default());
        if let Some(x) = a.answered.get_mut(q) {
            x.guess = Some(guess);
        }
    }

    fn set_typed(&mut self, q: usize, text: String) {
        let key = self.step_key();
        let n = self.questions().len();
        let a = self.answers.entry(key).or_default();
        a.answered.resize(n.max(a.answered.len()), Answered::default());
        if let Some(x) = a.answered.get_mut(q) {
            x.typed = text;
        }
    }

    /// A question's text (or its `why`) in the current language, its placeholders filled from `values`
    /// ([`Self::question_values`]).
    fn question_text(&self, t: &crate::lesson_file::Text, values: &[(&'static str, String)]) -> String {
        let missing = if self.output().is_some() && !self.computing() {
            "—"
        } else {
            "…"
        };
        crate::lessons::fill(self.lang.pick(t), values, missing, self.lang == Lang::Zh)
    }
}

/// The current step's questions at text size `size`: each asked, with its answer box or choices until it
/// is answered, then the guess against the lesson's answer and why (`answers_shown`: also the answers of
/// questions not answered, once the step is revealed).
///
/// A pick question's grid is at most `grid_h` tall (None: what the rest of `ui` leaves).
pub fn questions_ui(app: &mut KvscopeApp, ui: &mut Ui, size: f32, answers_shown: bool, grid_h: Option<f32>) {
    let lang = app.lang;
    let qs = app.questions().to_vec();
    if qs.is_empty() {
        return;
    }
    let values = app.question_values();
    let answers: Vec<_> = qs.iter().map(|q| answer(q, &values)).collect();
    let state = app.step_answers();
    for (i, q) in qs.iter().enumerate() {
        let done = state.answered.get(i).and_then(|a| a.guess.clone());
        ui.add_space(size * 0.3);
        let head = match (lang, qs.len()) {
            (Lang::Zh, 1) => "预测：".to_string(),
            (Lang::Zh, _) => format!("预测 {}：", i + 1),
            (_, 1) => "Predict: ".to_string(),
            (_, _) => format!("Predict {}: ", i + 1),
        };
        let ask = app.question_text(q.ask.get_ref(), &values);
        super::text::markdown(ui, &format!("**{}** {ask}", head.trim()), size);
        let answer = answers.get(i).cloned().unwrap_or_else(|| Err(String::new()));
        match (&done, &answer) {
            (None, _) => {
                // The answer box (a number) or the choices.
                let mut picked = None;
                let surface = app.pick_surface(q);
                if q.pick.is_some() {
                    match &surface {
                        Some(sf) => {
                            let shown = if answers_shown {
                                answer.as_ref().ok().cloned()
                            } else {
                                None
                            };
                            picked = pick_grid(ui, sf, (size, grid_h), lang, i, shown.as_ref(), None).map(Guess::Pick);
                        }
                        None => {
                            ui.label(
                                RichText::new(lang.t("computing the view…", "正在计算视图…")).size(style::fit(size)),
                            );
                        }
                    }
                } else if q.choices.is_empty() {
                    let mut typed = state.answered.get(i).map(|a| a.typed.clone()).unwrap_or_default();
                    ui.horizontal_wrapped(|ui| {
                        let id = egui::Id::unique(("kvscope-question", i));
                        let label = ui.label(RichText::new(lang.t("your guess", "你的猜测")).size(style::fit(size)));
                        let r = ui
                            .add(
                                egui::TextEdit::singleline(&mut typed)
                                    .id(id)
                                    .desired_width(size * 6.0)
                                    .font(egui::FontId::proportional(style::fit(size))),
                            )
                            .labelled_by(label.id);
                        if i == 0 {
                            app.answer_box = Some(r.rect);
                        }
                        if let Some(u) = &q.unit {
                            ui.label(RichText::new(lang.pick(u)).size(style::fit(size)));
                        }
                        let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                        let check = ui.button(RichText::new(lang.t("Check", "核对")).size(style::fit(size)));
                        if enter || check.clicked() {
                            picked = Guess::typed(&typed);
                        }
                    });
                    app.set_typed(i, typed);
                } else {
                    ui.horizontal_wrapped(|ui| {
                        for (k, c) in q.choices.iter().enumerate() {
                            let label = app.question_text(c.label.get_ref(), &values);
                            if ui.button(RichText::new(label).size(style::fit(size))).clicked() {
                                picked = Some(Guess::Choice(k));
                            }
                        }
                    });
                }
                if let Some(g) = picked {
                    app.answer(i, g);
                }
                if answers_shown && let Ok(a) = &answer {
                    result_line(app, ui, q, a, None, &values, size);
                }
            }
            (Some(g), Ok(a)) => {
                let surface = app.pick_surface(q);
                if let Some(sf) = &surface {
                    pick_grid(ui, sf, (size, grid_h), lang, i, Some(a), Some(g));
                }
                result_line(app, ui, q, a, Some(g), &values, size)
            }
            (Some(_), Err(_)) => {
                ui.label(RichText::new(lang.t("computing the answer…", "正在计算答案…")).size(style::fit(size)));
            }
        }
    }
}

/// The lesson's answer to `q`, the guess against it (right or not) and why (filled from `values`).
fn result_line(
    app: &KvscopeApp,
    ui: &mut Ui,
    q: &crate::lesson_file::Question,
    a: &Answer,
    guess: Option<&Guess>,
    values: &[(&'static str, String)],
    size: f32,
) {
    let lang = app.lang;
    let zh = lang == Lang::Zh;
    let surface = app.pick_surface(q);
    let surface = surface.as_ref();
    let picked = |p: usize| surface.map_or_else(|| p.to_string(), |s| s.describe(p, zh));
    let shown = match a {
        Answer::Number { shown, .. } => {
            let unit = q.unit.as_ref().map(|u| lang.pick(u).to_string()).unwrap_or_default();
            // A placeholder that carries its unit already ("2.87×") is not given it twice.
            if shown.ends_with(unit.as_str()) {
                shown.to_string()
            } else {
                format!("{shown} {unit}").trim().to_string()
            }
        }
        Answer::Choice(k) => q
            .choices
            .get(*k)
            .map(|c| app.question_text(c.label.get_ref(), values))
            .unwrap_or_default(),
        Answer::Pick(p) => picked(*p),
    };
    let guessed = |g: &Guess| match g {
        Guess::Number(v) => format!("{v}"),
        Guess::Choice(k) => q
            .choices
            .get(*k)
            .map(|c| app.question_text(c.label.get_ref(), values))
            .unwrap_or_default(),
        Guess::Pick(p) => picked(*p),
    };
    let (text, colour) = match guess {
        Some(g) if is_right(a, g) => (
            match lang {
                Lang::Zh => format!("对了：这次运行得到 {shown}"),
                _ => format!("Right: the run gives {shown}"),
            },
            style::state_text(ui.visuals(), style::ACCEPTED),
        ),
        Some(g) => (
            match lang {
                Lang::Zh => format!("不对：你说 {}，这次运行得到 {shown}", guessed(g)),
                _ => format!("Not this time: you said {}, the run gives {shown}", guessed(g)),
            },
            style::fail(ui.visuals()),
        ),
        None => (
            match lang {
                Lang::Zh => format!("答案：这次运行得到 {shown}"),
                _ => format!("Answer: the run gives {shown}"),
            },
            ui.visuals().strong_text_color(),
        ),
    };
    ui.add(egui::Label::new(RichText::new(text).strong().size(style::fit(size)).color(colour)).wrap());
    super::text::markdown(ui, &app.question_text(q.why.get_ref(), values), size);
}

/// The view's shape to pick on (`s`, text size `size`): a heatmap's cells with its tokens down the side
/// and positions across the top, or a pool's numbered blocks. Open (no `guess`): each row (a row pick)
/// or item is a button named as [`PickSurface::describe`] names it, and the pick clicked is returned.
/// With `guess`, or with the `answer` alone once the step is revealed, the run's pick is filled in
/// "accepted" and a wrong guess in "rejected", with a caption saying which is which.
fn pick_grid(
    ui: &mut Ui,
    s: &PickSurface,
    (size, grid_h): (f32, Option<f32>),
    lang: Lang,
    q: usize,
    answer: Option<&Answer>,
    guess: Option<&Guess>,
) -> Option<usize> {
    let zh = lang == Lang::Zh;
    let open = guess.is_none() && answer.is_none();
    let font = egui::FontId::proportional(style::fit(size * 0.8));
    let text = ui.visuals().text_color();
    let muted = style::muted(ui.visuals());
    let heat = s.on != PickOn::Block;
    let width = |t: &str, ui: &Ui| ui.painter().layout_no_wrap(t.to_string(), font.clone(), text).size().x;
    let avail_w = ui.available_width();
    let avail_h = grid_h
        .unwrap_or(ui.available_height() - size * 4.0)
        .min(ui.available_height())
        .max(size * 6.0);
    // Row labels: the position and the token, cut to at most a third of the width.
    let row_label = |r: usize| match s.row_labels.get(r) {
        Some(l) if l.trim() != r.to_string() => format!("{r} {l}"),
        _ => r.to_string(),
    };
    let cap = avail_w / 3.0;
    let mut labels: Vec<String> = Vec::new();
    if heat {
        for r in 0..s.rows {
            let mut l = row_label(r).trim_end().to_string();
            while width(&l, ui) > cap && l.chars().count() > 2 {
                l.pop();
                l = l.trim_end_matches('…').to_string();
                l.push('…');
            }
            labels.push(l);
        }
    }
    let gutter = labels.iter().map(|l| width(l, ui)).fold(0.0, f32::max) + if heat { size * 0.4 } else { 0.0 };
    let head = if heat { size * 1.1 } else { 0.0 };
    let digits = width(&s.len.saturating_sub(1).to_string(), ui);
    let (cell_w, cell_h) = if heat {
        let c = ((avail_w - gutter) / s.cols.max(1) as f32)
            .min(size * 2.2)
            .min((avail_h - head) / s.rows.max(1) as f32);
        (c, c)
    } else {
        let w = ((avail_w) / s.cols.max(1) as f32).min(size * 3.0);
        (w, (size * 1.5).min(avail_h / s.rows.max(1) as f32))
    };
    // Room under the last row for its label, where a label is taller than a row.
    let tail = if heat {
        ((font.size * 1.3 - cell_h) / 2.0).max(0.0)
    } else {
        0.0
    };
    let (rect, _) = ui.allocate_exact_size(
        egui::vec2(gutter + cell_w * s.cols as f32, head + cell_h * s.rows as f32 + tail),
        egui::Sense::hover(),
    );
    let painter = ui.painter_at(rect.expand(2.0));
    let origin = rect.min + egui::vec2(gutter, head);
    let item_rect = |i: usize| {
        let (r, c) = (i / s.cols.max(1), i % s.cols.max(1));
        egui::Rect::from_min_size(
            origin + egui::vec2(c as f32 * cell_w, r as f32 * cell_h),
            egui::vec2(cell_w, cell_h),
        )
        .shrink(1.0)
    };
    let right = match answer {
        Some(Answer::Pick(p)) => Some(*p),
        _ => None,
    };
    let wrong = match (guess, right) {
        (Some(Guess::Pick(g)), Some(p)) if *g != p => Some(*g),
        _ => None,
    };
    for i in 0..s.len {
        let p = s.pick_of_item(i);
        let fill = if Some(p) == right {
            style::ACCEPTED
        } else if Some(p) == wrong {
            style::REJECTED
        } else if s.off.get(i).copied().unwrap_or(false) {
            style::MASKED_HATCH
        } else {
            style::FREE
        };
        let r = item_rect(i);
        painter.rect_filled(r, 2.0, style::c32(fill));
        if fill == style::MASKED_HATCH {
            hatch(&painter, r);
        }
        if !heat && digits + size * 0.2 <= cell_w {
            painter.text(
                r.center(),
                egui::Align2::CENTER_CENTER,
                i.to_string(),
                font.clone(),
                style::ink_on(fill),
            );
        }
    }
    if heat {
        // Every row's label where the rows are tall enough, else every few; the last row (the newest
        // query, what questions ask about) always, the one before it dropped where they would meet.
        let every = (font.size / cell_h).ceil().max(1.0) as usize;
        let last = labels.len().saturating_sub(1);
        for (r, l) in labels.iter().enumerate() {
            let y = origin.y + (r as f32 + 0.5) * cell_h;
            let shown = r == last || (r % every == 0 && r + every <= last);
            if cell_h >= font.size * 0.9 || shown {
                painter.text(
                    egui::pos2(rect.min.x, y),
                    egui::Align2::LEFT_CENTER,
                    l,
                    font.clone(),
                    text,
                );
            }
        }
        let every = (width(&s.cols.to_string(), ui) / cell_w).ceil().max(1.0) as usize;
        for c in (0..s.cols).step_by(every) {
            let x = origin.x + (c as f32 + 0.5) * cell_w;
            painter.text(
                egui::pos2(x, rect.min.y),
                egui::Align2::CENTER_TOP,
                c.to_string(),
                font.clone(),
                muted,
            );
        }
    }
    let mut picked = None;
    if open {
        let units: Vec<(usize, egui::Rect)> = match s.on {
            PickOn::Row => (0..s.rows)
                .map(|r| (r, item_rect(r * s.cols).union(item_rect(r * s.cols + s.cols - 1))))
                .collect(),
            _ => (0..s.len).map(|i| (i, item_rect(i))).collect(),
        };
        for (p, r) in units {
            let id = egui::Id::unique(("kvscope-pick", q, p));
            let resp = ui.interact(r, id, egui::Sense::click());
            let label = s.describe(p, zh);
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &label));
            if resp.hovered() {
                painter.rect_stroke(r, 2.0, egui::Stroke::new(2.5, text), egui::StrokeKind::Outside);
            }
            if resp.clicked() {
                picked = Some(p);
            }
        }
    }
    // What the colours mean: a masked cell, the run's pick and a wrong guess.
    ui.horizontal_wrapped(|ui| {
        let key = |ui: &mut Ui, c: style::Rgba, t: &str| {
            let s = style::fit(size * 0.85);
            let (r, _) = ui.allocate_exact_size(egui::vec2(s, s), egui::Sense::hover());
            ui.painter().rect_filled(r, 2.0, style::c32(c));
            if c == style::MASKED_HATCH {
                // Hatched, as the grid's masked cells are.
                hatch(ui.painter(), r);
            }
            ui.label(RichText::new(t).size(s));
        };
        if s.off.iter().any(|&o| o) {
            key(ui, style::MASKED_HATCH, lang.t("masked (p = 0)", "被掩码（p = 0）"));
        }
        if !open {
            key(ui, style::ACCEPTED, lang.t("the run's pick", "这次运行的答案"));
        }
        if wrong.is_some() {
            key(ui, style::REJECTED, lang.t("your pick", "你的选择"));
        }
    });
    picked
}

/// Diagonal hatching over `r`, as the heatmaps draw a masked cell.
fn hatch(painter: &egui::Painter, r: egui::Rect) {
    let clip = painter.with_clip_rect(r);
    let h = r.height();
    let mut k = -h;
    while k < r.width() {
        clip.line_segment(
            [
                r.left_bottom() + egui::vec2(k, 0.0),
                r.left_bottom() + egui::vec2(k + h, -h),
            ],
            egui::Stroke::new((h / 10.0).max(1.0), style::c32(style::MASKED)),
        );
        k += h / 2.5;
    }
}

impl KvscopeApp {
    /// Class mode's veil over the canvas `rect` while the step is veiled (`draw_views`).
    pub(super) fn draw_veil(&mut self, ui: &mut Ui, rect: egui::Rect) {
        veil(self, ui, rect);
    }
}

/// Class mode's veil over the canvas `rect` while the step is veiled: the questions with their answer
/// boxes, and how to reveal the step without answering.
fn veil(app: &mut KvscopeApp, ui: &mut Ui, rect: egui::Rect) {
    let lang = app.lang;
    // Larger than the narration: the question is what the hall reads now.
    let size = app.body_size() * if app.presentation { 1.6 } else { 1.15 };
    super::widgets::view_in(ui, rect, |ui| {
        ui.label(
            RichText::new(lang.t(
                "Predict first: what will this step's run show?",
                "先预测：这一步的运行会显示什么？",
            ))
            .strong()
            .size(style::fit(size * 1.15)),
        );
        questions_ui(app, ui, size, false, None);
        ui.add_space(size);
        let reveal = ui.button(RichText::new(lang.t("Reveal the step (R)", "揭晓这一步 (R)")).size(style::fit(size)));
        if reveal.clicked() {
            app.reveal();
        }
    });
}

/// The side panel's text while the step is veiled (the narration would give the answer away).
pub fn veiled_note(lang: Lang) -> &'static str {
    lang.t(
        "Class mode: answer the question on the left, or press R to reveal the step. The narration follows.",
        "课堂模式：先回答左边的问题，或按 R 揭晓这一步，讲解随后显示。",
    )
}
