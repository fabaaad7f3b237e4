//! `kvscope render`: the app's real frame of a lesson step (or of every step) drawn without a window.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use kvscope::compute::BackendKind;
use kvscope::compute::bench::{sweep_contexts, sweep_point};
use kvscope::lessons::Schema;
use kvscope::lessons::kv_decode::KvDecode;
use kvscope::lessons::kv_decode::sweep::Sweep;
use kvscope::ui::headless::Headless;
use kvscope::ui::text::Lang;
use kvscope::ui::{AppConfig, KvscopeApp};

/// What `kvscope render` draws.
#[derive(Args)]
pub struct RenderArgs {
    /// Lesson id (see `kvscope lessons list`), or `all` to render every step of every lesson
    /// into the folder given by --out.
    #[arg(long)]
    pub lesson: String,
    /// Step number, from 1.
    #[arg(long, default_value_t = 1)]
    pub step: usize,
    /// Language: en or zh.
    #[arg(long, default_value = "en")]
    pub lang: String,
    /// Frame size in pixels, WxH.
    #[arg(long, default_value = "1600x900")]
    pub size: String,
    /// Presentation mode.
    #[arg(long)]
    pub present: bool,
    /// With --present: the views' page to draw, from 1 (a view too long for the slide pages what it shows;
    /// the presenter's → turns the pages).
    #[arg(long, default_value_t = 1)]
    pub view_page: usize,
    /// With --present: the presenter's page to draw, from 1, as the narration's foot counts them (the
    /// narration's pages, then the views'): the frame after pressing → that many times less one.
    #[arg(long, default_value_t = 1)]
    pub page: usize,
    /// Light theme.
    #[arg(long)]
    pub light: bool,
    /// Class mode on or off (by default it follows --present): a step with questions is veiled until
    /// they are answered or revealed.
    #[arg(long)]
    pub class_mode: Option<bool>,
    /// Reveal the step's questions and their answers (class mode's R).
    #[arg(long)]
    pub reveal: bool,
    /// Answer the step's questions with these guesses, in order (a number, a choice from 1, or for a pick
    /// the item's index from 0: a heatmap cell's row × columns + column, a row, a block), before
    /// drawing: the frame shows each guess graded against the lesson's answer.
    #[arg(long, value_delimiter = ',')]
    pub answer: Vec<String>,
    /// Open this kernel exercise in the step's kernel panel (`kvscope exercise list`).
    #[arg(long)]
    pub exercise: Option<String>,
    /// With --exercise: this file in its editor instead of the blank.
    #[arg(long)]
    pub exercise_source: Option<PathBuf>,
    /// With --exercise: grade the editor's text before drawing (in a child process, as Run does).
    #[arg(long)]
    pub grade: bool,
    /// With --exercise --grade: then run the lesson's views on the edited kernel ("Run the lesson on my
    /// kernel").
    #[arg(long)]
    pub on_my_kernel: bool,
    /// Backend to compute on.
    #[arg(long, default_value = "cpu")]
    pub backend: BackendKind,
    /// Timeline position (decode token / scheduler step) instead of the step's own.
    #[arg(long)]
    pub at: Option<usize>,
    /// Draw the step's last move halfway, or this fraction (0 to 1) of the way, through its transition
    /// (from timeline position --at − 1, or the step's own less one) instead of the settled frame.
    #[arg(long)]
    pub transition: Option<f32>,
    /// Slider values, id=value (repeatable).
    #[arg(long = "set", value_parser = super::parse_set)]
    pub set: Vec<super::SetArg>,
    /// Run lesson 4's bandwidth sweep on the backend first, so its plot shows this machine's numbers.
    #[arg(long)]
    pub measure: bool,
    /// Output PNG (or folder, with --lesson all).
    #[arg(long)]
    pub out: PathBuf,
    /// Also write every text run of the frame (string, rect, clip rect, font size, colour, in pixels of
    /// the PNG) as JSON: to FILE, or without one beside the PNG as `<frame>.layout.json` (the only form
    /// with --lesson all). The format is in the README.
    #[arg(long, num_args = 0..=1, default_missing_value = "beside-the-png", value_name = "FILE")]
    pub layout_json: Option<PathBuf>,
    /// Exit non-zero when any text run leaves its clip rect (outside a scroll area that scrolls that
    /// way, and not elided with "…"), naming the step and the text.
    #[arg(long)]
    pub fail_on_overflow: bool,
}

