//! Lesson 12's views: each scheduler step's tokens under the budget, the latencies, one chunk's rows over
//! the paged cache, swap against recompute, the speculative passes and what they buy, and the kernel.

mod common;
mod speculation;

use eframe::egui::{self, RichText, Ui};

use crate::lessons::serving::{Serving, ServingOut, View};
use crate::lessons::{LessonKind, Output};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{
    Cell, Chart, ChartAxis, Motion, Table, ViewCtx, check_line, fit_key, fitted_height, kernel_panel, legend, table,
    timeline,
};
use common::*;
use speculation::{real, spec_stats, speculative};
mod offload;
use offload::*;

impl LessonUi for Serving {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(o), Some(view)) = (out.downcast_ref::<ServingOut>(), View::from_name(view)) else {
            return;
        };
        let key = fit_key((view.name(), cx.params));
        match view {
            View::Schedule => fitted_height(ui, "serve-schedule", key, cx.size, |ui, size| schedule(cx, ui, o, size)),
            View::Latency => latency(cx, ui, o),
            View::Chunk => fitted_height(ui, "serve-chunk", key, cx.size, |ui, size| chunk(cx, ui, o, size)),
            View::Offload => offload(cx, ui, o),
            View::Speculative => {
                fitted_height(ui, "serve-spec", key, cx.size, |ui, size| speculative(cx, ui, o, size));
            }
            View::SpecStats => fitted_height(ui, "serve-stats", key, cx.size, |ui, size| spec_stats(cx, ui, o, size)),
            View::Real => real(cx, ui, o),
            View::Kernel => {
                check_line(
                    cx,
                    ui,
                    Some(&o.check),
                    cx.t(
                        "paged_prefill: a verification pass (f64 causal attention over the gathered cache)",
                        "paged_prefill：一次验证（对取回的缓存做 f64 因果注意力）",
                    ),
                );
                kernel_panel(cx, ui, self.ops(), out);
            }
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    /// The two processes of the lesson: the schedule, step by step, and the speculative passes, one by
    /// one. The other steps show whole runs or stored measurements and have no bar (the step that puts the
    /// schedule beside the latencies compares whole runs).
    fn timeline_on(&self, cx: &ViewCtx) -> bool {
        schedule_steps(cx) || cx.step_shows(View::Speculative.name())
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(o) = out.downcast_ref::<ServingOut>() else {
            return;
        };
        let lang = cx.lang;
        if schedule_steps(cx) {
            let Ok(run) = &o.run else { return };
            timeline(
                cx,
                ui,
                run.steps.len(),
                |ui, c, n| step_buttons(ui, c, n, lang.t("< step", "< 上一步"), lang.t("step >", "下一步 >")),
                |c| schedule_label(lang, o, run, c),
            );
        } else {
            let passes = &o.spec.steps;
            timeline(
                cx,
                ui,
                passes.len(),
                |ui, c, n| step_buttons(ui, c, n, lang.t("< pass", "< 上一次"), lang.t("pass >", "下一次 >")),
                |c| pass_label(lang, passes, c),
            );
        }
    }
}

/// Whether the step walks the schedule step by step (it shows the schedule without the latencies).
fn schedule_steps(cx: &ViewCtx) -> bool {
    cx.step_shows(View::Schedule.name()) && !cx.step_shows(View::Latency.name())
}

/// A timeline's "one back" and "one on" buttons.
fn step_buttons(ui: &mut Ui, c: &mut usize, n: usize, back: &str, on: &str) {
    if ui.button(back).clicked() {
        *c = c.saturating_sub(1);
    }
    if ui.button(on).clicked() {
        *c = (*c + 1).min(n - 1);
    }
}

