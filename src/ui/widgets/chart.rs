//! Every line and bar chart of the lessons, drawn on egui_plot under the presentation rules (issue #56):
//! the chart, not the view, decides its ranges, its ticks and where its legend and titles go.
//!
//! - **Ranges** cover the data (every item's bounds, texts included) with 4% to spare at each end, and no
//!   spare below zero on an axis whose quantity starts at zero ([`ChartAxis::from_zero`]). A chart is
//!   never dragged or zoomed: a slide shows the range the data needs.
//! - **Ticks** are chosen here, not by egui_plot's log-10 grid: as many round values (1, 2, 2.5, 5 × 10ⁿ;
//!   decades and their 2 and 5 multiples on a log axis) as fit the axis with their labels measured in the
//!   font they are drawn in, and never fewer than three.
//! - **The y title** is set upright above the plot (a sideways title cannot be read in Chinese, and is
//!   hard to read in English at the back of a hall); the x title stays under the ticks.
//! - **The legend** sits under the plot, never over the data, and lists every named item drawn (or the
//!   entries a view gives it, when its marks are coloured by state).
//!
//! Each chart shown records what it did ([`crate::ui::layout::record_chart`]): its ranges, its ticks and
//! whether their labels fit, so that `tests/overflow.rs` checks the axis rules on every frame.

use eframe::egui::{self, Color32, Ui};
use egui_plot::{AxisHints, BarChart, GridMark, HLine, Line, Plot, PlotBounds, PlotItem, Points, Polygon, Text, VLine};

use crate::style::Rgba;
use crate::ui::layout::{ChartAxisRecord, ChartRecord};
mod axis;
pub use axis::{ChartAxis, Scale};
enum Item<'a> {
    Line(Line<'a>),
    Points(Points<'a>),
    Bars(BarChart),
    Text(Text),
    VLine(VLine),
    HLine(HLine),
    Polygon(Polygon<'a>),
}

impl Item<'_> {
    fn plot_item(&self) -> &dyn PlotItem {
        match self {
            Item::Line(i) => i,
            Item::Points(i) => i,
            Item::Bars(i) => i,
            Item::Text(i) => i,
            Item::VLine(i) => i,
            Item::HLine(i) => i,
            Item::Polygon(i) => i,
        }
    }
}

/// What a chart's contents are added to: the items egui_plot draws, kept until the chart has seen
/// them all (their bounds set its ranges, their names its legend).
pub struct ChartUi<'a> {
    items: Vec<Item<'a>>,
    thresholds: Vec<(usize, f64, String)>,
}

impl<'a> ChartUi<'a> {
    /// A line.
    pub fn line(&mut self, l: Line<'a>) {
        self.items.push(Item::Line(l));
    }
    /// Points.
    pub fn points(&mut self, p: Points<'a>) {
        self.items.push(Item::Points(p));
    }
    /// Bars.
    pub fn bar_chart(&mut self, b: BarChart) {
        self.items.push(Item::Bars(b));
    }
    /// A text at a point (a label on the data; not in the legend).
    pub fn text(&mut self, t: Text) {
        self.items.push(Item::Text(t));
    }
    /// A vertical line (its value is in the x range).
    pub fn vline(&mut self, l: VLine) {
        self.items.push(Item::VLine(l));
    }
    /// A horizontal line (its value is in the y range).
    pub fn hline(&mut self, l: HLine) {
        self.items.push(Item::HLine(l));
    }
    /// A polygon.
    pub fn polygon(&mut self, p: Polygon<'a>) {
        self.items.push(Item::Polygon(p));
    }
    /// A threshold on the x axis (a budget, a limit, where something starts): a neutral dashed vertical
    /// line labelled at the line, not in the legend (the colour grammar keeps colours for the data).
    pub fn threshold_x(&mut self, value: f64, label: impl Into<String>) {
        self.thresholds.push((0, value, label.into()));
    }
    /// A threshold on the y axis: a neutral dashed horizontal line labelled at its right end.
    pub fn threshold_y(&mut self, value: f64, label: impl Into<String>) {
        self.thresholds.push((1, value, label.into()));
    }
}

/// A chart: a plot with its two axes, its height (titles, ticks and legend included) and its legend.
pub struct Chart {
    id: String,
    height: f32,
    x: ChartAxis,
    y: ChartAxis,
    legend: Option<Vec<(Rgba, String)>>,
    legend_drawn: bool,
    gutter_for: Option<String>,
    hover: bool,
}