/// Run `kvscope render`.
pub fn run(lessons: Option<PathBuf>, args: RenderArgs) -> Result<bool> {
    let RenderArgs {
        lesson,
        step,
        lang,
        size,
        present,
        view_page,
        page,
        light,
        class_mode,
        reveal,
        answer,
        exercise,
        exercise_source,
        grade,
        on_my_kernel,
        backend,
        at,
        transition,
        set,
        measure,
        out,
        layout_json,
        fail_on_overflow,
    } = args;
    let size = parse_size(&size)?;
    let lang = match lang.as_str() {
        "en" => Lang::En,
        "zh" => Lang::Zh,
        other => bail!("--lang {other}: expected en or zh"),
    };
    let config = AppConfig {
        lessons_dir: lessons,
        sync: true,
        fresh: true,
        export_dir: None,
    };
    let mut app = KvscopeApp::new(&config, None, None);
    if !app.load_errors().is_empty() {
        for e in app.load_errors() {
            eprintln!("{e}");
        }
        bail!("the lesson files have errors");
    }
    app.lang = lang;
    app.presentation = present;
    app.set_light(light);
    app.choose_backend(backend);
    if app.active_backend() != backend {
        eprintln!(
            "kvscope: {}",
            app.fallback().unwrap_or_else(|| "backend unavailable".into())
        );
    }
    if measure {
        let b = app.running_backend();
        let mut points = Vec::new();
        for c in sweep_contexts(b.kind()) {
            let p = sweep_point(b.as_ref(), c).map_err(|e| anyhow::anyhow!(e))?;
            eprintln!(
                "measured ctx {}: decode {:.2} GB/s, read-only stream {:.2} GB/s, copy (read+written) {:.2} GB/s",
                p.context, p.kernel, p.read, p.copy
            );
            points.push(p);
        }
        let balance = points
            .last()
            .filter(|p| p.device == kvscope::compute::Device::Host)
            .map(|p| (kvscope::compute::bench::best_gemm_gflops(1024).0, p.read));
        let sweep = app.lesson_state::<Sweep>(KvDecode.name());
        sweep.points = points;
        sweep.backend = Some(b.kind());
        sweep.balance = balance;
    }
    let mut headless = Headless::new().map_err(|e| anyhow::anyhow!(e))?;
    let mut targets = Vec::new();
    if lesson == "all" {
        std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
        for (i, l) in app.lessons().iter().enumerate() {
            for j in 0..l.file.steps.len() {
                let suffix = if lang == Lang::Zh { "-zh" } else { "" };
                targets.push((i, j, out.join(format!("{}-{:02}{suffix}.png", l.id(), j + 1))));
            }
        }
    } else {
        let Some(i) = app.lessons().iter().position(|l| l.id() == lesson) else {
            let ids: Vec<String> = app.lessons().iter().map(|l| l.id().to_string()).collect();
            bail!("no lesson `{lesson}` (lessons: {})", ids.join(", "));
        };
        let n = app.lessons()[i].file.steps.len();
        if step == 0 || step > n {
            bail!("--step {step}: lesson `{lesson}` has steps 1..={n}");
        }
        targets.push((i, step - 1, out.clone()));
    }
    let chosen: Vec<&kvscope::lessons::Lesson> = targets.iter().map(|t| &*app.lessons()[t.0]).collect();
    let set = super::check_sets(&chosen, &set)?;
    for l in &chosen {
        kvscope::lessons::apply_set(l, &mut kvscope::lessons::Params::new(), &set).map_err(|e| anyhow::anyhow!(e))?;
    }
    let mut overflowed = Vec::new();
    for (i, j, path) in targets {
        app.goto(i, j);
        let params: Vec<String> = app.lessons()[i]
            .file
            .params
            .iter()
            .map(|p| p.id.get_ref().clone())
            .collect();
        for (k, v) in set.iter().filter(|(k, _)| params.contains(k)) {
            app.set_param(k, *v);
        }
        if let Some(a) = at {
            app.set_cursor(a);
        }
        app.set_view_page(view_page.saturating_sub(1));
        if let Some(on) = class_mode {
            app.set_class_mode(on);
        }
        if reveal {
            app.reveal();
        }
        if let Some(id) = &exercise {
            let x = kvscope::exercises::find(id).map_err(|e| anyhow::anyhow!(e))?;
            let state = &mut app.widgets.kernel.exercise;
            state.open(id);
            if let Some(f) = &exercise_source {
                let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
                state.set_text(id, text);
            }
            if grade {
                state.run(&x, lang == Lang::Zh, true);
                let ran = state
                    .grade
                    .get(id)
                    .is_some_and(|g| g.compile_errors.is_empty() && g.error.is_none());
                if on_my_kernel && ran {
                    state.use_edited(&x).map_err(|e| anyhow::anyhow!(e))?;
                }
            }
        }
        for (q, g) in answer.iter().enumerate() {
            let choice = app.questions().get(q).is_some_and(|x| !x.choices.is_empty());
            let pick = app.questions().get(q).is_some_and(|x| x.pick.is_some());
            let guess = if pick {
                // A pick: the item's index (a heatmap cell's row × columns + column).
                g.trim()
                    .parse::<usize>()
                    .ok()
                    .map(kvscope::lessons::questions::Guess::Pick)
            } else if choice {
                g.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|k| *k >= 1)
                    .map(|k| kvscope::lessons::questions::Guess::Choice(k - 1))
            } else {
                kvscope::lessons::questions::Guess::typed(g)
            };
            let guess = guess.with_context(|| format!("--answer {g}: not a guess for question {}", q + 1))?;
            app.answer(q, guess);
        }
        if page > 1 {
            // The pages are counted by drawing the step once; → then turns them, never past the step.
            headless
                .render(size, 1.0, kvscope::ui::headless::SETTLE_FRAMES, |ui| app.show(ui))
                .map_err(|e| anyhow::anyhow!(e))?;
            for _ in 1..page {
                let (n, ns) = app.narration_page();
                let (v, vs) = app.view_page();
                if n + 1 >= ns && v + 1 >= vs {
                    break;
                }
                app.next_page_or_step();
            }
        }
        if let Some(f) = transition {
            if !(0.0..=1.0).contains(&f) {
                bail!("--transition {f}: expected a fraction from 0 to 1");
            }
            // The step's own position is resolved once its result is in; the frame before it is drawn
            // first, so the move into it is the one a presenter's key makes.
            app.update_now();
            let to = app.cursor();
            if to == 0 {
                bail!("--transition: the timeline is at its start, so no move leads into this frame (try --at)");
            }
            kvscope::ui::widgets::motion::preview(Some(f));
            app.set_cursor(to - 1);
            headless
                .render(size, 1.0, kvscope::ui::headless::SETTLE_FRAMES, |ui| app.show(ui))
                .map_err(|e| anyhow::anyhow!(e))?;
            app.set_cursor(to);
        }
        let img = headless
            .render(size, 1.0, kvscope::ui::headless::SETTLE_FRAMES, |ui| app.show(ui))
            .map_err(|e| anyhow::anyhow!(e))?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        img.write_png(&path).map_err(|e| anyhow::anyhow!(e))?;
        outln!("{}", path.display());
        let layout = headless.layout().context("the frame recorded no layout")?;
        if let Some(file) = &layout_json {
            let file = if file.as_os_str() == "beside-the-png" || lesson == "all" {
                path.with_extension("layout.json")
            } else {
                file.clone()
            };
            let json = serde_json::to_string_pretty(layout)?;
            std::fs::write(&file, json).with_context(|| format!("cannot write {}", file.display()))?;
        }
        let name = format!("{} step {}", app.lessons()[i].id(), j + 1);
        for t in layout.overflows() {
            overflowed.push(format!(
                "{name}: {:?} at [{:.0}, {:.0}, {:.0}, {:.0}] leaves its clip [{:.0}, {:.0}, {:.0}, {:.0}]",
                t.text, t.rect[0], t.rect[1], t.rect[2], t.rect[3], t.clip[0], t.clip[1], t.clip[2], t.clip[3]
            ));
        }
    }
    if fail_on_overflow && !overflowed.is_empty() {
        for o in &overflowed {
            eprintln!("kvscope: overflow: {o}");
        }
        eprintln!("kvscope: {} text runs overflow", overflowed.len());
        return Ok(false);
    }
    Ok(true)
}

fn parse_size(s: &str) -> Result<[u32; 2]> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .with_context(|| format!("--size {s}: expected WxH, e.g. 1600x900"))?;
    let (w, h) = (w.parse::<u32>()?, h.parse::<u32>()?);
    if !(64..=8192).contains(&w) || !(64..=8192).contains(&h) {
        bail!("--size {s}: width and height must lie in 64..=8192");
    }
    Ok([w, h])
}
