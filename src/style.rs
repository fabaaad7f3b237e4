//! The visual grammar: what every colour on screen means, in every view of every lesson.
//!
//! Rules (ARCHITECTURE.md, "The visual grammar", says why):
//! - **One meaning per colour.** A state colour ([`WRITTEN`], [`READ`], [`CURRENT`], …) means that state
//!   wherever it appears: a slot of the static cache, a block of the pool, a token of generated text, a
//!   row of a plot. The states the next lessons bring are reserved here already ([`SINK`], [`EVICTED`],
//!   [`RESIDUAL`], [`ACCEPTED`], [`REJECTED`], [`SWAPPED`]), so that they cannot be taken by accident.
//! - **Highlights are outlines, never fills over data.** [`CURRENT`] marks the row, column or cell a
//!   step talks about by a frame drawn around it, and its tick label is set bold; the cells keep their
//!   colours.
//! - **Requests take their colours from [`REQUESTS`]**, which stays clear of every state colour (the
//!   unit test measures the distances in CIELAB). A single sequence (lessons 4 and 6) is request 0.
//! - **Views name no colour literal.** Everything under `src/ui/` and `src/render/` takes its colours
//!   from this module (`tests/layering.rs` fails on a `Color32::from_rgb`, `from_gray`, `Color32::RED`,
//!   … outside it). Text colours that depend on the theme are functions of [`egui::Visuals`].
//! - Every mark has a legend entry, every colour bar a title with its quantity and unit (the views'
//!   job; [`crate::ui::widgets::legend_chip`] draws entries with these colours).

use eframe::egui::{self, Color32, Visuals};

/// The smallest text presentation mode draws, in pixels at one pixel per point: about 4% of a 720-line
/// slide's height, less a margin (issue #56; `tests/overflow.rs` checks every frame against it).
pub const PRESENT_FLOOR: f32 = 20.0;
/// The smallest text the window draws, in pixels (the same test, at 1600×900).
pub const WINDOW_FLOOR: f32 = 14.0;

thread_local! {
    static TEXT_FLOOR: std::cell::Cell<f32> = const { std::cell::Cell::new(0.0) };
}

/// Set the smallest text size the views may draw this frame, in points (the app sets
/// [`PRESENT_FLOOR`] in presentation mode and [`WINDOW_FLOOR`] in the window, each frame before the views
/// draw; 0, the default, leaves every size as the view computed it).
pub fn set_text_floor(points: f32) {
    TEXT_FLOOR.with(|f| f.set(points));
}

/// This frame's text floor ([`set_text_floor`]).
pub fn text_floor() -> f32 {
    TEXT_FLOOR.with(std::cell::Cell::get)
}

thread_local! {
    // The view page presentation mode shows this frame, and the most pages a view asked for.
    static VIEW_PAGES: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 1)) };
}

/// Start a frame's views on view page `page` (the shell, each frame, before the views draw).
pub fn begin_view_pages(page: usize) {
    VIEW_PAGES.with(|p| p.set((page, 1)));
}

/// A view that splits what it shows into `pages` pages (a long table in presentation mode): the page to
/// draw now. The presenter's → and ← step through the pages before the steps (`KvscopeApp::next_page_or_step`).
pub fn view_page(pages: usize) -> usize {
    let pages = pages.max(1);
    VIEW_PAGES.with(|p| {
        let (page, most) = p.get();
        p.set((page, most.max(pages)));
        page.min(pages - 1)
    })
}

/// The most pages a view of this frame asked for ([`view_page`]; 1 when none did).
pub fn view_pages() -> usize {
    VIEW_PAGES.with(|p| p.get().1)
}

/// Whether this frame is the window's (its floor set, below presentation mode's): there a view's table
/// or text block that does not fit its room at full size scrolls instead of shrinking under the floor
/// (the presentation rules let the window scroll; a projector never does).
pub fn views_may_scroll() -> bool {
    let floor = text_floor();
    floor > 0.0 && floor < PRESENT_FLOOR
}

/// A view's secondary text size (a tick, a legend, a table cell, a label on a mark): `size` as the view
/// computed it, raised to this frame's floor ([`set_text_floor`]). Every text size under the body size
/// goes through it, so presentation mode never draws it smaller than a slide can show.
pub fn fit(size: f32) -> f32 {
    // Within half a pixel of the floor counts as on it (the check allows the same), so a size of 0.9 of
    // presentation mode's 22-pixel body text stays as it is.
    let floor = text_floor();
    if size + 0.5 >= floor { size } else { floor }
}