/// What scheduler step `c` of `run` does, in words: each request's prefill (a chunk, with where it sits
/// in the prompt, or a whole prompt), who decodes, who arrives and who finishes.
fn schedule_label(
    lang: crate::ui::text::Lang,
    o: &ServingOut,
    run: &crate::drivers::serve::ServeRun,
    c: usize,
) -> String {
    use crate::ui::text::Lang;
    let Some(e) = run.steps.get(c) else {
        return String::new();
    };
    let zh = lang == Lang::Zh;
    let mut parts = vec![if zh {
        format!("第 {c} / {} 步", run.steps.len() - 1)
    } else {
        format!("step {c} / {}", run.steps.len() - 1)
    }];
    for &(r, first, n) in &e.chunks {
        let prompt = o.requests.get(r as usize).map_or(0, |q| q.1);
        parts.push(if zh {
            format!("请求 {r} 预填充位置 {first}…{}（共 {prompt}）", first + n - 1)
        } else {
            format!("request {r} prefills {first}…{} of {prompt}", first + n - 1)
        });
    }
    // (A chunked policy also lists the request whose first chunk this is as admitted.)
    for &(r, n) in e.admitted.iter().filter(|a| !e.chunks.iter().any(|c| c.0 == a.0)) {
        parts.push(if zh {
            format!("请求 {r} 预填充整段 {n} 字节 prompt")
        } else {
            format!("request {r} prefills its whole {n}-byte prompt")
        });
    }
    if !e.decoded.is_empty() {
        let ids: Vec<String> = e.decoded.iter().map(|d| d.0.to_string()).collect();
        parts.push(if zh {
            format!("解码：请求 {}", ids.join("、"))
        } else {
            format!("decode: request {}", ids.join(", "))
        });
    }
    for &(r, _) in &e.finished {
        parts.push(if zh {
            format!("请求 {r} 完成")
        } else {
            format!("request {r} finishes")
        });
    }
    parts.join(" · ")
}

/// What speculative pass `c` did: how many drafts the target kept, and the blocks the rejected ones
/// freed. Counted as the narration's `{passes}` counts, the prompt's prefill being the target's first.
fn pass_label(lang: crate::ui::text::Lang, passes: &[crate::drivers::spec::SpecStep], c: usize) -> String {
    let Some(s) = passes.get(c) else { return String::new() };
    let zh = lang == crate::ui::text::Lang::Zh;
    let freed = match (s.freed.is_empty(), zh) {
        (true, _) => String::new(),
        (false, true) => format!("，释放块 {:?}", s.freed),
        (false, false) => format!(", frees blocks {:?}", s.freed),
    };
    let (pass, all, pos, kept, drafts) = (c + 2, passes.len() + 1, s.pos, s.accepted, s.proposed.len());
    if zh {
        format!(
            "目标前向 {pass} / {all}（第 1 次是 prompt 的预填充），位置 {pos}：{drafts} 个草稿保留 {kept} 个{freed}"
        )
    } else {
        format!(
            "target pass {pass} / {all} (the 1st was the prompt's prefill), at position {pos}: keeps {kept} of {drafts} drafts{freed}"
        )
    }
}

