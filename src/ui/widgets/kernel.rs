//! The kernel panel: the source of the ops behind a lesson, as the active backend runs them, with the
//! entry line highlighted and the launch geometry of this result.

use eframe::egui::{self, Color32, RichText, Ui, text::LayoutJob};

use super::ViewCtx;
use crate::compute::launch::{Api, describe_wgsl};
use crate::compute::{Kernel, kernel_source};
use crate::lessons::Output;
use crate::ui::text;

/// Which op the panel shows, and its highlighted source.
#[derive(Default)]
pub struct KernelPanelState {
    /// Index into the lesson's ops, once one is clicked; until then the panel shows the result's
    /// [`Output::main_op`] (lesson 10's KIVI runs the group kernels, not `quant_append`), else the first.
    pub op: Option<usize>,
    /// The highlighted source, for (op, presentation mode, light theme, the room it was fitted to in
    /// presentation mode): built once, not every frame.
    pub source: Option<((Kernel, bool, bool, egui::Vec2), LayoutJob)>,
    /// The exercise tab: the open exercise, the texts as edited, the grades.
    pub exercise: super::ExerciseState,
}

/// The kernel panel for `ops` (the lesson's) and the computed `out`.
pub fn kernel_panel(cx: &mut ViewCtx, ui: &mut Ui, ops: &[Kernel], out: &dyn Output) {
    let lang = cx.lang;
    let size = cx.size;
    if ops.is_empty() {
        return;
    }
    let sel = cx
        .widgets
        .kernel
        .op
        .unwrap_or_else(|| {
            out.main_op()
                .and_then(|m| ops.iter().position(|o| *o == m))
                .unwrap_or(0)
        })
        .min(ops.len() - 1);
    // The lesson's kernel exercises sit beside its kernels (not on a slide: they are for a student at
    // a desk).
    let exercises = if cx.presentation {
        Vec::new()
    } else {
        super::lesson_exercises(cx.lesson.id())
    };
    let open = cx
        .widgets
        .kernel
        .exercise
        .open
        .as_ref()
        .and_then(|id| exercises.iter().find(|x| &x.id == id))
        .copied();
    ui.horizontal_wrapped(|ui| {
        for (i, op) in ops.iter().enumerate() {
            if ui
                .selectable_label(i == sel && open.is_none(), op.cuda_entries()[0])
                .clicked()
            {
                cx.widgets.kernel.op = Some(i);
                cx.widgets.kernel.exercise.open = None;
            }
        }
        for x in &exercises {
            let on = open.as_ref().is_some_and(|o| o.id == x.id);
            let what = if x.bug.is_some() {
                lang.t("find the bug", "找 bug")
            } else {
                lang.t("exercise", "练习")
            };
            if ui.selectable_label(on, format!("{what}: {}", x.id)).clicked() {
                cx.widgets.kernel.exercise.open(&x.id);
            }
        }
    });
    if let Some(x) = &open {
        super::exercise::exercise_panel(cx, ui, x);
        return;
    }
    let op = ops[sel];
    let Some(src) = kernel_source(cx.backend, op) else {
        return;
    };
    ui.label(
        RichText::new(match lang {
            crate::ui::text::Lang::Zh => format!("{} : 第 {} 行", src.path, src.line),
            _ => format!("{} : line {}", src.path, src.line),
        })
        .monospace()
        .size(crate::style::fit(size * 0.9)),
    );
    // What ran, as the backend reported it: for each entry point of the kernel, its last launch while
    // computing this result (a CUDA grid, or a WGSL dispatch); the CPU backend launches nothing and
    // reports the CUDA launch it stands in for, labelled so.
    let gold = ui.visuals().strong_text_color();
    // A launch's tuples stay whole where the line wraps ("block (32, 1," / "1)>>>" read as two).
    let line = |ui: &mut Ui, text: String, color: Color32| {
        let text = text.replace(", ", ",\u{a0}").replace(" (", "\u{a0}(");
        ui.label(
            RichText::new(text)
                .monospace()
                .size(crate::style::fit(size * 0.85))
                .color(color),
        );
    };
    for entry in op.cuda_entries() {
        let Some(l) = cx.launches.iter().rev().find(|l| l.dims.entry == *entry) else {
            continue;
        };
        let dims = l.dims;
        match (l.api, l.ran) {
            (Api::Wgsl, _) => line(
                ui,
                format!(
                    "{}  = {} {}",
                    describe_wgsl(&dims),
                    dims.threads(),
                    lang.t("invocations", "次调用")
                ),
                gold,
            ),
            (Api::Cuda, true) => line(
                ui,
                format!("{dims}  =\u{a0}{}\u{a0}{}", dims.threads(), lang.t("threads", "个线程")),
                gold,
            ),
            (Api::Cuda, false) => line(
                ui,
                format!(
                    "{} {dims}  =\u{a0}{}\u{a0}{}",
                    lang.t("CUDA would launch:", "CUDA 会启动："),
                    dims.threads(),
                    lang.t("threads", "个线程")
                ),
                crate::style::muted(ui.visuals()),
            ),
        }
    }
    if let Some(io) = out.io(op) {
        let list = |t: &[(&str, Vec<usize>)]| {
            t.iter()
                .map(|(n, s)| format!("{n} {s:?}"))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        ui.label(
            RichText::new(format!(
                "{} {} = {} · {} {} = {}",
                lang.t("reads", "读"),
                list(&io.reads),
                super::bytes(io.bytes(&io.reads) as f64),
                lang.t("writes", "写"),
                list(&io.writes),
                super::bytes(io.bytes(&io.writes) as f64),
            ))
            .monospace()
            .size(crate::style::fit(size * 0.85)),
        );
    }
    if let Some(r) = out.op_check(op) {
        // What was compared with comes from the report (`check_line` names it).
        let what = if op == Kernel::FlashAttention {
            lang.t("flash kernel", "flash kernel")
        } else {
            lang.t("fused kernel", "融合 kernel")
        };
        super::check_line(cx, ui, Some(r), what);
    }
    let [en, zh] = cx.backend.info().ran;
    // Italic in English only (see `text::Slant`).
    ui.label(crate::ui::text::Slant::slant(
        RichText::new(lang.t(en, zh)).size(crate::style::fit(size * 0.85)),
    ));
    // Show the source from a few lines above the entry point; the entry line (or the line the lesson
    // focuses on) is highlighted. In presentation mode (a projector never scrolls) only the lines that
    // fit the view's room are laid out, wrapped at its width, with no scroll area.
    let room = ui.available_size();
    let key = (
        op,
        cx.presentation,
        cx.light,
        if cx.presentation {
            room.round()
        } else {
            egui::Vec2::ZERO
        },
    );
    let job = match &cx.widgets.kernel.source {
        Some((k, job)) if *k == key => job.clone(),
        _ => {
            let lines: Vec<&str> = src.source.lines().collect();
            let focus = out
                .source_focus(op)
                .and_then(|needle| lines.iter().position(|l| l.contains(needle)))
                .map(|i| i + 1);
            // From a few lines above the entry point, or above the focused line when there is one.
            // In presentation mode (the room is a slide's), from the entry point itself, or from five
            // lines above the line the lesson focuses on (its loop or comment).
            let first = if cx.presentation {
                focus.map_or(src.line, |f| f.saturating_sub(5)).max(1)
            } else {
                focus.map_or(src.line, |f| f.saturating_sub(6)).saturating_sub(4).max(1)
            };
            let focus = focus.unwrap_or(src.line);
            let code_size = if cx.presentation { 16.0 } else { 12.0 };
            // On a slide a long line goes on in rows of its own, indented past the numbers (the window
            // scrolls sideways instead): the characters a row holds, measured once.
            let cols = cx.presentation.then(|| {
                let font = egui::FontId::monospace(crate::style::fit(code_size));
                let ten = ui
                    .painter()
                    .layout_no_wrap("0".repeat(10), font, egui::Color32::PLACEHOLDER)
                    .size()
                    .x;
                (room.x / (ten / 10.0).max(1.0)).floor() as usize
            });
            let job_of = |n: usize| {
                let shown = &lines[first - 1..(first - 1 + n).min(lines.len())];
                // On a slide, an argument list's alignment (40 spaces) would wrap every line: an indent
                // deeper than six levels (24 spaces) is such an alignment, and is set at eight spaces
                // (whitespace only; the nesting above it keeps its indent; the window shows the file as
                // it is).
                let shown: Vec<&str> = if cx.presentation {
                    shown
                        .iter()
                        .map(|l| {
                            let body = l.trim_start();
                            let indent = l.len() - body.len();
                            if indent > 24 { &l[indent - 8..] } else { l }
                        })
                        .collect()
                } else {
                    shown.to_vec()
                };
                let excerpt = shown.join("\n");
                let mut job = text::cuda_job(&excerpt, first, Some(focus), code_size, !cx.light, cols);
                if cx.presentation {
                    job.wrap.max_width = room.x;
                }
                job
            };
            // The excerpt ends where a header the loader put in front of an included file begins
            // (`// ---- <path> (included at the top of …) ----`), past the focused line.
            let end = lines
                .iter()
                .enumerate()
                .skip(focus)
                .find(|(_, l)| l.starts_with("// ---- ") && l.contains("(included at the top of"))
                .map_or(lines.len(), |(i, _)| i);
            let mut n = end.max(first) + 1 - first;
            if cx.presentation {
                // The most lines from `first` whose wrapped layout fits the room's height (one at
                // least).
                let fits = |n: usize| ui.painter().layout_job(job_of(n)).size().y <= room.y;
                let (mut lo, mut hi) = (1.min(n), n);
                if !fits(hi) {
                    while lo + 1 < hi {
                        let mid = (lo + hi) / 2;
                        if fits(mid) { lo = mid } else { hi = mid }
                    }
                    n = lo;
                }
            }
            let job = job_of(n);
            cx.widgets.kernel.source = Some((key, job.clone()));
            job
        }
    };
    if cx.presentation {
        ui.add(egui::Label::new(job).wrap());
        return;
    }
    let area = egui::ScrollArea::both()
        .id_salt(("kernel-src", sel))
        .auto_shrink([false, false]);
    // Code never soft-wraps (a wrapped signature reads as two columns): long lines scroll sideways.
    crate::ui::layout::scroll(ui, area, |ui| {
        ui.add(egui::Label::new(job).extend());
    });
}