/// An sRGB colour with alpha, as the renderers upload it.
pub type Rgba = [u8; 4];

/// Written this step: the slot a decode appends, the block a copy-on-write fills.
pub const WRITTEN: Rgba = [255, 140, 30, 255];
/// Read this step: the cached K/V a decode streams in.
pub const READ: Rgba = [250, 220, 90, 255];
/// The current row, column, cell, token or tile the step talks about: drawn as an outline.
pub const CURRENT: Rgba = [255, 64, 160, 255];
/// Text or tokens the model generated (as opposed to the prompt).
pub const GENERATED: Rgba = [90, 200, 110, 255];
/// Out of memory: a pool that cannot hold the next block, a request that cannot be admitted.
pub const OOM: Rgba = [230, 50, 50, 255];
/// A free block or slot: holds nothing.
pub const FREE: Rgba = [58, 58, 64, 255];
/// Reserved for a sequence but never used (the static cache's waste): darker than free, and the
/// views that show it also hatch or label it.
pub const RESERVED: Rgba = [66, 62, 44, 255];
/// Reserved (lesson 8): an attention-sink token pinned in the cache.
pub const SINK: Rgba = [40, 200, 230, 255];
/// Reserved (lessons 8–9): an evicted or dead slot, drawn struck out.
pub const EVICTED: Rgba = [120, 60, 50, 255];
/// Reserved (lesson 10): an f16 residual kept beside quantised codes.
pub const RESIDUAL: Rgba = [235, 235, 235, 255];
/// Reserved (lesson 12): a draft token the target model accepted.
pub const ACCEPTED: Rgba = [0, 130, 105, 255];
/// Reserved (lesson 12): a draft token the target model rejected.
pub const REJECTED: Rgba = [150, 30, 110, 255];
/// Reserved (lesson 12): a block swapped out to host memory.
pub const SWAPPED: Rgba = [140, 90, 230, 255];
/// A masked-out score (the heatmap's hatch is drawn from this grey and a darker shade of it).
pub const MASKED: Rgba = [128, 128, 128, 255];

/// The darker lines of the masked hatch (the renderer draws them at 0.8 × [`MASKED`] too).
pub const MASKED_HATCH: Rgba = [102, 102, 102, 255];

/// Every state colour with its name (tests and the legend of the grammar).
pub const STATES: [(&str, Rgba); 13] = [
    ("written", WRITTEN),
    ("read", READ),
    ("current", CURRENT),
    ("generated", GENERATED),
    ("oom", OOM),
    ("free", FREE),
    ("reserved", RESERVED),
    ("sink", SINK),
    ("evicted", EVICTED),
    ("residual", RESIDUAL),
    ("accepted", ACCEPTED),
    ("rejected", REJECTED),
    ("swapped", SWAPPED),
];

/// Request (and KV-head, and plot-series) colours, cycled by id. Muted, at least CIEDE2000 20 from each
/// other and from every state colour (the unit test checks both), so that eight requests in one pool
/// stay apart on a projector. Chosen by a max-min search over an sRGB grid (lightness 40–80, chroma
/// 12–60), then ordered so that the first few, the most used, are the most distinct.
pub const REQUESTS: [Rgba; 8] = [
    [120, 160, 240, 255],
    [240, 150, 140, 255],
    [80, 150, 140, 255],
    [150, 150, 30, 255],
    [230, 160, 240, 255],
    [160, 100, 40, 255],
    [30, 100, 140, 255],
    [30, 110, 30, 255],
];

/// The cache policies of lessons 8 and 9, one colour each wherever they appear (a policy keeps its
/// colour from lesson 8 to lesson 9). Its own palette: no request colour (each at least CIEDE2000 8 from
/// every request colour), and at least 20 from each other and from every state colour.
pub const POLICIES: [(&str, Rgba); 7] = [
    ("dense", [30, 150, 230, 255]),
    ("window", [240, 180, 180, 255]),
    ("sinks", [70, 130, 30, 255]),
    ("recompute", [130, 100, 30, 255]),
    ("h2o", [190, 160, 240, 255]),
    ("snapkv", [30, 110, 110, 255]),
    ("random", [170, 160, 110, 255]),
];

