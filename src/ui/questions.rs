//! Predict, then reveal, in the app. A step's questions (`lesson_file::Question`) sit under the narration;
//! in **class mode** (on by default in presentation mode, `Q` switches it, `&quiz=1` in a web link) the
//! step's views and narration are veiled until every question is answered or the presenter reveals them
//! (`R`): the canvas shows the questions with their answer boxes, and the side panel the step's title and
//! what to do. Answers are graded by `lessons::questions` against the value the lesson computed from the
//! run the step shows.

use eframe::egui::{self, RichText, Ui};

use super::KvscopeApp;
use super::text::Lang;
use crate::lessons::questions::{Answer, Answered, Guess, StepAnswers, answer, is_right};
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

    /// The answers of the current step's questions, from the lesson's result for the shown run (an
    /// error while it is computing or when the lesson did not fill the placeholder).
    pub fn question_answers(&self) -> Vec<Result<Answer, String>> {
        let values = self.question_values();
        self.questions().iter().map(|q| answer(q, &values)).collect()
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
pub fn questions_ui(app: &mut KvscopeApp, ui: &mut Ui, size: f32, answers_shown: bool) {
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
                if q.choices.is_empty() {
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
            (Some(g), Ok(a)) => result_line(app, ui, q, a, Some(g), &values, size),
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
    let shown = match a {
        Answer::Number { shown, .. } => {
            let unit = q.unit.as_ref().map(|u| lang.pick(u).to_string()).unwrap_or_default();
            format!("{shown} {unit}").trim().to_string()
        }
        Answer::Choice(k) => q
            .choices
            .get(*k)
            .map(|c| app.question_text(c.label.get_ref(), values))
            .unwrap_or_default(),
    };
    let guessed = |g: &Guess| match g {
        Guess::Number(v) => format!("{v}"),
        Guess::Choice(k) => q
            .choices
            .get(*k)
            .map(|c| app.question_text(c.label.get_ref(), values))
            .unwrap_or_default(),
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
        questions_ui(app, ui, size, false);
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