impl Chart {
    /// A chart with id `id` (unique in the frame) and axes `x`, `y`.
    pub fn new(id: impl Into<String>, x: ChartAxis, y: ChartAxis) -> Self {
        Self {
            id: id.into(),
            height: 200.0,
            x,
            y,
            legend: None,
            legend_drawn: true,
            gutter_for: None,
            hover: true,
        }
    }

    /// The whole chart's height: the y title, the plot with its ticks and x title, and the legend.
    pub fn height(mut self, h: f32) -> Self {
        self.height = h;
        self
    }

    /// The legend's entries, when the view colours its marks by state (each bar in the colour of what
    /// it is) rather than by item; by default the legend lists the named items.
    pub fn legend(mut self, entries: Vec<(Rgba, String)>) -> Self {
        self.legend = Some(entries);
        self
    }

    /// The legend of the chart drawn under this one, whose series this one shares (one legend for two
    /// stacked charts): recorded for the rules as this chart's, not drawn here.
    pub fn legend_below(mut self, entries: Vec<(Rgba, String)>) -> Self {
        self.legend = Some(entries);
        self.legend_drawn = false;
        self
    }

    /// Keep a right gutter as wide as threshold label `label` needs, so that a chart stacked over one
    /// with that threshold has the same plot width.
    pub fn gutter_for(mut self, label: impl Into<String>) -> Self {
        self.gutter_for = Some(label.into());
        self
    }

    /// No legend (a single unnamed series that the titles already name).
    pub fn no_legend(mut self) -> Self {
        self.legend = Some(Vec::new());
        self
    }

    /// No hover read-out (a chart drawn as a figure).
    pub fn no_hover(mut self) -> Self {
        self.hover = false;
        self
    }

