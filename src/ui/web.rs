//! The web build's entry point (feature `web`, target wasm32): the page calls [`start`] with its canvas.
//!
//! What it adds around the desktop app:
//! - WebGPU for the compute backend is opened first (awaited), so the backend list is complete when the
//!   app starts; without WebGPU the lessons compute on the CPU backend and the backend list says why;
//! - the URL's fragment is the app's state: `#lesson=paged-cache&step=5&block_size=4` opens that lesson,
//!   step (counted from 1, as `kvscope render --step`) and slider values (`&quiz=1` turns class mode on,
//!   `&quiz=0` off: the questions veil their steps), and the fragment follows the
//!   app as a student steps, so the address bar always holds a link to what is on screen;
//! - exports become downloads: Ctrl+S captures the frame through eframe and downloads a PNG, Ctrl+E
//!   downloads the step's `.npy` arrays and `manifest.json` as one zip;
//! - lesson files dropped on the page replace the lessons, as `--lessons DIR` does natively (errors name
//!   the file, line and column, in place of the lessons);
//! - SmolLM2's model file dropped on the page (`SmolLM2-135M-Instruct.Q4_1.gguf`, 98 MB) is checked as
//!   natively (structure, then the pinned SHA-256) and loaded, so the model switch can run it here too;
//! - `window.__kvscope` reports what the page shows (first frame, lesson, step, backend, errors) for the
//!   browser tests (`scripts/web-test.py`), and [`check`] runs the cross-backend check suite on WebGPU.

use std::sync::Arc;

use eframe::egui;
use wasm_bindgen::prelude::*;

use super::{AppConfig, KvscopeApp};
use crate::compute::{self, BackendKind};

/// Milliseconds since the page started (`performance.now()`).
fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// A future that is ready after `ms` milliseconds (`setTimeout`): the timer an exercise's grade is
/// raced against.
pub(crate) async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Set `window.__kvscope[key] = value`.
fn report(key: &str, value: JsValue) {
    let Some(w) = web_sys::window() else { return };
    let state = js_sys::Reflect::get(&w, &"__kvscope".into())
        .ok()
        .filter(|v| v.is_object())
        .unwrap_or_else(|| {
            let o: JsValue = js_sys::Object::new().into();
            let _ = js_sys::Reflect::set(&w, &"__kvscope".into(), &o);
            o
        });
    let _ = js_sys::Reflect::set(&state, &key.into(), &value);
}

fn log(line: &str) {
    web_sys::console::log_1(&line.into());
}

/// Start the app on the canvas with id `canvas_id`.
#[wasm_bindgen]
pub async fn start(canvas_id: String) -> Result<(), JsValue> {
    let t0 = now_ms();
    // eframe's and wgpu's warnings and errors go to the console (the browser tests fail on an error).
    let _ = eframe::WebLogger::init(log::LevelFilter::Warn);
    let gpu = compute::wgpu::open_web().await;
    match &gpu {
        Ok(b) => log(&format!(
            "kvscope: WebGPU compute backend: {}",
            compute::Backend::device(b.as_ref())
        )),
        Err(e) => log(&format!("kvscope: no WebGPU compute backend: {e}")),
    }
    report("webgpu", gpu.is_ok().into());
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or_else(|| JsValue::from_str("no document"))?;
    let canvas: web_sys::HtmlCanvasElement = document
        .get_element_by_id(&canvas_id)
        .ok_or_else(|| JsValue::from_str(&format!("no element #{canvas_id}")))?
        .dyn_into()?;
    let options = eframe::WebOptions::default();
    eframe::WebRunner::new()
        .start(
            canvas,
            options,
            Box::new(move |cc| {
                let config = AppConfig {
                    lessons_dir: None,
                    sync: false,
                    fresh: false,
                    export_dir: None,
                };
                let app = super::create(cc, &config);
                report(
                    "renderer",
                    cc.wgpu_render_state
                        .as_ref()
                        .map_or("none".to_string(), |rs| format!("{:?}", rs.adapter.get_info().backend))
                        .into(),
                );
                Ok(Box::new(WebApp {
                    app,
                    t0,
                    written: String::new(),
                    frames: 0,
                    cpu_ms: Vec::new(),
                    dropped: Arc::default(),
                    dropped_model: Arc::default(),
                    model_bytes: None,
                    repaints: 0,
                }))
            }),
        )
        .await
}

