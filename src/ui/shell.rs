//! The window around the lessons: top bar, status bar with the "verified" badge, navigator, narration
//! with the lesson's sliders and the backend selector, and the central area where the lesson draws its
//! views (or a lesson-file error, or why this setting cannot be computed).

use crate::ui::text::Slant as _;
use eframe::egui::{self, Color32, RichText, Ui};

use super::KvscopeApp;
use super::text::{self, Lang};
use crate::style;
mod narration;
use narration::*;

impl KvscopeApp {
    /// Draw one frame of the app into `ui` (the whole window).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        // (Fonts are installed once by whoever creates the context: `create`, or `Headless::new`.)
        let ctx = ui.ctx().clone();
        self.frames += 1;
        super::layout::begin_frame(&ctx);
        ctx.set_theme(if self.light {
            egui::Theme::Light
        } else {
            egui::Theme::Dark
        });
        self.poll();
        self.keys(&ctx);
        let _ = self.refresh();
        self.resolve_point();
        self.widgets.heat.begin_frame(self.sync);
        if self.computing() {
            ctx.request_repaint_after(std::time::Duration::from_millis(COMPUTING_REPAINT_MS));
        }
        shell(self, ui);
        self.after_ui(&ctx);
    }
}

/// How often a frame is drawn while a result is being computed (for the "computing…" hint). In the
/// browser a frame drawn competes with the GPU round trips of a replayed WebGPU computation for the same
/// GPU (on SwiftShader, the same CPU cores), so the page draws fewer.
const COMPUTING_REPAINT_MS: u64 = if cfg!(target_arch = "wasm32") { 1000 } else { 100 };

/// The whole window.
pub fn shell(app: &mut KvscopeApp, ui: &mut Ui) {
    let pres = app.presentation;
    style::set_text_floor(if pres {
        style::PRESENT_FLOOR
    } else {
        style::WINDOW_FLOOR
    });
    // Widgets' own text (labels without a size, sliders, buttons, egui's small style) no smaller than
    // the floor in the window, and than the windowed narration's body text in presentation mode; the
    // views size their text themselves (`style::fit` raises it to the floor), and the top bar sets its
    // own when presenting.
    let widget_floor = if pres {
        app.windowed_body_size() + 1.0
    } else {
        style::WINDOW_FLOOR
    };
    super::widgets::raise_text_styles(ui, widget_floor);
    egui::Panel::top("kvscope-top").show(ui, |ui| top_bar(app, ui));
    // Presentation mode hides the status bar: the hall reads the lesson, not the backend line (the
    // verified badge stays in the windowed app and in `kvscope render`'s log).
    if !pres {
        egui::Panel::bottom("kvscope-status").show(ui, |ui| status_bar(app, ui));
    }
    if !pres {
        egui::Panel::left("kvscope-nav")
            .resizable(false)
            .exact_size(210.0)
            .show(ui, |ui| navigator(app, ui));
    }
    let side_w = if pres { 440.0 } else { 330.0 };
    let side = egui::Panel::right("kvscope-side")
        .resizable(false)
        .exact_size(side_w)
        .show(ui, |ui| side_panel(app, ui));
    // A view that pages (a long table in presentation mode) reads the page to draw and says how many.
    style::begin_view_pages(app.view_page);
    let views = egui::CentralPanel::default_margins().show(ui, |ui| central(app, ui));
    app.view_pages = if pres { style::view_pages() } else { 1 };
    app.view_page = app.view_page.min(app.view_pages - 1);
    app.set_lesson_area(side.response.rect.union(views.response.rect));
}