    /// Draw the chart at text size `size` with the items `add` adds.
    pub fn show<'a>(self, ui: &mut Ui, size: f32, add: impl FnOnce(&mut ChartUi<'a>)) {
        let mut c = ChartUi {
            items: Vec::new(),
            thresholds: Vec::new(),
        };
        add(&mut c);
        let mut items = c.items;
        let thresholds: Vec<(usize, f64, String)> = c.thresholds.into_iter().filter(|t| t.1.is_finite()).collect();
        // The data's bounds, per axis.
        let mut lo = [f64::INFINITY; 2];
        let mut hi = [f64::NEG_INFINITY; 2];
        for it in &items {
            let b = it.plot_item().bounds();
            for a in 0..2 {
                for v in [b.min()[a], b.max()[a]] {
                    if v.is_finite() {
                        lo[a] = lo[a].min(v);
                        hi[a] = hi[a].max(v);
                    }
                }
            }
        }
        for (a, v, _) in &thresholds {
            lo[*a] = lo[*a].min(*v);
            hi[*a] = hi[*a].max(*v);
        }
        let (xr, xdata) = self.x.range(lo[0], hi[0]);
        let (yr, ydata) = self.y.range(lo[1], hi[1]);
        // The legend: the view's entries, or every named item once, in the order drawn.
        let entries: Vec<(Rgba, String)> = self.legend.clone().unwrap_or_else(|| {
            let mut e: Vec<(Rgba, String)> = Vec::new();
            for it in &items {
                if matches!(it, Item::Text(_)) {
                    continue;
                }
                let p = it.plot_item();
                if !p.name().is_empty() && !e.iter().any(|(_, n)| n == p.name()) {
                    e.push((p.color().to_array(), p.name().to_string()));
                }
            }
            e
        });
        // The colours the data marks are drawn in (before the thresholds join them), for the rule that
        // every mark's colour is in the legend.
        let mark_rgba = mark_colours(ui, &items, [xr, yr]);
        // The thresholds: dashed lines in the muted text colour (their labels go outside the plot once it
        // is drawn).
        let ink = crate::style::muted(ui.visuals());
        for (a, v, _) in &thresholds {
            let dashed = egui_plot::LineStyle::dashed_loose();
            items.push(if *a == 0 {
                Item::VLine(VLine::new("", *v).color(ink).width(1.5).style(dashed))
            } else {
                Item::HLine(HLine::new("", *v).color(ink).width(1.5).style(dashed))
            });
        }
        let legend_size = size * 0.85;
        let width = ui.available_width();
        let legend_h = if entries.is_empty() || !self.legend_drawn {
            0.0
        } else {
            super::legend_height(ui, &entries, legend_size, width) + ui.spacing().item_spacing.y
        };
        // The y title, upright above the plot.
        let title_font = egui::FontId::proportional(crate::style::fit(size * 0.85));
        let title = ui
            .painter()
            .layout(self.y.title.clone(), title_font, ui.visuals().text_color(), width);
        let title_h = if self.y.title.is_empty() {
            0.0
        } else {
            title.size().y + 2.0
        };
        // Threshold labels go outside the plot, never over the data: a horizontal line's in a gutter
        // right of the plot (wrapped to at most a quarter of the width), a vertical line's in a row
        // above the plot, at the line.
        let label_font = egui::FontId::proportional(crate::style::fit(size * 0.85));
        let hlabels: Vec<(f64, String)> = thresholds
            .iter()
            .filter(|(a, _, _)| *a == 1)
            .map(|(_, v, t)| (*v, t.clone()))
            .collect();
        let vlabels: Vec<(f64, String)> = thresholds
            .iter()
            .filter(|(a, _, _)| *a == 0)
            .map(|(_, v, t)| (*v, t.clone()))
            .collect();
        let gutter = if hlabels.is_empty() && self.gutter_for.is_none() {
            0.0
        } else {
            let widest = hlabels
                .iter()
                .map(|(_, t)| t)
                .chain(&self.gutter_for)
                .map(|t| ui.painter().layout_no_wrap(t.clone(), label_font.clone(), ink).size().x)
                .fold(0.0, f32::max);
            widest.min(width * 0.25) + 8.0
        };
        let vrow_h = if vlabels.is_empty() {
            0.0
        } else {
            ui.fonts_mut(|f| f.row_height(&label_font)) + 2.0
        };
        let plot_h = (self.height - title_h - vrow_h - legend_h).max(size * 4.0);
        if title_h > 0.0 {
            let (r, resp) = ui.allocate_exact_size(egui::vec2(width, title_h), egui::Sense::hover());
            let text = self.y.title.clone();
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, &text));
            ui.painter().galley(r.min, title, ui.visuals().text_color());
        }
        if vrow_h > 0.0 {
            ui.allocate_exact_size(egui::vec2(width, vrow_h), egui::Sense::hover());
        }
        // The plot frame's size: last frame's, measured, or a guess from the fonts.
        let tick_font = egui::TextStyle::Body.resolve(ui.style());
        let row = ui.text_style_height(&egui::TextStyle::Body);
        let frame_key = egui::Id::unique(("kvscope-chart-frame", &self.id));
        let measure = |ui: &Ui, t: &str| {
            ui.painter()
                .layout_no_wrap(t.to_string(), tick_font.clone(), Color32::PLACEHOLDER)
                .size()
                .x
        };
        let guess = ui.data(|d| d.get_temp::<egui::Vec2>(frame_key));
        let frame_h = guess.map_or(plot_h - row * (1.0 + f32::from(!self.x.title.is_empty())) - 6.0, |g| {
            g.y
        });
        // y ticks: at least three label heights apart (a slide, not a table); named categories, a row
        // each, need only a label height and a fifth (they are the rows of the chart, as a table's).
        let apart = if matches!(self.y.scale, Scale::Categories(_)) {
            1.2
        } else {
            3.0
        };
        let y_max = ((frame_h / (row * apart)).floor() as usize).max(3);
        let yt = self.y.ticks(yr[0], yr[1], y_max);
        let y_step = min_gap(&yt);
        let ylabels: Vec<String> = yt.iter().map(|&v| self.y.label(v, y_step)).collect();
        let y_w = ylabels.iter().map(|t| measure(ui, t)).fold(0.0, f32::max) + 8.0;
        let frame_w = guess.map_or(width - gutter - y_w - 4.0, |g| g.x);
        // x ticks: the most that leave a gap of half a label height between their labels.
        let mut xt = Vec::new();
        let mut xlabels = Vec::new();
        for max_n in (3..=14).rev() {
            let t = self.x.ticks(xr[0], xr[1], max_n);
            let step = min_gap(&t);
            let px = frame_w / (xr[1] - xr[0]) as f32;
            // A label that would stick out past the plot's right edge (where the view's clip cuts it)
            // is left out; its grid line stays. So is one at the left end wide enough to reach under
            // the y axis's lowest label, where the axes meet ("0.0" under a "0").
            let y_at_bottom = yt.first().is_some_and(|&v| (v - yr[0]).abs() <= 1e-9 * (1.0 + v.abs()));
            let labels: Vec<String> = t
                .iter()
                .map(|&v| {
                    let l = self.x.label(v, step);
                    let room = (xr[1] - v) as f32 * px;
                    let left = (v - xr[0]) as f32 * px;
                    let w = measure(ui, &l);
                    if w / 2.0 > room + 1.0 || (y_at_bottom && w / 2.0 > left + row * 0.35) {
                        String::new()
                    } else {
                        l
                    }
                })
                .collect();
            let widest = labels.iter().map(|l| measure(ui, l)).fold(0.0, f32::max);
            let gap = px * step as f32;
            let shown = labels.iter().filter(|l| !l.is_empty()).count();
            let enough = shown >= 3 || matches!(self.x.scale, Scale::Categories(_));
            let fits = enough && (t.len() < 2 || gap >= widest + row * 0.5);
            xt = t;
            xlabels = labels;
            if fits {
                break;
            }
        }
        let x_step = min_gap(&xt);
        let marks = |t: &[f64], step: f64| -> Vec<GridMark> {
            t.iter()
                .map(|&value| GridMark {
                    value,
                    step_size: if step.is_finite() { step } else { 1.0 },
                })
                .collect()
        };
        let (xm, ym) = (marks(&xt, x_step), marks(&yt, y_step));
        let lookup = |t: Vec<f64>, l: Vec<String>| {
            move |m: GridMark, _: &std::ops::RangeInclusive<f64>| {
                t.iter()
                    .position(|&v| (v - m.value).abs() <= 1e-9 * (1.0 + v.abs()))
                    .map_or(String::new(), |i| l[i].clone())
            }
        };
        let mut xh = AxisHints::new_x()
            .formatter(lookup(xt.clone(), xlabels.clone()))
            .label_spacing(egui::Rangef::new(1.0, 2.0));
        if !self.x.title.is_empty() {
            xh = xh.label(self.x.title.clone());
        }
        let yh = AxisHints::new_y()
            .formatter(lookup(yt.clone(), ylabels.clone()))
            .label_spacing(egui::Rangef::new(1.0, 2.0));
        let bounds = PlotBounds::from_min_max([xr[0], yr[0]], [xr[1], yr[1]]);
        let x_fmt = self.x.clone();
        let y_fmt = self.y.clone();
        let resp = Plot::new(&self.id)
            .height(plot_h)
            .width(width - gutter)
            .allow_scroll(false)
            .allow_drag(false)
            .allow_zoom(false)
            .allow_boxed_zoom(false)
            .allow_double_click_reset(false)
            .show_x(self.hover)
            .show_y(self.hover)
            .label_formatter(move |h| {
                let v = |a: &ChartAxis, v: f64| match a.scale {
                    Scale::Categories(_) => a.label(v, 1.0),
                    _ => a.label(v, (v.abs() / 1000.0).max(1e-6)),
                };
                let (name, p) = match h {
                    egui_plot::HoverPosition::NearDataPoint {
                        plot_name, position, ..
                    } => (*plot_name, position),
                    egui_plot::HoverPosition::Elsewhere { position } => ("", position),
                };
                let xy = format!("{}, {}", v(&x_fmt, p.x), v(&y_fmt, p.y));
                Some(if name.is_empty() { xy } else { format!("{name}\n{xy}") })
            })
            .custom_x_axes(vec![xh])
            .custom_y_axes(vec![yh])
            .x_grid_spacer(move |_| xm.clone())
            .y_grid_spacer(move |_| ym.clone())
            .show(ui, |p| {
                for it in items {
                    match it {
                        Item::Line(i) => p.line(i),
                        Item::Points(i) => p.points(i),
                        Item::Bars(i) => p.bar_chart(i),
                        Item::Text(i) => p.text(i),
                        Item::VLine(i) => p.vline(i),
                        Item::HLine(i) => p.hline(i),
                        Item::Polygon(i) => p.polygon(i),
                    }
                }
                p.set_plot_bounds(bounds);
            });
        let frame = *resp.transform.frame();
        ui.data_mut(|d| d.insert_temp(frame_key, frame.size()));
        // The threshold labels, outside the plot: horizontal lines' in the right gutter, level with
        // their line (pushed apart when two would meet), vertical lines' in the row above, at the line.
        let painter = ui.painter();
        let mut hl: Vec<(f32, std::sync::Arc<egui::Galley>)> = hlabels
            .iter()
            .map(|(v, t)| {
                let g = painter.layout(t.clone(), label_font.clone(), ink, gutter - 8.0);
                (resp.transform.position_from_point_y(*v) - g.size().y / 2.0, g)
            })
            .collect();
        hl.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut next_free = f32::NEG_INFINITY;
        for (y, g) in hl {
            let y = y
                .max(next_free)
                .clamp(frame.top() - vrow_h, frame.bottom() - g.size().y);
            next_free = y + g.size().y + 2.0;
            painter.galley(egui::pos2(frame.right() + 8.0, y), g, ink);
        }
        for (v, t) in &vlabels {
            let g = painter.layout_no_wrap(t.clone(), label_font.clone(), ink);
            let x = resp.transform.position_from_point_x(*v);
            let right_half = *v > (xr[0] + xr[1]) / 2.0;
            let left = if right_half { x - 3.0 - g.size().x } else { x + 3.0 };
            let left = left.clamp(frame.left(), (frame.right() - g.size().x).max(frame.left()));
            painter.galley(egui::pos2(left, frame.top() - g.size().y - 1.0), g, ink);
        }
        if !entries.is_empty() && self.legend_drawn {
            super::legend(ui, &entries, legend_size);
        }
        // What the rules check: the ranges, the ticks inside the range and the room their labels had.
        let shown = resp.transform.bounds();
        let axis = |a: &ChartAxis, i: usize, t: &[f64], labels: &[String], data: [f64; 2]| {
            let lo_hi = [shown.min()[i], shown.max()[i]];
            let len = if i == 0 { frame.width() } else { frame.height() };
            let px = len / (lo_hi[1] - lo_hi[0]) as f32;
            let inside: Vec<usize> = (0..t.len())
                .filter(|&k| t[k] >= lo_hi[0] - 1e-9 && t[k] <= lo_hi[1] + 1e-9 && !labels[k].is_empty())
                .collect();
            ChartAxisRecord {
                title: a.title.clone(),
                scale: a.scale_name().to_string(),
                data,
                shown: lo_hi,
                ticks: inside.iter().map(|&k| labels[k].clone()).collect(),
                gap_px: px * min_gap(t) as f32,
                label_px: if i == 0 {
                    inside.iter().map(|&k| measure(ui, &labels[k])).fold(0.0, f32::max)
                } else {
                    row
                },
            }
        };
        let record = ChartRecord {
            id: self.id.clone(),
            x: axis(&self.x, 0, &xt, &xlabels, xdata),
            y: axis(&self.y, 1, &yt, &ylabels, ydata),
            legend: entries.iter().map(|(c, n)| (n.clone(), *c)).collect(),
            marks: mark_rgba,
        };
        crate::ui::layout::record_chart(ui.ctx(), record);
    }
}

