//! The app: kittest snapshots of every lesson step, interaction tests (keys, sliders, backend
//! selector, presentation mode, language), the OOM path of lesson 5, counts on screen against the
//! allocator, a bad lesson folder, and a seeded monkey test of random events on the background worker.

mod common;

use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use kvscope::lessons::Output;
use kvscope::lessons::attention_layer::AttnOut;
use kvscope::lessons::paged_cache::PagedOut;
use kvscope::ui::text::Lang;
use kvscope::ui::{AppConfig, KvscopeApp};

/// The app as the tests run it: synchronous and fresh. Its apps share computed results
/// (`worker::share_results`), so the walks compute each step once per backend, not once per walk; the
/// monkey runs the real worker, which always computes.
fn config() -> AppConfig {
    kvscope::ui::worker::share_results(true);
    AppConfig {
        lessons_dir: None,
        sync: true,
        fresh: true,
        export_dir: Some(std::env::temp_dir().join("kvscope-test-exports")),
    }
}

fn harness(wgpu: bool) -> Harness<'static, KvscopeApp> {
    let b = Harness::builder().with_size(eframe::egui::vec2(1280.0, 800.0));
    let b = if wgpu { b.wgpu() } else { b };
    b.build_eframe(|cc| kvscope::ui::create(cc, &config()))
}

fn settle(h: &mut Harness<'static, KvscopeApp>) {
    for _ in 0..3 {
        h.step();
    }
}

fn lesson_index(h: &Harness<'static, KvscopeApp>, id: &str) -> usize {
    h.state().lessons().iter().position(|l| l.id() == id).expect(id)
}

/// The index of lesson `lesson`'s step `id`.
fn step_index(h: &Harness<'static, KvscopeApp>, lesson: usize, id: &str) -> usize {
    h.state().lessons()[lesson]
        .file
        .steps
        .iter()
        .position(|s| s.id.get_ref() == id)
        .unwrap_or_else(|| panic!("lesson {lesson} has no step {id}"))
}