fn top_bar(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = if app.presentation { 20.0 } else { 15.0 };
    if app.presentation {
        // The presenter's buttons at the presentation floor.
        super::widgets::raise_text_styles(ui, style::PRESENT_FLOOR);
    }
    ui.horizontal(|ui| {
        ui.label(RichText::new("kvscope").strong().size(crate::style::fit(size)));
        // Buttons first, from the right; the title takes what is left and is truncated.
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let pres_label = if app.presentation {
                lang.t("Exit presentation (Esc)", "退出演示 (Esc)")
            } else {
                lang.t("Present (F5)", "演示模式 (F5)")
            };
            if ui.button(pres_label).clicked() {
                app.presentation = !app.presentation;
            }
            if !app.presentation {
                // Class mode: the questions veil their steps until answered or revealed.
                let class = app.class_mode();
                if ui
                    .selectable_label(class, lang.t("Class mode (Q)", "课堂模式 (Q)"))
                    .clicked()
                {
                    app.set_class_mode(!class);
                }
                let light = app.light();
                if ui
                    .button(if light {
                        lang.t("Dark", "深色")
                    } else {
                        lang.t("Light", "浅色")
                    })
                    .clicked()
                {
                    app.set_light(!light);
                }
                for l in [Lang::Zh, Lang::En] {
                    if ui.selectable_label(app.lang == l, l.label()).clicked() {
                        app.lang = l;
                    }
                }
                if ui
                    .button(lang.t("Export .npy (Ctrl+E)", "导出 .npy (Ctrl+E)"))
                    .clicked()
                {
                    app.export_npy();
                }
                if ui.button(lang.t("Save PNG (Ctrl+S)", "保存 PNG (Ctrl+S)")).clicked() {
                    app.request_png();
                }
            }
            if ui
                .button(">")
                .on_hover_text(lang.t("Next step (→, Space)", "下一步 (→、空格)"))
                .clicked()
            {
                app.next_page_or_step();
            }
            if ui
                .button("<")
                .on_hover_text(lang.t("Previous step (←)", "上一步 (←)"))
                .clicked()
            {
                app.prev_page_or_step();
            }
            if let Some(l) = app.lesson().cloned() {
                let (li, si) = app.position();
                // In presentation mode the step's title heads the narration just below, in full, so the
                // bar names the lesson and the step's number only (with the title too it ran past the
                // buttons and ended in "…" on most slides).
                let step_title = if app.presentation {
                    String::new()
                } else {
                    format!(": {}", lang.pick(l.file.steps[si].title.get_ref()))
                };
                ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                    ui.separator();
                    ui.add(
                        egui::Label::new(
                            RichText::new(format!(
                                "{} {}{}: {}  ·  {} {}/{}{step_title}",
                                lang.t("Lesson", "第"),
                                li + 1,
                                lang.t("", " 课"),
                                lang.pick(l.file.title.get_ref()),
                                lang.t("step", "步骤"),
                                si + 1,
                                l.file.steps.len(),
                            ))
                            .size(crate::style::fit(size)),
                        )
                        .truncate(),
                    );
                });
            }
        });
    });
}

fn verified_text(app: &KvscopeApp, v: &egui::Visuals) -> (String, Color32) {
    let lang = app.lang;
    let worst = app.reports().and_then(|r| crate::lessons::worst(r.iter()));
    // With an exercise open and the views on the shipped kernels, say that this line is about those,
    // not about the student's kernel (the exercise tab grades that).
    let x = &app.widgets.kernel.exercise;
    let shipped = if x.open.is_some() && x.edited_exercise().is_none() {
        lang.t(" (the views' shipped kernels)", "（视图所用的原有 kernel）")
    } else {
        ""
    };
    match (app.reports(), worst) {
        (None, _) => (lang.t("verifying…", "正在核对…").into(), style::muted(v)),
        (Some(_), None) => (lang.t("nothing to verify", "无需核对").into(), style::muted(v)),
        (Some(r), Some(w)) if w.passed() => (
            match lang {
                Lang::En => format!(
                    "OK  {}{shipped}: {} checks pass; largest error vs {}: max abs {:.1e}, max rel {:.1e}",
                    app.running_name(lang),
                    r.len(),
                    w.against.en(),
                    w.max_abs,
                    w.max_rel
                ),
                Lang::Zh => format!(
                    "OK  {}{shipped}：{} 项核对通过；误差最大的是与{}的比较：max abs {:.1e}，max rel {:.1e}",
                    app.running_name(lang),
                    r.len(),
                    w.against.zh(),
                    w.max_abs,
                    w.max_rel
                ),
            },
            style::pass(v),
        ),
        (Some(_), Some(w)) => (
            format!(
                "MISMATCH  {} {}: {} ({} of {} values)",
                app.running_name(lang),
                lang.t("disagrees with the reference", "与参考结果不一致"),
                w.label,
                w.mismatch_count,
                w.count
            ),
            style::fail(v),
        ),
    }
}

