//! The kernel panel's exercise tab (issue #59): one of the lesson's kernel exercises
//! (`crate::exercises`), its hint, an editor holding the WGSL kernel with the exercise's region blanked,
//! and Run, which grades the edit against the f64 reference (natively in a child process, as an edit may
//! never end; in the browser on a WebGPU device of its own, raced by a timer):
//! pass or fail, the largest error, compile errors at their line and column (the line is marked in the
//! editor), and a map of where the output is wrong. "Show solution" puts the shipped kernel in the
//! editor, unless the lesson file turns it off (`show_solutions = false`, for an exam).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};

use eframe::egui::{self, Color32, RichText, Ui, text::LayoutJob};

use super::ViewCtx;
use crate::compute::Backend;
use crate::exercises::{self, Exercise, Grade};
use crate::style;
use crate::ui::text::Lang;

/// What a grade brings back: the grade, and (in the browser) the text it graded and the device it
/// graded it on.
type Graded = (Grade, Option<(String, Arc<dyn Backend>)>);

/// How long a grade may take before its child is stopped (in the browser: before it stops waiting).
const GRADE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The exercise tab's state: which exercise is open, each one's text as edited, and its last grade.
#[derive(Default)]
pub struct ExerciseState {
    /// The open exercise (None: the panel shows the kernel source).
    pub open: Option<String>,
    /// Each exercise's text as the student left it.
    pub text: HashMap<String, String>,
    /// Each exercise's last grade.
    pub grade: HashMap<String, Grade>,
    /// A grade on its way, for this exercise (with, in the browser, the device that graded it).
    running: Option<(String, Receiver<Graded>)>,
    /// The device the last grade ran the student's kernel on, with the exercise and the text it graded
    /// (the browser's, for "Run the lesson on my kernel": it cannot open one without awaiting).
    graded: Option<(String, String, Arc<dyn Backend>)>,
    /// The kvscope executable that grades (None: [`exercises::grader_exe`]; a test sets its own, as its
    /// executable is not kvscope).
    pub grader: Option<std::path::PathBuf>,
    /// The student's kernel, on a wgpu device of its own, that the lesson's views run instead of the
    /// shipped kernels ("Run the lesson on my kernel"), with the exercise it is for.
    edited: Option<(String, Arc<dyn Backend>)>,
    /// The views must compute again (the student's kernel came or went).
    changed: bool,
    /// Where this frame drew the panel's buttons ("run", "solution", "mine": running the lesson on the
    /// student's kernel), for the browser test to click.
    pub buttons: HashMap<&'static str, egui::Rect>,
    /// The exercise whose editor is scrolled to its region when it opens, and for how many frames so
    /// far (the first frames still lay the editor out).
    scrolled: Option<(String, u8)>,
}

impl ExerciseState {
    /// Open exercise `id` (its text as left, else the blank).
    pub fn open(&mut self, id: &str) {
        self.open = Some(id.to_string());
    }

    /// Put `text` in exercise `id`'s editor.
    pub fn set_text(&mut self, id: &str, text: String) {
        self.text.insert(id.to_string(), text);
    }

    /// Grade exercise `id`'s text: in a thread that waits for the child (`wait`: here, before returning,
    /// as a headless render does); in the browser, in a task beside the frames.
    pub fn run(&mut self, x: &Exercise, zh: bool, wait: bool) {
        let text = self.text.entry(x.id.clone()).or_insert_with(|| x.blanked(zh)).clone();
        let (tx, rx) = channel();
        #[cfg(not(target_arch = "wasm32"))]
        {
            let id = x.id.clone();
            let exe = self.grader.clone().unwrap_or_else(exercises::grader_exe);
            let job = move || {
                let _ = tx.send((exercises::grade_in_child(&exe, &id, &text, GRADE_TIMEOUT), None));
            };
            if wait {
                job();
            } else {
                std::thread::spawn(job);
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = wait;
            let x = x.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let timer = crate::ui::web::sleep_ms(GRADE_TIMEOUT.as_millis() as i32);
                let (g, b) = x.grade_web(&text, &exercises::HIDDEN_SEEDS, timer).await;
                let _ = tx.send((g, b.map(|b| (text, b as Arc<dyn Backend>))));
            });
        }
        self.running = Some((x.id.clone(), rx));
        self.poll();
    }

    /// The backend the lesson's views run while the student's kernel is in use.
    pub fn edited_backend(&self) -> Option<Arc<dyn Backend>> {
        self.edited.as_ref().map(|(_, b)| b.clone())
    }

    /// Which exercise's kernel the views run, if any.
    pub fn edited_exercise(&self) -> Option<&str> {
        self.edited.as_ref().map(|(id, _)| id.as_str())
    }

    /// Run the lesson's views on exercise `x`'s text as edited: a wgpu device with the edited file in
    /// place of the shipped one (only after a grade showed it compiles and ends: it ran on every shape
    /// the suites try). Natively a device opens here; the browser keeps the one that graded this text.
    pub fn use_edited(&mut self, x: &Exercise) -> Result<(), String> {
        let text = self.text.get(&x.id).cloned().unwrap_or_else(|| x.blanked(false));
        #[cfg(not(target_arch = "wasm32"))]
        let b: Arc<dyn Backend> = Arc::new(crate::compute::wgpu::WgpuBackend::open_edited(
            None,
            &[(x.file.clone(), text)],
            None,
        )?);
        #[cfg(target_arch = "wasm32")]
        let b = match &self.graded {
            Some((id, graded, b)) if *id == x.id && *graded == text => b.clone(),
            _ => return Err("the text changed since it was graded: run and grade it again".to_string()),
        };
        self.edited = Some((x.id.clone(), b));
        self.changed = true;
        Ok(())
    }

    /// Back to the shipped kernels.
    pub fn clear_edited(&mut self) {
        if self.edited.take().is_some() {
            self.changed = true;
        }
    }

    /// Whether the views must compute again, once.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Whether a grade is on its way.
    pub fn grading(&self) -> bool {
        self.running.is_some()
    }

    /// Take a grade that has arrived.
    pub fn poll(&mut self) {
        if let Some((id, rx)) = &self.running
            && let Ok((g, device)) = rx.try_recv()
        {
            self.graded = device.map(|(text, b)| (id.clone(), text, b));
            self.grade.insert(id.clone(), g);
            self.running = None;
        }
    }
}