fn schedule(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let policy = if o.chunked {
        lang.t("chunked prefill", "分块预填充")
    } else {
        lang.t("whole prompts", "整段 prompt")
    };
    title(
        ui,
        size,
        format!(
            "{} {} · {} {}",
            lang.t("Token budget", "token 预算"),
            o.budget,
            policy,
            lang.t("· tokens per step, by request", "· 每步的 token，按请求着色")
        ),
    );
    if let Err(e) = &o.run {
        ui.add(
            egui::Label::new(
                RichText::new(format!("{} {e}", lang.t("Refused:", "被拒绝：")))
                    .size(crate::style::fit(size))
                    .color(style::fail(ui.visuals())),
            )
            .wrap(),
        );
        return;
    }
    let tokens = o.step_tokens();
    let n = tokens.len().max(1);
    let mut entries: Vec<(style::Rgba, String)> = Vec::new();
    for (i, r) in o.requests.iter().enumerate() {
        entries.push((
            style::request(i),
            match lang {
                crate::ui::text::Lang::Zh => format!("请求 {i}：第 {} 步到达，{} 字节 prompt", r.0, r.1),
                _ => format!("request {i}: arrives at step {}, {}-byte prompt", r.0, r.1),
            },
        ));
    }
    // The timeline's step just taken, while it runs (on the step that walks the schedule): the outline
    // slides from the step before and the new step's bar fills, its chunks being scheduled; tests and
    // renders draw the settled frame.
    let at = (*cx.cursor).min(n - 1);
    let motion = if schedule_steps(cx) {
        Motion::of(
            ui,
            egui::Id::unique(("kvscope-schedule-motion", cx.lesson.id())),
            at,
            cx.sync,
            1,
        )
    } else {
        Motion::settled(at)
    };
    let grow = |s: usize| {
        if motion.moving() && s == at {
            f64::from(motion.ease())
        } else {
            1.0
        }
    };
    // Each step's tokens stacked by request, each request's prefill (solid) under its decode (faded):
    // one bar chart per (request, kind), each stacked on those before it.
    let mut charts: Vec<egui_plot::BarChart> = Vec::new();
    for i in 0..o.requests.len() {
        for decode in [false, true] {
            let bars: Vec<egui_plot::Bar> = tokens
                .iter()
                .enumerate()
                .map(|(s, t)| {
                    let (pf, dc) = t.get(i).copied().unwrap_or((0, 0));
                    egui_plot::Bar::new(s as f64, if decode { dc } else { pf } as f64 * grow(s))
                        .width(0.9)
                        .fill(req_color(i, decode))
                        .stroke(egui::Stroke::NONE)
                })
                .collect();
            let refs: Vec<&egui_plot::BarChart> = charts.iter().collect();
            let chart = egui_plot::BarChart::new("", bars)
                .color(req_color(i, decode))
                .stack_on(&refs);
            charts.push(chart);
        }
    }
    // The timeline's step, outlined over its bar (on the step that walks the schedule).
    let now = schedule_steps(cx).then(|| {
        let cur = at as f64;
        let x = motion.from as f64 + (cur - motion.from as f64) * f64::from(motion.ease());
        let top = o.budget as f64 * 1.04;
        entries.push((
            style::CURRENT,
            match lang {
                crate::ui::text::Lang::Zh => format!("时间线所在的第 {cur} 步"),
                _ => format!("step {cur}, where the timeline is"),
            },
        ));
        egui_plot::Polygon::new(
            "",
            egui_plot::PlotPoints::new(vec![[x - 0.5, 0.0], [x + 0.5, 0.0], [x + 0.5, top], [x - 0.5, top]]),
        )
        .fill_color(egui::Color32::TRANSPARENT)
        .stroke(egui::Stroke::new(2.0, style::CURRENT_32))
    });
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    // The chart takes the height left over the two lines of notes under it, at most 24 lines of text.
    let h = (ui.available_height() - 3.5 * size)
        .min(size * 24.0 + legend_h)
        .max(size * 6.0);
    Chart::new(
        "serve-schedule",
        ChartAxis::linear(match lang {
            crate::ui::text::Lang::Zh => format!("调度步 0 … {}", n.saturating_sub(1)),
            _ => format!("scheduler step 0 … {}", n.saturating_sub(1)),
        })
        .from_zero(),
        ChartAxis::linear(lang.t("tokens in the step", "本步的 token 数")).from_zero(),
    )
    .height(h)
    .legend(entries)
    .no_hover()
    .show(ui, size, |p| {
        for c in charts {
            p.bar_chart(c);
        }
        if let Some(now) = now {
            p.polygon(now);
        }
        p.threshold_y(o.budget as f64, format!("{} {}", lang.t("budget", "预算"), o.budget));
    });
    note(
        ui,
        size,
        lang.t(
            "Solid: prefill tokens (a prompt or a chunk of one). Faded: one decoded token per running request.",
            "实色：预填充 token（整段 prompt 或其中一块）。淡色：每个运行中的请求解码一个 token。",
        ),
    );
}

fn latency(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    let size = cx.size;
    let lang = cx.lang;
    let long = o.long();
    // In presentation mode the chart of the stored measurement (TTFT against ITL across budgets, whole
    // prompts beside) is the view's first page and the live table its second (a slide has room for one
    // of the two at the floor); the window shows both, the live table first.
    if crate::style::views_may_scroll() {
        live_latency(cx, ui, o);
        ui.add_space(size * 0.5);
        stored_latency(ui, lang, size, o, long);
    } else if crate::style::view_page(2) == 0 {
        stored_latency(ui, lang, size, o, long);
        crate::ui::widgets::more_on_next_page(ui, lang, size, lang.t("live, per request", "实时，每个请求"));
    } else {
        live_latency(cx, ui, o);
    }
}