/// Lesson files as (file name, contents).
type LessonSources = Vec<(String, String)>;

/// A model file dropped on the page: its name, and its bytes or why the browser could not read them.
type DroppedModel = (String, Result<Vec<u8>, String>);

/// The desktop app plus the page's URL state and reports.
struct WebApp {
    app: KvscopeApp,
    /// `performance.now()` when [`start`] began.
    t0: f64,
    /// The fragment this app last wrote (another one was typed or set by a link).
    written: String,
    frames: u64,
    /// Milliseconds of CPU each frame took (eframe's measure), the last 120.
    cpu_ms: Vec<f32>,
    /// Frames still to draw for a PNG capture to arrive.
    repaints: u32,
    /// Lesson files dropped on the page, once read.
    dropped: Arc<std::sync::Mutex<Option<LessonSources>>>,
    /// A model file dropped on the page, once read (or why it could not be).
    dropped_model: Arc<std::sync::Mutex<Option<DroppedModel>>>,
    /// A model file read and announced, loaded in the next frame (so the status shows first).
    model_bytes: Option<(String, Vec<u8>)>,
}

/// `location.hash` without the `#`.
fn fragment() -> String {
    web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .map(|h| h.trim_start_matches('#').to_string())
        .unwrap_or_default()
}

/// The fragment of what `app` shows: lesson, step from 1, the backend when it is not the CPU, and the
/// lesson's slider values.
pub fn state_fragment(app: &KvscopeApp) -> String {
    let Some(l) = app.lesson() else { return String::new() };
    let mut s = format!("lesson={}&step={}", l.id(), app.position().1 + 1);
    if app.active != BackendKind::Cpu {
        s += &format!("&backend={}", app.active.name());
    }
    // Class mode, when it was switched (it otherwise follows presentation mode).
    if let Some(on) = app.class_mode_setting() {
        s += &format!("&quiz={}", u8::from(on));
    }
    // The kernel panel's open exercise.
    if let Some(id) = &app.widgets.kernel.exercise.open {
        s += &format!("&exercise={id}");
    }
    if let Some(p) = app.params() {
        for (k, v) in p {
            s += &format!("&{k}={v}");
        }
    }
    s
}

/// Open what fragment `f` names; the problems, in words (an unknown lesson or slider, a bad number).
pub fn apply_fragment(app: &mut KvscopeApp, f: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let pairs: Vec<(&str, &str)> = f
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let step = pairs
        .iter()
        .find(|(k, _)| *k == "step")
        .map(|(_, v)| v.parse::<usize>());
    let step = match step {
        Some(Ok(n)) if n >= 1 => n - 1,
        Some(_) => {
            problems.push("step must be a whole number from 1".to_string());
            0
        }
        None => 0,
    };
    if let Some((_, id)) = pairs.iter().find(|(k, _)| *k == "lesson") {
        if !app.goto_id(id, step) {
            problems.push(format!("no lesson `{id}`"));
        }
    } else if pairs.iter().any(|(k, _)| *k == "step") {
        let cur = app.position().0;
        app.goto(cur, step);
    }
    match pairs.iter().find(|(k, _)| *k == "backend") {
        Some((_, name)) => match BackendKind::ALL.into_iter().find(|b| b.name() == *name) {
            Some(kind) => app.choose_backend(kind),
            None => problems.push(format!("no backend `{name}`")),
        },
        None => app.choose_backend(BackendKind::Cpu),
    }
    match pairs.iter().find(|(k, _)| *k == "exercise") {
        Some((_, id)) => match crate::exercises::all().unwrap_or_default().iter().find(|x| x.id == *id) {
            Some(x) if app.lesson().is_some_and(|l| l.id() == x.lesson) => app.widgets.kernel.exercise.open(id),
            Some(x) => problems.push(format!("exercise `{id}` belongs to lesson `{}`", x.lesson)),
            None => problems.push(format!("no exercise `{id}`")),
        },
        None => app.widgets.kernel.exercise.open = None,
    }
    match pairs.iter().find(|(k, _)| *k == "quiz") {
        Some((_, "1")) => app.set_class_mode(true),
        Some((_, "0")) => app.set_class_mode(false),
        Some((_, v)) => problems.push(format!("quiz must be 0 or 1, not `{v}`")),
        None => {}
    }
    if let Some(l) = app.lesson().cloned() {
        let steps = l.file.steps.len();
        if step >= steps {
            problems.push(format!("lesson `{}` has {steps} steps", l.id()));
        }
        for (k, v) in pairs
            .iter()
            .filter(|(k, _)| !["lesson", "step", "backend", "quiz", "exercise"].contains(k))
        {
            if !l.file.params.iter().any(|p| p.id.get_ref() == *k) {
                problems.push(format!("lesson `{}` has no slider `{k}`", l.id()));
                continue;
            }
            match v.parse::<i64>() {
                Ok(n) => app.set_param(k, n),
                Err(_) => problems.push(format!("slider `{k}`: `{v}` is not a whole number")),
            }
        }
    }
    problems
}

