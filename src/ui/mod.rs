//! The desktop app: an eframe shell around the lessons.
//!
//! How it works: [`KvscopeApp`] holds the lessons (embedded, or a teacher's folder), where the user
//! is (lesson, step, timeline position), the slider values per lesson, the language and theme, and the
//! latest computed [`Output`]. Each frame it (1) takes finished results from the [`worker::Worker`],
//! (2) handles keys, (3) submits a new job when the lesson, sliders or backend changed — the old view
//! stays on screen with a quiet "computing" hint meanwhile — and (4) draws the panels ([`shell`]):
//! navigator, the lesson's views (drawn by the lesson's own module through a [`widgets::ViewCtx`]),
//! narration and controls, status bar. [`KvscopeApp::show`] needs no eframe frame, so `kvscope
//! render` and the tests draw exactly the app's frame headlessly ([`headless`]).

mod actions;
mod backends;
pub mod fonts;
pub mod headless;
mod jobs;
pub mod layout;
pub mod lesson_ui;
mod nav;
pub mod questions;
mod shell;
pub mod text;
pub mod views;
#[cfg(all(feature = "web", target_arch = "wasm32"))]
pub mod web;
pub mod widgets;
mod window;
pub mod worker;

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use eframe::egui;

use crate::compute::{BackendKind, BackendStatus, CheckReport};
use crate::lesson_file::LessonError;
use crate::lessons::Lesson;
use crate::lessons::{Output, Params};
use text::Lang;
use widgets::{ViewCtx, WidgetState, grid, view_in};
use worker::Worker;

pub use window::{STARTUP, create, load_saved};

/// How the app is started.
#[derive(Debug, Clone, Default)]
pub struct AppConfig {
    /// A teacher's lesson folder instead of the embedded lessons.
    pub lessons_dir: Option<PathBuf>,
    /// Compute on the UI thread (tests and headless rendering: every frame is complete).
    pub sync: bool,
    /// Ignore stored state.
    pub fresh: bool,
    /// Where Ctrl+S and Ctrl+E write (`kvscope-exports` in the working folder by default).
    pub export_dir: Option<PathBuf>,
}

/// What the app keeps between runs (eframe storage).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    /// Lesson id.
    pub lesson: String,
    /// Step index.
    pub step: usize,
    /// Language.
    pub lang: Lang,
    /// Light theme instead of dark.
    pub light: bool,
    /// Slider values per lesson id.
    pub params: BTreeMap<String, Params>,
    /// The backend last chosen.
    pub backend: Option<BackendKind>,
    /// Class mode, when switched (`None`: it follows presentation mode).
    #[serde(default)]
    pub class_mode: Option<bool>,
}

const STORAGE_KEY: &str = "kvscope-state";

/// Where a backend stands.
#[derive(Clone)]
pub enum BackendSlot {
    /// Still probing.
    Probing,
    /// Probed.
    Ready(BackendStatus),
}