/// Step frames (20 ms apart) until `done` holds, at most `frames` of them (work off the UI thread: a
/// grade in a child, a recompute).
fn step_until(
    h: &mut Harness<'static, KvscopeApp>,
    frames: usize,
    done: impl Fn(&Harness<'static, KvscopeApp>) -> bool,
) {
    for _ in 0..frames {
        h.step();
        if done(h) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn go(h: &mut Harness<'static, KvscopeApp>, id: &str, step: usize) {
    let i = lesson_index(h, id);
    h.state_mut().goto(i, step);
    settle(h);
}

/// The lesson's own area of the frame just drawn (its narration panel and its views, without the lesson
/// list, the top bar and the status bar): a crop of the real frame, so that a new lesson, which changes
/// the list and the numbering, changes no other lesson's baseline.
fn lesson_image(h: &mut Harness<'static, KvscopeApp>) -> image::RgbaImage {
    let frame = h.render().expect("the frame renders");
    let area = h.state().lesson_area().expect("a frame was drawn");
    let ppp = frame.width() as f32 / h.ctx.content_rect().width();
    let px = |v: f32, max: u32| ((v * ppp).round().max(0.0) as u32).min(max);
    let (x0, y0) = (px(area.min.x, frame.width()), px(area.min.y, frame.height()));
    let (x1, y1) = (px(area.max.x, frame.width()), px(area.max.y, frame.height()));
    image::imageops::crop_imm(&frame, x0, y0, x1 - x0, y1 - y0).to_image()
}

/// How exact the lesson snapshots are: kittest's colour threshold per pixel, and at most 8 pixels over
/// it. Glyphs share one font atlas, and where a glyph lands in it depends on the text drawn before (a new
/// lesson's title in the list, say); linear sampling then moves a glyph's edge pixels slightly. Adding a
/// lesson at the front moved 2 pixels in each of 2 of the 118 images past the threshold. A change a
/// student could see moves far more than 8 pixels, and so does a line one pixel wide
/// (`a_one_pixel_wide_change_fails_a_lesson_snapshot`).
fn lesson_options() -> egui_kittest::SnapshotOptions {
    egui_kittest::SnapshotOptions::new().max_failed_pixels(8)
}

/// Compare the lesson's area with `tests/snapshots/lesson/{name}.png`.
fn lesson_snapshot(h: &mut Harness<'static, KvscopeApp>, name: &str, failures: &mut Vec<String>) {
    let img = lesson_image(h);
    if let Err(e) = egui_kittest::try_image_snapshot_options(&img, format!("lesson/{name}"), &lesson_options()) {
        failures.push(e.to_string());
    }
}

#[test]
fn snapshots_of_every_step() {
    let mut h = harness(true);
    let lessons: Vec<(usize, String, &'static str, usize)> = h
        .state()
        .lessons()
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.id().to_string(), l.kind.name(), l.file.steps.len()))
        .collect();
    let mut failures = Vec::new();
    let mut trained_steps = 0;
    for (i, id, kind, n) in &lessons {
        for j in 0..*n {
            h.state_mut().goto(*i, j);
            settle(&mut h);
            lesson_snapshot(&mut h, &format!("{id}-{:02}", j + 1), &mut failures);
        }
        // One step of each lesson in Chinese (lessons 1–2 back on random weights and lesson 5 on random
        // K/V, which their last steps switched on); every step of the FlashAttention lesson, whose tiles
        // carry the most Chinese labels.
        h.state_mut().lang = Lang::Zh;
        h.state_mut().goto(*i, n / 2);
        h.state_mut().set_param("model", 0);
        settle(&mut h);
        lesson_snapshot(&mut h, &format!("{id}-zh"), &mut failures);
        // The trained model's step (lessons 1–3 and 5 have one) in Chinese too.
        let trained = h.state().lessons()[*i]
            .file
            .steps
            .iter()
            .position(|s| ["trained", "serve"].contains(&s.id.get_ref().as_str()));
        trained_steps += usize::from(trained.is_some());
        if let Some(j) = trained {
            h.state_mut().goto(*i, j);
            settle(&mut h);
            lesson_snapshot(&mut h, &format!("{id}-zh-trained"), &mut failures);
        }
        if *kind == "flash" {
            for j in 0..*n {
                h.state_mut().goto(*i, j);
                settle(&mut h);
                lesson_snapshot(&mut h, &format!("{id}-zh-{:02}", j + 1), &mut failures);
            }
        }
        h.state_mut().lang = Lang::En;
    }
    assert!(
        trained_steps >= 4,
        "lessons 1-3 and 5 have a trained-model step: {trained_steps} steps found"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The app around the lessons (top bar, lesson list, status bar, backend panel, presentation mode), drawn
/// over the tests' own lesson folder (`tests/fixtures/chrome-lessons`: copies of lessons 1 and 5), so
/// that a lesson added to `lessons/` changes none of these either.
#[test]
fn snapshots_of_the_app_around_the_lessons() {
    let cfg = AppConfig {
        lessons_dir: Some(std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chrome-lessons"
        ))),
        ..config()
    };
    let mut h = Harness::builder()
        .with_size(eframe::egui::vec2(1280.0, 800.0))
        .wgpu()
        .build_eframe(|cc| kvscope::ui::create(cc, &cfg));
    settle(&mut h);
    assert_eq!(h.state().lessons().len(), 2, "the fixture folder holds two lessons");
    let mut failures = Vec::new();
    let mut shot = |h: &mut Harness<'static, KvscopeApp>, name: &str| {
        if let Err(e) = h.try_snapshot(format!("chrome/{name}")) {
            failures.push(e.to_string());
        }
    };
    h.state_mut().goto(1, 2);
    settle(&mut h);
    shot(&mut h, "window-en");
    h.state_mut().lang = Lang::Zh;
    settle(&mut h);
    shot(&mut h, "window-zh");
    h.state_mut().lang = Lang::En;
    h.state_mut().presentation = true;
    settle(&mut h);
    shot(&mut h, "presentation-en");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The baselines are exact enough to catch a one-pixel-wide change: a vertical line one pixel wide
/// through a committed baseline (each pixel's colour inverted) fails the comparison that the lesson
/// snapshots use, and so does a single glyph-sized patch of 4×4 pixels.
#[test]
fn a_one_pixel_wide_change_fails_a_lesson_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let name = "attention-matrix-01";
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/lesson/{name}.png"));
    std::fs::copy(&base, dir.path().join(format!("{name}.png"))).unwrap();
    let img = image::open(&base).unwrap().to_rgba8();
    let opts = lesson_options().output_path(dir.path());
    assert!(
        egui_kittest::try_image_snapshot_options(&img, name, &opts).is_ok(),
        "the baseline matches itself"
    );
    let mut changed = img.clone();
    let x = changed.width() / 2;
    for y in 0..changed.height() {
        let p = changed.get_pixel_mut(x, y);
        p.0 = [255 - p.0[0], 255 - p.0[1], 255 - p.0[2], 255];
    }
    assert!(
        egui_kittest::try_image_snapshot_options(&changed, name, &opts).is_err(),
        "a one-pixel-wide line must fail the snapshot"
    );
    let mut patch = img.clone();
    for (x, y) in (0..4).flat_map(|dx| (0..4).map(move |dy| (100 + dx, 100 + dy))) {
        let p = patch.get_pixel_mut(x, y);
        p.0 = [255 - p.0[0], 255 - p.0[1], 255 - p.0[2], 255];
    }
    assert!(
        egui_kittest::try_image_snapshot_options(&patch, name, &opts).is_err(),
        "a 4x4 patch must fail the snapshot"
    );
}

#[test]
fn keys_move_between_steps() {
    let mut h = harness(false);
    settle(&mut h);
    assert_eq!(h.state().position(), (0, 0));
    h.key_press(eframe::egui::Key::ArrowRight);
    settle(&mut h);
    assert_eq!(h.state().position(), (0, 1));
    h.key_press(eframe::egui::Key::Space);
    settle(&mut h);
    assert_eq!(h.state().position(), (0, 2));
    h.key_press(eframe::egui::Key::ArrowLeft);
    settle(&mut h);
    assert_eq!(h.state().position(), (0, 1));
    h.key_press(eframe::egui::Key::Backspace);
    settle(&mut h);
    assert_eq!(h.state().position(), (0, 0));
    h.key_press(eframe::egui::Key::End);
    settle(&mut h);
    let last = h.state().lessons()[0].file.steps.len() - 1;
    assert_eq!(h.state().position(), (0, last));
    // Past the end of a lesson, → opens the next one.
    h.key_press(eframe::egui::Key::ArrowRight);
    settle(&mut h);
    assert_eq!(h.state().position(), (1, 0));
    h.key_press(eframe::egui::Key::Home);
    settle(&mut h);
    assert_eq!(h.state().position(), (1, 0));
    // F5 toggles presentation mode: the navigator disappears, the narration stays.
    assert!(h.query_all_by_label("Lessons").next().is_some());
    h.key_press(eframe::egui::Key::F5);
    settle(&mut h);
    assert!(h.state().presentation);
    assert!(h.query_all_by_label("Lessons").next().is_none());
    h.key_press(eframe::egui::Key::Escape);
    settle(&mut h);
    assert!(!h.state().presentation);
}

#[test]
fn heads_slider_changes_the_number_of_head_heatmaps() {
    let mut h = harness(false);
    go(&mut h, "multi-head", 1);
    let heads = |h: &Harness<'static, KvscopeApp>| h.query_all_by_label_contains("(KV ").count();
    assert_eq!(heads(&h), 4);
    // Drag the real slider with the keyboard: it only offers divisors of d_model = 32.
    h.get_by_role_and_label(Role::Slider, "Query heads").focus();
    settle(&mut h);
    h.key_press(eframe::egui::Key::ArrowRight);
    settle(&mut h);
    assert_eq!(h.state().params().unwrap()["heads"], 8);
    assert_eq!(heads(&h), 8);
    // The arrow key went to the slider, not to the step navigation.
    assert_eq!(h.state().position().1, 1);
    h.key_press(eframe::egui::Key::ArrowLeft);
    h.key_press(eframe::egui::Key::ArrowLeft);
    h.key_press(eframe::egui::Key::ArrowLeft);
    settle(&mut h);
    assert_eq!(heads(&h), 1);
}

#[test]
fn kv_heads_slider_changes_bytes_per_token() {
    let mut h = harness(false);
    let step = h.state().lessons()[lesson_index(&h, "multi-head")]
        .file
        .steps
        .iter()
        .position(|s| s.views.iter().any(|v| v.get_ref() == "kv_groups"))
        .expect("a step shows kv_groups");
    go(&mut h, "multi-head", step);
    // d_model 32, 4 heads → head_dim 8; 4 KV heads: 2·4·8·2 = 128 B.
    assert!(
        h.query_all_by_label_contains("MHA: 4 query heads · 4 KV heads")
            .next()
            .is_some()
    );
    assert!(h.query_all_by_label("2 · 4 · 8 · 2 = 128 B").next().is_some());
    h.get_by_role_and_label(Role::Slider, "KV heads").focus();
    settle(&mut h);
    h.key_press(eframe::egui::Key::ArrowLeft);
    settle(&mut h);
    assert_eq!(h.state().params().unwrap()["kv_heads"], 2);
    assert!(
        h.query_all_by_label_contains("GQA: 4 query heads · 2 KV heads")
            .next()
            .is_some()
    );
    assert!(h.query_all_by_label("2 · 2 · 8 · 2 = 64 B").next().is_some());
    h.key_press(eframe::egui::Key::ArrowLeft);
    settle(&mut h);
    assert!(h.query_all_by_label_contains("MQA").next().is_some());
    assert!(h.query_all_by_label("2 · 1 · 8 · 2 = 32 B").count() >= 1);
}

#[test]
fn backend_selector_shows_why_a_backend_is_unavailable() {
    let mut h = harness(false);
    settle(&mut h);
    let statuses = h.state().backend_statuses();
    for (kind, st) in &statuses {
        assert!(
            h.query_all_by_label(kind.name()).next().is_some(),
            "{} listed",
            kind.name()
        );
        match st {
            Ok(device) => assert!(h.query_all_by_label_contains(device).next().is_some(), "{device}"),
            Err(why) => assert!(
                h.query_all_by_label_contains(&format!("unavailable: {why}"))
                    .next()
                    .is_some(),
                "reason for {} shown",
                kind.name()
            ),
        }
    }
    // cuda-sim always runs here: switching to it re-computes and stays verified. The backend list sits
    // low in the side panel, which scrolls: bring the button into view first, as a user would.
    h.get_by_label("cuda-sim").scroll_to_me();
    settle(&mut h);
    h.get_by_label("cuda-sim").click();
    settle(&mut h);
    assert_eq!(h.state().active_backend().name(), "cuda-sim");
    assert!(
        h.query_all_by_label_contains("OK  cuda-sim: ").next().is_some()
            && h.query_all_by_label_contains("checks pass; largest error vs")
                .next()
                .is_some()
    );
}

/// The "kernels that ran" steps say which code computed the result and where (`{ran_on}`), for every
/// backend that runs here, in both languages.
#[test]
fn kernel_steps_name_the_code_that_ran() {
    use kvscope::compute::BackendKind;
    let mut h = harness(false);
    settle(&mut h);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while h
        .state()
        .backend_statuses()
        .iter()
        .any(|(_, s)| s.as_ref().is_err_and(|e| e.contains("probing")))
        && std::time::Instant::now() < deadline
    {
        h.step();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let statuses = h.state().backend_statuses();
    for lesson in [0, 3] {
        let step = step_index(&h, lesson, "kernel");
        let cases = [
            (BackendKind::Cpu, "as their Rust twins on the CPU", "CPU 上的 Rust 版本"),
            (
                BackendKind::CudaSim,
                "as the `.cu` source itself, on CPU threads",
                "CPU 线程上的 `.cu` 源码本身",
            ),
            (BackendKind::Wgpu, "as their WGSL twins on ", " 上的 WGSL 版本"),
        ];
        for (kind, en, zh) in cases {
            let Some((_, Ok(device))) = statuses.iter().find(|(k, _)| *k == kind) else {
                assert_ne!(kind, BackendKind::Cpu);
                assert!(
                    !(kind == BackendKind::Wgpu && common::wgpu_required()),
                    "wgpu is required here but did not come up: {statuses:?}"
                );
                continue;
            };
            let app = h.state_mut();
            app.choose_backend(kind);
            app.goto(lesson, step);
            app.update_now();
            for (lang, want) in [(Lang::En, en), (Lang::Zh, zh)] {
                h.state_mut().lang = lang;
                let n = h.state().narration().unwrap();
                assert!(n.contains(want), "lesson {lesson} on {}: {n}", kind.name());
                assert!(!n.contains("{ran_on}") && !n.contains('…'), "{n}");
                if kind == BackendKind::Wgpu {
                    let adapter = device.rsplit_once(", ").map_or(device.as_str(), |(a, _)| a);
                    assert!(n.contains(adapter), "{n}");
                }
            }
            h.state_mut().lang = Lang::En;
        }
    }
}

/// The kernel panel opens on an op that ran for the result: with KIVI, lesson 10's group kernels
/// (`kernels/group_kv.cu`), not `quant_append`, which only the per-token formats run; a click on another
/// op still shows that one.
#[test]
fn kernel_panel_opens_on_a_kernel_that_ran() {
    let mut h = harness(false);
    settle(&mut h);
    let i = lesson_index(&h, "quantization");
    let step = step_index(&h, i, "kernels");
    // The panel's source line: "kernels/<file>.cu : line N" (.wgsl on wgpu).
    let shows = |h: &Harness<'static, KvscopeApp>, stem: &str| {
        h.query_all_by_label_contains(&format!("kernels/{stem}."))
            .next()
            .is_some()
    };
    for (format, file) in [(3, "quant_kv"), (5, "group_kv"), (1, "quant_kv"), (2, "group_kv")] {
        h.state_mut().goto(i, step);
        h.state_mut().set_param("format", format);
        settle(&mut h);
        assert!(shows(&h, file), "format {format}: the panel does not show {file}");
    }
    assert!(!shows(&h, "quant_kv"));
    h.get_by_label("quant_decode_u8").click();
    settle(&mut h);
    assert!(shows(&h, "quant_kv"), "a clicked op is shown");
}

/// On/off parameters (`kind = "bool"`) are checkboxes, not 0–1 sliders.
#[test]
fn switches_are_checkboxes() {
    let mut h = harness(false);
    go(&mut h, "causal-mask", 0);
    assert!(h.query_by_role_and_label(Role::Slider, "Causal mask").is_none());
    assert_eq!(h.state().params().unwrap()["mask_on"], 1);
    h.get_by_role_and_label(Role::CheckBox, "Causal mask").click();
    settle(&mut h);
    assert_eq!(h.state().params().unwrap()["mask_on"], 0);
}

#[test]
fn language_switch_changes_ui_and_narration() {
    let mut h = harness(false);
    settle(&mut h);
    h.get_by_label("中文").click();
    settle(&mut h);
    assert_eq!(h.state().lang, Lang::Zh);
    assert!(h.query_all_by_label("课程").next().is_some());
}

#[test]
fn lesson_five_reaches_oom_and_counts_match_the_allocator() {
    use kvscope::cache::PagedShape;
    use kvscope::kv::Scheduler;
    let mut h = harness(false);
    let li = lesson_index(&h, "paged-cache");
    let oom_step = step_index(&h, li, "oom");
    go(&mut h, "paged-cache", oom_step);
    assert_eq!(
        h.query_all_by_label_contains("OOM — ").count(),
        1,
        "the OOM step shows the OOM banner, once"
    );
    // Replay the scenario independently and compare the free-list count on screen at every step.
    let lesson = h.state().lessons()[li].clone();
    let params = h.state().params().unwrap().clone();
    let specs = kvscope::lessons::paged_cache::scenario(&lesson, &params);
    let shape: PagedShape = kvscope::lessons::paged_cache::pool_shape(&params);
    assert_eq!(shape.num_blocks * shape.block_size, params["token_slots"] as usize);
    let mut s = Scheduler::new(shape, specs).unwrap();
    let free_step = lesson
        .file
        .steps
        .iter()
        .position(|s| s.views.iter().any(|v| v.get_ref() == "free_list"))
        .unwrap();
    go(&mut h, "paged-cache", free_step);
    let mut t = 0;
    let mut saw_oom = false;
    while !s.is_done() {
        let ev = s.step();
        saw_oom |= ev.oom();
        h.state_mut().set_cursor(t);
        settle(&mut h);
        let n = s.cache().allocator().num_free();
        assert!(
            h.query_all_by_label_contains(&format!("free list ({n} blocks)"))
                .next()
                .is_some(),
            "step {t}: {n} free blocks on screen"
        );
        t += 1;
    }
    assert!(saw_oom, "the scenario reaches OOM with the default sliders");
}

#[test]
fn a_bad_lesson_folder_shows_the_error_in_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("01-bad.toml"),
        "format_version = 1\nid = \"bad\"\nkind = \"attention\"\norder = 1\ntitle = { en = \"Bad\" }\nsteps = []\n",
    )
    .unwrap();
    let cfg = AppConfig {
        lessons_dir: Some(dir.path().to_path_buf()),
        ..config()
    };
    let mut h = Harness::builder()
        .with_size(eframe::egui::vec2(1280.0, 800.0))
        .build_eframe(|cc| kvscope::ui::create(cc, &cfg));
    settle(&mut h);
    assert!(h.query_all_by_label("A lesson file has problems").next().is_some());
    assert!(
        h.query_all_by_label_contains("01-bad.toml:5:").next().is_some(),
        "file:line:col shown"
    );
}

