//! The panels of the app and the views of lessons 1–3 (lessons 4–5 are in [`cache_views`]).
//!
//! Every number drawn here comes from the [`Output`] the lesson computed on the active backend, or
//! from the lesson file's data (model configurations) through the crate's formulas.

#[path = "cache_views.rs"]
pub mod cache_views;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use eframe::egui::{self, Color32, RichText, Ui};

pub use cache_views::Sweep;

use super::model::{self, AttnOut, Output};
use super::text::{self, Lang};
use super::{KvscopeApp, UPLOAD_BUDGET};
use crate::compute::{BackendKind, CheckReport, Op};
use crate::export::{ArrayData, NamedArray};
use crate::lesson::{Highlight as StepHighlight, LessonKind};
use crate::render::colormap::{Colormap, owner_color};
use crate::render::egui_glue;
use crate::render::heatmap::{HeatmapData, HeatmapStyle, Highlight};

/// A stable renderer id for view `name` number `i`.
pub fn vid(name: &str, i: usize) -> u64 {
    let mut h = DefaultHasher::new();
    (name, i).hash(&mut h);
    h.finish()
}

/// Text size for body text (larger in presentation mode).
pub fn body_size(app: &KvscopeApp) -> f32 {
    if app.presentation { 22.0 } else { 14.5 }
}

/// Colour of a request / KV head `i` (the block-grid palette, so colours agree across views).
pub fn color_of(i: usize) -> Color32 {
    let [r, g, b, _] = owner_color(i as u32);
    Color32::from_rgb(r, g, b)
}

/// Format bytes with binary units.
pub fn bytes(n: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// The whole window.
pub fn shell(app: &mut KvscopeApp, ui: &mut Ui) {
    let pres = app.presentation;
    egui::Panel::top("kvscope-top").show(ui, |ui| top_bar(app, ui));
    egui::Panel::bottom("kvscope-status").show(ui, |ui| status_bar(app, ui));
    if !pres {
        egui::Panel::left("kvscope-nav")
            .resizable(false)
            .exact_size(210.0)
            .show(ui, |ui| navigator(app, ui));
    }
    let side_w = if pres { 440.0 } else { 330.0 };
    egui::Panel::right("kvscope-side")
        .resizable(false)
        .exact_size(side_w)
        .show(ui, |ui| side_panel(app, ui));
    egui::CentralPanel::default_margins().show(ui, |ui| central(app, ui));
}

fn top_bar(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = if app.presentation { 20.0 } else { 15.0 };
    ui.horizontal(|ui| {
        ui.label(RichText::new("kvscope").strong().size(size));
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
                app.next_step();
            }
            if ui
                .button("<")
                .on_hover_text(lang.t("Previous step (←)", "上一步 (←)"))
                .clicked()
            {
                app.prev_step();
            }
            if let Some(l) = app.lesson().cloned() {
                let (li, si) = app.position();
                ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                    ui.separator();
                    ui.add(
                        egui::Label::new(
                            RichText::new(format!(
                                "{} {}{}: {}  ·  {} {}/{}: {}",
                                lang.t("Lesson", "第"),
                                li + 1,
                                lang.t("", " 课"),
                                lang.pick(l.file.title.get_ref()),
                                lang.t("step", "步骤"),
                                si + 1,
                                l.file.steps.len(),
                                lang.pick(l.file.steps[si].title.get_ref())
                            ))
                            .size(size),
                        )
                        .truncate(),
                    );
                });
            }
        });
    });
}

fn verified_text(app: &KvscopeApp) -> (String, Color32) {
    let lang = app.lang;
    let worst = app.reports().and_then(|r| model::worst(r.iter()));
    match (app.reports(), worst) {
        (None, _) => (
            lang.t(
                "verifying against the CPU f64 reference…",
                "正在与 CPU f64 参考结果核对…",
            )
            .into(),
            Color32::GRAY,
        ),
        (Some(_), None) => (lang.t("nothing to verify", "无需核对").into(), Color32::GRAY),
        (Some(_), Some(w)) if w.passed() => (
            format!(
                "OK  {} {}: max abs err {:.1e}, max rel err {:.1e}",
                lang.t("verified vs CPU f64 reference", "已与 CPU f64 参考结果核对"),
                app.active_backend().name(),
                w.max_abs,
                w.max_rel
            ),
            Color32::from_rgb(90, 200, 110),
        ),
        (Some(_), Some(w)) => (
            format!(
                "MISMATCH  {} {}: {} ({} of {} values)",
                app.active_backend().name(),
                lang.t("disagrees with the reference", "与参考结果不一致"),
                w.label,
                w.mismatch_count,
                w.count
            ),
            Color32::from_rgb(240, 90, 90),
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
            .unwrap_or_default();
        ui.label(format!(
            "{}: {} ({device})",
            lang.t("backend", "后端"),
            app.active_backend().name()
        ));
        ui.separator();
        let (t, c) = verified_text(app);
        ui.label(RichText::new(t).color(c));
        if app.computing() {
            ui.separator();
            ui.label(
                RichText::new(lang.t("computing…", "计算中…"))
                    .italics()
                    .color(Color32::GRAY),
            );
        } else if app.compute_ms() > 0.0 && !app.is_sync() {
            // (Not in tests and `kvscope render`: their frames must not depend on timing.)
            ui.separator();
            ui.label(RichText::new(format!("{:.1} ms", app.compute_ms())).color(Color32::GRAY));
        }
        if let Some(s) = app.status_message() {
            ui.separator();
            ui.label(s.to_string());
        }
    });
}