/// The app.
pub struct KvscopeApp {
    lessons: Vec<Arc<Lesson>>,
    load_errors: Vec<LessonError>,
    cur: usize,
    step: usize,
    /// Language.
    pub lang: Lang,
    light: bool,
    /// Presentation mode (F5 / F).
    pub presentation: bool,
    /// Presentation mode pages a narration that does not fit its panel: the page shown, and how many the
    /// last frame laid out (the presenter's → and ← step through them before the steps).
    narration_page: usize,
    narration_pages: usize,
    /// The same for the views: a table too long for the slide pages its rows (`widgets::table`), and the
    /// presenter's keys step through its pages after the narration's.
    view_page: usize,
    view_pages: usize,
    /// Class mode switched on or off (`Q`); `None` follows presentation mode (`questions`).
    class_mode: Option<bool>,
    /// What was answered on each (lesson id, step) with questions.
    answers: HashMap<(String, usize), crate::lessons::questions::StepAnswers>,
    /// Where the first question's answer box was drawn last (the browser test clicks it).
    pub answer_box: Option<egui::Rect>,
    params: BTreeMap<String, Params>,
    cursor: BTreeMap<String, usize>,
    backends: Vec<(BackendKind, BackendSlot)>,
    probe_rx: Option<Receiver<BackendStatus>>,
    active: BackendKind,
    fallback_note: Option<Fallback>,
    worker: Option<Worker>,
    sync: bool,
    generation: u64,
    submitted: Option<(String, Params, BackendKind)>,
    /// When the newest job was submitted (the "computing…" hint counts the seconds since).
    submitted_at: web_time::Instant,
    output: Option<(u64, String, Arc<dyn Output>)>,
    /// The launches the backend reported while computing `output` (the kernel panel's "what ran").
    launches: Vec<crate::compute::launch::Launch>,
    error: Option<(String, String)>,
    reports: Option<(u64, Vec<CheckReport>)>,
    compute_ms: f64,
    /// The backend (and device) that computed the shown output.
    shown_on: Option<(BackendKind, String)>,
    /// The shared widgets' state (heatmap zoom and uploads, the kernel panel).
    pub widgets: WidgetState,
    /// Each lesson kind's own UI state, by kind name.
    lesson_state: HashMap<&'static str, Box<dyn Any + Send>>,
    status: Option<String>,
    pending_png: bool,
    headless: Option<Result<headless::Headless, String>>,
    frames: u64,
    /// The newest generation whose result (or error) arrived.
    done: u64,
    export_dir: PathBuf,
    smoke_steps: usize,
    /// A named timeline point the current step opens at, until the result that locates it arrives.
    pending_point: Option<String>,
    /// The lesson's own area in the last frame: the narration panel and the views, in points.
    lesson_area: Option<egui::Rect>,
    /// What happened to the jobs sent to the worker.
    jobs: JobStats,
}

/// What happened to the jobs the app sent to its worker: how many were submitted, how many results came
/// back, and how many of those had gone stale (a newer job was submitted before they arrived) or were
/// dropped (a newer result had already arrived). Jobs submitted but never computed were superseded in the
/// worker's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobStats {
    /// Jobs sent.
    pub submitted: u64,
    /// Results (or errors) that came back.
    pub arrived: u64,
    /// Results that arrived after a newer job had been submitted (shown, if newer than what is shown,
    /// until the newer one arrives).
    pub stale: u64,
    /// Results older than one already shown: dropped.
    pub dropped: u64,
}

impl JobStats {
    /// Jobs that were never computed: a newer job replaced them in the queue (or is still computing).
    pub fn superseded(&self) -> u64 {
        self.submitted.saturating_sub(self.arrived)
    }
}