/// The KV-cache formats of lesson 10, one colour each wherever they appear: the policies' palette (the
/// two lessons never share a view), so no request colour either.
pub const FORMATS: [(&str, Rgba); 7] = [
    ("f16", POLICIES[0].1),
    ("int8-token", POLICIES[1].1),
    ("int8-channel", POLICIES[2].1),
    ("fp8-e4m3", POLICIES[3].1),
    ("fp8-e5m2", POLICIES[4].1),
    ("kivi-4", POLICIES[5].1),
    ("kivi-2", POLICIES[6].1),
];

/// The colour of KV-cache format `key` (one of [`FORMATS`]).
pub fn kv_format(key: &str) -> Rgba {
    FORMATS.iter().find(|(n, _)| *n == key).map_or(MASKED, |(_, c)| *c)
}

/// The colour of cache policy `name` (one of [`POLICIES`]; "full" is lesson 9's name for "dense").
pub fn policy(name: &str) -> Rgba {
    let name = if name == "full" { "dense" } else { name };
    POLICIES.iter().find(|(n, _)| *n == name).map_or(MASKED, |(_, c)| *c)
}

/// The colour of request (or KV head, or series) `i`.
pub fn request(i: usize) -> Rgba {
    REQUESTS[i % REQUESTS.len()]
}

/// The fill of a pool block owned by request `owner` (−1: a free block).
pub fn owner_fill(owner: i32) -> Rgba {
    if owner < 0 { FREE } else { request(owner as usize) }
}

/// Background of the GPU-drawn panels (heatmap, pool, strip).
pub const CANVAS: Rgba = [24, 24, 28, 255];

/// Background of the block pool in the light theme (a dark panel in a lit room reads as a hole).
pub const CANVAS_LIGHT: Rgba = [232, 232, 236, 255];

/// The pool's background in the current theme.
pub fn canvas(dark: bool) -> Rgba {
    if dark { CANVAS } else { CANVAS_LIGHT }
}

/// Text the renderers draw themselves (the demo PNGs' labels).
pub const LABEL: Rgba = [230, 230, 230, 255];

/// Grid lines between heatmap cells.
pub const GRID: Rgba = [20, 20, 20, 255];

/// An [`Rgba`] as egui's colour.
pub const fn c32(c: Rgba) -> Color32 {
    Color32::from_rgba_premultiplied(c[0], c[1], c[2], c[3])
}

/// The state colour `c` as egui's colour (for marks: chips, bars, outlines).
pub const WRITTEN_32: Color32 = c32(WRITTEN);
/// [`READ`] for egui.
pub const READ_32: Color32 = c32(READ);
/// [`CURRENT`] for egui.
pub const CURRENT_32: Color32 = c32(CURRENT);
/// [`GENERATED`] for egui.
pub const GENERATED_32: Color32 = c32(GENERATED);
/// [`OOM`] for egui.
pub const OOM_32: Color32 = c32(OOM);
/// [`FREE`] for egui.
pub const FREE_32: Color32 = c32(FREE);

/// Black or white, whichever reads better on `bg` (cell values drawn on a colormap, labels on chips).
pub fn ink_on(bg: Rgba) -> Color32 {
    let lin = |c: u8| {
        let c = f32::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(bg[0]) + 0.7152 * lin(bg[1]) + 0.0722 * lin(bg[2]);
    if l > 0.179 { Color32::BLACK } else { Color32::WHITE }
}

/// Text of secondary importance (axis notes, hints, "—"): still 7:1 against the panel.
pub fn muted(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_gray(175)
    } else {
        Color32::from_gray(70)
    }
}

/// A check that passed (and nothing else).
pub fn pass(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_rgb(110, 215, 130)
    } else {
        Color32::from_rgb(15, 95, 35)
    }
}

/// A check that failed, an error, an OOM message.
pub fn fail(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_rgb(255, 130, 130)
    } else {
        Color32::from_rgb(160, 15, 15)
    }
}

/// A warning: a fallback backend, a skipped measurement.
pub fn warn(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_rgb(240, 170, 100)
    } else {
        Color32::from_rgb(120, 60, 0)
    }
}

/// Quoted (published, not measured) values: narration's `^^…^^` and the views' quoted figures.
pub fn quote(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_rgb(140, 190, 255)
    } else {
        Color32::from_rgb(20, 70, 150)
    }
}