fn navigator(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.heading(lang.t("Lessons", "课程"));
        if !app.load_errors().is_empty() {
            ui.label(RichText::new(lang.t("Lesson files have errors:", "课程文件有错误：")).color(Color32::RED));
        }
        let (cur, step) = app.position();
        let lessons: Vec<_> = app.lessons().to_vec();
        for (i, l) in lessons.iter().enumerate() {
            let title = format!("{}. {}", i + 1, lang.pick(l.file.title.get_ref()));
            if ui.selectable_label(i == cur, RichText::new(title).strong()).clicked() && i != cur {
                app.goto(i, 0);
            }
            if i == cur {
                ui.indent("steps", |ui| {
                    for (j, s) in l.file.steps.iter().enumerate() {
                        let t = format!("{}. {}", j + 1, lang.pick(s.title.get_ref()));
                        if ui.selectable_label(j == step, t).clicked() {
                            app.goto(i, j);
                        }
                    }
                });
            }
        }
        ui.add_space(8.0);
        ui.label(
            RichText::new(lang.t(
                "→/Space next · ←/Backspace back · Home/End · F5 present · Ctrl+S PNG · Ctrl+E .npy",
                "→/空格 下一步 · ←/退格 上一步 · Home/End · F5 演示 · Ctrl+S PNG · Ctrl+E .npy",
            ))
            .small()
            .color(Color32::GRAY),
        );
    });
}

fn side_panel(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = body_size(app);
    egui::ScrollArea::vertical().show(ui, |ui| {
        let Some(l) = app.lesson().cloned() else {
            return;
        };
        let (_, si) = app.position();
        let step = &l.file.steps[si];
        ui.label(
            RichText::new(lang.pick(step.title.get_ref()))
                .strong()
                .size(size * 1.25),
        );
        ui.add_space(4.0);
        text::markdown(ui, lang.pick(step.narration.get_ref()), size);
        if app.presentation {
            return;
        }
        ui.separator();
        ui.label(RichText::new(lang.t("Parameters", "参数")).strong());
        let params = app.params().cloned().unwrap_or_default();
        for prm in &l.file.params {
            let id = prm.id.get_ref();
            let cur = model::get(&params, id, *prm.default.get_ref());
            let label = lang.pick(prm.label.get_ref()).to_string();
            let allowed = model::allowed_values(l.kind, id, &params)
                .map(|a| {
                    a.into_iter()
                        .filter(|v| (prm.min..=prm.max).contains(v))
                        .collect::<Vec<_>>()
                })
                .filter(|a| !a.is_empty());
            let mut changed = None;
            let label_id = ui.label(RichText::new(label).size(size * 0.9)).id;
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
                                egui::Slider::new(&mut v, prm.min..=prm.max)
                                    .step_by(prm.step as f64)
                                    .logarithmic(prm.max - prm.min.max(1) >= 256),
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
        }
        if ui
            .button(lang.t("Reset to the lesson's defaults", "恢复默认参数"))
            .clicked()
        {
            for prm in &l.file.params {
                app.set_param(prm.id.get_ref(), *prm.default.get_ref());
            }
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
                Ok(dev) => (dev, Color32::GRAY),
                Err(why) => (
                    format!("{}: {why}", lang.t("unavailable", "不可用")),
                    Color32::from_rgb(220, 150, 80),
                ),
            };
            ui.label(RichText::new(txt).small().color(color));
        }
        if let Some(n) = app.fallback() {
            ui.label(RichText::new(n).small().color(Color32::from_rgb(220, 150, 80)));
        }
    });
}

/// Split `rect` into `n` view rectangles.
fn grid(rect: egui::Rect, n: usize) -> Vec<egui::Rect> {
    let n = n.max(1);
    let (cols, rows) = match n {
        1 => (1, 1),
        2 if rect.width() >= rect.height() * 1.1 => (2, 1),
        2 => (1, 2),
        3 if rect.width() >= rect.height() * 1.8 => (3, 1),
        3 | 4 => (2, 2),
        _ => (3, n.div_ceil(3)),
    };
    let gap = 8.0;
    let w = (rect.width() - gap * (cols - 1) as f32) / cols as f32;
    let h = (rect.height() - gap * (rows - 1) as f32) / rows as f32;
    (0..n)
        .map(|i| {
            let (c, r) = (i % cols, i / cols);
            let (c, w) = if n == 3 && cols == 2 && i == 2 {
                (0, rect.width())
            } else {
                (c, w)
            };
            egui::Rect::from_min_size(
                rect.min + egui::vec2(c as f32 * (w + gap), r as f32 * (h + gap)),
                egui::vec2(w, h),
            )
        })
        .collect()
}

fn central(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    if !app.load_errors().is_empty() {
        ui.heading(lang.t("A lesson file has problems", "课程文件有问题"));
        for e in app.load_errors() {
            ui.label(
                RichText::new(e.to_string())
                    .monospace()
                    .color(Color32::from_rgb(240, 120, 120)),
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
            .color(Color32::from_rgb(240, 120, 120)),
        );
        ui.label(lang.t("Change a slider to continue.", "请调整滑块后继续。"));
        return;
    }
    let Some(out) = app.output().cloned() else {
        ui.centered_and_justified(|ui| ui.label(RichText::new(lang.t("computing…", "计算中…")).italics()));
        return;
    };
    let (_, si) = app.position();
    let step = &l.file.steps[si];
    let views: Vec<String> = step.views.iter().map(|v| v.get_ref().clone()).collect();
    let hl = step.highlight.clone();
    // Children never grow the central panel: each view gets a fixed rectangle and is clipped to it.
    let mut rect = ui.available_rect_before_wrap();
    if matches!(l.kind, LessonKind::Decode | LessonKind::Paged) {
        let bar_h = body_size(app) + 14.0;
        let bar = egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), bar_h));
        let mut child = ui.new_child(egui::UiBuilder::new().max_rect(bar));
        child.set_clip_rect(bar);
        cache_views::timeline(app, &mut child, &out);
        rect.min.y += bar_h + 4.0;
    }
    let rects = grid(rect, views.len());
    for (name, r) in views.iter().zip(rects) {
        view_in(ui, r, |ui| match (&*out, name.as_str()) {
            (_, "kernel") => kernel_view(app, ui, l.kind, &out),
            (Output::Attn(a), v) => attn_view(app, ui, l.kind, a, v, hl.as_ref()),
            (Output::Decode(d), v) => cache_views::decode_view(app, ui, d, v),
            (Output::Paged(p), v) => cache_views::paged_view(app, ui, p, v),
        });
    }
    ui.allocate_rect(ui.available_rect_before_wrap(), egui::Sense::hover());
}