impl KvscopeApp {
    /// A new app. `saved` is the stored state, if any.
    pub fn new(config: &AppConfig, saved: Option<Saved>, wake: Option<Box<dyn Fn() + Send + Sync>>) -> Self {
        let (lessons, load_errors) = match &config.lessons_dir {
            Some(dir) => match crate::lessons::load_dir(dir) {
                Ok(l) => (l, Vec::new()),
                Err(e) => (Vec::new(), e),
            },
            None => match crate::lessons::load_embedded() {
                Ok(l) => (l, Vec::new()),
                Err(e) => (Vec::new(), e),
            },
        };
        let lessons: Vec<Arc<Lesson>> = lessons.into_iter().map(Arc::new).collect();
        let saved = if config.fresh { None } else { saved };
        let mut app = Self {
            lessons,
            load_errors,
            cur: 0,
            step: 0,
            lang: Lang::En,
            light: false,
            presentation: false,
            narration_page: 0,
            narration_pages: 1,
            view_page: 0,
            view_pages: 1,
            class_mode: None,
            answers: HashMap::new(),
            answer_box: None,
            params: BTreeMap::new(),
            cursor: BTreeMap::new(),
            backends: Vec::new(),
            probe_rx: None,
            active: BackendKind::Cpu,
            fallback_note: None,
            worker: None,
            sync: config.sync,
            generation: 0,
            submitted: None,
            submitted_at: web_time::Instant::now(),
            output: None,
            launches: Vec::new(),
            error: None,
            reports: None,
            compute_ms: 0.0,
            shown_on: None,
            widgets: WidgetState::default(),
            lesson_state: HashMap::new(),
            status: None,
            pending_png: false,
            headless: None,
            frames: 0,
            done: 0,
            smoke_steps: 0,
            pending_point: None,
            lesson_area: None,
            jobs: JobStats::default(),
            export_dir: config
                .export_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("kvscope-exports")),
        };
        // Backends: fast probes run here; slow ones (driver loading, NVRTC compilation) run off the UI
        // thread, or right here when computing synchronously.
        let mut wanted = None;
        if let Some(s) = saved {
            app.lang = s.lang;
            app.light = s.light;
            app.class_mode = s.class_mode;
            app.params = s.params;
            wanted = s.backend;
            if let Some(i) = app.lessons.iter().position(|l| l.id() == s.lesson) {
                app.cur = i;
                app.step = s.step.min(app.lessons[i].file.steps.len().saturating_sub(1));
            }
        }
        let mut slow = Vec::new();
        for kind in BackendKind::ALL {
            let slot = if kind.info().slow_probe && !config.sync {
                slow.push(kind);
                BackendSlot::Probing
            } else {
                BackendSlot::Ready(crate::compute::probe(kind))
            };
            app.backends.push((kind, slot));
        }
        if !config.sync {
            let (tx, rx) = std::sync::mpsc::channel();
            let wake2: Option<Arc<dyn Fn() + Send + Sync>> = wake.map(Arc::from);
            let w3 = wake2.clone();
            // The browser has no threads: the slow probes run here (the web build's are quick: the CUDA
            // backends are not in it, and WebGPU was opened before the app started).
            #[cfg(target_arch = "wasm32")]
            let spawn = |f: Box<dyn FnOnce()>| f();
            #[cfg(not(target_arch = "wasm32"))]
            let spawn = |f: Box<dyn FnOnce() + Send>| drop(std::thread::spawn(f));
            spawn(Box::new(move || {
                for kind in slow {
                    let _ = tx.send(crate::compute::probe(kind));
                    if let Some(w) = &w3 {
                        w();
                    }
                }
            }));
            app.probe_rx = Some(rx);
            app.worker = Some(Worker::spawn(move || {
                if let Some(w) = &wake2 {
                    w();
                }
            }));
        }
        if let Some(k) = wanted {
            app.choose_backend(k);
        }
        app.ensure_params();
        app
    }

    /// Replace the lessons with `loaded` (a teacher's files, dropped on the web page as `--lessons DIR`
    /// gives them natively); on errors the app shows them in place of the lessons.
    pub fn replace_lessons(&mut self, loaded: Result<Vec<Lesson>, Vec<LessonError>>) {
        let (lessons, errors) = match loaded {
            Ok(l) => (l, Vec::new()),
            Err(e) => (Vec::new(), e),
        };
        self.lessons = lessons.into_iter().map(Arc::new).collect();
        self.load_errors = errors;
        self.cur = 0;
        self.step = 0;
        self.output = None;
        self.submitted = None;
        self.error = None;
        self.reports = None;
        self.launches.clear();
        self.ensure_params();
    }

    /// Compute the current step again in the next frame, though no parameter changed (a model that was
    /// missing has arrived).
    pub fn recompute(&mut self) {
        self.submitted = None;
    }

    /// The lessons.
    pub fn lessons(&self) -> &[Arc<Lesson>] {
        &self.lessons
    }

    /// Lesson-file errors (shown in place of the lessons).
    pub fn load_errors(&self) -> &[LessonError] {
        &self.load_errors
    }

    /// The current lesson.
    pub fn lesson(&self) -> Option<&Arc<Lesson>> {
        self.lessons.get(self.cur)
    }

    /// (lesson index, step index).
    pub fn position(&self) -> (usize, usize) {
        (self.cur, self.step)
    }

    fn ensure_params(&mut self) {
        for l in &self.lessons {
            let p = self.params.entry(l.id().to_string()).or_default();
            crate::lessons::normalize(l, p);
        }
    }

    /// The current lesson's slider values.
    pub fn params(&self) -> Option<&Params> {
        self.lesson().and_then(|l| self.params.get(l.id()))
    }

    /// Set a slider of the current lesson (clamped and made consistent like a slider drag); an id the
    /// lesson does not have is ignored.
    pub fn set_param(&mut self, id: &str, value: i64) {
        let Some(l) = self.lesson().cloned() else { return };
        if !l.file.params.iter().any(|p| p.id.get_ref() == id) {
            return;
        }
        let p = self.params.entry(l.id().to_string()).or_default();
        p.insert(id.to_string(), value);
        crate::lessons::normalize(&l, p);
    }

    /// The timeline position of the current lesson.
    pub fn cursor(&self) -> usize {
        self.lesson()
            .and_then(|l| self.cursor.get(l.id()).copied())
            .unwrap_or(0)
    }

    /// Move the timeline (clamped by the views to what exists).
    pub fn set_cursor(&mut self, v: usize) {
        self.pending_point = None;
        if let Some(l) = self.lesson() {
            let id = l.id().to_string();
            self.cursor.insert(id, v);
        }
    }

    /// The latest output for the current lesson, if it has arrived.
    pub fn output(&self) -> Option<&Arc<dyn Output>> {
        let l = self.lesson()?;
        self.output
            .as_ref()
            .filter(|(_, id, _)| id == l.id())
            .map(|(_, _, o)| o)
    }

    /// The verification reports of the shown output.
    pub fn reports(&self) -> Option<&[CheckReport]> {
        let (g, _, _) = self.output.as_ref()?;
        self.reports
            .as_ref()
            .filter(|(rg, _)| rg == g)
            .map(|(_, r)| r.as_slice())
    }

    /// The lesson's own area in the last frame drawn (the narration panel and the views, without the
    /// lesson list, the top bar and the status bar), in points: what the per-lesson snapshots crop to.
    pub fn lesson_area(&self) -> Option<egui::Rect> {
        self.lesson_area
    }

    pub(crate) fn set_lesson_area(&mut self, r: egui::Rect) {
        self.lesson_area = Some(r);
    }

    /// What happened to the jobs sent to the worker so far.
    pub fn job_stats(&self) -> JobStats {
        self.jobs
    }

    /// The current step's narration, its `{placeholders}` filled from the lesson's result.
    pub fn narration(&self) -> Option<String> {
        let l = self.lesson()?;
        let template = self.lang.pick(l.file.steps.get(self.step)?.narration.get_ref());
        let mut values = l.kind.values(l, self.output().map(|o| o.as_ref()));
        if let Some((kind, device)) = &self.shown_on {
            values.push(("ran_on", text::ran_on(*kind, device, self.lang)));
        }
        let missing = if self.output().is_some() && !self.computing() {
            "—"
        } else {
            "…"
        };
        Some(crate::lessons::fill(
            template,
            &values,
            missing,
            self.lang == text::Lang::Zh,
        ))
    }

    /// What is kept between runs.
    pub fn saved(&self) -> Saved {
        Saved {
            lesson: self.lesson().map(|l| l.id().to_string()).unwrap_or_default(),
            step: self.step,
            lang: self.lang,
            light: self.light,
            params: self.params.clone(),
            backend: Some(self.active),
            class_mode: self.class_mode,
        }
    }

    /// Milliseconds the last computation took.
    pub fn compute_ms(&self) -> f64 {
        self.compute_ms
    }

    /// The last status message (exports, errors).
    pub fn status_message(&self) -> Option<&str> {
        self.status.as_deref()
    }

    /// Why the chosen backend is not the one running, if it is not (English).
    pub fn fallback(&self) -> Option<String> {
        self.fallback_in(crate::ui::text::Lang::En)
    }

    /// The same in `lang`.
    pub fn fallback_in(&self, lang: crate::ui::text::Lang) -> Option<String> {
        self.fallback_note.as_ref().map(|f| f.text(lang))
    }

    /// Whether results are computed on the UI thread (tests, headless rendering).
    pub fn is_sync(&self) -> bool {
        self.sync
    }

    /// Body text size (larger in presentation mode).
    pub fn body_size(&self) -> f32 {
        if self.presentation {
            22.0
        } else {
            self.windowed_body_size()
        }
    }

    /// The narration's body text size in the windowed mode: presentation mode draws nothing smaller.
    pub fn windowed_body_size(&self) -> f32 {
        14.5
    }

    /// The UI state lesson kind `kind` keeps (created on first use), e.g. lesson 4's bandwidth sweep.
    pub fn lesson_state<T: Default + Send + 'static>(&mut self, kind: &'static str) -> &mut T {
        let st = self.lesson_state.entry(kind).or_insert_with(|| Box::new(()));
        if !st.is::<T>() {
            *st = Box::new(T::default());
        }
        st.downcast_mut::<T>().expect("just set")
    }

    /// Draw the current step's views of `out` (and the lesson's timeline bar) into the central area.
    fn draw_views(&mut self, ui: &mut egui::Ui, l: &Arc<Lesson>, out: &Arc<dyn Output>) {
        if self.veiled() {
            // Class mode: the questions instead of the views until they are answered or revealed (the
            // timeline bar too, which names the event the step is about).
            let rect = ui.available_rect_before_wrap();
            self.draw_veil(ui, rect);
            ui.allocate_rect(rect, egui::Sense::hover());
            return;
        }
        let step = &l.file.steps[self.step];
        let kind = lesson_ui::ui_of(l.kind);
        let size = self.body_size();
        let runner = self.running_backend();
        let params = self.params.get(l.id()).cloned().unwrap_or_default();
        let mut cx = ViewCtx {
            lang: self.lang,
            size,
            presentation: self.presentation,
            light: self.light,
            sync: self.sync,
            lesson: l,
            params: &params,
            highlight: step.highlight.as_ref(),
            step_views: &step.views,
            backend: self.active,
            runner,
            launches: &self.launches,
            cursor: self.cursor.entry(l.id().to_string()).or_insert(0),
            widgets: &mut self.widgets,
            state: self.lesson_state.entry(kind.name()).or_insert_with(|| Box::new(())),
        };
        // Children never grow the central panel: each view gets a fixed rectangle and is clipped to it.
        let mut rect = ui.available_rect_before_wrap();
        if kind.timeline_on(&cx) {
            // One row high, or more when a narrow view wraps the bar (up to three rows).
            let bar_h = size + 14.0;
            let bar = egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), 3.0 * bar_h));
            let mut child = ui.new_child(egui::UiBuilder::new().max_rect(bar));
            child.set_clip_rect(bar);
            // The presenter's timeline controls at the text floor.
            crate::ui::widgets::raise_text_styles(&mut child, crate::style::text_floor());
            kind.timeline(&mut cx, &mut child, out.as_ref());
            rect.min.y += child.min_rect().height().max(bar_h) + 4.0;
        }
        // In presentation mode a step may put its views on pages of their own (`present_pages`).
        let names: Vec<&str> = match step.present_pages.as_ref().filter(|_| self.presentation) {
            Some(pages) => {
                let pages = pages.get_ref();
                let page = pages.get(crate::style::view_page(pages.len()));
                page.into_iter().flatten().map(String::as_str).collect()
            }
            None => step.views.iter().map(|v| v.get_ref().as_str()).collect(),
        };
        let rects = match kind.anchor_view() {
            Some(anchor) => crate::ui::widgets::anchored(rect, &names, anchor),
            None => grid(rect, names.len()),
        };
        for (name, r) in names.iter().zip(rects) {
            view_in(ui, r, |ui| kind.show(&mut cx, ui, out.as_ref(), name));
        }
        ui.allocate_rect(ui.available_rect_before_wrap(), egui::Sense::hover());
    }

    /// Whether the light theme is on.
    pub fn light(&self) -> bool {
        self.light
    }

    /// Whether the app keeps its state in `light` theme.
    pub fn set_light(&mut self, light: bool) {
        self.light = light;
    }
}

/// Why the chosen backend is not the one running.
#[derive(Debug, Clone)]
pub enum Fallback {
    /// It is unavailable, for this reason; the app runs on `running`.
    Unavailable {
        /// The backend asked for.
        chosen: BackendKind,
        /// Why it cannot run (English, from the compute layer).
        why: String,
        /// The backend still in use.
        running: BackendKind,
    },
    /// It is still being probed.
    Probing(BackendKind),
}

impl Fallback {
    /// In `lang`.
    pub fn text(&self, lang: crate::ui::text::Lang) -> String {
        use crate::ui::text::{Lang, backend_reason};
        match (self, lang) {
            (Fallback::Unavailable { chosen, why, running }, Lang::Zh) => format!(
                "{} 不可用（{}）；改用 {} 运行",
                chosen.name(),
                backend_reason(lang, why),
                running.name()
            ),
            (Fallback::Unavailable { chosen, why, running }, _) => {
                format!(
                    "{} is unavailable ({why}); running on {}",
                    chosen.name(),
                    running.name()
                )
            }
            (Fallback::Probing(k), Lang::Zh) => format!("{} 仍在探测中", k.name()),
            (Fallback::Probing(k), _) => format!("{} is still being probed", k.name()),
        }
    }
}