/// The live run's latency per request, in scheduler steps.
fn live_latency(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    let size = cx.size;
    let lang = cx.lang;
    title(
        ui,
        size,
        lang.t(
            "Latency per request: live, in scheduler steps",
            "每个请求的延迟：实时计算，以调度步计",
        ),
    );
    match &o.run {
        Ok(run) => {
            let arrivals: Vec<usize> = o.requests.iter().map(|r| r.0).collect();
            let lat = run.latencies(&arrivals);
            let mut t = Table::new([
                lang.t("request", "请求"),
                lang.t("arrives", "到达"),
                lang.t("prompt", "prompt"),
                "TTFT",
                lang.t("worst ITL", "最差 ITL"),
                lang.t("bytes", "字节"),
            ]);
            for (i, (r, l)) in o.requests.iter().zip(&lat).enumerate() {
                let (tt, it) = l.as_ref().map_or(("-".into(), "-".into()), |l| {
                    (l.ttft_steps.to_string(), l.max_itl_steps().to_string())
                });
                t.row([
                    Cell::new(i.to_string()).color(style::request_text(ui.visuals(), i)),
                    Cell::new(r.0.to_string()).mono(),
                    Cell::new(r.1.to_string()).mono(),
                    Cell::new(tt).mono(),
                    Cell::new(it).mono(),
                    Cell::new(run.outputs[i].len().to_string()).mono(),
                ]);
            }
            table(ui, lang, size, &t);
        }
        Err(e) => {
            ui.add(
                egui::Label::new(
                    RichText::new(format!("{} {e}", lang.t("Refused:", "被拒绝：")))
                        .size(crate::style::fit(size))
                        .color(style::fail(ui.visuals())),
                )
                .wrap(),
            );
        }
    }
}