/// Draw into a fixed rectangle, clipped, without growing the parent.
pub fn view_in(ui: &mut Ui, r: egui::Rect, f: impl FnOnce(&mut Ui)) {
    let mut child = ui.new_child(egui::UiBuilder::new().max_rect(r.shrink(2.0)));
    child.set_clip_rect(r.intersect(ui.clip_rect()));
    f(&mut child);
}

/// A titled heatmap with a colorbar and a hover line; returns the hovered cell.
#[allow(clippy::too_many_arguments)]
pub fn heat_panel(
    app: &mut KvscopeApp,
    ui: &mut Ui,
    id: u64,
    title: &str,
    data: &Arc<HeatmapData>,
    colormap: Colormap,
    range: Option<(f32, f32)>,
    highlight: Highlight,
    hover: &dyn Fn((usize, usize)) -> String,
) -> Option<(usize, usize)> {
    let size = body_size(app);
    ui.label(RichText::new(title).strong().size(size));
    // Swap a new result in within this frame's upload budget; until then the old one stays.
    let newest = data;
    let current = app.vs.shown.get(&id).cloned();
    let data = match current {
        Some(c) if c.generation == newest.generation => c,
        current => {
            let cells = newest.rows * newest.cols;
            if app.vs.upload_budget >= cells || app.vs.upload_budget == UPLOAD_BUDGET {
                app.vs.upload_budget = app.vs.upload_budget.saturating_sub(cells);
                app.vs.shown.insert(id, newest.clone());
                newest.clone()
            } else {
                ui.ctx().request_repaint();
                match current {
                    Some(c) => c,
                    None => {
                        ui.label(RichText::new(app.lang.t("loading…", "加载中…")).italics());
                        return None;
                    }
                }
            }
        }
    };
    let stale = data.generation != newest.generation;
    let data = &data;
    let avail = ui.available_size();
    let bar_w = 56.0;
    let line = size + 8.0;
    // Room the caller keeps below the heatmap (a check line), taken once.
    let below = std::mem::take(&mut app.vs.reserve_below);
    let h = (avail.y - line - below).max(20.0);
    let w = (avail.x - bar_w).max(20.0);
    // Keep cells square when the matrix is small.
    let cell = (w / data.cols as f32).min(h / data.rows as f32);
    let (w, h) = if data.rows * data.cols <= 64 * 64 {
        (cell * data.cols as f32, cell * data.rows as f32)
    } else {
        (w, h)
    };
    let style = HeatmapStyle {
        colormap,
        range,
        grid: true,
        highlight,
    };
    let (lo, hi) = *app
        .vs
        .ranges
        .entry(data.generation)
        .or_insert_with(|| data.finite_range());
    let range_shown = range.unwrap_or_else(|| {
        if colormap == Colormap::Diverging {
            let m = lo.abs().max(hi.abs()).max(1e-6);
            (-m, m)
        } else if hi > lo {
            (lo, hi)
        } else {
            (lo, lo + 1.0)
        }
    });
    let key = (data.rows, data.cols, w.round() as u32, h.round() as u32);
    let entry = app.vs.heat.entry(id).or_insert((key, None));
    if entry.0 != key {
        *entry = (key, None);
    }
    let mut view = entry.1;
    let mut hovered = None;
    ui.horizontal(|ui| {
        let r = egui_glue::heatmap(ui, id, data, &mut view, &style, egui::vec2(w, h));
        hovered = r.hovered;
        egui_glue::colorbar(ui, id ^ 0x5a5a, range_shown, colormap, egui::vec2(bar_w - 8.0, h));
    });
    if let Some(e) = app.vs.heat.get_mut(&id) {
        e.1 = view;
    }
    let text = match hovered {
        Some(_) if stale => app.lang.t("updating…", "更新中…").to_string(),
        Some(c) => hover(c),
        None => app
            .lang
            .t(
                "hover: numbers · scroll: zoom · drag: pan",
                "悬停看数值 · 滚轮缩放 · 拖动平移",
            )
            .to_string(),
    };
    ui.add(egui::Label::new(RichText::new(text).size(size * 0.85).monospace()).truncate());
    hovered
}

fn step_highlight(hl: Option<&StepHighlight>, rows: usize, cols: usize) -> Highlight {
    let row = hl.and_then(|h| h.row).map(|r| if r < 0 { rows as i64 + r } else { r });
    let col = hl.and_then(|h| h.col).map(|c| if c < 0 { cols as i64 + c } else { c });
    let ok = |v: i64, n: usize| v >= 0 && (v as usize) < n;
    match (row, col) {
        (Some(r), Some(c)) if ok(r, rows) && ok(c, cols) => Highlight::Cell(r as usize, c as usize),
        (Some(r), _) if ok(r, rows) => Highlight::Row(r as usize),
        (_, Some(c)) if ok(c, cols) => Highlight::Col(c as usize),
        _ => Highlight::None,
    }
}

fn dot(a: ndarray::ArrayView1<f32>, b: ndarray::ArrayView1<f32>) -> f32 {
    a.iter().zip(b.iter()).map(|(x, y)| x * y).sum()
}

/// The numbers behind score/probability cell (i, j) of head `h`.
fn score_hover(a: &AttnOut, h: usize, probs: &ndarray::Array3<f32>, mask_on: bool, (i, j): (usize, usize)) -> String {
    let kvh = a.shape.kv_head_of(h);
    let hd = a.shape.head_dim();
    let qk = dot(
        a.qkv.q.slice(ndarray::s![h, i, ..]),
        a.qkv.k.slice(ndarray::s![kvh, j, ..]),
    );
    let masked = mask_on && !a.mask.visible(i, j);
    format!(
        "q{i}·k{j} = {qk:.3}   /√{hd} = {:.3}   {}   p = {:.4}",
        qk / (hd as f32).sqrt(),
        if masked { "masked → −∞" } else { "visible" },
        probs[[h, i, j]]
    )
}

/// What P·V cell (i, d) of head `h` is made of: its largest terms p_ij · v_jd.
fn pv_hover(a: &AttnOut, h: usize, (i, d): (usize, usize)) -> String {
    let kvh = a.shape.kv_head_of(h);
    let t = a.shape.seq;
    let mut terms: Vec<(usize, f32)> = (0..t)
        .map(|j| (j, a.core.probs[[h, i, j]] * a.qkv.v[[kvh, j, d]]))
        .collect();
    terms.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()));
    let top: Vec<String> = terms
        .iter()
        .take(3)
        .map(|(j, v)| format!("p{i},{j}·v{j},{d} = {v:.3}"))
        .collect();
    format!(
        "out[{i},{d}] = {:.4} = Σ_j p·v; largest: {}",
        a.core.out[[h, i, d]],
        top.join(", ")
    )
}