/// A state colour as text on the panel: the state's colour lightened (dark theme) or darkened (light
/// theme) until it reads at 7:1, so that "written" in a sentence matches the chip in its legend.
pub fn state_text(v: &Visuals, c: Rgba) -> Color32 {
    // 45% of the way to white (35% of the colour left, on a light panel), further where a dark
    // colour needs it to reach 7:1.
    let mut t = 0.0f32;
    loop {
        let out = if v.dark_mode {
            let w = 0.45 + t;
            let l = |x: u8| (f32::from(x) + (255.0 - f32::from(x)) * w) as u8;
            Color32::from_rgb(l(c[0]), l(c[1]), l(c[2]))
        } else {
            let k = (0.35 - t).max(0.0);
            let d = |x: u8| (f32::from(x) * k) as u8;
            Color32::from_rgb(d(c[0]), d(c[1]), d(c[2]))
        };
        if t >= 0.35 || contrast(out, v.panel_fill) >= 7.0 {
            return out;
        }
        t += 0.025;
    }
}

/// Request `i`'s colour as text (its id in a table or a line of output), at 7:1 like
/// [`state_text`].
pub fn request_text(v: &Visuals, i: usize) -> Color32 {
    state_text(v, request(i))
}

/// The attention kinds, one colour each wherever they appear (lesson 4's roofline and intensity lines,
/// lesson 11's bars, legend and cached rows): their index into [`REQUESTS`] (none of these lessons'
/// views shows requests beside them).
pub const ATTENTION_KINDS: [(&str, usize); 4] = [("MHA", 3), ("GQA", 4), ("MQA", 5), ("MLA", 2)];

/// Kind `kind`'s (`MHA`, `GQA`, `MQA`, `MLA`) index into [`REQUESTS`] ([`ATTENTION_KINDS`]; MHA's for
/// a name it does not know).
pub fn attention_kind(kind: &str) -> usize {
    ATTENTION_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(ATTENTION_KINDS[0].1, |(_, i)| *i)
}

/// Series `i` of a plot or a bar list (the request palette, so a series never reads as a state).
pub fn series(i: usize) -> Color32 {
    c32(request(i))
}

/// The bar of "the whole" that a part is measured against (all tiles, all T² scores, pool capacity).
pub const WHOLE_32: Color32 = c32(WHOLE);

/// [`WHOLE_32`] as RGBA (a legend chip).
pub const WHOLE: Rgba = [150, 150, 150, 255];

/// The fill of a bar that is one quantity among several in a list (the label says which).
pub fn bar_fill(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_rgb(170, 178, 195)
    } else {
        Color32::from_rgb(85, 92, 110)
    }
}

/// A count badge drawn on a block (fill, ink): light for a block in use, dark for a block that only
/// waits in the evictor.
pub fn badge(in_use: bool) -> (Color32, Color32) {
    if in_use {
        (Color32::from_gray(245), Color32::BLACK)
    } else {
        (Color32::from_gray(20), Color32::from_gray(235))
    }
}

/// The empty track behind a bar.
pub fn track(v: &Visuals) -> Color32 {
    if v.dark_mode {
        Color32::from_gray(45)
    } else {
        Color32::from_gray(215)
    }
}

/// A shade laid over a region not reached yet (alpha 0–255): it darkens, it does not recolour.
pub fn shade(alpha: u8) -> Color32 {
    Color32::from_black_alpha(alpha)
}

/// The lines that strike out something skipped or evicted.
pub const STRIKE_32: Color32 = Color32::from_gray(150);

/// Thin borders between tiles or cells drawn over data.
pub const HAIRLINE_32: Color32 = Color32::from_rgba_premultiplied(110, 110, 110, 110);

/// Text colours of both themes, raised to 7:1 against their panels (egui's defaults are a mid grey,
/// about 5:1 in the dark theme, too faint on a projector). Called once by whoever creates the context.
pub fn install(ctx: &egui::Context) {
    ctx.style_mut_of(egui::Theme::Dark, |s| {
        s.visuals.widgets.noninteractive.fg_stroke.color = Color32::from_gray(222);
    });
    ctx.style_mut_of(egui::Theme::Light, |s| {
        s.visuals.widgets.noninteractive.fg_stroke.color = Color32::from_gray(28);
    });
}