/// SplitMix64, for the monkey.
struct Monkey(u64);
impl Monkey {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Says where a monkey run failed, if it panics: the seed and the event, to run it again.
struct MonkeyPlace {
    seed: u64,
    event: std::cell::Cell<u32>,
}
impl Drop for MonkeyPlace {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "monkey FAILED at event {}: rerun with KVSCOPE_MONKEY_SEED={} (and KVSCOPE_MONKEY_EVENTS at least {})",
                self.event.get(),
                self.seed,
                self.event.get() + 1
            );
        }
    }
}

/// Random keys, clicks, slider moves, timeline moves, language, backend and lesson changes, on the app
/// as users run it: results are computed by the background worker (`sync: false`) and arrive between
/// frames, so jobs are superseded in the queue, results arrive after newer jobs were sent (stale), and
/// a result may belong to a step that is no longer shown; the test asserts that this happened. After
/// every eighth event a frame is drawn; now and then the monkey waits for the worker, as a user reads.
/// No panic, no NaN in a view, and every reference check passes. CI runs 1,000 events with seed 2026
/// (`KVSCOPE_MONKEY_EVENTS=10000`, `KVSCOPE_MONKEY_SEED=N` for others); it prints which lessons and
/// backends its time went to.
#[test]
fn monkey_on_the_real_worker() {
    use eframe::egui::{self, Key};
    use kvscope::compute::BackendKind;
    use std::time::{Duration, Instant};
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("KVSCOPE_MONKEY_SEED").unwrap_or(2026);
    let events = env("KVSCOPE_MONKEY_EVENTS").unwrap_or(1000) as u32;
    eprintln!("monkey: seed {seed}, {events} events (KVSCOPE_MONKEY_SEED, KVSCOPE_MONKEY_EVENTS)");
    let place = MonkeyPlace {
        seed,
        event: std::cell::Cell::new(0),
    };
    let cfg = AppConfig {
        sync: false,
        ..config()
    };
    let mut h = Harness::builder()
        .with_size(eframe::egui::vec2(1280.0, 800.0))
        .build_eframe(|cc| kvscope::ui::create(cc, &cfg));
    settle(&mut h);
    let mut m = Monkey(seed);
    let keys = [
        Key::ArrowRight,
        Key::ArrowLeft,
        Key::Space,
        Key::Backspace,
        Key::Home,
        Key::End,
        Key::F5,
        Key::Escape,
    ];
    let mut frames = 0;
    let mut wgpu_frames = 0;
    // Wall time by (lesson, backend) of what the UI thread did: events, frames and waits for the worker.
    let mut spent: std::collections::BTreeMap<(String, &'static str), (u32, Duration)> = Default::default();
    let checks = |h: &Harness<'static, KvscopeApp>, event: u32| {
        let app = h.state();
        if let Some(out) = app.output() {
            assert!(!has_nan(out.as_ref()), "NaN in a view after event {event}");
            // The views draw the lesson on screen: a result still arriving for the lesson the user left
            // must not be drawn as this one's (its numbers are another kind's placeholders).
            let l = app.lesson().expect("an output is shown only with a lesson");
            for (name, _) in out.values() {
                assert!(
                    l.kind.placeholders().contains(&name),
                    "event {event}: the views of {} draw a result with `{{{name}}}`, which {} does not declare: \
                     another lesson's result",
                    l.id(),
                    l.kind.name()
                );
            }
        }
        if let Some(r) = app.reports() {
            assert!(
                r.iter().all(|r| r.passed()),
                "a check failed after event {event}: {r:?}"
            );
        }
    };
    // Frames until the worker has delivered the newest result, or `limit` passes.
    let wait = |h: &mut Harness<'static, KvscopeApp>, limit: Duration| {
        let t = Instant::now();
        while h.state().computing() && t.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(5));
            h.step();
        }
    };
    let t0 = Instant::now();
    for event in 0..events {
        place.event.set(event);
        let t_event = Instant::now();
        let before = {
            let app = h.state();
            (
                app.lesson().map(|l| l.id().to_string()).unwrap_or_default(),
                app.active_backend().name(),
            )
        };
        if event % 250 == 0 {
            let (l, st) = h.state().position();
            eprintln!(
                "monkey: event {event}, lesson {l} step {st}, {:?}, {:?}",
                t0.elapsed(),
                h.state().job_stats()
            );
        }
        match m.below(10) {
            0..=2 => h.key_press(keys[m.below(keys.len() as u64) as usize]),
            3 | 4 => {
                let pos = egui::pos2(m.below(1280) as f32, m.below(800) as f32);
                h.event(egui::Event::PointerMoved(pos));
                for pressed in [true, false] {
                    h.event(egui::Event::PointerButton {
                        pos,
                        button: egui::PointerButton::Primary,
                        pressed,
                        modifiers: Default::default(),
                    });
                }
            }
            5..=7 => {
                // A slider move: usually a small drag, sometimes all the way to an end.
                let app = h.state_mut();
                let Some(l) = app.lesson().cloned() else { continue };
                if l.file.params.is_empty() {
                    continue;
                }
                let p = &l.file.params[m.below(l.file.params.len() as u64) as usize];
                let id = p.id.get_ref().clone();
                let cur = app.params().and_then(|x| x.get(&id).copied()).unwrap_or(p.lo());
                // (Every slider's maximum, all at once, is `every_lesson_computes_at_its_slider_extremes`.)
                let v = match m.below(100) {
                    0 => p.lo(),
                    _ => cur + (m.below(7) as i64 - 3) * p.step,
                };
                app.set_param(&id, v);
            }
            8 => {
                let n = m.below(200) as usize;
                h.state_mut().set_cursor(n);
            }
            _ => {
                let app = h.state_mut();
                match m.below(3) {
                    0 => app.lang = if app.lang == Lang::En { Lang::Zh } else { Lang::En },
                    // cpu, wgpu (lavapipe here) and cuda (unavailable without a GPU: the refusal path);
                    // the shim is slow on big shapes and has its own walk.
                    1 => app
                        .choose_backend([BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Cuda][m.below(3) as usize]),
                    _ => {
                        let n = app.lessons().len();
                        app.goto(m.below(n as u64) as usize, m.below(10) as usize);
                    }
                }
            }
        }
        if event % 8 == 7 {
            h.step();
            frames += 1;
            if h.state().active_backend() == BackendKind::Wgpu {
                wgpu_frames += 1;
            }
            checks(&h, event);
        }
        // Now and then the user stops to read: the newest result arrives and is drawn.
        if m.below(40) == 0 {
            wait(&mut h, Duration::from_secs(2));
            frames += 1;
            checks(&h, event);
        }
        let e = spent.entry(before).or_default();
        e.0 += 1;
        e.1 += t_event.elapsed();
    }
    wait(&mut h, Duration::from_secs(120));
    checks(&h, events);
    assert!(frames >= events / 8);
    let stats = h.state().job_stats();
    eprintln!(
        "monkey: {frames} frames, {wgpu_frames} of them on wgpu, {:?} in all; jobs {stats:?}, {} superseded",
        t0.elapsed(),
        stats.superseded()
    );
    let mut by_time: Vec<_> = spent.into_iter().collect();
    by_time.sort_by_key(|e| std::cmp::Reverse(e.1.1));
    eprintln!("monkey: where the UI thread's time went (lesson, backend: events, time):");
    for ((lesson, backend), (n, t)) in by_time.iter().take(8) {
        eprintln!("  {lesson:18} {backend:8} {n:5} events {t:9.2?}");
    }
    if events >= 500 {
        assert!(
            stats.superseded() > 0,
            "no job was ever superseded: the worker was never behind ({stats:?})"
        );
        assert!(stats.stale > 0, "no result ever arrived stale ({stats:?})");
    }
    let wgpu_ready = h
        .state()
        .backend_statuses()
        .iter()
        .any(|(k, s)| *k == BackendKind::Wgpu && s.is_ok());
    assert!(
        wgpu_ready || !common::wgpu_required(),
        "wgpu is required here but the app never brought it up"
    );
    assert!(
        !wgpu_ready || events < 1000 || wgpu_frames > 0,
        "the monkey never ran on wgpu"
    );
    drop(place);
}