fn status_bar(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    ui.horizontal(|ui| {
        let device = app
            .backend_statuses()
            .into_iter()
            .find(|(k, _)| *k == app.active_backend())
            .and_then(|(_, s)| s.ok())
            .map(|d| crate::ui::text::device_text(lang, &d))
            .unwrap_or_default();
        ui.label(format!(
            "{}: {} ({device})",
            lang.t("backend", "后端"),
            app.active_backend().name()
        ));
        ui.separator();
        let (t, c) = verified_text(app, ui.visuals());
        ui.label(RichText::new(t).color(c));
        if app.computing() {
            ui.separator();
            // No egui::Spinner: it asks for a repaint every frame, and in the browser those frames
            // compete with a replayed WebGPU computation for the same cores (COMPUTING_REPAINT_MS).
            ui.label(
                RichText::new(app.computing_hint())
                    .slant()
                    .color(style::muted(ui.visuals())),
            );
        } else if app.compute_ms() > 0.0 && !app.is_sync() {
            // (Not in tests and `kvscope render`: their frames must not depend on timing.)
            ui.separator();
            ui.label(RichText::new(format!("{:.1} ms", app.compute_ms())).color(style::muted(ui.visuals())));
        }
        if let Some(s) = app.status_message() {
            ui.separator();
            ui.label(s.to_string());
        }
    });
}

fn navigator(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    super::layout::scroll(ui, egui::ScrollArea::vertical(), |ui| {
        ui.heading(lang.t("Lessons", "课程"));
        if !app.load_errors().is_empty() {
            ui.label(
                RichText::new(lang.t("Lesson files have errors:", "课程文件有错误：")).color(style::fail(ui.visuals())),
            );
        }
        let (cur, step) = app.position();
        let lessons: Vec<_> = app.lessons().to_vec();
        for (i, l) in lessons.iter().enumerate() {
            let title = format!("{}. {}", i + 1, lang.pick(l.file.title.get_ref()));
            let title = nav_lines(ui, lang, title, egui::TextStyle::Button, true);
            if ui.selectable_label(i == cur, RichText::new(title).strong()).clicked() && i != cur {
                app.goto(i, 0);
            }
            if i == cur {
                ui.indent("steps", |ui| {
                    for (j, s) in l.file.steps.iter().enumerate() {
                        let t = format!("{}. {}", j + 1, lang.pick(s.title.get_ref()));
                        let t = nav_lines(ui, lang, t, egui::TextStyle::Button, true);
                        if ui.selectable_label(j == step, t).clicked() {
                            app.goto(i, j);
                        }
                    }
                });
            }
        }
        ui.add_space(8.0);
        let keys = lang.t(
            "→/Space next · ←/Backspace back · Home/End · F5 present · Ctrl+S PNG · Ctrl+E .npy",
            "→/空格 下一步 · ←/退格 上一步 · Home/End · F5 演示 · Ctrl+S PNG · Ctrl+E .npy",
        );
        ui.label(
            RichText::new(nav_lines(ui, lang, keys.to_string(), egui::TextStyle::Small, false))
                .small()
                .color(style::muted(ui.visuals())),
        );
    });
}