/// The colours of highlighted CUDA/WGSL source.
#[derive(Clone, Copy)]
pub struct CodeColors {
    /// Identifiers and punctuation.
    pub plain: Color32,
    /// Keywords and types.
    pub keyword: Color32,
    /// Comments.
    pub comment: Color32,
    /// Numbers and strings.
    pub number: Color32,
    /// Line numbers.
    pub line_number: Color32,
    /// The background of the line the step points at.
    pub highlight: Color32,
}

/// [`CodeColors`] of the dark or the light theme, every one at least 7:1 on the code background
/// (the unit test checks it).
pub fn code(dark: bool) -> CodeColors {
    if dark {
        CodeColors {
            plain: Color32::from_gray(225),
            keyword: Color32::from_rgb(165, 200, 255),
            comment: Color32::from_rgb(160, 215, 160),
            number: Color32::from_rgb(240, 185, 130),
            line_number: Color32::from_gray(160),
            highlight: Color32::from_rgb(55, 48, 10),
        }
    } else {
        CodeColors {
            plain: Color32::from_gray(20),
            keyword: Color32::from_rgb(20, 50, 160),
            comment: Color32::from_rgb(25, 90, 25),
            number: Color32::from_rgb(130, 55, 0),
            line_number: Color32::from_gray(80),
            highlight: Color32::from_rgb(255, 240, 160),
        }
    }
}

