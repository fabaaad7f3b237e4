//! What a frame drew as text, in physical pixels: every text run with its rect, its clip rect, its font
//! size and colour. `kvscope render --layout-json` writes it, and the overflow check reads it: a run
//! that leaves its clip rect is cut off on screen (a table column lost at the panel's edge, a line under
//! the status bar), unless it sits in a scroll area that scrolls on that axis, or it is elided with "…".
//!
//! How it works: the frame's [`egui::epaint::ClippedShape`]s are walked for text shapes (inside shape
//! lists too); each galley's rect, moved to its position (and turned for sideways text), is compared
//! with the clip rect it was painted under. Scroll areas are known because the app records each one it
//! shows ([`record_scroll`]) with whether its content exceeds it on each axis.

use eframe::egui::{self, Shape, epaint::ClippedShape};
use serde::Serialize;

/// One run of text in a frame, in physical pixels of the rendered image.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TextRun {
    /// The text.
    pub text: String,
    /// Where it is drawn: `[x0, y0, x1, y1]`.
    pub rect: [f32; 4],
    /// The clip rect it is painted under: `[x0, y0, x1, y1]`.
    pub clip: [f32; 4],
    /// Font size of its first section, in pixels.
    pub size: f32,
    /// Colour of its first section, `[r, g, b, a]`.
    pub color: [u8; 4],
    /// Inside a scroll area that scrolls horizontally, vertically.
    pub scrolls: [bool; 2],
}

impl TextRun {
    /// Whether the run leaves its clip rect (by more than a pixel) on an axis it cannot scroll on, and is
    /// not elided.
    pub fn overflows(&self) -> bool {
        const TOL: f32 = 1.0;
        if self.text.trim_end().ends_with('…') {
            return false;
        }
        let [x0, y0, x1, y1] = self.rect;
        let [cx0, cy0, cx1, cy1] = self.clip;
        let x = x0 < cx0 - TOL || x1 > cx1 + TOL;
        let y = y0 < cy0 - TOL || y1 > cy1 + TOL;
        (x && !self.scrolls[0]) || (y && !self.scrolls[1])
    }
}

/// Why a text run breaks the presentation rules (DESIGN: a slide's text must be read from the back of a
/// hall, so nothing is shrunk, hidden behind a scroll or cut short).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Breach {
    /// Set smaller than the floor, in pixels.
    Small(f32),
    /// In a scroll area, but (partly) outside what it shows: a projector never scrolls.
    Hidden,
    /// Cut short with "…".
    Elided,
    /// Drawn over another run (more than a third of the smaller one's area): neither can be read.
    Overlaps,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breach::Small(px) => write!(f, "{px:.1} px"),
            Breach::Hidden => f.write_str("needs scrolling"),
            Breach::Elided => f.write_str("elided"),
            Breach::Overlaps => f.write_str("drawn over other text"),
        }
    }
}

impl TextRun {
    /// How the run breaks the presentation rules with `floor` as the smallest text size in pixels, or
    /// `None`. `scrolling_ok`: a scroll area may hide what it holds (the window's side panel may scroll,
    /// a projected slide may not). A run counts as hidden when more than a pixel of it lies outside its
    /// clip rect on an axis its scroll area scrolls on (a run leaving its clip elsewhere is an overflow,
    /// [`TextRun::overflows`]).
    pub fn breach(&self, floor: f32, scrolling_ok: bool) -> Option<Breach> {
        const TOL: f32 = 1.0;
        if self.text.trim_end().ends_with('…') {
            return Some(Breach::Elided);
        }
        if !scrolling_ok {
            let [x0, y0, x1, y1] = self.rect;
            let [cx0, cy0, cx1, cy1] = self.clip;
            let x = x0 < cx0 - TOL || x1 > cx1 + TOL;
            let y = y0 < cy0 - TOL || y1 > cy1 + TOL;
            if (x && self.scrolls[0]) || (y && self.scrolls[1]) {
                return Some(Breach::Hidden);
            }
        }
        // Half a pixel of slack: sizes are set in points and scaled.
        (self.size + 0.5 < floor).then_some(Breach::Small(self.size))
    }
}