/// The lesson's exercises (those whose `lesson` is its id).
pub fn lesson_exercises(lesson: &str) -> Vec<&'static Exercise> {
    exercises::all()
        .unwrap_or_default()
        .iter()
        .filter(|x| x.lesson == lesson)
        .collect()
}

/// The exercise tab for exercise `x`.
pub fn exercise_panel(cx: &mut ViewCtx, ui: &mut Ui, x: &Exercise) {
    let lang = cx.lang;
    let zh = lang == Lang::Zh;
    let size = cx.size;
    let state = &mut cx.widgets.kernel.exercise;
    state.poll();
    state.buttons.clear();
    if state.grading() {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(100));
    }
    let pick = |t: &crate::lesson_file::Text| if zh { t.zh.clone() } else { t.en.clone() }.unwrap_or_default();
    let kind = if x.bug.is_some() {
        lang.t("Find the bug", "找出 bug")
    } else {
        lang.t("Exercise", "练习")
    };
    ui.label(
        RichText::new(format!("{kind}: {}", pick(&x.title)))
            .strong()
            .size(style::fit(size)),
    );
    crate::ui::text::markdown(ui, &pick(&x.hint), size * 0.9);
    let graded_by = x.ops.join(", ");
    ui.label(
        RichText::new(match lang {
            Lang::Zh => format!(
                "kernels/{} · 由 {graded_by} 的检查在 {} 个隐藏种子上对照 CPU f64 参考结果评分",
                x.file,
                exercises::HIDDEN_SEEDS.len()
            ),
            _ => format!(
                "kernels/{} · graded by the checks of {graded_by} against the CPU f64 reference on {} hidden seeds",
                x.file,
                exercises::HIDDEN_SEEDS.len()
            ),
        })
        .size(style::fit(size * 0.8))
        .color(style::muted(ui.visuals())),
    );
    let show_solutions = cx.lesson.file.show_solutions.unwrap_or(true);
    let mut run = false;
    ui.horizontal_wrapped(|ui| {
        let busy = state.grading();
        let label = if busy {
            lang.t("Grading…", "评分中…")
        } else {
            lang.t("Run and grade", "运行并评分")
        };
        let b = ui.add_enabled(!busy, egui::Button::new(RichText::new(label).size(style::fit(size))));
        state.buttons.insert("run", b.rect);
        if b.clicked() {
            run = true;
        }
        if ui
            .button(RichText::new(lang.t("Start again", "重新开始")).size(style::fit(size * 0.9)))
            .clicked()
        {
            state.set_text(&x.id, x.blanked(zh));
            state.grade.remove(&x.id);
        }
        if show_solutions {
            let b = ui.button(RichText::new(lang.t("Show solution", "显示答案")).size(style::fit(size * 0.9)));
            state.buttons.insert("solution", b.rect);
            if b.clicked() {
                state.set_text(&x.id, x.solution());
            }
        }
    });
    if run {
        state.run(x, zh, cx.sync);
    }
    let grade = state.grade.get(&x.id).cloned();
    if let Some(g) = &grade {
        grade_lines(ui, g, lang, size);
    }
    // The views on the student's kernel: once a grade shows the text compiles and ends.
    let ran = grade
        .as_ref()
        .is_some_and(|g| g.compile_errors.is_empty() && g.error.is_none());
    let mine = state.edited_exercise() == Some(x.id.as_str());
    ui.horizontal_wrapped(|ui| {
        if mine {
            ui.label(
                RichText::new(lang.t(
                    "The views show what your kernel computed (wgpu).",
                    "视图显示的是你的 kernel 算出的结果（wgpu）。",
                ))
                .size(style::fit(size * 0.85))
                .color(style::warn(ui.visuals())),
            );
            if ui
                .button(
                    RichText::new(lang.t("Back to the shipped kernels", "换回原有的 kernel"))
                        .size(style::fit(size * 0.85)),
                )
                .clicked()
            {
                state.clear_edited();
            }
        } else if ran {
            let b = ui.button(
                RichText::new(lang.t("Run the lesson on my kernel", "用我的 kernel 运行本课"))
                    .size(style::fit(size * 0.85)),
            );
            state.buttons.insert("mine", b.rect);
            if b.clicked()
                && let Err(e) = state.use_edited(x)
            {
                state.grade.entry(x.id.clone()).and_modify(|g| g.error = Some(e));
            }
        }
    });
    // The browser replays each GPU readback (`compute::wgpu::replay`) and gives up past a few hundred:
    // say before the click what the streaming lessons then show.
    #[cfg(target_arch = "wasm32")]
    if ran && !mine {
        ui.add(
            egui::Label::new(
                RichText::new(lang.t(
                    "In the browser, a lesson that streams its model through thousands of kernel calls \
                     (lessons 8–12) stops after 400 GPU round trips and says so: there the grade above is \
                     what checks your kernel; the desktop app runs those lessons on it.",
                    "在网页版中，需要上千次 kernel 调用来流式运行模型的课程（第 8–12 课）在 400 次 GPU 往返后会停下并说明原因：\
                     那里由上面的评分检查你的 kernel；桌面版可以在你的 kernel 上运行这些课程。",
                ))
                .size(style::fit(size * 0.75))
                .color(style::muted(ui.visuals())),
            )
            .wrap(),
        );
    }
    // The editor, its region in view, the lines with compile errors marked.
    let errors: Vec<usize> = grade
        .as_ref()
        .map(|g| g.compile_errors.iter().map(|e| e.line).collect())
        .unwrap_or_default();
    let frames = match &state.scrolled {
        Some((id, n)) if *id == x.id => n.saturating_add(1),
        _ => 0,
    };
    state.scrolled = Some((x.id.clone(), frames));
    let scroll = frames < 3;
    let text = state.text.entry(x.id.clone()).or_insert_with(|| x.blanked(zh));
    // Where the region starts (its BEGIN marker, a few lines above it), to scroll there when it opens.
    let marker = format!("// EXERCISE {} BEGIN", x.id);
    let region_at = text
        .find(&marker)
        .or_else(|| x.bug.as_ref().and_then(|b| text.find(&b.to)))
        .map(|i| text[..i].lines().count());
    let dark = !cx.light;
    let code_size = style::fit(size * 0.8);
    let mut layouter = |ui: &Ui, buf: &dyn egui::TextBuffer, wrap: f32| {
        // Code is not wrapped: the editor scrolls sideways.
        let _ = wrap;
        let job = code_job(buf.as_str(), &errors, code_size, dark);
        ui.fonts_mut(|f| f.layout_job(job))
    };
    // Lines are not wrapped, so line n is row n: open with the region's marker a few lines down.
    let row = ui.fonts_mut(|f| f.row_height(&egui::FontId::monospace(code_size)));
    let mut area = egui::ScrollArea::both().id_salt(("kvscope-exercise", x.id.as_str()));
    if scroll && let Some(line) = region_at {
        area = area.vertical_scroll_offset(line.saturating_sub(6) as f32 * row);
    }
    area.show(ui, |ui| {
        ui.add(
            egui::TextEdit::multiline(text)
                .code_editor()
                .desired_width(f32::INFINITY)
                .layouter(&mut layouter),
        );
    });
}

