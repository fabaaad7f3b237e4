//! The widgets every lesson's views share, and the small context views draw with.
//!
//! How it works: the app hands each view a [`ViewCtx`]: the language and text size, the lesson, its
//! slider values and step highlight, the active backend, the lesson's timeline position, the shared
//! widget state ([`WidgetState`]) and the lesson's own UI state. Views never see the app.

mod axes;
mod bars;
mod chart;
mod exercise;
mod heat;
mod kernel;
mod layout;
mod lines;
pub mod motion;
mod table;
mod tables;

use std::any::Any;
use std::sync::Arc;

use eframe::egui::{self, Color32, RichText, Ui};

pub use axes::Axes;
pub use bars::compare_bars;
pub use chart::{Chart, ChartAxis, ChartUi, Scale};
pub use exercise::{ExerciseState, lesson_exercises};
pub use heat::{HeatKey, HeatState, UPLOAD_BUDGET, heat_panel, step_highlight};
pub use kernel::{KernelPanelState, kernel_panel};
pub use layout::{anchored, fit_key, fitted_height, grid, raise_text_styles, view_in};
pub use lines::{LineHead, attention_lines};
pub use motion::Motion;
pub use table::{Cell, Table, table};
pub use tables::{
    BlockBox, Tables, arrow, block_label_size, block_rects, block_row, block_tables, pool_legend, ref_badge, ref_counts,
};

pub use crate::lessons::format_bytes as bytes;

use super::text::Lang;
use crate::compute::{Backend, BackendKind, CheckReport};
use crate::lesson_file::Highlight;
use crate::lessons::Lesson;
use crate::lessons::Params;

/// State of the shared widgets that survives frames.
#[derive(Default)]
pub struct WidgetState {
    /// Heatmaps: zoom and pan, the data shown, the upload budget, colorbar ranges.
    pub heat: HeatState,
    /// The kernel panel.
    pub kernel: KernelPanelState,
}

/// What a view may use.
pub struct ViewCtx<'a> {
    /// Language.
    pub lang: Lang,
    /// Body text size (larger in presentation mode).
    pub size: f32,
    /// Presentation mode.
    pub presentation: bool,
    /// Light theme.
    pub light: bool,
    /// Results are computed on the UI thread (tests, headless renders): nothing is measured live.
    pub sync: bool,
    /// The lesson.
    pub lesson: &'a Lesson,
    /// Its slider values.
    pub params: &'a Params,
    /// What the step highlights.
    pub highlight: Option<&'a Highlight>,
    /// The names of the views the step shows side by side.
    pub step_views: &'a [toml::Spanned<String>],
    /// The active backend.
    pub backend: BackendKind,
    /// The active backend, ready to run (live measurements).
    pub runner: Arc<dyn Backend>,
    /// The launches the backend reported while computing the shown result.
    pub launches: &'a [crate::compute::launch::Launch],
    /// The lesson's timeline position (views clamp it to the frames that exist).
    pub cursor: &'a mut usize,
    /// The shared widgets' state.
    pub widgets: &'a mut WidgetState,
    /// The lesson's own UI state.
    pub state: &'a mut Box<dyn Any + Send>,
}

impl ViewCtx<'_> {
    /// Whether the step also shows view `name` (so a message it draws need not be repeated).
    pub fn step_shows(&self, name: &str) -> bool {
        self.step_views.iter().any(|v| v.get_ref() == name)
    }

    /// The size range of labels drawn inside small shapes (block ids): never below the frame's text
    /// floor (`style::fit`); a shape too small for its label at that size shows none.
    pub fn inner_label_sizes(&self) -> (f32, f32) {
        let (lo, hi): (f32, f32) = if self.presentation { (15.5, 18.0) } else { (8.0, 13.0) };
        let lo = crate::style::fit(lo);
        (lo, hi.max(lo))
    }

    /// Pick the string of the current language.
    pub fn t(&self, en: &'static str, zh: &'static str) -> &'static str {
        self.lang.t(en, zh)
    }

    /// The lesson's own UI state, created on first use.
    pub fn state<T: Default + Send + 'static>(&mut self) -> &mut T {
        if !self.state.is::<T>() {
            *self.state = Box::new(T::default());
        }
        self.state.downcast_mut::<T>().expect("just set")
    }
}