/// A frame's layout as `kvscope render --layout-json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    /// Image size in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// Physical pixels per egui point.
    pub pixels_per_point: f32,
    /// Every text run drawn, in paint order.
    pub texts: Vec<TextRun>,
    /// Every arrow a view drew from one thing to another (a block-table entry to its physical block).
    pub arrows: Vec<Arrow>,
    /// Every chart drawn ([`crate::ui::widgets::Chart`]): its axes and legend, for the axis rules.
    pub charts: Vec<ChartRecord>,
    /// Every legend drawn ([`crate::ui::widgets::legend`]): its entries' texts and colours, for the
    /// colour grammar ([`crate::style::legend_breach`]).
    pub legends: Vec<Vec<(String, [u8; 4], bool)>>,
}

/// One axis of a chart as drawn.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChartAxisRecord {
    /// Its title.
    pub title: String,
    /// `linear`, `log10`, `log2` or `categories` (not a quantity: no tick or range rule).
    pub scale: String,
    /// The data's range (with 0 where the quantity starts at zero), in plotted units.
    pub data: [f64; 2],
    /// The range shown.
    pub shown: [f64; 2],
    /// The labels of the ticks inside the range.
    pub ticks: Vec<String>,
    /// The smallest distance between two ticks, in points.
    pub gap_px: f32,
    /// The room a label needs along the axis (the widest label on x, a text row on y), in points.
    pub label_px: f32,
}

impl ChartAxisRecord {
    /// How the axis breaks the rules of issue #56, if it does: a quantity axis needs three labelled
    /// ticks and at most 20% of its range empty at either end; any axis needs room between its labels
    /// (egui_plot drops a label that does not fit).
    pub fn breach(&self) -> Option<String> {
        let name = &self.title;
        if self.gap_px.is_finite() && self.ticks.len() > 1 && self.gap_px < self.label_px {
            return Some(format!(
                "axis {name:?}: ticks {:.0} pt apart, labels need {:.0}",
                self.gap_px, self.label_px
            ));
        }
        if self.scale == "categories" {
            return None;
        }
        if self.ticks.len() < 3 {
            return Some(format!(
                "axis {name:?}: {} labelled ticks {:?}",
                self.ticks.len(),
                self.ticks
            ));
        }
        let span = self.shown[1] - self.shown[0];
        let empty = [
            (self.data[0] - self.shown[0]) / span,
            (self.shown[1] - self.data[1]) / span,
        ];
        if empty.iter().any(|e| *e > 0.2 + 1e-9) {
            return Some(format!(
                "axis {name:?}: shown {:?} for data {:?} ({:.0}% and {:.0}% empty)",
                self.shown,
                self.data,
                100.0 * empty[0],
                100.0 * empty[1]
            ));
        }
        None
    }
}

/// A chart as drawn.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChartRecord {
    /// Its id.
    pub id: String,
    /// The x axis.
    pub x: ChartAxisRecord,
    /// The y axis.
    pub y: ChartAxisRecord,
    /// Its legend: each entry's text and colour.
    pub legend: Vec<(String, [u8; 4])>,
    /// The distinct colours its data marks are drawn in (unmultiplied sRGBA).
    pub marks: Vec<[u8; 4]>,
}

impl ChartRecord {
    /// How the chart breaks the rule that every mark drawn is in the legend, if it does: a mark whose
    /// colour (not a grey) is none of the legend's (`style::unlisted_mark`).
    pub fn unlisted_mark(&self) -> Option<String> {
        let legend: Vec<[u8; 4]> = self.legend.iter().map(|l| l.1).collect();
        crate::style::unlisted_mark(&self.marks, &legend)
    }
}

/// The charts recorded this frame.
#[derive(Debug, Clone, Default)]
pub struct Charts(pub Vec<ChartRecord>);

fn charts_id() -> egui::Id {
    egui::Id::unique("kvscope-layout-charts")
}

/// Record a chart just drawn, for `--layout-json` and the tests.
pub fn record_chart(ctx: &egui::Context, c: ChartRecord) {
    ctx.data_mut(|d| d.get_temp_mut_or_default::<Charts>(charts_id()).0.push(c));
}