/// Offer `bytes` as a download named `name`.
pub fn download(name: &str, mime: &str, bytes: &[u8]) -> Result<(), String> {
    let err = |e: JsValue| format!("{e:?}");
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &opts).map_err(err)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(err)?;
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(err)?
        .dyn_into()
        .map_err(|_| "no <a>")?;
    a.set_href(&url);
    a.set_download(name);
    a.click();
    web_sys::Url::revoke_object_url(&url).map_err(err)?;
    report("lastDownload", name.into());
    Ok(())
}

/// Ctrl+E in the browser: the step's export as a zip download; the status line.
pub fn download_export(app: &KvscopeApp) -> String {
    let (Some(l), Some(p), Some(out)) = (app.lesson(), app.params(), app.output()) else {
        return "export failed: nothing computed yet".into();
    };
    let backend = app.running_backend();
    let name = format!("{}-step{:02}.zip", l.id(), app.position().1 + 1);
    let zip = crate::lessons::export_step_zip(l, p, out.as_ref(), app.cursor(), app.reports(), backend.as_ref());
    match zip.and_then(|z| download(&name, "application/zip", &z)) {
        Ok(()) => format!("downloaded {name}"),
        Err(e) => format!("export failed: {e}"),
    }
}

/// A captured frame as PNG bytes.
fn png_bytes(img: &egui::ColorImage) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, img.size[0] as u32, img.size[1] as u32);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let rgba: Vec<u8> = img.pixels.iter().flat_map(|c| c.to_srgba_unmultiplied()).collect();
    enc.write_header()
        .and_then(|mut w| w.write_image_data(&rgba))
        .map_err(|e| e.to_string())?;
    Ok(out)
}