/// A muted line under a view that continues on the next page: what is there, and "on the next page →".
pub fn more_on_next_page(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, what: &str) {
    let text = match lang {
        crate::ui::text::Lang::En => format!("{what}: on the next page →"),
        crate::ui::text::Lang::Zh => format!("{what}：见下一页 →"),
    };
    ui.add_space(size * 0.5);
    ui.add(
        egui::Label::new(
            RichText::new(text)
                .size(crate::style::fit(size * 0.85))
                .color(crate::style::muted(ui.visuals())),
        )
        .wrap(),
    );
}

/// A stable renderer id for view `name` number `i`.
pub fn view_id(name: &str, i: usize) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    (name, i).hash(&mut h);
    h.finish()
}

/// One line saying whether a kernel result matches what it was compared with (the report's `against`:
/// the f64 reference, or the other path a lesson compares).
pub fn check_line(cx: &ViewCtx, ui: &mut Ui, r: Option<&CheckReport>, what: &str) {
    let size = cx.size;
    // Wrapped at the visible edge: a wide view drawn above may have widened this ui past its clip.
    let wrapped = |ui: &mut Ui, t: RichText| {
        let room = (ui.clip_rect().right() - ui.cursor().left()).max(40.0);
        ui.scope(|ui| {
            ui.set_max_width(room.min(ui.available_width()));
            ui.add(egui::Label::new(t).wrap())
        })
        .inner
    };
    match r {
        Some(r) if r.passed() => wrapped(
            ui,
            RichText::new(match cx.lang {
                Lang::En => {
                    format!("OK  {what} matches {}: max abs err {:.1e}", r.against.en(), r.max_abs)
                }
                Lang::Zh => {
                    format!("OK  {what} 与{}一致：max abs err {:.1e}", r.against.zh(), r.max_abs)
                }
            })
            .size(crate::style::fit(size * 0.9))
            .color(crate::style::pass(ui.visuals())),
        ),
        Some(r) => wrapped(
            ui,
            RichText::new(format!(
                "MISMATCH  {what}: {}",
                r.to_string().lines().next().unwrap_or_default()
            ))
            .size(crate::style::fit(size * 0.9))
            .color(crate::style::fail(ui.visuals())),
        ),
        None => ui.label(RichText::new(format!("{what}: —")).size(crate::style::fit(size * 0.9))),
    };
}

/// The line a lesson on a simulated GPU shows when it read `read` bytes of the `asked` it was asked for
/// (the CPU shim runs the GPU threads one after another, so lessons 9 and 10 read fewer there).
pub fn sim_capped(cx: &ViewCtx, ui: &mut Ui, read: usize, asked: Option<usize>) {
    if let Some(asked) = asked {
        ui.add(
            egui::Label::new(
                RichText::new(format!(
                    "{} {read} {} {asked}.",
                    cx.t(
                        "A simulated GPU runs its threads one after another on the CPU: it read",
                        "模拟 GPU 在 CPU 上逐个运行它的线程：只读取了"
                    ),
                    cx.t("bytes of", "字节，而不是")
                ))
                .size(crate::style::fit(cx.size * 0.9)),
            )
            .wrap(),
        );
    }
}

/// A colour chip with its meaning.
///
/// One unit (chip and text laid out together), so that a wrapping row moves the whole entry to the next
/// line instead of running its text past the edge.
pub fn legend_chip(ui: &mut Ui, c: [u8; 4], text: &str, size: f32) {
    let color = ui.visuals().text_color();
    let gap = ui.spacing().item_spacing.x;
    // An entry wider than a whole row wraps its text beside the chip (it is never cut at the edge).
    let wrap = (ui.max_rect().width() - size - gap).max(size * 4.0);
    let galley = ui.painter().layout(
        text.to_string(),
        egui::FontId::proportional(crate::style::fit(size * 0.85)),
        color,
        wrap,
    );
    let h = galley.size().y.max(size * 0.8);
    let (rect, resp) = ui.allocate_exact_size(egui::vec2(size + gap + galley.size().x, h), egui::Sense::hover());
    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, text));
    let chip = egui::Rect::from_min_size(
        egui::pos2(rect.min.x, rect.center().y - size * 0.4),
        egui::vec2(size, size * 0.8),
    );
    ui.painter().rect_filled(chip, 2.0, crate::style::c32(c));
    ui.painter().galley(
        egui::pos2(chip.max.x + gap, rect.center().y - galley.size().y / 2.0),
        galley,
        color,
    );
}