/// The grade: pass or fail with the checks and the largest error, what stopped it, the compile errors,
/// and where the first failed check is wrong.
fn grade_lines(ui: &mut Ui, g: &Grade, lang: Lang, size: f32) {
    let n = g.checks.len();
    let failed: Vec<_> = g.failed().collect();
    let (text, colour) = if !g.compile_errors.is_empty() {
        (
            lang.t("FAIL: the kernel does not compile", "未通过：kernel 无法编译")
                .to_string(),
            style::fail(ui.visuals()),
        )
    } else if let Some(e) = &g.error {
        (format!("{}: {e}", lang.t("FAIL", "未通过")), style::fail(ui.visuals()))
    } else if g.passed {
        (
            match lang {
                Lang::Zh => format!(
                    "通过：{n} 项检查全部与 CPU f64 参考结果一致，最大绝对误差 {:.1e}",
                    g.max_abs()
                ),
                _ => format!(
                    "PASS: all {n} checks match the CPU f64 reference; max abs error {:.1e}",
                    g.max_abs()
                ),
            },
            style::pass(ui.visuals()),
        )
    } else {
        (
            match lang {
                Lang::Zh => format!("未通过：{n} 项检查中 {} 项与 CPU f64 参考结果不一致", failed.len()),
                _ => format!("FAIL: {} of {n} checks differ from the CPU f64 reference", failed.len()),
            },
            style::fail(ui.visuals()),
        )
    };
    ui.add(egui::Label::new(RichText::new(text).strong().size(style::fit(size)).color(colour)).wrap());
    for e in &g.compile_errors {
        ui.add(
            egui::Label::new(
                RichText::new(match lang {
                    Lang::Zh => format!("第 {} 行第 {} 列：{}", e.line, e.column, e.message),
                    _ => format!("line {}, column {}: {}", e.line, e.column, e.message),
                })
                .monospace()
                .size(style::fit(size * 0.8))
                .color(style::fail(ui.visuals())),
            )
            .wrap(),
        );
    }
    if let Some(c) = failed.iter().find(|c| c.wrong_map.is_some())
        && let Some(m) = &c.wrong_map
    {
        let first = c
            .mismatches
            .first()
            .map(|x| match lang {
                Lang::Zh => format!("；例如 {:?} 处得到 {:.4}，应为 {:.4}", x.index, x.got, x.want),
                _ => format!("; e.g. at {:?} got {:.4}, want {:.4}", x.index, x.got, x.want),
            })
            .unwrap_or_default();
        ui.add(
            egui::Label::new(
                RichText::new(match lang {
                    Lang::Zh => format!(
                        "{} 出错的位置（最后两维 {} × {}，{} 处不一致{first}）：",
                        c.label, m.rows, m.cols, c.mismatch_count
                    ),
                    _ => format!(
                        "where {} is wrong (its last two dimensions, {} × {}; {} wrong{first}):",
                        c.label, m.rows, m.cols, c.mismatch_count
                    ),
                })
                .size(style::fit(size * 0.8)),
            )
            .wrap(),
        );
        wrong_map(ui, m, size, lang);
    }
}