fn attn_view(app: &mut KvscopeApp, ui: &mut Ui, kind: LessonKind, a: &AttnOut, view: &str, hl: Option<&StepHighlight>) {
    let lang = app.lang;
    let t = a.shape.seq;
    let hd = a.shape.head_dim();
    let d = a.shape.d_model;
    let m = &a.maps;
    let seq_hl = step_highlight(hl, t, t);
    let none = |_: (usize, usize)| String::new();
    match view {
        "x" => {
            let x = &a.w.x;
            heat_panel(
                app,
                ui,
                vid("x", 0),
                &format!("X  [T={t}, d={d}]"),
                &m.x,
                Colormap::Diverging,
                None,
                Highlight::None,
                &|(i, j)| format!("X[{i},{j}] = {:.4}  ({} {i})", x[[i, j]], lang.t("token", "token")),
            );
        }
        "weights" => {
            let rects = grid(ui.available_rect_before_wrap(), 3);
            for (k, (name, data)) in [("W_Q", &m.wq), ("W_K", &m.wk), ("W_V", &m.wv)].into_iter().enumerate() {
                view_in(ui, rects[k], |ui| {
                    heat_panel(
                        app,
                        ui,
                        vid("w", k),
                        &format!("{name}  [{}, {}]", data.rows, data.cols),
                        data,
                        Colormap::Diverging,
                        None,
                        Highlight::None,
                        &none,
                    );
                });
            }
        }
        "q" | "k" | "v" => {
            let (maps, arr) = match view {
                "q" => (&m.q, &a.qkv.q),
                "k" => (&m.k, &a.qkv.k),
                _ => (&m.v, &a.qkv.v),
            };
            let name = view.to_uppercase();
            heat_panel(
                app,
                ui,
                vid(view, 0),
                &format!("{name} = X·W_{name}  [T={t}, {hd}]"),
                &maps[0],
                Colormap::Diverging,
                None,
                seq_hl_rows(seq_hl),
                &|(i, j)| format!("{name}[{i},{j}] = {:.4}", arr[[0, i, j]]),
            );
        }
        "scores" | "masked_scores" => {
            let (data, masked_view) = if view == "scores" && kind == LessonKind::Causal {
                (m.unmasked_scores.clone().unwrap_or_else(|| m.scores[0].clone()), false)
            } else {
                (m.scores[0].clone(), a.mask != crate::math::Mask::None)
            };
            let title = if masked_view {
                format!(
                    "{}  [T={t}, T={t}]",
                    lang.t(
                        "masked scores QK^T/√d (−∞ hatched)",
                        "掩码后的分数 QK^T/√d（−∞ 为斜纹）"
                    )
                )
            } else {
                format!("{}  [T={t}, T={t}]", lang.t("scores QK^T/√d", "分数 QK^T/√d"))
            };
            heat_panel(
                app,
                ui,
                vid(view, 0),
                &title,
                &data,
                Colormap::Diverging,
                None,
                seq_hl,
                &|c| score_hover(a, 0, &a.core.probs, masked_view, c),
            );
        }
        "softmax" | "last_row" => {
            let row = if view == "last_row" {
                t - 1
            } else {
                match seq_hl {
                    Highlight::Row(r) | Highlight::Cell(r, _) | Highlight::RowCol(r, _) => r,
                    _ => t / 2,
                }
            };
            softmax_row_view(app, ui, a, row, view == "last_row");
        }
        "probs" => {
            // Lesson 2's `mask` slider (1 = on, 0 = off) switches between the two computed results.
            let mask_on = app.params().is_none_or(|p| model::get(p, "mask_on", 1) != 0);
            let unmasked = kind == LessonKind::Causal && !mask_on;
            if kind == LessonKind::Causal {
                ui.label(
                    RichText::new(if mask_on {
                        lang.t("causal mask ON", "因果掩码：开")
                    } else {
                        lang.t(
                            "causal mask OFF: every token sees the future",
                            "因果掩码：关——每个 token 都能看到未来",
                        )
                    })
                    .strong()
                    .color(if mask_on {
                        Color32::from_rgb(90, 200, 110)
                    } else {
                        Color32::from_rgb(240, 150, 80)
                    }),
                );
            }
            let (data, probs) = match (&a.unmasked, unmasked) {
                (Some(u), true) => (m.unmasked_probs.clone().unwrap_or_else(|| m.probs[0].clone()), &u.probs),
                _ => (m.probs[0].clone(), &a.core.probs),
            };
            let title = format!(
                "P = softmax(scores)  [T={t}, T={t}]  {}",
                lang.t("each row sums to 1", "每行之和为 1")
            );
            heat_panel(
                app,
                ui,
                vid(if unmasked { "probs-off" } else { "probs" }, 0),
                &title,
                &data,
                Colormap::Sequential,
                Some((0.0, 1.0)),
                seq_hl,
                &|c| score_hover(a, 0, probs, !unmasked, c),
            );
        }
        "mask" => {
            heat_panel(
                app,
                ui,
                vid("mask", 0),
                &format!(
                    "{}  [T={t}, T={t}]",
                    lang.t(
                        "causal mask: 1 = may attend, 0 = future",
                        "因果掩码：1 = 可见，0 = 未来"
                    )
                ),
                &m.mask,
                Colormap::Sequential,
                Some((0.0, 1.0)),
                Highlight::None,
                &|(i, j)| {
                    format!(
                        "query {i}, key {j}: {}",
                        if a.mask.visible(i, j) {
                            "j ≤ i, visible"
                        } else {
                            "j > i, future → masked"
                        }
                    )
                },
            );
        }
        "mask_diff" => {
            let Some(diff) = m.diff.clone() else { return };
            heat_panel(
                app,
                ui,
                vid("diff", 0),
                &format!(
                    "{}  [T={t}, T={t}]",
                    lang.t("P(mask on) − P(mask off)", "P(有掩码) − P(无掩码)")
                ),
                &diff,
                Colormap::Diverging,
                None,
                Highlight::None,
                &|(i, j)| format!("ΔP[{i},{j}] = {:+.4}", diff.values[i * t + j]),
            );
        }
        "pv" | "out" => {
            if view == "pv" {
                let rects = grid(ui.available_rect_before_wrap(), 3);
                #[allow(clippy::type_complexity)]
                let pairs: [(&str, &Arc<HeatmapData>, Colormap, Option<(f32, f32)>); 3] = [
                    ("P", &m.probs[0], Colormap::Sequential, Some((0.0, 1.0))),
                    ("V", &m.v[0], Colormap::Diverging, None),
                    ("P·V", &m.out[0], Colormap::Diverging, None),
                ];
                for (k, (name, data, cm, range)) in pairs.into_iter().enumerate() {
                    view_in(ui, rects[k], |ui| {
                        let title = format!("{name}  [{}, {}]", data.rows, data.cols);
                        if k == 2 {
                            heat_panel(app, ui, vid("pv", k), &title, data, cm, range, Highlight::None, &|c| {
                                pv_hover(a, 0, c)
                            });
                        } else {
                            heat_panel(app, ui, vid("pv", k), &title, data, cm, range, Highlight::None, &none);
                        }
                    });
                }
            } else {
                heat_panel(
                    app,
                    ui,
                    vid("out", 0),
                    &format!(
                        "{}  [T={t}, {hd}]",
                        lang.t(
                            "output P·V: each row mixes the V rows",
                            "输出 P·V：每行是 V 各行的加权混合"
                        )
                    ),
                    &m.out[0],
                    Colormap::Diverging,
                    None,
                    seq_hl_rows(seq_hl),
                    &|c| pv_hover(a, 0, c),
                );
            }
        }
        "head_split" => head_split_view(app, ui, a),
        "heads_grid" => {
            let h = a.shape.n_heads;
            let rects = grid(ui.available_rect_before_wrap(), h);
            for (k, r) in rects.into_iter().enumerate() {
                view_in(ui, r, |ui| {
                    let kv = a.shape.kv_head_of(k);
                    let title = format!("{} {k} (KV {kv})", lang.t("head", "头"));
                    heat_panel(
                        app,
                        ui,
                        vid("head", k),
                        &title,
                        &m.probs[k],
                        Colormap::Sequential,
                        Some((0.0, 1.0)),
                        Highlight::None,
                        &|c| score_hover(a, k, &a.core.probs, true, c),
                    );
                });
            }
        }
        "concat" => {
            heat_panel(
                app,
                ui,
                vid("concat", 0),
                &format!(
                    "concat(head_0 … head_{})  [T={t}, {}]",
                    a.shape.n_heads - 1,
                    a.shape.n_heads * hd
                ),
                &m.concat,
                Colormap::Diverging,
                None,
                Highlight::None,
                &|(i, j)| {
                    format!(
                        "{} {} · dim {}: {:.4}",
                        lang.t("head", "头"),
                        j / hd,
                        j % hd,
                        a.concat[[i, j]]
                    )
                },
            );
        }
        "y" => {
            heat_panel(
                app,
                ui,
                vid("y", 0),
                &format!("Y = concat · W_O  [T={t}, d={d}]"),
                &m.y,
                Colormap::Diverging,
                None,
                Highlight::None,
                &|(i, j)| format!("Y[{i},{j}] = {:.4}", a.y[[i, j]]),
            );
        }
        "kv_groups" => kv_groups_view(app, ui, a),
        "kv_bytes" => kv_bytes_view(app, ui, a),
        "model_table" => model_table_view(app, ui),
        other => {
            ui.label(format!("view `{other}`"));
        }
    }
}