/// The stored wall-clock latencies across budgets and policies.
fn stored_latency(ui: &mut Ui, lang: crate::ui::text::Lang, size: f32, o: &ServingOut, long: usize) {
    title(
        ui,
        size,
        lang.t(
            "Across budgets (stored wall-clock measurement): down and left is better",
            "不同预算（存储的实测时间）：越靠左下越好",
        ),
    );
    // TTFT against ITL: each stored run a point, the chunked budgets joined in order, the whole-prompt
    // schedule apart, the current setting ringed. Down and left is better; chunking trades one for the other.
    let point_of = |ttft: &[f64], max_itl: &[f64]| {
        let stall = max_itl[..long.min(max_itl.len())].iter().copied().fold(0.0, f64::max);
        [ttft.get(long).copied().unwrap_or(0.0) * 1e3, stall * 1e3]
    };
    let point = |r: &crate::lessons::serving::measure::LatencyRow| point_of(&r.ttft, &r.max_itl);
    // The spread of a point's runs: the smallest and largest TTFT and ITL any of them gave.
    let spread = |r: &crate::lessons::serving::measure::LatencyRow| {
        r.runs
            .iter()
            .map(|x| point_of(&x.ttft, &x.max_itl))
            .fold([[f64::INFINITY; 2], [f64::NEG_INFINITY; 2]], |[lo, hi], p| {
                [[lo[0].min(p[0]), lo[1].min(p[1])], [hi[0].max(p[0]), hi[1].max(p[1])]]
            })
    };
    let runs = o.stored.latency.iter().map(|r| r.runs.len()).min().unwrap_or(0);
    let chunked: Vec<_> = o.stored.latency.iter().filter(|r| r.policy == "chunked").collect();
    let whole: Vec<_> = o.stored.latency.iter().filter(|r| r.policy != "chunked").collect();
    let chunked_name = lang.t("chunked prefill, by budget", "分块预填充（按预算）");
    let whole_name = lang.t("whole prompts", "整段预填充");
    let here_name = lang.t("this step's setting", "本步的设置");
    let h = (ui.available_height() - 7.0 * size).max(8.0 * size);
    // Room beyond the farthest points for their labels.
    let far = o
        .stored
        .latency
        .iter()
        .flat_map(|r| [point(r), if runs > 0 { spread(r)[1] } else { point(r) }])
        .fold([0.0f64; 2], |m, p| [m[0].max(p[0]), m[1].max(p[1])]);
    Chart::new(
        "serving-ttft-itl",
        ChartAxis::linear(lang.t("long request's TTFT (ms)", "长请求的 TTFT（ms）"))
            .from_zero()
            .include(far[0] * 1.2),
        ChartAxis::linear(lang.t("worst ITL of the others (ms)", "其他请求的最差 ITL（ms）"))
            .from_zero()
            .include(far[1] * 1.15),
    )
    .height(h)
    .legend(vec![
        (style::REQUESTS[0], chunked_name.to_string()),
        (style::WHOLE, whole_name.to_string()),
        (style::CURRENT, here_name.to_string()),
    ])
    .show(ui, size, |p| {
        // Each point's runs, fastest to slowest: a bar across in TTFT and one up in ITL, through the point.
        if runs > 0 {
            for r in &o.stored.latency {
                let [x, y] = point(r);
                let [lo, hi] = spread(r);
                let color = if r.policy == "chunked" {
                    style::series(0)
                } else {
                    style::c32(style::WHOLE)
                };
                for seg in [[[lo[0], y], [hi[0], y]], [[x, lo[1]], [x, hi[1]]]] {
                    p.line(
                        egui_plot::Line::new("", seg.to_vec())
                            .color(color.gamma_multiply(0.6))
                            .width(1.5),
                    );
                }
            }
        }
        let pts: Vec<[f64; 2]> = chunked.iter().map(|r| point(r)).collect();
        p.line(
            egui_plot::Line::new(chunked_name, pts.clone())
                .color(style::series(0))
                .width(2.0),
        );
        p.points(
            egui_plot::Points::new(chunked_name, pts)
                .color(style::series(0))
                .radius(size * 0.3),
        );
        for r in &chunked {
            let [x, y] = point(r);
            p.text(
                egui_plot::Text::new("", egui_plot::PlotPoint::new(x, y), format!("  {}", r.budget))
                    .anchor(egui::Align2::LEFT_BOTTOM)
                    .color(style::series(0)),
            );
        }
        for r in &whole {
            let [x, y] = point(r);
            p.points(
                egui_plot::Points::new(whole_name, vec![[x, y]])
                    .color(style::c32(style::WHOLE))
                    .radius(size * 0.4)
                    .shape(egui_plot::MarkerShape::Square),
            );
            p.text(
                egui_plot::Text::new(
                    "",
                    egui_plot::PlotPoint::new(x, y),
                    // Where chunks of this budget never split a prompt, the two points timed the same
                    // schedule: say so on the point, so its gap to the chunked one is not read as the policy's.
                    if o.same_at_top.is_some() && chunked.iter().any(|c| c.budget == r.budget) {
                        format!(
                            "  {} {}\n  {}",
                            whole_name,
                            r.budget,
                            lang.t("(same steps as chunked)", "（与分块步骤相同）")
                        )
                    } else {
                        format!("  {} {}", whole_name, r.budget)
                    },
                )
                // Below the point: the chunked point of the same budget may sit on it, labelled above.
                .anchor(egui::Align2::LEFT_TOP)
                .color(style::c32(style::WHOLE)),
            );
        }
        for r in o
            .stored
            .latency
            .iter()
            .filter(|r| r.budget == o.budget && (r.policy == "chunked") == o.chunked)
        {
            p.points(
                egui_plot::Points::new(here_name, vec![point(r)])
                    .color(style::c32(style::CURRENT))
                    .radius(size * 0.6)
                    .filled(false),
            );
        }
    });
    let rates: Vec<String> = o
        .stored
        .latency
        .iter()
        .map(|r| {
            format!(
                "{} {} {:.0}",
                if r.policy == "chunked" {
                    lang.t("chunked", "分块")
                } else {
                    lang.t("whole", "整段")
                },
                r.budget,
                r.bytes_per_second
            )
        })
        .collect();
    // A slide has room for the chart and where it was measured; the window lists the rates too.
    let rates = if crate::style::views_may_scroll() {
        format!("{} {}. ", lang.t("Bytes/s:", "字节/秒："), rates.join(" · "))
    } else {
        String::new()
    };
    note(
        ui,
        size,
        format!(
            "{rates}{} {} · {} · {}. {}",
            lang.t("Measured on", "测量于"),
            o.stored.machine,
            o.stored.backend,
            o.stored.date,
            if runs > 0 {
                if lang == crate::ui::text::Lang::Zh {
                    format!("由 kvscope bench serving --store 写入；每个点取 {runs} 次运行的中位数，细线横跨全部运行。")
                } else {
                    format!(
                        "kvscope bench serving --store writes it; each point is the median of {runs} runs, its bars span them all."
                    )
                }
            } else {
                lang.t(
                    "kvscope bench serving --store writes it; each point is the median of three runs.",
                    "由 kvscope bench serving --store 写入；每个点取三次运行的中位数。",
                )
                .to_string()
            }
        ),
    );
}