/// The map of a failed check: a cell per (binned) element, filled where something is wrong.
fn wrong_map(ui: &mut Ui, m: &crate::compute::WrongMap, size: f32, lang: Lang) {
    let w = ui.available_width().min(size * 24.0);
    let cell = (w / m.map_cols.max(1) as f32).min(size * 0.9).max(3.0);
    let (rect, _) = ui.allocate_exact_size(
        egui::vec2(cell * m.map_cols as f32, cell * m.map_rows as f32),
        egui::Sense::hover(),
    );
    let p = ui.painter_at(rect);
    for (i, &n) in m.counts.iter().enumerate() {
        let (r, c) = (i / m.map_cols.max(1), i % m.map_cols.max(1));
        let cr = egui::Rect::from_min_size(
            rect.min + egui::vec2(c as f32 * cell, r as f32 * cell),
            egui::vec2(cell, cell),
        )
        .shrink(0.5);
        let fill = if n > 0 { style::REJECTED } else { style::FREE };
        p.rect_filled(cr, 0.0, style::c32(fill));
    }
    ui.horizontal_wrapped(|ui| {
        let key = |ui: &mut Ui, c: style::Rgba, t: &str| {
            let s = style::fit(size * 0.8);
            let (r, _) = ui.allocate_exact_size(egui::vec2(s, s), egui::Sense::hover());
            ui.painter().rect_filled(r, 1.0, style::c32(c));
            ui.label(RichText::new(t).size(s));
        };
        key(ui, style::REJECTED, lang.t("wrong", "错误"));
        key(ui, style::FREE, lang.t("matches the reference", "与参考结果一致"));
    });
}

/// The editor's text as a layout: monospace, comments in the comment colour, lines with compile errors
/// on the highlight colour. The text is kept exactly (the editor's cursor counts its characters).
fn code_job(text: &str, errors: &[usize], size: f32, dark: bool) -> LayoutJob {
    let c = style::code(dark);
    let font = egui::FontId::monospace(size);
    let mut job = LayoutJob::default();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bg = if errors.contains(&(i + 1)) {
            c.highlight
        } else {
            Color32::TRANSPARENT
        };
        let colour = if line.trim_start().starts_with("//") {
            c.comment
        } else {
            c.plain
        };
        job.append(
            line,
            0.0,
            egui::TextFormat {
                font_id: font.clone(),
                color: colour,
                background: bg,
                ..Default::default()
            },
        );
    }
    job
}