/// The legends recorded this frame.
#[derive(Debug, Clone, Default)]
pub struct Legends(pub Vec<Vec<(String, [u8; 4], bool)>>);

fn legends_id() -> egui::Id {
    egui::Id::unique("kvscope-layout-legends")
}

/// Record a legend just drawn: each entry's text, colour and whether a second cue tells it apart.
pub fn record_legend(ctx: &egui::Context, entries: Vec<(String, [u8; 4], bool)>) {
    ctx.data_mut(|d| d.get_temp_mut_or_default::<Legends>(legends_id()).0.push(entries));
}

/// The legends recorded this frame.
pub fn legends(ctx: &egui::Context) -> Vec<Vec<(String, [u8; 4], bool)>> {
    ctx.data(|d| d.get_temp::<Legends>(legends_id())).unwrap_or_default().0
}

/// The charts recorded this frame.
pub fn charts(ctx: &egui::Context) -> Vec<ChartRecord> {
    ctx.data(|d| d.get_temp::<Charts>(charts_id())).unwrap_or_default().0
}

/// An arrow a view drew, in physical pixels, with what it links.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Arrow {
    /// Its tail `[x, y]`.
    pub from: [f32; 2],
    /// Its head `[x, y]`.
    pub to: [f32; 2],
    /// What it links, e.g. `r3[1] -> 14` (request 3's logical block 1 lives in physical block 14).
    pub what: String,
}

/// The arrows recorded this frame, in points.
#[derive(Debug, Clone, Default)]
pub struct Arrows(pub Vec<(egui::Pos2, egui::Pos2, String)>);

fn arrows_id() -> egui::Id {
    egui::Id::unique("kvscope-layout-arrows")
}

/// Record an arrow a view just drew (points), for `--layout-json` and the tests.
pub fn record_arrow(ctx: &egui::Context, from: egui::Pos2, to: egui::Pos2, what: String) {
    ctx.data_mut(|d| {
        d.get_temp_mut_or_default::<Arrows>(arrows_id())
            .0
            .push((from, to, what))
    });
}

/// The arrows recorded this frame, in physical pixels.
pub fn arrows(ctx: &egui::Context, ppp: f32) -> Vec<Arrow> {
    ctx.data(|d| d.get_temp::<Arrows>(arrows_id()))
        .unwrap_or_default()
        .0
        .into_iter()
        .map(|(a, b, what)| Arrow {
            from: [a.x * ppp, a.y * ppp],
            to: [b.x * ppp, b.y * ppp],
            what,
        })
        .collect()
}

impl Layout {
    /// The runs that overflow ([`TextRun::overflows`]).
    pub fn overflows(&self) -> Vec<&TextRun> {
        self.texts.iter().filter(|t| t.overflows()).collect()
    }

    /// The runs that break the presentation rules ([`TextRun::breach`]) and how, then each run drawn
    /// over an earlier one ([`Breach::Overlaps`], the visible parts of the two compared).
    pub fn breaches(&self, floor: f32, scrolling_ok: bool) -> Vec<(&TextRun, Breach)> {
        let mut out: Vec<(&TextRun, Breach)> = self
            .texts
            .iter()
            .filter_map(|t| t.breach(floor, scrolling_ok).map(|b| (t, b)))
            .collect();
        let rect = |r: [f32; 4]| egui::Rect::from_min_max(egui::pos2(r[0], r[1]), egui::pos2(r[2], r[3]));
        // Single lines only: a wrapped run's rect is the box of all its lines, and a label that wraps
        // after a row of buttons starts its first line where they end, not at its box's corner.
        let shown: Vec<egui::Rect> = self
            .texts
            .iter()
            .map(|t| {
                let single = t.rect[3] - t.rect[1] <= 1.6 * t.size;
                if single {
                    rect(t.rect).intersect(rect(t.clip))
                } else {
                    egui::Rect::NOTHING
                }
            })
            .collect();
        for (i, t) in self.texts.iter().enumerate() {
            let a = shown[i];
            if !a.is_positive() {
                continue;
            }
            let over = shown[..i].iter().any(|b| {
                let both = a.intersect(*b);
                both.is_positive() && both.area() > a.area().min(b.area()) / 3.0
            });
            if over {
                out.push((t, Breach::Overlaps));
            }
        }
        out
    }
}