/// A wrapping row of legend entries (see [`legend_chip`]).
pub fn legend<S: AsRef<str>>(ui: &mut Ui, entries: &[(crate::style::Rgba, S)], size: f32) {
    legend_cued(ui, entries, size, 0);
}

/// [`legend`], where the first `cued` entries are also told apart by a second cue drawn with the marks
/// (their name written on each one), so that the colour grammar's limit of eight colours told apart by
/// colour alone counts only the others.
pub fn legend_cued<S: AsRef<str>>(ui: &mut Ui, entries: &[(crate::style::Rgba, S)], size: f32, cued: usize) {
    crate::ui::layout::record_legend(
        ui.ctx(),
        entries
            .iter()
            .enumerate()
            .map(|(i, (c, t))| (t.as_ref().to_string(), *c, i < cued))
            .collect(),
    );
    ui.horizontal_wrapped(|ui| {
        for (c, t) in entries {
            legend_chip(ui, *c, t.as_ref(), size);
        }
    });
}

/// The height [`legend`] takes in a width of `width` points: its entries wrapped the way
/// `horizontal_wrapped` wraps them, so that a view can size what goes above it and still fit.
pub fn legend_height<S: AsRef<str>>(ui: &Ui, entries: &[(crate::style::Rgba, S)], size: f32, width: f32) -> f32 {
    let gap = ui.spacing().item_spacing;
    let (mut x, mut row_h) = (0.0f32, 0.0f32);
    let mut done = 0.0f32; // the height of the rows finished
    for (_, t) in entries {
        let g = ui.painter().layout(
            t.as_ref().to_string(),
            egui::FontId::proportional(crate::style::fit(size * 0.85)),
            Color32::PLACEHOLDER,
            (width - size - gap.x).max(size * 4.0),
        );
        let w = size + gap.x + g.size().x;
        let h = g.size().y.max(size * 0.8);
        if x > 0.0 && x + w > width {
            done += row_h + gap.y;
            x = 0.0;
            row_h = 0.0;
        }
        row_h = row_h.max(h);
        x += w + gap.x;
    }
    done + row_h
}

/// A probability `p` as a bar in its track (the next-byte bars of lessons 4 and 5), the track outlined in
/// the grammar's "current" colour, `outline` points wide, when it is the byte chosen.
pub fn prob_bar(painter: &egui::Painter, v: &egui::Visuals, track: egui::Rect, p: f64, outline: Option<f32>) {
    painter.rect_filled(track, 2.0, crate::style::track(v));
    let bar = egui::Rect::from_min_size(track.min, egui::vec2(track.width() * p as f32, track.height()));
    painter.rect_filled(bar, 2.0, crate::style::bar_fill(v));
    if let Some(w) = outline {
        painter.rect_stroke(
            track,
            2.0,
            egui::Stroke::new(w, crate::style::CURRENT_32),
            egui::StrokeKind::Outside,
        );
    }
}

/// A labelled horizontal bar of `value` out of `max`.
pub fn bar(ui: &mut Ui, label: &str, value: usize, max: usize, color: Color32, size: f32) {
    ui.horizontal(|ui| {
        let avail = ui.available_width();
        let lw = (avail * 0.4).min(260.0);
        let vw = size * 3.0;
        let w = (avail - lw - vw - 3.0 * ui.spacing().item_spacing.x).max(10.0);
        ui.add_sized(
            [lw, size + 4.0],
            egui::Label::new(RichText::new(label).size(crate::style::fit(size * 0.9))).truncate(),
        );
        let (r, _) = ui.allocate_exact_size(egui::vec2(w, size), egui::Sense::hover());
        ui.painter().rect_filled(r, 2.0, crate::style::track(ui.visuals()));
        let frac = value as f32 / max.max(1) as f32;
        let fill = egui::Rect::from_min_size(r.min, egui::vec2(r.width() * frac.min(1.0), r.height()));
        ui.painter().rect_filled(fill, 2.0, color);
        ui.label(
            RichText::new(value.to_string())
                .monospace()
                .size(crate::style::fit(size * 0.9)),
        );
    });
}