/// Every lesson at all its sliders' minimums, all maximums, and each slider alone at its maximum
/// (the model switch only alone, so SmolLM2 runs once per lesson, at the defaults): no panic, no NaN, every check passes (or the lesson shows a clear error).
#[test]
fn every_lesson_computes_at_its_slider_extremes() {
    let backend = kvscope::compute::CpuBackend::new();
    let lessons = kvscope::lessons::load_embedded().unwrap();
    for l in &lessons {
        let mut cases: Vec<kvscope::lessons::Params> = Vec::new();
        let defaults: kvscope::lessons::Params = l
            .file
            .params
            .iter()
            .map(|p| (p.id.get_ref().clone(), p.default_value()))
            .collect();
        // The real model runs once per lesson (the rule for the walks): the model switch at its
        // maximum alone, at the other sliders' defaults. The all-maximums case keeps the switch's default.
        let is_model = |p: &kvscope::lesson_file::Param| p.kind == kvscope::lesson_file::ParamKind::Model;
        cases.push(l.file.params.iter().map(|p| (p.id.get_ref().clone(), p.lo())).collect());
        cases.push(
            l.file
                .params
                .iter()
                .map(|p| {
                    (
                        p.id.get_ref().clone(),
                        if is_model(p) { p.default_value() } else { p.hi() },
                    )
                })
                .collect(),
        );
        for p in &l.file.params {
            let mut c = defaults.clone();
            c.insert(p.id.get_ref().clone(), p.hi());
            cases.push(c);
        }
        for mut params in cases {
            kvscope::lessons::normalize(l, &mut params);
            match kvscope::lessons::compute(l, &params, &backend) {
                Ok(out) => {
                    assert!(!out.has_nan(), "{} {params:?}: NaN", l.id());
                    for r in kvscope::ui::worker::verify_output(out.as_ref()) {
                        assert!(r.passed(), "{} {params:?}: {r}", l.id());
                    }
                }
                Err(e) => assert!(!e.is_empty(), "{} {params:?}: an error must say why", l.id()),
            }
        }
    }
}

/// A lesson's output depends only on its file, its sliders and the backend: every lesson computed twice
/// at its defaults exports the same arrays, bit for bit. This is what lets the walks share computed
/// results between their apps (`ui::worker::share_results`).
#[test]
fn recomputing_a_lesson_gives_the_same_numbers() {
    let backend = kvscope::compute::CpuBackend::new();
    for l in &kvscope::lessons::load_embedded().unwrap() {
        let mut params = kvscope::lessons::Params::new();
        kvscope::lessons::normalize(l, &mut params);
        let run = || {
            let out = kvscope::lessons::compute(l, &params, &backend).unwrap_or_else(|e| panic!("{}: {e}", l.id()));
            let (arrays, _) = out.export_arrays(0, None);
            assert!(!arrays.is_empty(), "{}: exports arrays", l.id());
            format!("{arrays:?}")
        };
        assert!(run() == run(), "{}: two computations at the defaults differ", l.id());
    }
}

/// The kernel entries a computation launched (or, on the CPU backend, stands in for), and the CUDA
/// threads they add up to: what the shim pays for, since it runs each block's threads one by one.
fn entries_and_threads(
    launches: &[kvscope::compute::launch::Launch],
) -> (std::collections::BTreeSet<&'static str>, u64) {
    (
        launches.iter().map(|l| l.dims.entry).collect(),
        launches.iter().map(|l| l.dims.threads()).sum(),
    )
}