/// The scroll areas shown this frame: inner rect (points) and whether the content exceeds it on x, y.
#[derive(Debug, Clone, Default)]
pub struct ScrollAreas(pub Vec<(egui::Rect, [bool; 2])>);

fn scroll_id() -> egui::Id {
    egui::Id::unique("kvscope-layout-scroll-areas")
}

/// Forget the previous frame's scroll areas (the app calls this as a frame starts).
pub fn begin_frame(ctx: &egui::Context) {
    ctx.data_mut(|d| d.insert_temp(scroll_id(), ScrollAreas::default()));
    ctx.data_mut(|d| d.insert_temp(arrows_id(), Arrows::default()));
    ctx.data_mut(|d| d.insert_temp(charts_id(), Charts::default()));
    ctx.data_mut(|d| d.insert_temp(legends_id(), Legends::default()));
}

/// Record a scroll area the app just showed.
pub fn record_scroll<R>(ctx: &egui::Context, out: &egui::scroll_area::ScrollAreaOutput<R>) {
    let r = out.inner_rect;
    let scrolls = [
        out.content_size.x > r.width() + 0.5,
        out.content_size.y > r.height() + 0.5,
    ];
    ctx.data_mut(|d| {
        d.get_temp_mut_or_default::<ScrollAreas>(scroll_id())
            .0
            .push((r, scrolls))
    });
}

/// Show `area` with `add` as its contents, and record it for the overflow check.
pub fn scroll<R>(ui: &mut egui::Ui, area: egui::ScrollArea, add: impl FnOnce(&mut egui::Ui) -> R) -> R {
    let out = area.show(ui, add);
    record_scroll(ui.ctx(), &out);
    out.inner
}

/// The scroll areas recorded this frame.
pub fn scroll_areas(ctx: &egui::Context) -> ScrollAreas {
    ctx.data(|d| d.get_temp::<ScrollAreas>(scroll_id())).unwrap_or_default()
}

/// Every text run of `shapes` at `ppp` physical pixels per point; runs clipped to a recorded scroll
/// area scroll on the axes it scrolls on (the innermost area that holds the clip rect).
pub fn text_runs(shapes: &[ClippedShape], scroll: &ScrollAreas, ppp: f32) -> Vec<TextRun> {
    let mut out = Vec::new();
    for c in shapes {
        walk(&c.shape, c.clip_rect, scroll, ppp, &mut out);
    }
    out
}

fn px(r: egui::Rect, ppp: f32) -> [f32; 4] {
    [r.min.x * ppp, r.min.y * ppp, r.max.x * ppp, r.max.y * ppp]
}