fn seq_hl_rows(h: Highlight) -> Highlight {
    match h {
        Highlight::Row(r) | Highlight::Cell(r, _) | Highlight::RowCol(r, _) => Highlight::Row(r),
        _ => Highlight::None,
    }
}

/// One row's scores and probabilities as bars, with the sum of the probabilities.
fn softmax_row_view(app: &mut KvscopeApp, ui: &mut Ui, a: &AttnOut, row: usize, causal_note: bool) {
    let lang = app.lang;
    let size = body_size(app);
    let t = a.shape.seq;
    let scores: Vec<f32> = (0..t).map(|j| a.core.scores[[0, row, j]]).collect();
    let probs: Vec<f32> = (0..t).map(|j| a.core.probs[[0, row, j]]).collect();
    let sum: f64 = probs.iter().map(|&p| p as f64).sum();
    ui.label(
        RichText::new(format!(
            "{} {row}: softmax(s)_j = exp(s_j − max s) / Σ_k exp(s_k − max s)",
            lang.t("query row", "查询行")
        ))
        .strong()
        .size(size),
    );
    let avail = ui.available_size();
    let h = ((avail.y - 3.0 * size) / 2.0).max(40.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(avail.x, 2.0 * h + size), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let n = t.max(1) as f32;
    let bw = rect.width() / n;
    let finite: Vec<f32> = scores.iter().copied().filter(|s| s.is_finite()).collect();
    let smax = finite.iter().fold(1e-6f32, |m, s| m.max(s.abs()));
    let base = rect.top() + h / 2.0;
    let text_color = ui.visuals().text_color();
    p.text(
        rect.left_top(),
        egui::Align2::LEFT_TOP,
        lang.t("scores s", "分数 s"),
        egui::FontId::proportional(size * 0.8),
        text_color,
    );
    for (j, s) in scores.iter().enumerate() {
        let x0 = rect.left() + j as f32 * bw + bw * 0.1;
        let x1 = x0 + bw * 0.8;
        if s.is_finite() {
            let y = base - s / smax * (h / 2.0 - 4.0);
            let c = if *s >= 0.0 {
                Color32::from_rgb(200, 90, 80)
            } else {
                Color32::from_rgb(80, 120, 200)
            };
            p.rect_filled(
                egui::Rect::from_two_pos(egui::pos2(x0, base), egui::pos2(x1, y)),
                0.0,
                c,
            );
        } else {
            p.text(
                egui::pos2((x0 + x1) / 2.0, base),
                egui::Align2::CENTER_CENTER,
                "−∞",
                egui::FontId::proportional(size * 0.75),
                Color32::GRAY,
            );
        }
    }
    let pbase = rect.top() + 2.0 * h + size * 0.2;
    p.text(
        egui::pos2(rect.left(), rect.top() + h + 2.0),
        egui::Align2::LEFT_TOP,
        lang.t("probabilities p", "概率 p"),
        egui::FontId::proportional(size * 0.8),
        text_color,
    );
    for (j, pr) in probs.iter().enumerate() {
        let x0 = rect.left() + j as f32 * bw + bw * 0.1;
        let x1 = x0 + bw * 0.8;
        let y = pbase - pr * (h - size);
        p.rect_filled(
            egui::Rect::from_two_pos(egui::pos2(x0, pbase), egui::pos2(x1, y)),
            0.0,
            Color32::from_rgb(90, 190, 120),
        );
        if bw > 28.0 {
            p.text(
                egui::pos2((x0 + x1) / 2.0, y - 2.0),
                egui::Align2::CENTER_BOTTOM,
                format!("{pr:.2}"),
                egui::FontId::proportional(size * 0.7),
                text_color,
            );
        }
    }
    let masked = scores.iter().filter(|s| !s.is_finite()).count();
    ui.label(RichText::new(format!("Σ_j p_j = {sum:.6}")).size(size).strong());
    if causal_note || masked > 0 {
        ui.label(
            RichText::new(format!(
                "{masked} {} {}",
                lang.t(
                    "keys masked (exp(−∞) = 0); the visible",
                    "个键被掩码（exp(−∞) = 0）；其余"
                ),
                lang.t("ones share the whole probability mass", "可见的键分享全部概率")
            ))
            .size(size * 0.9),
        );
    }
}

fn head_split_view(app: &mut KvscopeApp, ui: &mut Ui, a: &AttnOut) {
    let lang = app.lang;
    let size = body_size(app);
    let (h, hd, d) = (a.shape.n_heads, a.shape.head_dim(), a.shape.d_model);
    ui.label(
        RichText::new(format!(
            "d_model = {d} = {h} × {hd}  ({} × head_dim)",
            lang.t("heads", "头数")
        ))
        .strong()
        .size(size * 1.2),
    );
    let w = ui.available_width();
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, 56.0), egui::Sense::hover());
    let p = ui.painter_at(rect);
    for k in 0..h {
        let x0 = rect.left() + w * k as f32 / h as f32;
        let x1 = rect.left() + w * (k + 1) as f32 / h as f32;
        let r = egui::Rect::from_min_max(egui::pos2(x0 + 1.0, rect.top()), egui::pos2(x1 - 1.0, rect.bottom()));
        p.rect_filled(r, 2.0, color_of(k));
        if r.width() > 40.0 {
            p.text(
                r.center(),
                egui::Align2::CENTER_CENTER,
                format!("{} {k}\n{hd} dims", lang.t("head", "头")),
                egui::FontId::proportional(size * 0.8),
                Color32::BLACK,
            );
        }
    }
    ui.add_space(8.0);
    ui.label(lang.t(
        "Q of every head, side by side (columns = d_model):",
        "各个头的 Q 并排（列 = d_model）：",
    ));
    let q = &a.qkv.q;
    let t = a.shape.seq;
    let data = a.maps.q_heads.clone();
    heat_panel(
        app,
        ui,
        vid("split", 0),
        &format!("Q  [T={t}, {h}×{hd}]"),
        &data,
        Colormap::Diverging,
        None,
        Highlight::None,
        &|(i, j)| {
            format!(
                "token {i}, {} {} dim {}: {:.4}",
                lang.t("head", "头"),
                j / hd,
                j % hd,
                q[[j / hd, i, j % hd]]
            )
        },
    );
}

