//! Lesson 12's views: each scheduler step's tokens under the budget, the latencies, one chunk's rows over
//! the paged cache, swap against recompute, the speculative passes and what they buy, and the kernel.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::lessons::serving::{FACT_CONTEXTS, Serving, ServingOut, View, crossover, device_rates, fact_costs, measure};
use crate::lessons::{LessonKind, Output, format_bytes};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{ViewCtx, check_line, fit_key, fitted_height, fitted_table, kernel_panel, legend};

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
}

fn title(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).strong().size(size)).wrap());
}

fn note(ui: &mut Ui, size: f32, text: impl Into<String>) {
    ui.add(egui::Label::new(RichText::new(text.into()).size(size * 0.85)).wrap());
}

/// A table's header row.
fn header(ui: &mut Ui, size: f32, cols: &[&str]) {
    for h in cols {
        ui.label(RichText::new(*h).strong().size(size));
    }
    ui.end_row();
}

/// A request's colour, lighter for its decode tokens.
fn req_color(i: usize, decode: bool) -> Color32 {
    let c = style::c32(style::request(i));
    if decode { c.gamma_multiply(0.55) } else { c }
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
                    .size(size)
                    .color(style::fail(ui.visuals())),
            )
            .wrap(),
        );
        return;
    }
    let tokens = o.step_tokens();
    let max = tokens
        .iter()
        .map(|t| t.iter().map(|x| x.0 + x.1).sum::<usize>())
        .max()
        .unwrap_or(1)
        .max(o.budget.min(4096))
        .max(1);
    let w = ui.available_width();
    let h = (size * 16.0).min(ui.available_height().max(size * 6.0) * 0.6);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, h), egui::Sense::hover());
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 2.0, style::track(ui.visuals()));
    let n = tokens.len().max(1);
    let bw = rect.width() / n as f32;
    let y_of = |t: f32| rect.bottom() - rect.height() * (t / max as f32);
    for (s, t) in tokens.iter().enumerate() {
        let mut y = rect.bottom();
        let x0 = rect.left() + s as f32 * bw;
        for (i, &(pf, dc)) in t.iter().enumerate() {
            for (count, decode) in [(pf, false), (dc, true)] {
                if count == 0 {
                    continue;
                }
                let top = y - rect.height() * (count as f32 / max as f32);
                let r = egui::Rect::from_min_max(egui::pos2(x0 + 0.5, top), egui::pos2(x0 + bw - 0.5, y));
                p.rect_filled(r, 0.0, req_color(i, decode));
                y = top;
            }
        }
    }
    // The budget.
    let yb = y_of(o.budget as f32);
    if yb >= rect.top() {
        p.line_segment(
            [egui::pos2(rect.left(), yb), egui::pos2(rect.right(), yb)],
            egui::Stroke::new(2.0, style::c32(style::CURRENT)),
        );
        let (at, align) = if yb - rect.top() < size * 1.2 {
            (egui::pos2(rect.right() - 4.0, yb + 2.0), egui::Align2::RIGHT_TOP)
        } else {
            (egui::pos2(rect.right() - 4.0, yb - 2.0), egui::Align2::RIGHT_BOTTOM)
        };
        p.text(
            at,
            align,
            format!("{} {}", lang.t("budget", "预算"), o.budget),
            egui::FontId::proportional(size * 0.85),
            style::c32(style::CURRENT),
        );
    }
    p.text(
        egui::pos2(rect.left() + 4.0, rect.top() + 2.0),
        egui::Align2::LEFT_TOP,
        format!("{max} {}", lang.t("tokens", "token")),
        egui::FontId::proportional(size * 0.8),
        ui.visuals().text_color(),
    );
    note(
        ui,
        size,
        format!("{} 0 … {} →", lang.t("scheduler step", "调度步"), n.saturating_sub(1)),
    );
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
    legend(ui, &entries, size);
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
    title(
        ui,
        size,
        lang.t(
            "Latency per request: live, in scheduler steps",
            "每个请求的延迟：实时计算，以调度步计",
        ),
    );
    let long = o.long();
    match &o.run {
        Ok(run) => {
            let arrivals: Vec<usize> = o.requests.iter().map(|r| r.0).collect();
            let lat = run.latencies(&arrivals);
            fitted_table(ui, "serve-lat-live", size, |ui, size| {
                egui::Grid::new("serve-lat-live").striped(true).show(ui, |ui| {
                    header(
                        ui,
                        size,
                        &[
                            lang.t("request", "请求"),
                            lang.t("arrives", "到达"),
                            lang.t("prompt", "prompt"),
                            "TTFT",
                            lang.t("worst ITL", "最差 ITL"),
                            lang.t("bytes", "字节"),
                        ],
                    );
                    for (i, (r, l)) in o.requests.iter().zip(&lat).enumerate() {
                        ui.label(
                            RichText::new(i.to_string())
                                .size(size)
                                .color(style::request_text(ui.visuals(), i)),
                        );
                        for v in [r.0.to_string(), r.1.to_string()] {
                            ui.label(RichText::new(v).monospace().size(size));
                        }
                        let (t, s) = l.as_ref().map_or(("-".into(), "-".into()), |l| {
                            (l.ttft_steps.to_string(), l.max_itl_steps().to_string())
                        });
                        ui.label(RichText::new(t).monospace().size(size));
                        ui.label(RichText::new(s).monospace().size(size));
                        ui.label(RichText::new(run.outputs[i].len().to_string()).monospace().size(size));
                        ui.end_row();
                    }
                })
            });
        }
        Err(e) => {
            ui.add(
                egui::Label::new(
                    RichText::new(format!("{} {e}", lang.t("Refused:", "被拒绝：")))
                        .size(size)
                        .color(style::fail(ui.visuals())),
                )
                .wrap(),
            );
        }
    }
    ui.add_space(size * 0.5);
    title(
        ui,
        size,
        lang.t(
            "Across budgets: stored wall-clock measurement",
            "不同预算：存储的实测时间",
        ),
    );
    fitted_table(ui, "serve-lat-stored", size, |ui, size| {
        egui::Grid::new("serve-lat-stored").striped(true).show(ui, |ui| {
            header(
                ui,
                size,
                &[
                    lang.t("policy", "策略"),
                    lang.t("budget", "预算"),
                    lang.t("long request TTFT", "长请求 TTFT"),
                    lang.t("worst ITL, others", "其他请求最差 ITL"),
                    lang.t("bytes/s", "字节/秒"),
                ],
            );
            for r in &o.stored.latency {
                let here = r.budget == o.budget && (r.policy == "chunked") == o.chunked;
                let t = |s: String| {
                    let t = RichText::new(s).monospace().size(size);
                    if here {
                        t.strong().color(style::c32(style::CURRENT))
                    } else {
                        t
                    }
                };
                let pol = if r.policy == "chunked" {
                    lang.t("chunked", "分块")
                } else {
                    lang.t("whole", "整段")
                };
                ui.label(t(pol.to_string()));
                ui.label(t(r.budget.to_string()));
                ui.label(t(format!("{:.1} ms", r.ttft.get(long).copied().unwrap_or(0.0) * 1e3)));
                let stall = r.max_itl[..long.min(r.max_itl.len())]
                    .iter()
                    .copied()
                    .fold(0.0, f64::max);
                ui.label(t(format!("{:.1} ms", stall * 1e3)));
                ui.label(t(format!("{:.0}", r.bytes_per_second)));
                ui.end_row();
            }
        })
    });
    note(
        ui,
        size,
        format!(
            "{} {} · {} · {}. {}",
            lang.t("Measured on", "测量于"),
            o.stored.machine,
            o.stored.backend,
            o.stored.date,
            lang.t(
                "kvscope bench serving --store writes it; each row is the median of three runs.",
                "由 kvscope bench serving --store 写入；每行取三次运行的中位数。",
            )
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

fn offload(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    let size = cx.size;
    let lang = cx.lang;
    title(
        ui,
        size,
        lang.t(
            "Measured here: swap a request out and back (a copy between host pools) against recompute",
            "本机实测：换出再换回一个请求（主机内存池之间的拷贝）对比重算",
        ),
    );
    fitted_table(ui, "serve-offload", size, |ui, size| {
        egui::Grid::new("serve-offload").striped(true).show(ui, |ui| {
            header(
                ui,
                size,
                &[
                    lang.t("tokens", "token 数"),
                    lang.t("KV bytes", "KV 字节"),
                    lang.t("swap out + in", "换出 + 换入"),
                    lang.t("GB/s", "GB/s"),
                    lang.t("recompute (prefill)", "重算（预填充）"),
                    lang.t("recompute ÷ swap", "重算 ÷ 换入换出"),
                ],
            );
            for r in &o.stored.offload {
                for v in [
                    r.tokens.to_string(),
                    format_bytes(r.bytes as f64),
                    format!("{:.3} ms", r.swap_seconds * 1e3),
                    format!("{:.1}", 2.0 * r.bytes as f64 / r.swap_seconds / 1e9),
                    format!("{:.2} ms", r.recompute_seconds * 1e3),
                    format!("{:.0}×", r.recompute_seconds / r.swap_seconds),
                ] {
                    ui.label(RichText::new(v).monospace().size(size));
                }
                ui.end_row();
            }
        })
    });
    note(
        ui,
        size,
        format!(
            "{} {} · {} · {}",
            lang.t("Stored measurement:", "存储的实测："),
            o.stored.machine,
            o.stored.backend,
            o.stored.date
        ),
    );
    ui.add_space(size * 0.4);
    let (pcie, flops) = device_rates();
    title(
        ui,
        size,
        format!(
            "{} {:.0} GB/s, {} {:.0} TFLOP/s",
            lang.t(
                "From device facts (quoted): PCIe Gen5 x16",
                "由设备参数（引用）：PCIe Gen5 x16"
            ),
            pcie / 1e9,
            lang.t("H100 SXM BF16 dense", "H100 SXM BF16 稠密"),
            flops / 1e12
        ),
    );
    fitted_table(ui, "serve-facts", size, |ui, size| {
        egui::Grid::new("serve-facts").striped(true).show(ui, |ui| {
            ui.label(RichText::new(lang.t("context", "上下文")).strong().size(size));
            for m in &o.fact_models {
                for what in [lang.t("swap", "换出换入"), lang.t("recompute", "重算")] {
                    ui.label(RichText::new(format!("{} · {what}", m.name)).strong().size(size));
                }
            }
            ui.end_row();
            let win = style::pass(ui.visuals());
            for n in FACT_CONTEXTS {
                ui.label(RichText::new(format!("{}k", n / 1024)).monospace().size(size));
                for m in &o.fact_models {
                    let (s, r) = fact_costs(m, n, pcie, flops);
                    for (v, best) in [(s, s <= r), (r, r < s)] {
                        let t = RichText::new(format!("{:.1} ms", v * 1e3)).monospace().size(size);
                        ui.label(if best { t.strong().color(win) } else { t });
                    }
                }
                ui.end_row();
            }
        })
    });
    let cross: Vec<String> = o
        .fact_models
        .iter()
        .map(|m| {
            let c = crossover(m, pcie, flops).map_or_else(
                || {
                    lang.t("swap is cheaper at every length", "任何长度都是换出更便宜")
                        .to_string()
                },
                |n| match lang {
                    crate::ui::text::Lang::Zh => format!("超过 {n} 个 token 后换出更便宜"),
                    _ => format!("swap is cheaper beyond {n} tokens"),
                },
            );
            format!("{}: {c}", m.name)
        })
        .collect();
    note(
        ui,
        size,
        format!("{} {}", lang.t("Crossover:", "交叉点："), cross.join("; ")),
    );
    note(
        ui,
        size,
        lang.t(
            "swap/recompute: both ways over PCIe against 2 FLOPs per parameter per token plus causal attention, at peak rates (the best case for each). vLLM V1 recomputes on preemption; CPU offload comes through KV connectors.",
            "换出/重算：经 PCIe 往返一次，对比每 token 每参数 2 FLOP 加因果注意力，按峰值计算（对两者都是最好情况）。vLLM V1 在抢占时重算；CPU 卸载通过 KV connector 实现。",
        ),
    );
}

fn speculative(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let sp = &o.spec;
    title(
        ui,
        size,
        format!(
            "{} · k = {} · {}",
            match o.drafter {
                "draft" => lang.t("draft model", "草稿模型"),
                _ => lang.t("prompt lookup (n-gram)", "提示查找（n-gram）"),
            },
            sp.k,
            lang.t("each row is one target pass", "每行是目标模型的一次前向"),
        ),
    );
    let font = egui::FontId::monospace(size * 0.95);
    let max_rows = ((ui.available_height() / (size * 1.5)).floor() as usize).clamp(4, 14);
    for s in sp.steps.iter().take(max_rows) {
        ui.horizontal(|ui| {
            ui.label(
                RichText::new(format!("@{:<4}", s.pos))
                    .monospace()
                    .size(size * 0.85)
                    .color(style::muted(ui.visuals())),
            );
            let chip = |ui: &mut Ui, b: u8, rgba: style::Rgba| {
                let fill = style::c32(rgba);
                let text = crate::model::byte_label(b);
                let g = ui.painter().layout_no_wrap(text, font.clone(), style::ink_on(rgba));
                let (r, _) = ui.allocate_exact_size(
                    egui::vec2(g.size().x.max(size * 0.8) + 6.0, size * 1.3),
                    egui::Sense::hover(),
                );
                ui.painter().rect_filled(r, 3.0, fill);
                ui.painter()
                    .galley(r.center() - g.size() / 2.0, g, Color32::PLACEHOLDER);
            };
            for (i, &b) in s.proposed.iter().enumerate() {
                let fill = if i < s.accepted {
                    style::ACCEPTED
                } else {
                    style::REJECTED
                };
                chip(ui, b, fill);
            }
            ui.label(RichText::new("→").size(size));
            chip(ui, *s.emitted.last().unwrap_or(&b'?'), style::GENERATED);
            ui.label(
                RichText::new(format!(
                    "{} {}/{}{}",
                    lang.t("kept", "接受"),
                    s.accepted,
                    s.proposed.len(),
                    if s.freed.is_empty() {
                        String::new()
                    } else {
                        format!(", {} {:?}", lang.t("freed blocks", "释放块"), s.freed)
                    }
                ))
                .size(size * 0.85),
            );
        });
    }
    if sp.steps.len() > max_rows {
        note(
            ui,
            size,
            format!(
                "… {} {}",
                sp.steps.len() - max_rows,
                lang.t("more passes", "次更多的前向")
            ),
        );
    }
    legend(
        ui,
        &[
            (style::ACCEPTED, lang.t("draft accepted", "草稿被接受").to_string()),
            (
                style::REJECTED,
                lang.t(
                    "draft rejected: its slot is cut from the cache",
                    "草稿被拒绝：其槽位从缓存中截掉",
                )
                .to_string(),
            ),
            (
                style::GENERATED,
                lang.t("the target's own next byte", "目标模型自己的下一个字节")
                    .to_string(),
            ),
        ],
        size,
    );
}

fn spec_stats(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut, size: f32) {
    let lang = cx.lang;
    let sp = &o.spec;
    title(
        ui,
        size,
        lang.t(
            "Acceptance α at each draft position (accepted ÷ reached)",
            "每个草稿位置的接受率 α（接受数 ÷ 到达数）",
        ),
    );
    for (i, a) in sp.alpha().iter().enumerate() {
        ui.horizontal(|ui| {
            ui.label(RichText::new(format!("{} {}", lang.t("position", "位置"), i + 1)).size(size * 0.9));
            let w = (ui.available_width() - size * 8.0).max(20.0);
            let (r, _) = ui.allocate_exact_size(egui::vec2(w, size * 0.9), egui::Sense::hover());
            ui.painter().rect_filled(r, 2.0, style::track(ui.visuals()));
            if let Some(a) = a {
                let f = egui::Rect::from_min_size(r.min, egui::vec2(r.width() * *a as f32, r.height()));
                ui.painter().rect_filled(f, 2.0, style::c32(style::ACCEPTED));
            }
            ui.label(
                RichText::new(match a {
                    Some(a) => format!("{a:.2} ({}/{})", sp.accepted_at[i], sp.reached_at[i]),
                    None => lang.t("never reached", "从未到达").to_string(),
                })
                .monospace()
                .size(size * 0.85),
            );
        });
    }
    ui.add_space(size * 0.4);
    let (kv, plain_kv) = sp.kv_bytes();
    let rows: Vec<(&str, String)> = vec![
        (
            lang.t("target passes per byte", "每字节的目标前向次数"),
            format!(
                "{:.2} ({} {})",
                sp.passes_per_byte(),
                1 + sp.steps.len(),
                lang.t("passes", "次")
            ),
        ),
        (
            lang.t("accepted drafts per pass", "每次前向接受的草稿数"),
            format!("{:.2}", sp.mean_accepted()),
        ),
        (
            lang.t("KV at peak: target + draft", "峰值 KV：目标 + 草稿"),
            format!(
                "{} ({} + {} {})",
                format_bytes(kv as f64),
                sp.target_peak_blocks,
                sp.draft_peak_blocks,
                lang.t("blocks", "块")
            ),
        ),
        (
            lang.t("KV of plain decode", "普通解码的 KV"),
            format_bytes(plain_kv as f64),
        ),
        (
            lang.t("draft weights", "草稿模型权重"),
            format_bytes(sp.draft_weight_bytes as f64),
        ),
        (
            lang.t("output equals plain greedy decode", "输出与普通贪心解码相同"),
            (sp.output == o.plain.output).to_string(),
        ),
    ];
    egui::Grid::new("serve-spec-stats").striped(true).show(ui, |ui| {
        for (k, v) in rows {
            ui.label(RichText::new(k).size(size * 0.9));
            ui.label(RichText::new(v).monospace().size(size * 0.9));
            ui.end_row();
        }
    });
    ui.add_space(size * 0.4);
    let speeds: Vec<String> = o
        .stored
        .speculative
        .iter()
        .filter(|r| r.drafter == o.drafter)
        .map(|r| {
            format!(
                "k={} {:.2}×",
                r.k,
                r.bytes_per_second / r.plain_bytes_per_second.max(1e-12)
            )
        })
        .collect();
    note(
        ui,
        size,
        format!(
            "{} {} ({} {} · {} · {}, {} {} {})",
            lang.t("Bytes/s against plain decode:", "字节/秒相对普通解码："),
            speeds.join("  "),
            lang.t("stored,", "存储的实测，"),
            o.stored.machine,
            o.stored.backend,
            o.stored.date,
            lang.t("best of three,", "三次取最好，"),
            measure::SPEC_BYTES,
            lang.t("bytes", "字节"),
        ),
    );
}

/// The tiny model's and SmolLM2's colours in the real-model step.
const TINY: style::Rgba = style::REQUESTS[0];
const REAL: style::Rgba = style::REQUESTS[2];

/// Lesson 12 on SmolLM2-135M: prompt lookup's speed-up over plain decode at each k, SmolLM2's stored
/// measurement beside the tiny model's, with the drafts each verification pass accepts.
fn real(cx: &ViewCtx, ui: &mut Ui, o: &ServingOut) {
    use egui_plot::{Bar, BarChart, HLine, Plot};
    let size = cx.size;
    let lang = cx.lang;
    title(
        ui,
        size,
        lang.t(
            "Prompt lookup against plain decode, by k: SmolLM2-135M-Instruct beside the tiny model (stored speeds)",
            "提示查找对比普通解码（按 k）：SmolLM2-135M-Instruct 与小模型，速度为存储的实测",
        ),
    );
    note(
        ui,
        size,
        lang.t(
            "One prompt each. SmolLM2's greedy continuation of this one loops on a sentence, which prompt lookup drafts exactly: this gain is the loop's, not speculation's in general.",
            "每个模型只有一个提示。SmolLM2 对这个提示的贪心续写在一句话上循环，提示查找能把循环完全猜中：这个加速来自循环，而不是投机解码的一般收益。",
        ),
    );
    let ratio = |s: &measure::StoredServing, k: usize| {
        s.speculative
            .iter()
            .find(|r| r.drafter == "ngram" && r.k == k)
            .map(|r| r.bytes_per_second / r.plain_bytes_per_second)
    };
    let entries = [
        (TINY, lang.t("tiny model (bytes)", "小模型（字节）")),
        (
            REAL,
            lang.t("SmolLM2-135M-Instruct (tokens)", "SmolLM2-135M-Instruct（token）"),
        ),
        (style::MASKED, lang.t("plain decode (1×)", "普通解码（1×）")),
    ];
    let legend_h = crate::ui::widgets::legend_height(ui, &entries, size * 0.85, ui.available_width());
    let hp = ((ui.available_height() - legend_h) * 0.5).max(120.0);
    let ks = measure::SPEC_KS;
    let bars = |s: &measure::StoredServing, dx: f64, c: style::Rgba| -> Vec<Bar> {
        ks.iter()
            .enumerate()
            .filter_map(|(i, &k)| ratio(s, k).map(|v| Bar::new(i as f64 + dx, v).width(0.38).fill(style::c32(c))))
            .collect()
    };
    let (tiny, real) = (bars(&o.stored, -0.2, TINY), bars(&o.real, 0.2, REAL));
    crate::ui::widgets::plot_title_room(ui);
    Plot::new("serve-real")
        .height(hp)
        .allow_scroll(false)
        .allow_drag(false)
        .allow_zoom(false)
        .include_y(0.0)
        .x_axis_label(lang.t("drafted tokens per pass, k", "每次验证的草稿数 k"))
        .y_axis_label(lang.t("speed-up over plain decode (×)", "相对普通解码的加速（×）"))
        .x_axis_formatter(move |m, _| {
            let i = m.value.round();
            if (m.value - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < ks.len() {
                format!("k = {}", ks[i as usize])
            } else {
                String::new()
            }
        })
        .show(ui, |pl| {
            pl.bar_chart(BarChart::new(lang.t("tiny model", "小模型"), tiny).color(style::c32(TINY)));
            pl.bar_chart(BarChart::new("SmolLM2-135M-Instruct", real).color(style::c32(REAL)));
            pl.hline(HLine::new(lang.t("plain decode", "普通解码"), 1.0).color(style::c32(style::MASKED)));
        });
    legend(ui, &entries, size * 0.85);
    ui.add_space(size * 0.3);
    let real_row = |k: usize| o.real.speculative.iter().find(|r| r.drafter == "ngram" && r.k == k);
    fitted_table(ui, "serve-real-table", size, |ui, size| {
        egui::Grid::new("serve-real-table").striped(true).show(ui, |ui| {
            header(
                ui,
                size,
                &[
                    "k",
                    lang.t("SmolLM2: speed-up", "SmolLM2：加速"),
                    lang.t("accepted / pass", "每次验证接受"),
                    lang.t("passes / token", "每 token 的前向次数"),
                    lang.t("tiny: speed-up", "小模型：加速"),
                    lang.t("accepted / pass", "每次验证接受"),
                ],
            );
            let f = |v: Option<f64>, suffix: &str| v.map_or("-".to_string(), |v| format!("{v:.2}{suffix}"));
            for &k in &ks {
                let r = real_row(k);
                let t = o.tiny_ngram.iter().find(|t| t.0 == k);
                for v in [
                    k.to_string(),
                    f(ratio(&o.real, k), "×"),
                    f(r.and_then(|r| r.accepted_per_pass), ""),
                    f(r.and_then(|r| r.passes_per_token), ""),
                    f(ratio(&o.stored, k), "×"),
                    f(t.map(|t| t.1), ""),
                ] {
                    ui.label(RichText::new(v).monospace().size(size));
                }
                ui.end_row();
            }
        })
    });
    note(
        ui,
        size,
        match lang {
            crate::ui::text::Lang::En => format!(
                "Stored: `{}` on {}, {}, {} (SmolLM2); `{}` on {}, {} (tiny). The tiny model's accepted drafts are counted live (greedy, CPU backend).",
                o.real.command,
                o.real.machine,
                o.real.backend,
                o.real.date,
                o.stored.command,
                o.stored.machine,
                o.stored.date
            ),
            crate::ui::text::Lang::Zh => format!(
                "存储的实测：`{}`，{}，{}，{}（SmolLM2）；`{}`，{}，{}（小模型）。小模型每次验证接受的草稿数在此实时统计（贪心解码，CPU 后端）。",
                o.real.command,
                o.real.machine,
                o.real.backend,
                o.real.date,
                o.stored.command,
                o.stored.machine,
                o.stored.date
            ),
        },
    );
}