/// WCAG contrast ratio of two opaque colours (1 to 21).
pub fn contrast(a: Color32, b: Color32) -> f32 {
    let lum = |c: Color32| {
        let lin = |x: u8| {
            let x = f32::from(x) / 255.0;
            if x <= 0.04045 {
                x / 12.92
            } else {
                ((x + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(c.r()) + 0.7152 * lin(c.g()) + 0.0722 * lin(c.b())
    };
    let (la, lb) = (lum(a), lum(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// CIELAB (D65 white) of an sRGB colour (its alpha ignored).
pub fn lab(c: Rgba) -> [f64; 3] {
    let lin = |x: u8| {
        let x = f64::from(x) / 255.0;
        if x <= 0.04045 {
            x / 12.92
        } else {
            ((x + 0.055) / 1.055).powf(2.4)
        }
    };
    let (r, g, b) = (lin(c[0]), lin(c[1]), lin(c[2]));
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| {
        if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    [116.0 * f(y) - 16.0, 500.0 * (f(x) - f(y)), 200.0 * (f(y) - f(z))]
}

/// The CIEDE2000 difference of two sRGB colours: how far apart they look (Sharma, Wu and Dalal 2005,
/// "The CIEDE2000 color-difference formula: implementation notes"). About 2 is a just-noticeable
/// difference; the grammar asks 20 between the colours a view tells apart by colour alone.
pub fn delta_e2000(a: Rgba, b: Rgba) -> f64 {
    de2000(lab(a), lab(b))
}

/// CIEDE2000 between two CIELAB colours (kL = kC = kH = 1).
pub fn de2000([l1, a1, b1]: [f64; 3], [l2, a2, b2]: [f64; 3]) -> f64 {
    let (deg, rad) = (f64::to_degrees, f64::to_radians);
    let pow7 = |c: f64| c.powi(7);
    let c_bar = ((a1 * a1 + b1 * b1).sqrt() + (a2 * a2 + b2 * b2).sqrt()) / 2.0;
    let g = 0.5 * (1.0 - (pow7(c_bar) / (pow7(c_bar) + pow7(25.0))).sqrt());
    let (a1p, a2p) = ((1.0 + g) * a1, (1.0 + g) * a2);
    let (c1p, c2p) = ((a1p * a1p + b1 * b1).sqrt(), (a2p * a2p + b2 * b2).sqrt());
    let hue = |b: f64, a: f64| {
        if a == 0.0 && b == 0.0 {
            0.0
        } else {
            deg(b.atan2(a)).rem_euclid(360.0)
        }
    };
    let (h1p, h2p) = (hue(b1, a1p), hue(b2, a2p));
    let d_lp = l2 - l1;
    let d_cp = c2p - c1p;
    let chroma0 = c1p * c2p == 0.0;
    let dh = if chroma0 {
        0.0
    } else {
        let d = h2p - h1p;
        if d > 180.0 {
            d - 360.0
        } else if d < -180.0 {
            d + 360.0
        } else {
            d
        }
    };
    let d_hp = 2.0 * (c1p * c2p).sqrt() * rad(dh / 2.0).sin();
    let l_bar = (l1 + l2) / 2.0;
    let c_barp = (c1p + c2p) / 2.0;
    let h_bar = if chroma0 {
        h1p + h2p
    } else if (h1p - h2p).abs() <= 180.0 {
        (h1p + h2p) / 2.0
    } else if h1p + h2p < 360.0 {
        (h1p + h2p + 360.0) / 2.0
    } else {
        (h1p + h2p - 360.0) / 2.0
    };
    let t = 1.0 - 0.17 * rad(h_bar - 30.0).cos() + 0.24 * rad(2.0 * h_bar).cos() + 0.32 * rad(3.0 * h_bar + 6.0).cos()
        - 0.20 * rad(4.0 * h_bar - 63.0).cos();
    let d_theta = 30.0 * (-((h_bar - 275.0) / 25.0).powi(2)).exp();
    let r_c = 2.0 * (pow7(c_barp) / (pow7(c_barp) + pow7(25.0))).sqrt();
    let s_l = 1.0 + 0.015 * (l_bar - 50.0).powi(2) / (20.0 + (l_bar - 50.0).powi(2)).sqrt();
    let s_c = 1.0 + 0.045 * c_barp;
    let s_h = 1.0 + 0.015 * c_barp * t;
    let r_t = -rad(2.0 * d_theta).sin() * r_c;
    let (l, c, h) = (d_lp / s_l, d_cp / s_c, d_hp / s_h);
    (l * l + c * c + h * h + r_t * c * h).sqrt()
}

/// The smallest distance a legend keeps between the colours it tells apart ([`delta_e2000`]).
pub const LEGEND_MIN_DE: f64 = 20.0;

/// The most entries a legend tells apart by colour alone.
pub const LEGEND_MAX_COLOURS: usize = 8;

/// How a legend breaks the colour grammar, if it does: more than [`LEGEND_MAX_COLOURS`] entries told
/// apart by colour alone (an entry whose marks also carry its name, the `bool`, does not count), or two
/// entries closer than [`LEGEND_MIN_DE`] (one colour for two meanings included).
pub fn legend_breach(entries: &[(String, Rgba, bool)]) -> Option<String> {
    let by_colour = entries.iter().filter(|e| !e.2).count();
    if by_colour > LEGEND_MAX_COLOURS {
        return Some(format!("{by_colour} colours in one legend, told apart by colour alone"));
    }
    for (i, (ta, ca, _)) in entries.iter().enumerate() {
        for (tb, cb, _) in &entries[i + 1..] {
            let d = delta_e2000(*ca, *cb);
            if d < LEGEND_MIN_DE {
                return Some(format!("{ta:?} and {tb:?}: ΔE2000 {d:.1}"));
            }
        }
    }
    None
}

/// The colour grammar's last rule, on one chart: every mark drawn is in the legend. A mark colour
/// breaks it when it is not a grey (CIELAB chroma ≥ 12: greys are the chart's own ink, free blocks,
/// what a title already names) and is further than ΔE2000 8 from every legend colour (a faded or
/// outlined twin of an entry counts as the entry: alpha is not compared). A chart without a legend may
/// draw one such colour, a single series its titles name.
pub fn unlisted_mark(marks: &[Rgba], legend: &[Rgba]) -> Option<String> {
    let chroma = |c: Rgba| {
        let [_, a, b] = lab(c);
        a.hypot(b)
    };
    let opaque = |c: Rgba| [c[0], c[1], c[2], 255];
    let coloured: Vec<Rgba> = marks.iter().copied().filter(|&c| chroma(c) >= 12.0).collect();
    if legend.is_empty() {
        return (coloured.len() > 1).then(|| format!("{} mark colours and no legend", coloured.len()));
    }
    coloured
        .iter()
        .find(|&&m| legend.iter().all(|&l| delta_e2000(opaque(m), opaque(l)) > UNLISTED_DE))
        .map(|m| format!("a mark in {:?} that the legend does not list", &m[..3]))
}

/// How close (CIEDE2000) a mark's colour must be to a legend entry's to count as it.
pub const UNLISTED_DE: f64 = 8.0;

#[cfg(test)]
mod tests;