/// The distinct colours (unmultiplied, nearly transparent ones left out) that `items`' data marks are
/// drawn in: the shapes egui_plot makes of each line, point set, bar chart and polygon (texts, and the
/// chart's own thresholds, are not data), laid out on a stand-in frame over `ranges`.
fn mark_colours(ui: &Ui, items: &[Item<'_>], ranges: [[f64; 2]; 2]) -> Vec<Rgba> {
    let bounds = PlotBounds::from_min_max([ranges[0][0], ranges[1][0]], [ranges[0][1], ranges[1][1]]);
    let frame = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(200.0, 200.0));
    let transform = egui_plot::PlotTransform::new(frame, bounds, false);
    let mut shapes = Vec::new();
    for it in items.iter().filter(|it| !matches!(it, Item::Text(_))) {
        it.plot_item().shapes(ui, &transform, &mut shapes);
    }
    let mut out: Vec<Rgba> = Vec::new();
    let mut add = |c: Color32| {
        let c = c.to_srgba_unmultiplied();
        if c[3] >= 16 && !out.iter().any(|o| o[..3] == c[..3]) {
            out.push(c);
        }
    };
    fn walk(s: &egui::Shape, add: &mut dyn FnMut(Color32)) {
        match s {
            egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, add)),
            egui::Shape::Rect(r) => {
                add(r.fill);
                if r.stroke.width > 0.0 {
                    add(r.stroke.color);
                }
            }
            egui::Shape::Circle(c) => {
                add(c.fill);
                if c.stroke.width > 0.0 {
                    add(c.stroke.color);
                }
            }
            egui::Shape::LineSegment { stroke, .. } => add(stroke.color),
            egui::Shape::Path(p) => {
                add(p.fill);
                if let egui::epaint::ColorMode::Solid(c) = p.stroke.color
                    && p.stroke.width > 0.0
                {
                    add(c);
                }
            }
            egui::Shape::Mesh(m) => m.vertices.iter().for_each(|v| add(v.color)),
            _ => {}
        }
    }
    for s in &shapes {
        walk(s, &mut add);
    }
    out
}

/// The smallest gap between consecutive values (infinite for fewer than two).
fn min_gap(t: &[f64]) -> f64 {
    t.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min)
}