/// Timeline buttons that step one frame back (`prev`) and forward (`next`), for [`timeline`].
pub fn prev_next<'a>(prev: &'a str, next: &'a str) -> impl FnOnce(&mut Ui, &mut usize, usize) + 'a {
    move |ui, c, n| {
        if ui.button(prev).clicked() {
            *c = c.saturating_sub(1);
        }
        if ui.button(next).clicked() {
            *c = (*c + 1).min(n - 1);
        }
    }
}

/// Whether one of this step's views follows the timeline's position (`uses`: the lesson's views that
/// do). When none does, a line saying what the views show (`whole`) stands where the timeline would:
/// a position such as "reading byte 0" above views of the whole stream would only mislead.
pub fn timeline_used(cx: &ViewCtx, ui: &mut Ui, uses: &[&str], whole: &str) -> bool {
    if cx.step_views.iter().any(|v| uses.contains(&v.get_ref().as_str())) {
        return true;
    }
    ui.label(RichText::new(whole).strong().size(crate::style::fit(cx.size)));
    false
}

/// The timeline bar of lessons whose output has frames: start, the lesson's own step buttons, end, a
/// slider and a label. `buttons` moves the position (it gets the clamped position and the frame count);
/// `label` describes a position.
pub fn timeline(
    cx: &mut ViewCtx,
    ui: &mut Ui,
    frames: usize,
    buttons: impl FnOnce(&mut Ui, &mut usize, usize),
    label: impl FnOnce(usize) -> String,
) {
    let lang = cx.lang;
    let size = cx.size;
    let n = frames;
    if n == 0 {
        return;
    }
    let mut c = (*cx.cursor).min(n - 1);
    // Wrapped: on a narrow view the position label goes to the next line instead of past the edge.
    ui.horizontal_wrapped(|ui| {
        if ui.button("|<").on_hover_text(lang.t("start", "开始")).clicked() {
            c = 0;
        }
        buttons(ui, &mut c, n);
        if ui.button(">|").on_hover_text(lang.t("end", "结束")).clicked() {
            c = n - 1;
        }
        let mut v = c;
        ui.add(
            egui::Slider::new(&mut v, 0..=n - 1)
                .show_value(false)
                .text(lang.t("timeline", "时间线")),
        );
        c = v;
        // A label that does not fit breaks between its " · "-separated phrases, never inside one
        // ("提示词" split over two lines), and the line break stands for the " · "; one that fits is
        // drawn as it is.
        let text = label(c);
        let font = egui::FontId::proportional(crate::style::fit(size));
        let ink = ui.visuals().text_color();
        let ctx = ui.ctx().clone();
        let width = |t: &str| ctx.fonts_mut(|f| f.layout_no_wrap(t.to_string(), font.clone(), ink).size().x);
        let parts: Vec<&str> = text.split(" · ").collect();
        let (dot, full) = (width("a · b") - width("ab"), ui.max_rect().width());
        let mut room = ui.available_size_before_wrap().x;
        // A first phrase too wide for the room beside the controls starts the next line instead of
        // breaking inside a word there.
        if width(parts[0]) > room - 2.0 && room < full - 2.0 {
            ui.end_row();
            room = full;
        }
        let (mut line, mut out) = (0.0, String::new());
        for (i, part) in parts.iter().enumerate() {
            let w = width(part);
            if i > 0 && line + dot + w > room - 2.0 {
                out.push('\n');
                (room, line) = (full, w);
            } else {
                if i > 0 {
                    out.push_str(" · ");
                    line += dot;
                }
                line += w;
            }
            out.push_str(part);
        }
        ui.label(RichText::new(out).strong().size(crate::style::fit(size)));
    });
    if c != *cx.cursor {
        *cx.cursor = c;
    }
}