/// Every lesson on the backend that runs the real `.cu` sources on CPU threads: every kernel result
/// agrees with the f64 reference, and every kernel entry the lesson launches at its defaults runs.
///
/// When the shim ran a block's threads as OS threads, a lesson at its defaults took up to minutes here
/// (all twelve about 14 minutes on 2 cores); its threads are now fibers, and the walk still keeps it
/// short: each lesson runs at the cheapest slider values
/// that launch the same kernel entries as its defaults: starting from the defaults, one integer slider at
/// a time is moved to its minimum (to 1 where the minimum is 0 and the default is not, so a feature that
/// is on stays on; never past a negative minimum), and the move is kept when the lesson still computes
/// on the CPU backend, launches exactly the same entries there, and launches fewer CUDA threads in all.
/// Switches, texts and the choice of format or policy that changes the entries are never moved. The
/// lessons are split round-robin over six tests, two lessons each, so that they run side by side (at
/// these values the twelve lessons took 335 s of shim work here on OS threads and take 6 s as fibers,
/// lesson 12 the most: 3.7 s in about 3,000 launches; each test prints its lessons' launches per entry
/// and time).
fn cuda_sim_walk(part: usize, parts: usize) {
    use kvscope::lessons::{Params, compute_with_launches, normalize};
    let sim = kvscope::compute::probe(kvscope::compute::BackendKind::CudaSim)
        .backend
        .unwrap();
    let cpu = kvscope::compute::CpuBackend::new();
    let lessons = kvscope::lessons::load_embedded().unwrap();
    assert!(lessons.len() >= parts, "every part has a lesson");
    for l in lessons.iter().skip(part).step_by(parts) {
        let mut params = Params::new();
        normalize(l, &mut params);
        let (out, launches) = compute_with_launches(l, &params, &cpu);
        out.unwrap_or_else(|e| panic!("{}: {e}", l.id()));
        let (entries, threads_at_defaults) = entries_and_threads(&launches);
        let mut threads = threads_at_defaults;
        let mut moved = Vec::new();
        for p in &l.file.params {
            if p.kind != kvscope::lesson_file::ParamKind::Int || p.lo() < 0 {
                continue;
            }
            let id = p.id.get_ref();
            let cur = params.get(id.as_str()).copied().unwrap_or(p.default_value());
            let target = if p.lo() == 0 && cur > 0 { 1 } else { p.lo() };
            if target >= cur {
                continue;
            }
            let mut trial = params.clone();
            trial.insert(id.clone(), target);
            normalize(l, &mut trial);
            let (out, launches) = compute_with_launches(l, &trial, &cpu);
            let (e, t) = entries_and_threads(&launches);
            if out.is_ok() && e == entries && t < threads {
                moved.push(format!(
                    "{id} {cur}→{}",
                    trial.get(id.as_str()).copied().unwrap_or(target)
                ));
                params = trial;
                threads = t;
            }
        }
        let t0 = std::time::Instant::now();
        let (out, launches) = compute_with_launches(l, &params, sim.as_ref());
        let out = out.unwrap_or_else(|e| panic!("{} {params:?}: {e}", l.id()));
        let (ran, _) = entries_and_threads(&launches);
        let mut per_entry = std::collections::BTreeMap::<&str, (usize, u64)>::new();
        for la in &launches {
            let e = per_entry.entry(la.dims.entry).or_default();
            e.0 += 1;
            e.1 += la.dims.threads();
        }
        eprintln!(
            "cuda-sim: {:18} launches (entry: count, threads): {per_entry:?}",
            l.id()
        );
        eprintln!(
            "cuda-sim: {:18} {:6.1?}  {} → {} CUDA threads ({})",
            l.id(),
            t0.elapsed(),
            threads_at_defaults,
            threads,
            if moved.is_empty() {
                "at its defaults".to_string()
            } else {
                moved.join(", ")
            }
        );
        assert_eq!(
            ran,
            entries,
            "{}: the shim launched the entries the defaults launch",
            l.id()
        );
        let reports = kvscope::ui::worker::verify_output(out.as_ref());
        assert!(!reports.is_empty(), "{}", l.id());
        for r in reports {
            assert!(r.passed(), "{} {params:?}: {r}", l.id());
        }
    }
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_1_of_6() {
    cuda_sim_walk(0, 6);
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_2_of_6() {
    cuda_sim_walk(1, 6);
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_3_of_6() {
    cuda_sim_walk(2, 6);
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_4_of_6() {
    cuda_sim_walk(3, 6);
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_5_of_6() {
    cuda_sim_walk(4, 6);
}

#[test]
fn every_lesson_runs_on_the_cuda_sim_backend_part_6_of_6() {
    cuda_sim_walk(5, 6);
}

fn has_nan(o: &dyn Output) -> bool {
    o.has_nan()
}

/// The worker computes off the calling thread, skips stale jobs and sends the verification after
/// the result.
#[test]
fn worker_recomputes_off_thread_and_verifies() {
    use kvscope::ui::worker::{Job, Msg, Worker};
    use std::sync::Arc;
    let lessons = kvscope::lessons::load_embedded().unwrap();
    let l = Arc::new(lessons.into_iter().find(|l| l.id() == "multi-head").unwrap());
    let w = Worker::spawn(|| {});
    let backend: Arc<dyn kvscope::compute::Backend> = Arc::new(kvscope::compute::CpuBackend::new());
    let main_thread = std::thread::current().id();
    for (g, heads) in [(1u64, 2i64), (2, 4), (3, 8)] {
        let mut params = kvscope::lessons::Params::new();
        kvscope::lessons::normalize(&l, &mut params);
        params.insert("heads".into(), heads);
        params.insert("kv_heads".into(), heads);
        w.submit(Job {
            generation: g,
            lesson: l.clone(),
            params,
            backend: backend.clone(),
        });
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut done = Vec::new();
    let mut verified = Vec::new();
    while verified.last() != Some(&3) && std::time::Instant::now() < deadline {
        for m in w.poll() {
            match m {
                Msg::Done { generation, result, .. } => {
                    let out = result.unwrap();
                    if generation == 3 {
                        let a = out.downcast_ref::<AttnOut>().unwrap();
                        assert_eq!(a.shape.n_heads, 8);
                    }
                    done.push(generation);
                }
                Msg::Verified { generation, reports } => {
                    assert!(reports.iter().all(|r| r.passed()));
                    verified.push(generation);
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(done.last(), Some(&3), "the newest job always completes: {done:?}");
    assert_eq!(verified.last(), Some(&3));
    assert_eq!(std::thread::current().id(), main_thread);
}

/// Lesson, step, language, theme and slider values survive a restart (eframe storage).
#[test]
fn state_persists_through_storage() {
    let mut a = KvscopeApp::new(&config(), None, None);
    a.goto(2, 3);
    a.lang = Lang::Zh;
    a.set_param("seq", 17);
    a.set_light(true);
    let saved = serde_json::to_string(&a.saved()).unwrap();
    let restored: kvscope::ui::Saved = serde_json::from_str(&saved).unwrap();
    let b = KvscopeApp::new(
        &AppConfig {
            fresh: false,
            ..config()
        },
        Some(restored),
        None,
    );
    assert_eq!(b.position(), (2, 3));
    assert_eq!(b.lang, Lang::Zh);
    assert_eq!(b.params().unwrap()["seq"], 17);
    assert!(b.saved().light);
}

/// Ctrl+E writes the step's tensors and a manifest in the `kvscope export` format.
#[test]
fn ctrl_e_exports_the_current_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = KvscopeApp::new(&config(), None, None);
    for (lesson, step) in [(0, 2), (3, 1), (4, 4)] {
        a.goto(lesson, step);
        a.update_now();
        let out = dir.path().join(format!("l{lesson}"));
        a.export_npy_to(&out).unwrap();
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
        let arrays = manifest["arrays"].as_object().unwrap();
        assert!(!arrays.is_empty());
        for (name, _) in arrays {
            let (shape, values) = kvscope::lessons::export::read_npy(&out.join(format!("{name}.npy"))).unwrap();
            assert_eq!(shape.iter().product::<usize>(), values.len(), "{name}");
        }
    }
}

/// Lesson 5's scenario replayed at several block sizes through the lesson code: the allocator
/// invariants hold after every step, the accounting adds up, every paged decode equals contiguous
/// attention, and every request finishes with all blocks back on the free list.
#[test]
fn lesson_five_replays_keep_the_invariants_at_every_block_size() {
    use kvscope::lessons as model;
    let lessons = kvscope::lessons::load_embedded().unwrap();
    let l = lessons.iter().find(|l| l.id() == "paged-cache").unwrap();
    let backend = kvscope::compute::CpuBackend::new();
    for (bs, slots) in [(1, 64), (2, 64), (3, 72), (4, 64), (8, 128), (16, 256), (64, 512)] {
        let blocks = slots / bs;
        let mut p = model::Params::new();
        model::normalize(l, &mut p);
        p.insert("block_size".into(), bs);
        p.insert("token_slots".into(), slots);
        let out = model::compute(l, &p, &backend).unwrap();
        let out = out.downcast_ref::<PagedOut>().unwrap();
        assert!(out.error.is_none(), "bs {bs}: {:?}", out.error);
        for (t, f) in out.frames.iter().enumerate() {
            f.invariants
                .as_ref()
                .unwrap_or_else(|e| panic!("bs {bs} step {t}: {e}"));
            let s = &f.stats;
            assert_eq!(s.blocks_used + s.blocks_free, s.total_blocks);
            assert_eq!(s.blocks_free, f.free.len());
            assert_eq!(s.slots_allocated, s.blocks_used * bs as usize);
            assert_eq!(s.slots_allocated - s.tokens_stored, s.internal_fragmentation);
            assert_eq!(s.tokens_stored, f.lens.values().sum::<usize>());
            assert_eq!(f.grid.owners.iter().filter(|&&o| o >= 0).count(), s.blocks_used);
            if let Some(c) = &f.check {
                assert!(c.passed(), "bs {bs} step {t}: {c}");
            }
        }
        let last = out.frames.last().unwrap();
        assert_eq!(last.free.len(), blocks as usize, "bs {bs}: every block returned");
    }
}

/// Ctrl+S: the current frame through the offscreen renderer, as a PNG.
#[test]
fn ctrl_s_saves_the_frame_as_png() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = KvscopeApp::new(&config(), None, None);
    a.goto(4, 4);
    let path = a.export_png([960, 600], dir.path()).unwrap();
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (960, 600));
    let distinct: std::collections::HashSet<&[u8]> = buf.chunks_exact(4).step_by(5).collect();
    assert!(distinct.len() > 40, "the PNG is not blank");
}

/// With the worker (the windowed app's mode), a big lesson-3 result arrives off the UI thread while
/// frames keep running, and its 16 heatmaps are swapped in over several frames (the upload budget)
/// instead of all in one.
#[test]
fn big_results_arrive_off_thread_and_upload_over_several_frames() {
    use kvscope::ui::widgets::view_id as vid;
    let cfg = AppConfig {
        sync: false,
        ..config()
    };
    let mut h = Harness::builder()
        .with_size(eframe::egui::vec2(1280.0, 800.0))
        .build_eframe(|cc| kvscope::ui::create(cc, &cfg));
    let li = lesson_index(&h, "multi-head");
    h.state_mut().goto(li, 1);
    for (k, v) in [("seq", 1024), ("d_model", 1024), ("heads", 16), ("kv_heads", 16)] {
        h.state_mut().set_param(k, v);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut saw_computing = false;
    let gens = loop {
        h.step();
        saw_computing |= h.state().computing();
        if let Some(a) = h.state().output().and_then(|o| o.downcast_ref::<AttnOut>())
            && a.shape.n_heads == 16
        {
            break a.maps.probs.iter().map(|d| d.generation).collect::<Vec<_>>();
        }
        assert!(std::time::Instant::now() < deadline, "the result never arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        saw_computing,
        "the UI kept running (and said so) while the worker computed"
    );
    let mut frames = 0;
    loop {
        let shown = (0..16)
            .filter(|&k| {
                h.state()
                    .widgets
                    .heat
                    .shown
                    .get(&vid("head", k))
                    .is_some_and(|d| d.generation == gens[k])
            })
            .count();
        if shown == 16 {
            break;
        }
        h.step();
        frames += 1;
        assert!(frames < 50, "only {shown} of 16 heatmaps swapped in");
    }
    // The frame that received the result swapped in the first four.
    assert!(
        frames >= 3,
        "16 × 1024² cells need four frames at 4·2²⁰ per frame; took the arrival frame plus {frames}"
    );
}

/// The tick marks and labels of a heatmap sit at their cells' centres (±1 px), read back from the
/// rendered frame: lesson 1's score matrix (T = 8), the first, a middle and the last row and column.
#[test]
fn heatmap_ticks_sit_at_cell_centres() {
    let mut h = harness(true);
    go(&mut h, "attention-matrix", 2);
    let rect = h.state().widgets.heat.rects[&kvscope::ui::widgets::view_id("scores", 0)];
    let img = h.render().expect("render");
    let ppp = img.width() as f32 / 1280.0;
    let bg = img.get_pixel(2, img.height() / 2).0;
    // How far a pixel is from the background, summed over the channels.
    let ink = |x: f32, y: f32| -> f32 {
        let p = img.get_pixel((x * ppp) as u32, (y * ppp) as u32).0;
        (0..3).map(|c| (i32::from(p[c]) - i32::from(bg[c])).abs() as f32).sum()
    };
    // Runs of ink along a line of pixels: (centre weighted by ink).
    let runs = |pts: Vec<(f32, f32)>| -> Vec<f32> {
        let mut out = Vec::new();
        let (mut wsum, mut psum) = (0.0, 0.0);
        for (pos, w) in pts {
            if w > 30.0 {
                wsum += w;
                psum += w * pos;
            } else if wsum > 0.0 {
                out.push(psum / wsum);
                (wsum, psum) = (0.0, 0.0);
            }
        }
        out
    };
    let t = 8;
    let cell = rect.height() / t as f32;
    // Row tick marks: a column of pixels 2 points left of the heatmap.
    let x = rect.min.x - 2.5;
    let rows = runs(
        (rect.min.y as i32 - 2..rect.max.y as i32 + 3)
            .map(|y| (y as f32 + 0.5, ink(x, y as f32 + 0.5)))
            .collect(),
    );
    assert_eq!(rows.len(), t, "one tick mark per row: {rows:?}");
    // Column tick marks: a row of pixels 2.5 points below the heatmap.
    let y = rect.max.y + 2.5;
    let cols = runs(
        (rect.min.x as i32 - 2..rect.max.x as i32 + 3)
            .map(|x| (x as f32 + 0.5, ink(x as f32 + 0.5, y)))
            .collect(),
    );
    assert_eq!(cols.len(), t, "one tick mark per column: {cols:?}");
    for i in [0, t / 2, t - 1] {
        let want_y = rect.min.y + (i as f32 + 0.5) * cell;
        assert!(
            (rows[i] - want_y).abs() <= 1.0,
            "row {i}: tick at {} want {want_y}",
            rows[i]
        );
        let want_x = rect.min.x + (i as f32 + 0.5) * cell;
        assert!(
            (cols[i] - want_x).abs() <= 1.0,
            "column {i}: tick at {} want {want_x}",
            cols[i]
        );
        // The label is drawn beside its tick: ink left of the mark around the row's centre, and
        // below the mark around the column's centre, and none halfway to the next cell.
        let label_ink = |xs: std::ops::Range<i32>, ys: std::ops::Range<i32>| -> f32 {
            xs.flat_map(|x| ys.clone().map(move |y| (x, y)))
                .map(|(x, y)| ink(x as f32 + 0.5, y as f32 + 0.5))
                .sum()
        };
        let lx = rect.min.x as i32;
        let ly = want_y as i32;
        assert!(
            label_ink(lx - 20..lx - 5, ly - 3..ly + 3) > 500.0,
            "row {i}: no label beside its tick"
        );
        let cx = want_x as i32;
        let by = rect.max.y as i32;
        assert!(
            label_ink(cx - 3..cx + 3, by + 6..by + 16) > 500.0,
            "column {i}: no label below its tick"
        );
        let mid = (want_y + cell / 2.0) as i32;
        if i + 1 < t {
            assert!(
                label_ink(lx - 20..lx - 5, mid - 1..mid + 1) < 100.0,
                "row {i}: label ink between rows"
            );
        }
    }
}

/// Presentation mode at 1920×1080: no text on any step is smaller than the windowed mode's narration
/// body text (read from the text shapes egui paints), and lesson 3's heads grid is snapshotted.
#[test]
fn presentation_text_is_never_smaller_than_windowed_body_text() {
    fn walk(shape: &eframe::egui::Shape, out: &mut Vec<(f32, String)>) {
        match shape {
            eframe::egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, out)),
            eframe::egui::Shape::Text(t) => {
                for sec in &t.galley.job.sections {
                    let text = &t.galley.job.text[sec.byte_range.start.0..sec.byte_range.end.0];
                    if !text.trim().is_empty() {
                        out.push((sec.format.font_id.size, text.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    let mut h = Harness::builder()
        .with_size(eframe::egui::vec2(1920.0, 1080.0))
        .wgpu()
        .build_eframe(|cc| kvscope::ui::create(cc, &config()));
    h.state_mut().presentation = true;
    let min = h.state().windowed_body_size();
    let steps: Vec<(usize, usize)> = h
        .state()
        .lessons()
        .iter()
        .enumerate()
        .flat_map(|(i, l)| (0..l.file.steps.len()).map(move |j| (i, j)))
        .collect();
    let mut small = Vec::new();
    for (i, j) in steps {
        for lang in [Lang::En, Lang::Zh] {
            h.state_mut().lang = lang;
            h.state_mut().goto(i, j);
            settle(&mut h);
            let mut texts = Vec::new();
            for c in &h.output().shapes {
                walk(&c.shape, &mut texts);
            }
            assert!(texts.len() > 10, "lesson {i} step {j}: the frame has text");
            for (size, text) in texts {
                if size + 1e-3 < min {
                    small.push(format!(
                        "lesson {} step {} {lang:?}: {size:.1} pt {text:?}",
                        i + 1,
                        j + 1
                    ));
                }
            }
        }
    }
    small.dedup();
    assert!(
        small.is_empty(),
        "{} texts below {min} pt:\n{}",
        small.len(),
        small.join("\n")
    );
    h.state_mut().lang = Lang::En;
    go(&mut h, "multi-head", 1);
    let mut failures = Vec::new();
    lesson_snapshot(&mut h, "presentation-multi-head-02", &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A step shows the same thing however it was reached: opened directly, or stepped back into from the
/// lesson's last step (a step without `at` opens at the start of the timeline; a control another step
/// sets goes back to its default). Compared: the timeline position, the sliders and the filled narration.
#[test]
fn a_step_does_not_depend_on_how_it_was_reached() {
    let n = KvscopeApp::new(&config(), None, None).lessons().len();
    for i in 0..n {
        let steps = KvscopeApp::new(&config(), None, None).lessons()[i].file.steps.len();
        let mut walked = KvscopeApp::new(&config(), None, None);
        walked.goto(i, steps - 1);
        walked.update_now();
        for j in (0..steps).rev() {
            if j + 1 < steps {
                walked.prev_step();
                walked.update_now();
            }
            let mut direct = KvscopeApp::new(&config(), None, None);
            direct.goto(i, j);
            direct.update_now();
            let id = direct.lessons()[i].id().to_string();
            assert!(
                direct.output().is_some() && walked.output().is_some(),
                "{id} step {}: computed",
                j + 1
            );
            assert_eq!(
                walked.cursor(),
                direct.cursor(),
                "{id} step {}: timeline position",
                j + 1
            );
            assert_eq!(walked.params(), direct.params(), "{id} step {}: sliders", j + 1);
            assert_eq!(walked.narration(), direct.narration(), "{id} step {}: narration", j + 1);
        }
    }
}

/// Predict, then reveal, through the UI: in class mode a step with a question shows the question in place
/// of its views and narration; a guess typed into the answer box and checked is graded against the
/// lesson's own answer (wrong, then right, on two steps), and the step's views appear once it is answered;
/// a choice is answered with its button. Outside class mode the question sits under the narration and
/// the views show at once.
#[test]
fn class_mode_veils_a_step_until_its_question_is_answered() {
    use kvscope::lessons::questions::Answer;
    let mut h = harness(false);
    h.state_mut().set_class_mode(true);
    let l = lesson_index(&h, "paged-cache");
    let recompute = step_index(&h, l, "recompute");
    go(&mut h, "paged-cache", recompute);
    assert!(h.state().veiled(), "the step is veiled in class mode");
    assert!(h.query_by_label_contains("Predict first").is_some());
    assert!(
        h.query_all_by_label_contains("block tables").next().is_none(),
        "the views are veiled"
    );
    let number = |h: &Harness<'static, KvscopeApp>| match h.state().question_answers()[0].clone() {
        Ok(Answer::Number { value, .. }) => value,
        other => panic!("a number question: {other:?}"),
    };
    // A wrong guess: one more than the lesson's answer.
    let blocks = number(&h);
    h.get_by_role_and_label(Role::TextInput, "your guess").focus();
    h.get_by_role_and_label(Role::TextInput, "your guess")
        .type_text(&format!("{}", blocks + 1.0));
    settle(&mut h);
    h.get_by_label("Check").click();
    settle(&mut h);
    assert!(!h.state().veiled(), "an answered question reveals the step");
    assert!(
        h.query_by_label_contains(&format!("you said {}, the run gives {blocks}", blocks + 1.0))
            .is_some(),
        "the wrong guess is graded against the lesson's answer"
    );
    assert!(
        h.query_all_by_label_contains("block tables").next().is_some(),
        "the views are back"
    );
    // A right guess on another lesson's step.
    let l = lesson_index(&h, "prefix-cache");
    let s = step_index(&h, l, "fully-cached");
    go(&mut h, "prefix-cache", s);
    assert!(h.state().veiled());
    let hits = number(&h);
    h.get_by_role_and_label(Role::TextInput, "your guess").focus();
    h.get_by_role_and_label(Role::TextInput, "your guess")
        .type_text(&format!("{hits}"));
    h.key_press(eframe::egui::Key::Enter);
    settle(&mut h);
    assert!(h.query_by_label_contains("Right: the run gives").is_some());
    assert!(!h.state().veiled());
    // A choice, answered with its button; R reveals a step without an answer.
    let l = lesson_index(&h, "serving");
    let s = step_index(&h, l, "speculative");
    go(&mut h, "serving", s);
    assert!(h.state().veiled());
    h.get_by_label("the same, byte for byte").click();
    settle(&mut h);
    assert!(!h.state().veiled());
    assert!(h.query_by_label_contains("Right: the run gives the same").is_some());
    let l = lesson_index(&h, "flash-attention");
    let s = step_index(&h, l, "causal");
    go(&mut h, "flash-attention", s);
    assert!(h.state().veiled());
    h.key_press(eframe::egui::Key::R);
    settle(&mut h);
    assert!(!h.state().veiled(), "R reveals");
    assert!(h.query_by_label_contains("Answer: the run gives").is_some());
    // Out of class mode: no veil, the question under the narration.
    h.state_mut().set_class_mode(false);
    let l = lesson_index(&h, "quantization");
    let s = step_index(&h, l, "formats");
    go(&mut h, "quantization", s);
    assert!(!h.state().veiled());
    assert!(h.query_by_label_contains("Predict:").is_some());
}

/// Every question of every lesson, answered through the UI as a student would (typed into its box and
/// checked, a choice's button, a pick's cell, row or block clicked), first right and then wrong: each is
/// graded against the answer the lesson computed, and answering them all lifts class mode's veil.
#[test]
fn every_question_is_answered_right_and_wrong_through_the_ui() {
    use kvscope::lessons::questions::{Answer, Guess, a_wrong_guess};
    let mut h = harness(false);
    h.state_mut().set_class_mode(true);
    let mut answered = 0;
    for l in 0..h.state().lessons().len() {
        let id = h.state().lessons()[l].id().to_string();
        let steps: Vec<usize> = h.state().lessons()[l]
            .file
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.questions.is_empty())
            .map(|(i, _)| i)
            .collect();
        for s in steps {
            go(&mut h, &id, s);
            let answers: Vec<Answer> = h
                .state()
                .question_answers()
                .into_iter()
                .map(|a| a.unwrap_or_else(|e| panic!("{id} step {}: no answer: {e}", s + 1)))
                .collect();
            for right in [true, false] {
                h.state_mut().clear_answers();
                settle(&mut h);
                assert!(h.state().veiled(), "{id} step {}: veiled before its answers", s + 1);
                for (q, a) in answers.iter().enumerate() {
                    let guess = if right {
                        match a {
                            Answer::Number { value, .. } => Guess::Number(*value),
                            Answer::Choice(k) => Guess::Choice(*k),
                            Answer::Pick(p) => Guess::Pick(*p),
                        }
                    } else {
                        a_wrong_guess(a)
                    };
                    match guess {
                        Guess::Number(v) => {
                            // The first box left is this question's (those answered are gone).
                            let shown = match a {
                                Answer::Number { shown, .. } if right => shown.clone(),
                                _ => format!("{v}"),
                            };
                            let bx = h
                                .get_all_by_role_and_label(Role::TextInput, "your guess")
                                .next()
                                .unwrap();
                            bx.focus();
                            bx.type_text(&shown);
                            settle(&mut h);
                            h.get_all_by_label("Check").next().unwrap().click();
                        }
                        Guess::Choice(k) => {
                            let label = h.state().choice_label(q, k).unwrap();
                            h.get_by_label(&label).click();
                        }
                        Guess::Pick(p) => {
                            let qs = h.state().questions()[q].clone();
                            let label = h.state().pick_surface(&qs).unwrap().describe(p, false);
                            h.get_by_label(&label).click();
                        }
                    }
                    settle(&mut h);
                    assert_eq!(
                        h.state().graded(q),
                        Some(right),
                        "{id} step {}: question {} answered {} through the UI",
                        s + 1,
                        q + 1,
                        if right { "right" } else { "wrong" }
                    );
                    answered += 1;
                }
                assert!(
                    !h.state().veiled(),
                    "{id} step {}: every question answered lifts the veil",
                    s + 1
                );
                let verdict = if right { "Right: the run gives" } else { "Not this time" };
                assert_eq!(
                    h.query_all_by_label_contains(verdict).count(),
                    answers.len(),
                    "{id} step {}: each answer graded on screen",
                    s + 1
                );
            }
        }
    }
    assert!(answered >= 2 * 26, "{answered} answers given");
}

/// The kernel panel's exercise tab: the blank fails with a map of where it is wrong, the solution passes,
/// both graded in a child process against the f64 reference; a lesson without exercises has no tab.
#[test]
fn an_exercise_fails_blank_and_passes_solved_in_the_kernel_panel() {
    let mut h = harness(false);
    h.state_mut().widgets.kernel.exercise.grader = Some(env!("CARGO_BIN_EXE_kvscope").into());
    let l = lesson_index(&h, "causal-mask");
    let s = step_index(&h, l, "kernel");
    go(&mut h, "causal-mask", s);
    h.get_by_label("exercise: causal-mask").click();
    settle(&mut h);
    assert!(
        h.query_by_label_contains("Exercise: The causal mask's predicate")
            .is_some()
    );
    h.get_by_label("Run and grade").click();
    step_until(&mut h, 200, |h| h.query_by_label_contains("FAIL:").is_some());
    assert!(h.query_by_label_contains("FAIL:").is_some(), "the blank fails");
    assert!(h.query_by_label_contains("where attention.").is_some(), "with a map");
    // The views run the student's kernel: the blank's mask hides nothing, so row 0 reads key 1.
    let weight_01 = |h: &Harness<'static, KvscopeApp>| {
        let out = h.state().output().expect("a result").clone();
        let a = out
            .downcast_ref::<kvscope::lessons::attention_layer::AttnOut>()
            .expect("lesson 2 computes attention");
        a.core.probs[[0, 0, 1]]
    };
    assert_eq!(weight_01(&h), 0.0, "the shipped kernel masks key 1 for query 0");
    h.get_by_label("Run the lesson on my kernel").click();
    step_until(&mut h, 50, |h| weight_01(h) > 0.0);
    assert!(
        weight_01(&h) > 0.0,
        "the views show the blank kernel's unmasked softmax"
    );
    assert!(
        h.query_by_label_contains("The views show what your kernel computed")
            .is_some()
    );
    h.get_by_label("Back to the shipped kernels").click();
    step_until(&mut h, 50, |h| weight_01(h) == 0.0);
    assert_eq!(weight_01(&h), 0.0, "back on the shipped kernel");
    h.get_by_label("Show solution").click();
    settle(&mut h);
    h.get_by_label("Run and grade").click();
    step_until(&mut h, 200, |h| h.query_by_label_contains("PASS:").is_some());
    assert!(h.query_by_label_contains("PASS:").is_some(), "the solution passes");
    // Lesson 6's kernel step has its own exercise; the kernel tab puts the source back.
    let l = lesson_index(&h, "flash-attention");
    let s = step_index(&h, l, "kernel");
    go(&mut h, "flash-attention", s);
    assert!(h.query_by_label("exercise: flash-rescale").is_some());
}

/// Whether a label containing `text` is on screen.
fn shows(h: &Harness<'static, KvscopeApp>, text: &str) -> bool {
    h.query_all_by_label_contains(text).next().is_some()
}

/// #57: the processes of lessons 10 and 12 step with the presenter's keys (down and up), their bars
/// naming what each position does: lesson 12's schedule scheduler step by scheduler step (each step's
/// prefill chunks, within the token budget), its speculative passes one by one, and lesson 10's KIVI
/// cache byte by byte, against KIVI's rule worked out here (K quantised in whole R once R have gathered,
/// V all but the last R).
#[test]
fn timelines_of_lessons_10_and_12_step_with_the_keys() {
    use eframe::egui::Key;
    use kvscope::lessons::serving::ServingOut;
    let mut h = harness(false);
    let li = lesson_index(&h, "serving");
    let batch = step_index(&h, li, "batch");
    go(&mut h, "serving", batch);
    let out = h.state().output().unwrap().clone();
    let o = out.downcast_ref::<ServingOut>().unwrap();
    let run = o.run.as_ref().expect("the default scenario runs");
    let n = run.steps.len();
    assert_eq!(
        h.state().cursor(),
        o.busiest_step().unwrap(),
        "step 1 opens at its busiest step"
    );
    h.state_mut().set_cursor(0);
    settle(&mut h);
    for (t, e) in run.steps.iter().enumerate() {
        assert_eq!(h.state().cursor(), t);
        assert!(
            shows(&h, &format!("step {t} / {}", n - 1)),
            "scheduler step {t} named on the bar"
        );
        for &(r, first, len) in &e.chunks {
            let text = format!(
                "request {r} prefills {first}…{} of {}",
                first + len - 1,
                o.requests[r as usize].1
            );
            assert!(shows(&h, &text), "step {t}: {text}");
        }
        let tokens: usize = e.chunks.iter().map(|c| c.2).sum::<usize>() + e.decoded.len();
        assert!(
            tokens <= o.budget,
            "step {t}: {tokens} tokens over the budget {}",
            o.budget
        );
        h.key_press(Key::ArrowDown);
        settle(&mut h);
    }
    assert_eq!(h.state().cursor(), n - 1, "the timeline stops at its last step");

    let spec = step_index(&h, li, "speculative");
    go(&mut h, "serving", spec);
    let passes = &o.spec.steps;
    let last = h.state().cursor();
    assert!(!passes[last].proposed.is_empty() && passes[last + 1..].iter().all(|p| p.proposed.is_empty()));
    for c in (0..=last).rev() {
        let p = &passes[c];
        let text = format!(
            "target pass {} / {} (the 1st was the prompt's prefill), at position {}: keeps {} of {} drafts",
            c + 2,
            passes.len() + 1,
            p.pos,
            p.accepted,
            p.proposed.len()
        );
        assert!(shows(&h, &text), "pass {c}: {text}");
        assert!(p.accepted <= p.proposed.len() && p.proposed.len() <= o.spec.k);
        h.key_press(Key::ArrowUp);
        settle(&mut h);
    }
    assert_eq!(h.state().cursor(), 0);

    // Lesson 10's KIVI step, at the lesson's default G = R = 32 over its 256-byte window.
    let lq = lesson_index(&h, "quantization");
    let kivi = step_index(&h, lq, "kivi");
    go(&mut h, "quantization", kivi);
    let (g, r) = {
        let p = h.state().params().unwrap();
        (p["group"] as usize, p["residual"] as usize)
    };
    assert_eq!(h.state().cursor(), 255, "the KIVI step opens at the window's last byte");
    h.state_mut().set_cursor(0);
    settle(&mut h);
    for t in 0..256usize {
        let len = t + 1;
        let (k, v) = (len / r * r, len.saturating_sub(r));
        // What the step's group_quant jobs quantise: K's R tokens when they complete, V's byte t − R.
        let k_job = (len % r == 0).then(|| format!(" · this step quantises K of bytes {}…{t}", len - r));
        let v_job = (t >= r).then(|| match &k_job {
            Some(_) => format!(" and V of byte {}", t - r),
            None => format!(" · this step quantises V of byte {}", t - r),
        });
        let text = format!(
            "byte {t} / 255: K {k} quantised, {} f16 · V {v} quantised, {} f16{}{}",
            len - k,
            len - v,
            k_job.unwrap_or_default(),
            v_job.unwrap_or_default()
        );
        // The label may break between its " · " phrases where the view is narrow (the break replaces the " · ").
        let shown = h
            .query_all_by(|n| n.value().is_some_and(|v| v.replace('\n', " · ") == text))
            .next();
        assert!(shown.is_some(), "byte {t} (G = {g}): {text}");
        h.key_press(Key::ArrowDown);
        h.step();
    }
}