impl WebApp {
    /// Lesson files dropped on the page replace the lessons, and a dropped `.gguf` file is offered to
    /// [`crate::model::smollm2::offer`]: both are read asynchronously (the browser reads files only so).
    /// Lesson files load in the frame after they arrive; the model file two frames after (its load takes
    /// seconds on the page's one thread, so the status line says so first).
    fn take_dropped(&mut self, ctx: &egui::Context) {
        let arrived = self.dropped.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(files) = arrived {
            let loaded = crate::lessons::load_sources(&files);
            let n = loaded.as_ref().map_or(0, Vec::len);
            self.app.replace_lessons(loaded);
            self.app.status = Some(format!("loaded {n} lessons from {} dropped files", files.len()));
            report("droppedLessons", (n as f64).into());
        }
        self.take_model(ctx);
        let dropped = ctx.input(|i| i.raw.dropped_files.clone());
        if dropped.is_empty() {
            return;
        }
        let (slot, model_slot) = (self.dropped.clone(), self.dropped_model.clone());
        let ctx = ctx.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let mut files = Vec::new();
            for f in dropped {
                let name = f.path().display().to_string();
                if name.ends_with(".gguf") {
                    let bytes = f.bytes_async().await;
                    *model_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((name, bytes));
                    ctx.request_repaint();
                    continue;
                }
                if !name.ends_with(".toml") {
                    continue;
                }
                match f.bytes_async().await {
                    Ok(b) => files.push((name, String::from_utf8_lossy(&b).into_owned())),
                    Err(e) => web_sys::console::warn_1(&format!("kvscope: cannot read {name}: {e}").into()),
                }
            }
            if !files.is_empty() {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(files);
            }
            ctx.request_repaint();
        });
    }

    /// A dropped model file: announce it, load it in the next frame, then recompute the step (which may
    /// have been waiting for it) and say what happened.
    fn take_model(&mut self, ctx: &egui::Context) {
        use crate::model::smollm2;
        if let Some((name, bytes)) = self.model_bytes.take() {
            let t = now_ms();
            let result = smollm2::offer(&bytes, &name);
            drop(bytes);
            let secs = (now_ms() - t) / 1e3;
            self.app.status = Some(match &result {
                Ok(()) => format!(
                    "SmolLM2-135M-Instruct loaded from the dropped {name} in {secs:.1} s (structure and SHA-256 \
                     checked): the model switch can run it"
                ),
                Err(e) => format!("the dropped model file was refused: {e}"),
            });
            report("realModel", result.is_ok().into());
            report("realModelLoadMs", (secs * 1e3).into());
            if let Err(e) = &result {
                report("realModelError", e.to_string().into());
            }
            self.app.recompute();
            ctx.request_repaint();
            return;
        }
        let arrived = self.dropped_model.lock().unwrap_or_else(|e| e.into_inner()).take();
        match arrived {
            Some((name, Ok(bytes))) => {
                self.app.status = Some(format!(
                    "checking and loading {name} ({:.0} MB: the SHA-256, then the weights unpacked to f32)…",
                    bytes.len() as f64 / 1e6
                ));
                self.model_bytes = Some((name, bytes));
                ctx.request_repaint();
            }
            Some((name, Err(e))) => {
                self.app.status = Some(format!("cannot read the dropped {name}: {e}"));
                report("realModel", false.into());
                report("realModelError", e.into());
            }
            None => {}
        }
    }

    /// Ctrl+S: ask eframe for this frame; its callback downloads the PNG.
    fn capture(&mut self, ctx: &egui::Context) {
        if !std::mem::take(&mut self.app.pending_png) {
            return;
        }
        let name = match self.app.lesson() {
            Some(l) => format!("{}-step{:02}.png", l.id(), self.app.position().1 + 1),
            None => "kvscope.png".to_string(),
        };
        ctx.send_viewport_cmd(egui::ViewportCommand::Screenshot(egui::ScreenshotCallback::new(
            move |img| {
                if let Err(e) = png_bytes(&img).and_then(|b| download(&name, "image/png", &b)) {
                    web_sys::console::warn_1(&format!("kvscope: PNG download failed: {e}").into());
                }
            },
        )));
        // eframe takes the shot when it paints a later frame, and the readback completes when the
        // device is polled, which it is while frames are drawn: draw a few.
        self.repaints = 10;
        self.app.status = Some("downloading the frame as a PNG".into());
    }
}