fn kv_groups_view(app: &mut KvscopeApp, ui: &mut Ui, a: &AttnOut) {
    let lang = app.lang;
    let size = body_size(app);
    let (h, kvh) = (a.shape.n_heads, a.shape.n_kv_heads);
    let name = if kvh == h {
        "MHA"
    } else if kvh == 1 {
        "MQA"
    } else {
        "GQA"
    };
    ui.label(
        RichText::new(format!(
            "{name}: {h} {} · {kvh} {} · {} {}",
            lang.t("query heads", "个 query 头"),
            lang.t("KV heads", "个 KV 头"),
            lang.t("group size", "组大小"),
            a.shape.group()
        ))
        .strong()
        .size(size * 1.15),
    );
    let w = ui.available_width();
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, 170.0), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let qy = rect.top() + 30.0;
    let ky = rect.bottom() - 30.0;
    let tc = ui.visuals().text_color();
    p.text(
        egui::pos2(rect.left(), rect.top()),
        egui::Align2::LEFT_TOP,
        lang.t("query heads", "query 头"),
        egui::FontId::proportional(size * 0.8),
        tc,
    );
    p.text(
        egui::pos2(rect.left(), rect.bottom()),
        egui::Align2::LEFT_BOTTOM,
        lang.t("K/V heads (cached)", "K/V 头（缓存）"),
        egui::FontId::proportional(size * 0.8),
        tc,
    );
    let qx = |k: usize| rect.left() + 40.0 + (w - 80.0) * (k as f32 + 0.5) / h as f32;
    let kx = |k: usize| rect.left() + 40.0 + (w - 80.0) * (k as f32 + 0.5) / kvh as f32;
    for k in 0..h {
        let g = a.shape.kv_head_of(k);
        p.line_segment(
            [egui::pos2(qx(k), qy + 12.0), egui::pos2(kx(g), ky - 14.0)],
            egui::Stroke::new(1.5, color_of(g)),
        );
    }
    let qs = ((w - 80.0) / h as f32 * 0.4).clamp(3.0, 12.0);
    for k in 0..h {
        let c = egui::pos2(qx(k), qy);
        p.circle_filled(c, qs, color_of(a.shape.kv_head_of(k)));
    }
    for g in 0..kvh {
        let r = egui::Rect::from_center_size(
            egui::pos2(kx(g), ky),
            egui::vec2(((w - 80.0) / kvh as f32 * 0.6).clamp(10.0, 80.0), 26.0),
        );
        p.rect_filled(r, 3.0, color_of(g));
        p.text(
            r.center(),
            egui::Align2::CENTER_CENTER,
            format!("K,V {g}"),
            egui::FontId::proportional(size * 0.75),
            Color32::BLACK,
        );
    }
    kv_bytes_view(app, ui, a);
}