/// A quantity on a log10 axis, as printed at a tick: `v` is the exponent, the label its power of ten with
/// an SI prefix (0.1, 1, 10, 1k, 1M, 1G, 1T, 1P), two significant digits between decades.
pub fn pow10_label(v: f64) -> String {
    let x = 10f64.powf(v);
    let (div, suffix) = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(d, _)| x >= *d * 0.999)
        .unwrap_or((1.0, ""));
    let m = x / div;
    let digits = if m >= 10.0 {
        0
    } else if m >= 1.0 {
        1
    } else {
        2
    };
    let t = format!("{m:.digits$}");
    let t = if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    };
    format!("{t}{suffix}")
}

/// A (layer × head) grid of percentages, one cell per head, the selected one outlined (lesson 8's sink
/// mass, lesson 9's attention concentration).
pub struct HeadGrid<'a> {
    /// Layers and heads.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// The value of (layer, head), a fraction.
    pub value: &'a dyn Fn(usize, usize) -> f64,
    /// The value drawn at full colour.
    pub full_at: f64,
    /// Decimals of the percentage.
    pub decimals: usize,
    /// The grid's height (before the row cap), the row cap and the font, in text sizes.
    pub height: f32,
    /// The tallest row.
    pub row_cap: f32,
    /// The font size.
    pub font: f32,
    /// The outlined cell.
    pub selected: (usize, usize),
}

/// A head grid cell's fill for value `m`, brightest at `full_at` and above.
fn cell_fill(m: f64, full_at: f64) -> crate::style::Rgba {
    let v = (m * 255.0 / full_at).clamp(0.0, 255.0) as u8;
    [40 + v / 2, 40 + v / 3, 60 + v / 2, 255]
}

/// A head grid's colour key under it: five swatches from 0 to the value drawn at full colour, the ends
/// labelled, so a grid of dark cells reads as "little mass", not as "not drawn".
fn grid_key(ui: &mut Ui, lang: crate::ui::text::Lang, g: &HeadGrid) {
    let size = crate::style::fit(g.font);
    ui.horizontal(|ui| {
        ui.label(egui::RichText::new(lang.t("cell colour: 0%", "格子颜色：0%")).size(size));
        for i in 0..5 {
            let (r, _) = ui.allocate_exact_size(egui::vec2(size * 1.4, size * 0.9), egui::Sense::hover());
            let fill = cell_fill(g.full_at * i as f64 / 4.0, g.full_at);
            ui.painter().rect_filled(r, 1.0, crate::style::c32(fill));
        }
        // A share cannot pass 100%: "or more" only below it.
        let more = if g.full_at < 1.0 {
            lang.t(" or more", " 及以上")
        } else {
            ""
        };
        ui.label(egui::RichText::new(format!("{:.0}%{more}", 100.0 * g.full_at)).size(size));
    });
}

/// One cell of a head grid: filled by (layer, head)'s value, outlined when selected, `label` on it.
fn grid_cell(
    painter: &egui::Painter,
    g: &HeadGrid,
    cell: egui::Rect,
    at: (usize, usize),
    label: &str,
    font: &egui::FontId,
) {
    let fill = cell_fill((g.value)(at.0, at.1), g.full_at);
    painter.rect_filled(cell, 2.0, crate::style::c32(fill));
    if at == g.selected {
        painter.rect_stroke(
            cell,
            2.0,
            egui::Stroke::new(2.5, crate::style::c32(crate::style::CURRENT)),
            egui::StrokeKind::Outside,
        );
    }
    painter.text(
        cell.center(),
        egui::Align2::CENTER_CENTER,
        label,
        font.clone(),
        crate::style::ink_on(fill),
    );
}