impl eframe::App for WebApp {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.take_dropped(ui.ctx());
        if self.repaints > 0 {
            self.repaints -= 1;
            ui.ctx().request_repaint();
        }
        let f = fragment();
        if f != self.written && !f.is_empty() {
            let problems = apply_fragment(&mut self.app, &f);
            for p in &problems {
                web_sys::console::warn_1(&format!("kvscope: the link's {p}").into());
            }
            report("linkProblems", problems.join("; ").into());
        }
        eframe::App::ui(&mut self.app, ui, frame);
        self.capture(ui.ctx());
        let now = state_fragment(&self.app);
        if now != f
            && let Some(h) = web_sys::window().and_then(|w| w.history().ok())
        {
            let _ = h.replace_state_with_url(&JsValue::NULL, "", Some(&format!("#{now}")));
        }
        self.written = now;
        self.frames += 1;
        if self.frames == 1 {
            report("firstFrameMs", (now_ms() - self.t0).into());
            let lessons: Vec<(&str, usize)> = self
                .app
                .lessons()
                .iter()
                .map(|l| (l.id(), l.file.steps.len()))
                .collect();
            report("lessons", serde_json::to_string(&lessons).unwrap_or_default().into());
        }
        if let Some(ms) = frame.info().cpu_usage {
            self.cpu_ms.push(ms * 1e3);
            if self.cpu_ms.len() > 120 {
                self.cpu_ms.remove(0);
            }
        }
        let (l, s) = self.app.position();
        report("frames", (self.frames as f64).into());
        report("mostReadbacks", (compute::wgpu::replay::most_readbacks() as f64).into());
        let (passes, host_ms, wall_ms) = crate::ui::worker::last_replay();
        report(
            "lastReplay",
            format!("{passes} passes, {host_ms:.0} ms on the host after the first, {wall_ms:.0} ms in all").into(),
        );
        report("lessonCount", (self.app.lessons().len() as f64).into());
        report(
            "loadErrors",
            self.app
                .load_errors()
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
                .into(),
        );
        report("status", self.app.status_message().unwrap_or("").into());
        report("lesson", self.app.lessons().get(l).map_or("", |x| x.id()).into());
        report("step", ((s + 1) as f64).into());
        // Class mode: whether the step is veiled, where its first answer box is (CSS pixels), and how its
        // first question was graded ("right", "wrong" or "").
        report("veiled", self.app.veiled().into());
        let answer_box = self.app.answer_box.map(|r| {
            let c = r.center();
            format!("{},{}", c.x, c.y)
        });
        report("answerBox", answer_box.unwrap_or_default().into());
        // The exercise tab: its buttons' centres (CSS pixels) and its grade ("grading", "pass", "fail").
        let x = &self.app.widgets.kernel.exercise;
        for (name, key) in [
            ("run", "exerciseRun"),
            ("solution", "exerciseSolution"),
            ("mine", "exerciseMine"),
        ] {
            let at = x
                .buttons
                .get(name)
                .map(|r| format!("{},{}", r.center().x, r.center().y));
            report(key, at.unwrap_or_default().into());
        }
        let grade = match x.open.as_ref().and_then(|id| x.grade.get(id)) {
            _ if x.grading() => "grading",
            Some(g) if g.passed => "pass",
            Some(_) => "fail",
            None => "",
        };
        report("exerciseGrade", grade.into());
        report("running", self.app.running_name(crate::ui::text::Lang::En).into());
        let graded = match self.app.graded(0) {
            Some(true) => "right",
            Some(false) => "wrong",
            None => "",
        };
        report("graded", graded.into());
        let answer = match self.app.question_answers().first() {
            Some(Ok(crate::lessons::questions::Answer::Number { value, .. })) => format!("{value}"),
            _ => String::new(),
        };
        report("questionAnswer", answer.into());
        report("computing", self.app.computing().into());
        report("hasOutput", self.app.output().is_some().into());
        report("computeMs", self.app.compute_ms().into());
        report("error", self.app.error().unwrap_or("").into());
        report("backend", self.app.running_backend().kind().name().into());
        if !self.cpu_ms.is_empty() {
            let mean = self.cpu_ms.iter().sum::<f32>() / self.cpu_ms.len() as f32;
            report("frameCpuMs", f64::from(mean).into());
        }
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::App::save(&mut self.app, storage);
    }
}