fn kv_bytes_view(app: &mut KvscopeApp, ui: &mut Ui, a: &AttnOut) {
    let lang = app.lang;
    let size = body_size(app);
    let (h, kvh, hd) = (
        a.shape.n_heads as u64,
        a.shape.n_kv_heads as u64,
        a.shape.head_dim() as u64,
    );
    let per = |k: u64| crate::cache::kv_bytes_per_token(1, k, hd, 2);
    ui.add_space(6.0);
    ui.label(
        RichText::new(lang.t(
            "KV-cache bytes per token, one layer, fp16:",
            "每个 token、每层的 KV 缓存字节数（fp16）：",
        ))
        .strong()
        .size(size),
    );
    egui::Grid::new("kvbytes").striped(true).show(ui, |ui| {
        ui.label("");
        ui.label("2 · kv_heads · head_dim · 2 B");
        ui.label(lang.t("vs MHA", "相对 MHA"));
        ui.end_row();
        for (name, k) in [("MHA", h), (lang.t("this setting", "当前设置"), kvh), ("MQA", 1)] {
            let mark = if k == kvh { "> " } else { "" };
            ui.label(RichText::new(format!("{mark}{name}")).size(size));
            ui.label(
                RichText::new(format!("2 · {k} · {hd} · 2 = {}", bytes(per(k) as f64)))
                    .size(size)
                    .monospace(),
            );
            ui.label(RichText::new(format!("{:.3}×", per(k) as f64 / per(h) as f64)).size(size));
            ui.end_row();
        }
    });
}

fn model_table_view(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = body_size(app);
    let Some(l) = app.lesson().cloned() else { return };
    ui.label(
        RichText::new(lang.t(
            "KV cache of real models (computed from their configs, fp16):",
            "真实模型的 KV 缓存（由其配置计算，fp16）：",
        ))
        .strong()
        .size(size),
    );
    egui::Grid::new("models").striped(true).show(ui, |ui| {
        for hdr in [
            lang.t("model", "模型"),
            lang.t("layers", "层数"),
            lang.t("heads / KV", "头数 / KV"),
            "head_dim",
            lang.t("per token", "每 token"),
            lang.t("4k-token context", "4k token 上下文"),
        ] {
            ui.label(RichText::new(hdr).strong().size(size * 0.9));
        }
        ui.end_row();
        for m in &l.file.models {
            let b = m.kv_bytes_per_token();
            ui.label(RichText::new(&m.name).size(size * 0.9));
            ui.label(RichText::new(m.layers.to_string()).size(size * 0.9));
            ui.label(RichText::new(format!("{} / {}", m.heads, m.kv_heads)).size(size * 0.9));
            ui.label(RichText::new(m.head_dim.to_string()).size(size * 0.9));
            ui.label(RichText::new(bytes(b as f64)).size(size * 0.9).monospace());
            ui.label(RichText::new(bytes(b as f64 * 4096.0)).size(size * 0.9).monospace());
            ui.end_row();
        }
    });
    ui.label(
        RichText::new("2 · layers · kv_heads · head_dim · bytes")
            .size(size * 0.85)
            .monospace(),
    );
}

/// The ops behind a lesson kind's views, in the order a student meets them.
pub fn kernel_ops(kind: LessonKind) -> &'static [Op] {
    match kind {
        LessonKind::Attention | LessonKind::Causal | LessonKind::MultiHead => {
            &[Op::AttentionScores, Op::Softmax, Op::AttentionPv, Op::AttentionFused]
        }
        LessonKind::Decode => &[Op::StaticCacheAppend, Op::PagedDecode],
        LessonKind::Paged => &[Op::PagedAppend, Op::PagedDecode],
    }
}

fn launch_dims(op: Op, out: &Output) -> Vec<crate::compute::cuda::launch::LaunchDims> {
    use crate::compute::cuda::launch as l;
    match (op, out) {
        (Op::AttentionScores, Output::Attn(a)) => vec![l::attention_scores(a.shape.n_heads, a.shape.seq)],
        (Op::Softmax, Output::Attn(a)) => vec![l::softmax_rows(a.shape.n_heads * a.shape.seq)],
        (Op::AttentionPv, Output::Attn(a)) => vec![l::attention_pv(a.shape.n_heads, a.shape.seq, a.shape.head_dim())],
        (Op::AttentionFused, Output::Attn(a)) => vec![l::attention_fused(a.shape.n_heads, a.shape.seq)],
        (Op::StaticCacheAppend, Output::Decode(d)) => vec![l::static_cache_append(d.batch, d.kv_heads)],
        (Op::PagedDecode, Output::Decode(d)) => {
            let parts = l::num_partitions(d.prompt + d.generate);
            vec![
                l::paged_decode(d.kv_heads, d.batch, parts),
                l::paged_reduce(d.heads, d.batch),
            ]
        }
        (Op::PagedAppend, Output::Paged(_)) => vec![l::paged_append(1)],
        (Op::PagedDecode, Output::Paged(p)) => {
            let longest = p.specs.iter().map(|s| s.prompt + s.generate).max().unwrap_or(1);
            let reqs = p.specs.len().max(1);
            vec![
                l::paged_decode(p.shape.kv_heads, reqs, l::num_partitions(longest)),
                l::paged_reduce(model::PAGED_HEADS, reqs),
            ]
        }
        _ => Vec::new(),
    }
}