fn chunk(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let (pos, rows, bs) = o.chunk;
    let ctx = pos + rows;
    title(
        ui,
        size,
        match lang {
            crate::ui::text::Lang::Zh => {
                format!(
                    "位置 {pos}…{} 上的 {rows} 个新 token 关注 {ctx} 个缓存位置",
                    ctx.saturating_sub(1)
                )
            }
            _ => format!(
                "A chunk of {rows} new tokens at positions {pos}…{} attends {ctx} cached positions",
                ctx.saturating_sub(1)
            ),
        },
    );
    // The last two blocks before the chunk are drawn; earlier ones are read the same way.
    let bs = bs.max(1);
    let start = if pos > 2 * bs { (pos / bs - 2) * bs } else { 0 };
    let cols = ctx - start;
    let w = ui.available_width();
    let cell = (w / cols.max(1) as f32).clamp(1.0, size * 1.4);
    let row_h = ((ui.available_height() * 0.55) / rows.max(1) as f32).clamp(2.0, size * 1.1);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, row_h * rows as f32), egui::Sense::hover());
    let p = ui.painter_at(rect);
    let (done, cur, blank) = (
        style::c32(style::READ),
        style::c32(style::WRITTEN),
        style::track(ui.visuals()),
    );
    for j in 0..rows {
        let y = rect.top() + j as f32 * row_h;
        for c in start..ctx {
            let x = rect.left() + (c - start) as f32 * cell;
            let color = if c > pos + j {
                blank
            } else if c >= pos {
                cur
            } else {
                done
            };
            let gap = if row_h > 4.0 { 1.0 } else { 0.0 };
            p.rect_filled(
                egui::Rect::from_min_size(
                    egui::pos2(x, y + gap),
                    egui::vec2((cell - 0.5).max(0.5), row_h - 2.0 * gap),
                ),
                0.0,
                color,
            );
        }
    }
    let mut b = start;
    while b <= ctx {
        let x = rect.left() + (b - start) as f32 * cell;
        p.line_segment(
            [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
            egui::Stroke::new(1.5, ui.visuals().text_color().gamma_multiply(0.6)),
        );
        b += bs;
    }
    legend(
        ui,
        &[
            (
                style::READ,
                lang.t(
                    "cached before the chunk, read through the block table",
                    "块之前已缓存，经块表读取",
                )
                .to_string(),
            ),
            (
                style::WRITTEN,
                lang.t(
                    "the chunk: row j sees up to its own token",
                    "这一块：第 j 行看到自己为止",
                )
                .to_string(),
            ),
        ],
        size,
    );
    let elided = match lang {
        crate::ui::text::Lang::Zh if start > 0 => format!("前 {start} 个位置未画出，读取方式相同。"),
        crate::ui::text::Lang::Zh => String::new(),
        _ if start > 0 => format!("Positions 0…{} are read the same way and not drawn.", start - 1),
        _ => String::new(),
    };
    note(
        ui,
        size,
        format!(
            "{} {bs} {} {elided}",
            lang.t("Lines: block boundaries, blocks of", "竖线：块边界，每块"),
            lang.t(
                "tokens. One launch serves the chunks of every scheduled request; each row carries its request and its context length.",
                "个 token。一次启动服务所有被调度请求的块；每一行带着自己的请求与上下文长度。"
            ),
        ),
    );
}