/// Run the cross-backend check suite on the WebGPU backend (every op, seeded inputs, against the f64
/// reference), as `kvscope check --backend wgpu --json` does natively: the same JSON. Each op is one
/// replayed computation (`compute::wgpu::replay`).
#[wasm_bindgen]
pub async fn check(seed: u64) -> String {
    let kind = BackendKind::Wgpu;
    let b = match compute::wgpu::probe() {
        Ok(b) => b,
        Err(reason) => {
            return serde_json::json!([{"backend": kind.name(), "available": false, "reason": reason}]).to_string();
        }
    };
    let backend: Arc<dyn compute::Backend> = b;
    let mut reports = Vec::new();
    for (i, op) in compute::Op::ALL.into_iter().enumerate() {
        let session = compute::wgpu::replay::CHECK_SESSIONS + i as u64;
        let r = compute::wgpu::replay::resolve(session, || {
            let mut out = Vec::new();
            compute::ops::suite(op, backend.as_ref(), seed, &mut out);
            out
        })
        .await;
        reports.extend(r);
    }
    let failed = reports.iter().filter(|r| !r.passed()).count();
    log(&format!(
        "kvscope: check on wgpu: {} checks, {failed} failed",
        reports.len()
    ));
    serde_json::json!([{"backend": kind.name(), "available": true, "device": backend.device(), "failed": failed, "reports": reports}])
        .to_string()
}

/// Grade `source` for kernel exercise `id` in the page (`Exercise::grade_web`: its own WebGPU device,
/// the hidden seeds, raced by a timer of `timeout_ms`), as `kvscope exercise grade ID --json` does
/// natively: the same JSON.
#[wasm_bindgen]
pub async fn exercise_grade(id: String, source: String, timeout_ms: i32) -> String {
    let x = match crate::exercises::find(&id) {
        Ok(x) => x,
        Err(e) => return serde_json::json!({ "error": e }).to_string(),
    };
    let (g, _) = x
        .grade_web(&source, &crate::exercises::HIDDEN_SEEDS, sleep_ms(timeout_ms))
        .await;
    serde_json::to_string(&g).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
}

/// Every exercise's cases graded in the page on the first `seeds` hidden seeds: the solution (it must
/// pass), the blank and each wrong edit (each must fail for a wrong value, with a map that marks where:
/// `Grade::wrong_value_problems`). One line of JSON per case: what the browser test asserts.
#[wasm_bindgen]
pub async fn exercise_cases(seeds: usize) -> String {
    let all = match crate::exercises::all() {
        Ok(a) => a,
        Err(e) => return serde_json::json!([{ "error": e }]).to_string(),
    };
    let seeds = &crate::exercises::HIDDEN_SEEDS[..seeds.clamp(1, crate::exercises::HIDDEN_SEEDS.len())];
    let mut out = Vec::new();
    for x in all {
        let mut cases = vec![
            ("solution".to_string(), x.solution(), true),
            ("blank".to_string(), x.blanked(false), false),
        ];
        for e in &x.wrong {
            cases.push((format!("{:?} → {:?}", e.from, e.to), x.with_edit(e), false));
        }
        for (case, source, should_pass) in cases {
            let t0 = now_ms();
            let (g, _) = x.grade_web(&source, seeds, sleep_ms(120_000)).await;
            let problems = if should_pass {
                let mut p: Vec<String> = g.failed().map(|c| format!("{} fails", c.label)).collect();
                p.extend(g.error.clone());
                p.extend(
                    g.compile_errors
                        .iter()
                        .map(|e| format!("{}:{} {}", e.line, e.column, e.message)),
                );
                if !g.passed {
                    p.push("it does not pass".to_string());
                }
                p
            } else {
                g.wrong_value_problems()
            };
            out.push(serde_json::json!({
                "exercise": x.id, "case": case, "should_pass": should_pass, "passed": g.passed,
                "checks": g.checks.len(), "failed": g.failed().count(), "max_abs": g.max_abs(),
                "problems": problems, "ms": now_ms() - t0,
            }));
        }
    }
    log(&format!("kvscope: {} exercise cases graded on WebGPU", out.len()));
    serde_json::Value::Array(out).to_string()
}