fn kernel_view(app: &mut KvscopeApp, ui: &mut Ui, kind: LessonKind, out: &Output) {
    let lang = app.lang;
    let size = body_size(app);
    let ops = kernel_ops(kind);
    let sel = app.vs.kernel_op.min(ops.len() - 1);
    ui.horizontal_wrapped(|ui| {
        for (i, op) in ops.iter().enumerate() {
            if ui.selectable_label(i == sel, op.cuda_entries()[0]).clicked() {
                app.vs.kernel_op = i;
            }
        }
    });
    let op = ops[sel];
    let file = crate::compute::cuda::sources::file_of(op);
    let entry = op.cuda_entries()[0];
    let line = crate::compute::cuda::sources::entry_line(&file, entry).unwrap_or(1);
    ui.label(
        RichText::new(format!("kernels/{} : {} {line}", file.file, lang.t("line", "第")))
            .monospace()
            .size(size * 0.9),
    );
    for dims in launch_dims(op, out) {
        ui.label(
            RichText::new(format!("{dims}  = {} {}", dims.threads(), lang.t("threads", "个线程")))
                .monospace()
                .size(size * 0.85)
                .color(Color32::from_rgb(230, 190, 90)),
        );
    }
    let ran_on = match app.active_backend() {
        BackendKind::Cuda => lang.t(
            "ran on the GPU through NVRTC + cudarc",
            "经 NVRTC + cudarc 在 GPU 上运行",
        ),
        BackendKind::CudaSim => lang.t(
            "this exact source ran on CPU threads (cuda-sim shim)",
            "这份源码在 CPU 线程上运行（cuda-sim 模拟）",
        ),
        BackendKind::Cpu => lang.t(
            "the CPU backend ran the same op in Rust; choose cuda or cuda-sim to run this source",
            "CPU 后端用 Rust 计算同一运算；选择 cuda 或 cuda-sim 运行这份源码",
        ),
    };
    ui.label(RichText::new(ran_on).italics().size(size * 0.85));
    // Show the source from a few lines above the entry point; the entry line is highlighted. The
    // highlighted layout is built once per (op, text size, theme), not every frame.
    let key = (op, app.presentation, app.light());
    let job = match &app.vs.kernel_src {
        Some((k, job)) if *k == key => job.clone(),
        _ => {
            let lines: Vec<&str> = file.source.lines().collect();
            let first = line.saturating_sub(4).max(1);
            let excerpt = lines[first - 1..].join("\n");
            let size = if app.presentation { 16.0 } else { 12.0 };
            let job = text::cuda_job(&excerpt, first, Some(line), size, !app.light());
            app.vs.kernel_src = Some((key, job.clone()));
            job
        }
    };
    egui::ScrollArea::both()
        .id_salt(("kernel-src", sel))
        .auto_shrink([false, false])
        .show(ui, |ui| {
            ui.label(job);
        });
}

/// The arrays of the current step for Ctrl+E, and the checks that go into the manifest.
pub fn export_arrays(
    out: &Output,
    cursor: usize,
    reports: Option<&[CheckReport]>,
) -> (Vec<NamedArray>, Vec<CheckReport>) {
    let f = |name: &str, shape: &[usize], v: Vec<f32>| NamedArray::new(name, shape, ArrayData::F32(v));
    let flat = |a: &ndarray::ArrayD<f32>| a.iter().copied().collect::<Vec<f32>>();
    match out {
        Output::Attn(a) => {
            let mut v = vec![
                f("x", a.w.x.shape(), flat(&a.w.x.clone().into_dyn())),
                f("wq", a.w.wq.shape(), flat(&a.w.wq.clone().into_dyn())),
                f("wk", a.w.wk.shape(), flat(&a.w.wk.clone().into_dyn())),
                f("wv", a.w.wv.shape(), flat(&a.w.wv.clone().into_dyn())),
                f("wo", a.w.wo.shape(), flat(&a.w.wo.clone().into_dyn())),
                f("q", a.qkv.q.shape(), flat(&a.qkv.q.clone().into_dyn())),
                f("k", a.qkv.k.shape(), flat(&a.qkv.k.clone().into_dyn())),
                f("v", a.qkv.v.shape(), flat(&a.qkv.v.clone().into_dyn())),
                f("scores", a.core.scores.shape(), flat(&a.core.scores.clone().into_dyn())),
                f("probs", a.core.probs.shape(), flat(&a.core.probs.clone().into_dyn())),
                f("out", a.core.out.shape(), flat(&a.core.out.clone().into_dyn())),
                f("y", a.y.shape(), flat(&a.y.clone().into_dyn())),
            ];
            if let Some(u) = &a.unmasked {
                v.push(f("probs_unmasked", u.probs.shape(), flat(&u.probs.clone().into_dyn())));
            }
            (v, reports.map(|r| r.to_vec()).unwrap_or_default())
        }
        Output::Decode(d) => {
            let i = cursor.min(d.frames.len() - 1);
            let fr = &d.frames[i];
            let v = vec![
                f("attention_row", &[fr.row.rows, fr.row.cols], fr.row.values.clone()),
                NamedArray::new(
                    "cache_lens",
                    &[fr.lens.len()],
                    ArrayData::I32(fr.lens.iter().map(|&x| x as i32).collect()),
                ),
            ];
            (v, fr.check.iter().cloned().collect())
        }
        Output::Paged(p) => {
            let Some(fr) = p.frames.get(cursor.min(p.frames.len().saturating_sub(1))) else {
                return (Vec::new(), Vec::new());
            };
            let reqs: Vec<u32> = fr.tables.keys().copied().collect();
            let maxb = fr.tables.values().map(|t| t.len()).max().unwrap_or(0).max(1);
            let mut tab = vec![-1i32; reqs.len() * maxb];
            for (r, t) in fr.tables.values().enumerate() {
                for (j, &b) in t.iter().enumerate() {
                    tab[r * maxb + j] = b as i32;
                }
            }
            let v = vec![
                NamedArray::new("block_tables", &[reqs.len(), maxb], ArrayData::I32(tab)),
                NamedArray::new(
                    "context_lens",
                    &[reqs.len()],
                    ArrayData::I32(fr.lens.values().map(|&x| x as i32).collect()),
                ),
                NamedArray::new(
                    "block_owner",
                    &[fr.grid.owners.len()],
                    ArrayData::I32(fr.grid.owners.clone()),
                ),
                NamedArray::new(
                    "free_list",
                    &[fr.free.len()],
                    ArrayData::I32(fr.free.iter().map(|&x| x as i32).collect()),
                ),
            ];
            (v, fr.check.iter().cloned().collect())
        }
    }
}