fn walk(shape: &Shape, clip: egui::Rect, scroll: &ScrollAreas, ppp: f32, out: &mut Vec<TextRun>) {
    match shape {
        Shape::Vec(v) => v.iter().for_each(|s| walk(s, clip, scroll, ppp, out)),
        Shape::Text(t) => {
            let text = t.galley.text();
            if text.trim().is_empty() {
                return;
            }
            // The rows' own extent: a label wrapped after other widgets in a row carries the room before
            // it as its first row's leading space, which is not text.
            let local = t
                .galley
                .rows
                .iter()
                .map(|r| r.rect_without_leading_space())
                .reduce(|a, b| a.union(b))
                .unwrap_or(t.galley.rect);
            let rect = if t.angle == 0.0 {
                local.translate(t.pos.to_vec2())
            } else {
                // The turned rect's bounding box (rotation about the galley's origin, at `pos`).
                let rot = egui::emath::Rot2::from_angle(t.angle);
                let corners = [
                    local.left_top(),
                    local.right_top(),
                    local.left_bottom(),
                    local.right_bottom(),
                ];
                egui::Rect::from_points(&corners.map(|p| t.pos + rot * p.to_vec2()))
            };
            let first = t.galley.job.sections.first();
            let size = first.map_or(0.0, |s| s.format.font_id.size) * ppp;
            let color = first.map_or(egui::Color32::TRANSPARENT, |s| s.format.color);
            let color = if t.override_text_color.is_some() {
                t.override_text_color.unwrap_or(color)
            } else if color == egui::Color32::PLACEHOLDER {
                t.fallback_color
            } else {
                color
            };
            // The innermost recorded scroll area whose inner rect is this clip rect (egui clips a scroll
            // area's content to its inner rect widened by a margin of a few points, within its panel).
            let scrolls = scroll
                .0
                .iter()
                .filter(|(r, _)| r.expand(12.0).contains_rect(clip) && clip.intersect(*r).area() >= 0.9 * r.area())
                .min_by(|a, b| a.0.area().total_cmp(&b.0.area()))
                .map_or([false, false], |(_, s)| *s);
            out.push(TextRun {
                text: text.to_string(),
                rect: px(rect, ppp),
                clip: px(clip, ppp),
                size,
                color: color.to_array(),
                scrolls,
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rect: [f32; 4], scrolls: [bool; 2], text: &str) -> TextRun {
        TextRun {
            text: text.into(),
            rect,
            clip: [0.0, 0.0, 100.0, 50.0],
            size: 20.0,
            color: [255; 4],
            scrolls,
        }
    }

    /// Inside: no overflow; past the right edge: overflow, unless that axis scrolls or the text is elided;
    /// a pixel of antialiasing slack is allowed.
    #[test]
    fn overflow_is_leaving_the_clip_rect_on_an_axis_that_does_not_scroll() {
        assert!(!run([10.0, 10.0, 90.0, 30.0], [false; 2], "a").overflows());
        assert!(!run([10.0, 10.0, 100.8, 30.0], [false; 2], "a").overflows());
        assert!(run([10.0, 10.0, 140.0, 30.0], [false; 2], "a").overflows());
        assert!(run([120.0, 10.0, 140.0, 30.0], [false; 2], "a column lost").overflows());
        assert!(!run([10.0, 10.0, 140.0, 30.0], [true, false], "a").overflows());
        assert!(run([10.0, 10.0, 140.0, 30.0], [false, true], "a").overflows());
        assert!(!run([10.0, 40.0, 90.0, 70.0], [false, true], "a").overflows());
        assert!(!run([10.0, 10.0, 140.0, 30.0], [false; 2], "long title…").overflows());
    }

    /// The presentation rules: small text, text a scroll area hides (unless scrolling is allowed) and
    /// elided text break them; text inside its clip at the floor does not.
    #[test]
    fn breaches_are_small_hidden_or_elided_text() {
        let ok = run([10.0, 10.0, 90.0, 30.0], [false, true], "a");
        assert_eq!(ok.breach(20.0, false), None);
        assert_eq!(ok.breach(21.0, false), Some(Breach::Small(20.0)));
        let below = run([10.0, 40.0, 90.0, 70.0], [false, true], "a");
        assert_eq!(below.breach(20.0, false), Some(Breach::Hidden));
        assert_eq!(below.breach(20.0, true), None);
        let cut = run([10.0, 10.0, 90.0, 30.0], [false; 2], "full blocks looke…");
        assert_eq!(cut.breach(14.0, true), Some(Breach::Elided));
        let layout = |texts| Layout {
            width: 100,
            height: 50,
            pixels_per_point: 1.0,
            texts,
            arrows: Vec::new(),
            charts: Vec::new(),
            legends: Vec::new(),
        };
        // Two lines one under the other do not overlap; a label over a label does.
        let apart = layout(vec![ok.clone(), run([10.0, 30.0, 90.0, 48.0], [false; 2], "b")]);
        assert!(apart.breaches(20.0, false).is_empty());
        let over = layout(vec![ok.clone(), run([20.0, 12.0, 60.0, 32.0], [false; 2], "b")]);
        assert_eq!(over.breaches(20.0, false).len(), 1);
    }
}