/// A navigator text (a title in `style`; `button`: drawn as a selectable label, with its padding)
/// broken into lines that fit the panel. English is left to egui (it breaks at spaces). Chinese is
/// broken only after full-width punctuation (`：，、；）`) or a ` · ` and before `（`, never inside a
/// term: egui would break after any CJK character or at the space in "重要 token", splitting "内核"
/// or "KV Cache" across lines. A piece wider than a line on its own still wraps where egui breaks it.
fn nav_lines(ui: &Ui, lang: Lang, title: String, style: egui::TextStyle, button: bool) -> String {
    if lang != Lang::Zh {
        return title;
    }
    let font = style.resolve(ui.style());
    let pad = if button {
        2.0 * ui.spacing().button_padding.x
    } else {
        0.0
    };
    let width = ui.available_width() - pad;
    let measure = |t: &str| {
        ui.painter()
            .layout_no_wrap(t.to_string(), font.clone(), ui.visuals().text_color())
            .size()
            .x
    };
    if measure(&title) <= width {
        return title;
    }
    let mut pieces: Vec<String> = vec![String::new()];
    for c in title.chars() {
        if c == '（' && !pieces.last().is_some_and(String::is_empty) {
            pieces.push(String::new());
        }
        pieces.last_mut().expect("one piece at least").push(c);
        if "：，、；）·".contains(c) {
            pieces.push(String::new());
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for p in pieces.into_iter().filter(|p| !p.is_empty()) {
        match lines.last_mut() {
            Some(line) if measure(&format!("{line}{p}")) <= width => line.push_str(&p),
            _ => lines.push(p.trim_start().to_string()),
        }
    }
    lines.join("\n")
}

fn side_panel(app: &mut KvscopeApp, ui: &mut Ui) {
    if app.presentation {
        presented_narration(app, ui);
        return;
    }
    let lang = app.lang;
    let size = app.body_size();
    super::layout::scroll(ui, egui::ScrollArea::vertical(), |ui| {
        let Some(l) = app.lesson().cloned() else {
            return;
        };
        let (_, si) = app.position();
        let step = &l.file.steps[si];
        ui.label(
            RichText::new(lang.pick(step.title.get_ref()))
                .strong()
                .size(crate::style::fit(size * 1.25)),
        );
        ui.add_space(4.0);
        if app.veiled() {
            ui.add(egui::Label::new(RichText::new(super::questions::veiled_note(lang)).size(size)).wrap());
        } else {
            text::markdown(ui, &app.narration().unwrap_or_default(), size);
            let quoted = crate::lessons::quoted_facts(lang.pick(step.narration.get_ref()));
            text::quoted_sources(ui, lang, &quoted, true, size, size * 0.72);
            // The step's questions under the narration (in class mode they veiled the step first).
            if !step.questions.is_empty() {
                ui.separator();
                super::questions::questions_ui(
                    app,
                    ui,
                    size,
                    app.class_mode(),
                    Some(ui.ctx().content_rect().height() * 0.22),
                );
            }
        }
        ui.separator();
        ui.label(RichText::new(lang.t("Parameters", "参数")).strong());
        let params = app.params().cloned().unwrap_or_default();
        let views: Vec<&str> = step.views.iter().map(|v| v.get_ref().as_str()).collect();
        let idle = l.kind.idle_params(&params, &views);
        for prm in &l.file.params {
            let id = prm.id.get_ref();
            // A slider that does not apply to what the step shows is disabled, and says why on hover.
            let why = idle.iter().find(|(i, _)| *i == id.as_str()).map(|(_, w)| match lang {
                Lang::En => w[0],
                Lang::Zh => w[1],
            });
            let r = ui.scope(|ui| {
                if why.is_some() {
                    ui.disable();
                }
                let cur = crate::lessons::get(&params, id, prm.default_value());
                let label = lang.pick(prm.label.get_ref()).to_string();
                let allowed = crate::lessons::allowed_values(&l, id, &params);
                let mut changed = None;
                if prm.kind == crate::lesson_file::ParamKind::Bool {
                    let mut on = cur != 0;
                    if ui
                        .checkbox(&mut on, RichText::new(label).size(crate::style::fit(size * 0.9)))
                        .changed()
                    {
                        app.set_param(id, i64::from(on));
                    }
                    return;
                }
                if prm.kind == crate::lesson_file::ParamKind::Model {
                    if let Some(v) = model_param(ui, lang, &label, cur, (prm.lo(), prm.hi()), size) {
                        app.set_param(id, v);
                    }
                    return;
                }
                if prm.kind == crate::lesson_file::ParamKind::Text {
                    if let Some(v) = text_param(ui, lang, id, &label, cur, size) {
                        app.set_param(id, v);
                    }
                    return;
                }
                let label_id = ui.label(RichText::new(label).size(crate::style::fit(size * 0.9))).id;
                ui.scope(|ui| {
                    ui.spacing_mut().slider_width = (ui.available_width() - 80.0).max(60.0);
                    match &allowed {
                        Some(vals) => {
                            let mut idx = vals.iter().position(|v| *v == cur).unwrap_or(0);
                            let r = ui
                                .add(
                                    egui::Slider::new(&mut idx, 0..=vals.len() - 1)
                                        .custom_formatter(|i, _| {
                                            vals.get(i as usize).map_or(String::new(), |v| v.to_string())
                                        })
                                        .custom_parser(|t| {
                                            let v: i64 = t.trim().parse().ok()?;
                                            vals.iter().position(|x| *x == v).map(|i| i as f64)
                                        }),
                                )
                                .labelled_by(label_id);
                            if r.changed() {
                                changed = vals.get(idx).copied();
                            }
                        }
                        None => {
                            let mut v = cur;
                            let r = ui
                                .add(
                                    egui::Slider::new(&mut v, prm.lo()..=prm.hi())
                                        .step_by(prm.step as f64)
                                        .logarithmic(prm.hi() - prm.lo().max(1) >= 256),
                                )
                                .labelled_by(label_id);
                            if r.changed() {
                                changed = Some(v);
                            }
                        }
                    }
                });
                if let Some(v) = changed {
                    app.set_param(id, v);
                }
            });
            if let Some(w) = why {
                r.response.on_hover_text(w);
            }
        }
        // The reason once, in words, under the greyed sliders (hover repeats it on each).
        if let Some((_, w)) = idle.first() {
            ui.label(
                RichText::new(match lang {
                    Lang::En => w[0],
                    Lang::Zh => w[1],
                })
                .small()
                .color(style::muted(ui.visuals())),
            );
        }
        if ui
            .button(lang.t("Reset to the lesson's defaults", "恢复默认参数"))
            .clicked()
        {
            for prm in &l.file.params {
                app.set_param(prm.id.get_ref(), prm.default_value());
            }
        }
        let mut numbers = !app.widgets.heat.hide_numbers;
        if ui
            .checkbox(
                &mut numbers,
                RichText::new(lang.t("Numbers in heatmap cells", "在热力图格子中显示数值"))
                    .size(crate::style::fit(size * 0.9)),
            )
            .changed()
        {
            app.widgets.heat.hide_numbers = !numbers;
        }
        ui.separator();
        ui.label(RichText::new(lang.t("Backend", "计算后端")).strong());
        for (kind, st) in app.backend_statuses() {
            let ok = st.is_ok();
            let sel = app.active_backend() == kind;
            let r = ui.add_enabled(ok, egui::RadioButton::new(sel, kind.name()));
            if r.clicked() {
                app.choose_backend(kind);
            }
            let (txt, color) = match st {
                Ok(dev) => (crate::ui::text::device_text(lang, &dev), style::muted(ui.visuals())),
                Err(why) => (
                    format!(
                        "{}: {}",
                        lang.t("unavailable", "不可用"),
                        crate::ui::text::backend_reason(lang, &why)
                    ),
                    style::warn(ui.visuals()),
                ),
            };
            ui.label(RichText::new(txt).small().color(color));
        }
        if let Some(n) = app.fallback_in(lang) {
            ui.label(RichText::new(n).small().color(style::warn(ui.visuals())));
        }
    });
}

fn central(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    if !app.load_errors().is_empty() {
        ui.heading(lang.t("A lesson file has problems", "课程文件有问题"));
        for e in app.load_errors() {
            ui.label(
                RichText::new(e.to_string())
                    .monospace()
                    .color(style::fail(ui.visuals())),
            );
        }
        ui.label(lang.t(
            "Fix the file and restart kvscope (or run `kvscope lessons check DIR`).",
            "修改文件后重新启动 kvscope（或运行 `kvscope lessons check DIR`）。",
        ));
        return;
    }
    let Some(l) = app.lesson().cloned() else {
        ui.label(lang.t("No lessons.", "没有课程。"));
        return;
    };
    if let Some(e) = app.error() {
        ui.label(
            RichText::new(format!(
                "{}: {e}",
                lang.t("This setting cannot be computed", "此参数组合无法计算")
            ))
            .color(style::fail(ui.visuals())),
        );
        ui.label(lang.t("Change a slider to continue.", "请调整滑块后继续。"));
        return;
    }
    let Some(out) = app.output().cloned() else {
        let hint = app.computing_hint();
        ui.centered_and_justified(|ui| ui.label(RichText::new(hint).slant()));
        return;
    };
    app.draw_views(ui, &l, &out);
}

/// A text parameter: a list of the texts (built-in and typed so far) and a field to type a new one,
/// used when Enter is pressed or the field loses focus. Returns the chosen text's id when it changed.
/// A model switch (`kind = "model"`): one radio button per model in `lo..=hi`; a model that cannot run
/// here is greyed, with what is missing and the command that fetches it.
fn model_param(ui: &mut Ui, lang: Lang, label: &str, cur: i64, (lo, hi): (i64, i64), size: f32) -> Option<i64> {
    use crate::model::choice::Choice;
    let mut chosen = None;
    ui.label(RichText::new(label).size(crate::style::fit(size * 0.9)));
    for c in Choice::ALL.into_iter().filter(|c| (lo..=hi).contains(&c.value())) {
        let ok = c.available();
        let [en, zh] = c.label();
        let r = ui.add_enabled(
            ok.is_ok(),
            egui::RadioButton::new(
                cur == c.value(),
                RichText::new(lang.t(en, zh)).size(crate::style::fit(size * 0.9)),
            ),
        );
        if r.clicked() && cur != c.value() {
            chosen = Some(c.value());
        }
        if let Err(why) = ok {
            ui.label(
                RichText::new(format!("{}: {why}", lang.t("unavailable", "不可用")))
                    .small()
                    .color(style::warn(ui.visuals())),
            );
        }
    }
    chosen
}

fn text_param(ui: &mut Ui, lang: Lang, id: &str, label: &str, cur: i64, size: f32) -> Option<i64> {
    use crate::model::texts;
    let mut chosen = None;
    let label_id = ui.label(RichText::new(label).size(crate::style::fit(size * 0.9))).id;
    let mut sel = cur;
    let combo = egui::ComboBox::from_id_salt(("text-param", id))
        .width(ui.available_width() - 8.0)
        // The whole text (at most `texts::MAX_BYTES`), wrapped, not elided.
        .wrap_mode(egui::TextWrapMode::Wrap)
        .selected_text(texts::get(cur))
        .show_ui(ui, |ui| {
            for i in 0..texts::count() as i64 {
                ui.selectable_value(&mut sel, i, texts::get(i));
            }
        });
    combo.response.labelled_by(label_id);
    if sel != cur {
        chosen = Some(sel);
    }
    let buf_id = ui.make_persistent_id(("text-param-typed", id));
    let mut typed: String = ui.data_mut(|d| d.get_temp::<String>(buf_id)).unwrap_or_default();
    let r = ui
        .add(
            egui::TextEdit::singleline(&mut typed)
                .desired_width(ui.available_width() - 8.0)
                .hint_text(lang.t("or type your own text, then Enter", "或输入自己的文本，按回车")),
        )
        .labelled_by(label_id);
    if r.lost_focus() && !typed.trim().is_empty() {
        chosen = texts::intern(&typed).filter(|v| *v != cur).or(chosen);
    }
    ui.data_mut(|d| d.insert_temp(buf_id, typed));
    chosen
}