/// Draw `g` at the top of the available space and take its height.
pub fn head_grid(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, g: &HeadGrid) {
    let rect = ui.available_rect_before_wrap();
    let cw = (rect.width() / (g.heads + 1) as f32).min(size * 6.0);
    let ch = (g.height / (g.layers + 1) as f32).min(g.row_cap);
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(g.font));
    for h in 0..g.heads {
        painter.text(
            egui::pos2(rect.min.x + cw * (h as f32 + 1.5), rect.min.y + ch * 0.5),
            egui::Align2::CENTER_CENTER,
            format!("{} {h}", lang.t("head", "头")),
            font.clone(),
            text,
        );
    }
    for l in 0..g.layers {
        let y = rect.min.y + ch * (l as f32 + 1.0);
        painter.text(
            egui::pos2(rect.min.x + cw * 0.5, y + ch * 0.5),
            egui::Align2::CENTER_CENTER,
            format!("{} {l}", lang.t("layer", "层")),
            font.clone(),
            text,
        );
        for h in 0..g.heads {
            let m = (g.value)(l, h);
            let cell = egui::Rect::from_min_size(
                egui::pos2(rect.min.x + cw * (h as f32 + 1.0) + 2.0, y + 2.0),
                egui::vec2(cw - 4.0, ch - 4.0),
            );
            grid_cell(
                &painter,
                g,
                cell,
                (l, h),
                &format!("{:.*}%", g.decimals, 100.0 * m),
                &font,
            );
        }
    }
    ui.allocate_rect(
        egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), ch * (g.layers + 1) as f32)),
        egui::Sense::hover(),
    );
    grid_key(ui, lang, g);
}

/// Draw `g` with the layers along x and the heads down y (a deep model's grid: SmolLM2's 30 layers of 9
/// heads), each cell its percentage without decimals, at the top of the available space, and take its
/// height.
pub fn head_grid_by_layer(ui: &mut Ui, lang: crate::ui::text::Lang, g: &HeadGrid) {
    let rect = ui.available_rect_before_wrap();
    let label_w = g.font * 4.0;
    let cw = (rect.width() - label_w) / g.layers.max(1) as f32;
    let ch = (g.height / (g.heads + 1) as f32).min(g.row_cap);
    let painter = ui.painter_at(rect);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(g.font));
    // Every layer numbered when there is room for two digits, else every fifth.
    let every = if cw >= g.font * 1.3 { 1 } else { 5 };
    for l in (0..g.layers).filter(|l| l % every == 0) {
        painter.text(
            egui::pos2(rect.min.x + label_w + cw * (l as f32 + 0.5), rect.min.y + ch * 0.5),
            egui::Align2::CENTER_CENTER,
            l.to_string(),
            font.clone(),
            text,
        );
    }
    painter.text(
        egui::pos2(rect.min.x, rect.min.y + ch * 0.5),
        egui::Align2::LEFT_CENTER,
        lang.t("layer", "层"),
        font.clone(),
        text,
    );
    for h in 0..g.heads {
        let y = rect.min.y + ch * (h as f32 + 1.0);
        painter.text(
            egui::pos2(rect.min.x, y + ch * 0.5),
            egui::Align2::LEFT_CENTER,
            format!("{} {h}", lang.t("head", "头")),
            font.clone(),
            text,
        );
        for l in 0..g.layers {
            let m = (g.value)(l, h);
            let cell = egui::Rect::from_min_size(
                egui::pos2(rect.min.x + label_w + cw * l as f32 + 1.0, y + 1.0),
                egui::vec2(cw - 2.0, ch - 2.0),
            );
            grid_cell(&painter, g, cell, (l, h), &format!("{:.0}", 100.0 * m), &font);
        }
    }
    ui.allocate_rect(
        egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), ch * (g.heads + 1) as f32)),
        egui::Sense::hover(),
    );
    grid_key(ui, lang, g);
}

#[cfg(test)]
mod tests {
    use super::pow10_label;

    #[test]
    fn log_axis_ticks_print_as_powers_of_ten_with_si_prefixes() {
        for (v, want) in [
            (0.0, "1"),
            (-1.0, "0.1"),
            (2.0, "100"),
            (3.0, "1k"),
            (0.5, "3.2"),
            (9.0, "1G"),
            (12.0, "1T"),
            (14.5, "316T"),
            (15.0, "1P"),
        ] {
            assert_eq!(pow10_label(v), want, "10^{v}");
        }
    }
}
