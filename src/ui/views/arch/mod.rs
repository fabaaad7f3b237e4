//! Lesson 11's views: the KV formula term by term, the notes' scale table from the configs, bytes per
//! token across models, MLA's cached row and the cost of its decode paths, the layer maps of windows and
//! cross-layer sharing, the calculator and the kernel.

use eframe::egui::{self, Color32, RichText, Ui};

use crate::calc::ModelSpec;
use crate::lessons::arch::{Arch, ArchOut, View, attention_kind, flops, mla_costs, mla_dims};
use crate::lessons::{LessonKind, Output, format_bytes};
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::text::Lang;
use crate::ui::widgets::{Cell, Table, ViewCtx, check_line, fit_key, fitted_height, kernel_panel, legend, table};

mod memory;
mod mla_flow;
mod parts;
mod scale;
use memory::{calculator, layer_map};
use mla_flow::mla_flow;
use parts::{kind, note, title};
use scale::scale;

impl LessonUi for Arch {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(o), Some(view)) = (out.downcast_ref::<ArchOut>(), View::from_name(view)) else {
            return;
        };
        // The fitted text size is searched again whenever a slider changes what the view draws.
        let key = fit_key((view.name(), cx.params));
        match view {
            View::Formula => fitted_height(ui, "arch-formula", key, cx.size, |ui, size| formula(cx, ui, o, size)),
            View::Scale => scale(cx, ui, o),
            View::Bars => fitted_height(ui, "arch-bars", key, cx.size, |ui, size| bars(cx, ui, o, size)),
            View::Mla => {
                // In presentation mode the projection diagram, the cached rows, then each case's decode
                // costs take a page each (a slide holds one of them at the floor); the window shows them
                // all.
                let pages = 2 + cost_cases(cx, o).len();
                let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(pages));
                let key = fit_key((view.name(), cx.params, page));
                fitted_height(ui, "arch-mla", key, cx.size, |ui, size| match page {
                    None => {
                        mla_flow(cx, ui, o, size);
                        ui.add_space(size * 0.5);
                        strip(cx, ui, o, size);
                        ui.add_space(size * 0.5);
                        cost(cx, ui, o, size, None);
                    }
                    Some(0) => mla_flow(cx, ui, o, size),
                    Some(1) => strip(cx, ui, o, size),
                    Some(p) => cost(cx, ui, o, size, Some(p - 2)),
                });
            }
            View::LayerMap => fitted_height(ui, "arch-map", key, cx.size, |ui, size| layer_map(cx, ui, o, size)),
            View::Calculator => {
                fitted_height(ui, "arch-calc", key, cx.size, |ui, size| calculator(cx, ui, o, size));
            }
            View::Kernel => {
                check_line(
                    cx,
                    ui,
                    Some(&o.mla.check),
                    cx.t(
                        "mla_decode · W_UV (naive expanded attention, f64)",
                        "mla_decode · W_UV（朴素展开注意力，f64）",
                    ),
                );
                kernel_panel(cx, ui, self.ops(), out);
            }
        }
    }
}

fn kind_color(m: &ModelSpec) -> style::Rgba {
    style::request(style::attention_kind(attention_kind(m)))
}

/// A term of the formula: its value large, its name under it.
fn term(ui: &mut Ui, size: f32, value: &str, name: &str, color: Color32) {
    ui.vertical(|ui| {
        ui.label(
            RichText::new(value)
                .monospace()
                .strong()
                .size(crate::style::fit(size * 2.2))
                .color(color),
        );
        ui.label(RichText::new(name).size(crate::style::fit(size * 0.9)));
    });
}

fn formula(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let m = o.model();
    let r = o.report();
    let lang = cx.lang;
    title(
        ui,
        size,
        match lang {
            Lang::En => format!("{}: KV bytes per token ({})", m.name, r.kv_format),
            Lang::Zh => format!("{}：每个 token 的 KV 字节数（{}）", m.name, r.kv_format),
        },
    );
    ui.add_space(size * 0.4);
    let per_value = r.kv_bytes_per_token_per_layer / m.values_per_token_layer().max(1) as f64;
    let text = ui.visuals().text_color();
    let accent = style::c32(style::CURRENT);
    let bytes = format!("{per_value:.3}")
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string();
    ui.horizontal_wrapped(|ui| {
        match mla_dims(m) {
            None => {
                term(ui, size, "2", lang.t("K and V", "K 与 V"), text);
                ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
                term(ui, size, &m.layers.to_string(), lang.t("layers", "层"), text);
                ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
                term(ui, size, &m.kv_heads.to_string(), lang.t("KV heads", "KV 头"), accent);
                ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
                term(ui, size, &m.head_dim.to_string(), "head_dim", accent);
            }
            Some(d) => {
                term(ui, size, &m.layers.to_string(), lang.t("layers", "层"), text);
                ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
                term(ui, size, &format!("({} + {})", d.d_c, d.d_r), "d_c + d_r", accent);
            }
        }
        ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
        term(ui, size, &bytes, lang.t("bytes / value", "字节 / 值"), text);
        ui.label(RichText::new("=").size(crate::style::fit(size * 2.0)));
        term(
            ui,
            size,
            &format_bytes(r.kv_bytes_per_token),
            lang.t("per token", "每个 token"),
            accent,
        );
    });
    ui.add_space(size * 0.4);
    ui.horizontal_wrapped(|ui| match r.groups.as_slice() {
        // Every layer stores the same tokens: min(context, window).
        [g] => {
            term(
                ui,
                size,
                &format_bytes(r.kv_bytes_per_token),
                lang.t("per token", "每个 token"),
                text,
            );
            ui.label(RichText::new("×").size(crate::style::fit(size * 2.0)));
            let label = match (g.window, lang) {
                (None, _) => lang.t("tokens", "个 token").to_string(),
                (Some(w), Lang::En) => format!("tokens stored (window {w})"),
                (Some(w), Lang::Zh) => format!("个存储的 token（窗口 {w}）"),
            };
            term(ui, size, &g.tokens_stored.to_string(), &label, text);
            ui.label(RichText::new("=").size(crate::style::fit(size * 2.0)));
            term(
                ui,
                size,
                &format_bytes(r.kv_bytes_per_request),
                lang.t("one request", "一个请求"),
                accent,
            );
        }
        _ => term(
            ui,
            size,
            &format_bytes(r.kv_bytes_per_request),
            &match lang {
                Lang::En => format!(
                    "one request of {} tokens (window layers store fewer: step 5)",
                    r.context_tokens
                ),
                Lang::Zh => format!("一个 {} token 的请求（窗口层存得更少：第 5 步）", r.context_tokens),
            },
            accent,
        ),
    });
    ui.add_space(size * 0.4);
    if let Some(d) = mla_dims(m) {
        // MLA has no K and V per head to count: no head_dim and no KV heads in its formula.
        note(
            ui,
            size,
            match lang {
                Lang::En => format!(
                    "MLA: one latent row per layer, c_KV ({}) + RoPE key k_R ({}), shared by all {} query heads; per layer {}; one request of {} tokens: {}",
                    d.d_c,
                    d.d_r,
                    m.heads,
                    format_bytes(r.kv_bytes_per_token_per_layer),
                    r.context_tokens,
                    format_bytes(r.kv_bytes_per_request)
                ),
                Lang::Zh => format!(
                    "MLA：每层一行潜向量，c_KV（{}）+ RoPE 键 k_R（{}），{} 个查询头共享；每层 {}；一个 {} token 的请求：{}",
                    d.d_c,
                    d.d_r,
                    m.heads,
                    format_bytes(r.kv_bytes_per_token_per_layer),
                    r.context_tokens,
                    format_bytes(r.kv_bytes_per_request)
                ),
            },
        );
    } else {
        let quotient = m.hidden / m.heads.max(1);
        note(
            ui,
            size,
            match (lang, m.head_dim_explicit) {
                (Lang::En, true) => format!(
                    "head_dim: the config's `head_dim` = {} (d_model / heads = {} / {} = {quotient})",
                    m.head_dim, m.hidden, m.heads
                ),
                (Lang::En, false) => format!(
                    "head_dim: the config has none, so d_model / heads = {} / {} = {}",
                    m.hidden, m.heads, m.head_dim
                ),
                (Lang::Zh, true) => format!(
                    "head_dim：配置中的 `head_dim` = {}（d_model / 头数 = {} / {} = {quotient}）",
                    m.head_dim, m.hidden, m.heads
                ),
                (Lang::Zh, false) => format!(
                    "head_dim：配置中没有，所以取 d_model / 头数 = {} / {} = {}",
                    m.hidden, m.heads, m.head_dim
                ),
            },
        );
        note(
            ui,
            size,
            match lang {
                Lang::En => format!(
                    "{} query heads share {} KV heads ({}); per layer {}; one request of {} tokens: {}",
                    m.heads,
                    m.kv_heads,
                    attention_kind(m),
                    format_bytes(r.kv_bytes_per_token_per_layer),
                    r.context_tokens,
                    format_bytes(r.kv_bytes_per_request)
                ),
                Lang::Zh => format!(
                    "{} 个查询头共享 {} 个 KV 头（{}）；每层 {}；一个 {} token 的请求：{}",
                    m.heads,
                    m.kv_heads,
                    attention_kind(m),
                    format_bytes(r.kv_bytes_per_token_per_layer),
                    r.context_tokens,
                    format_bytes(r.kv_bytes_per_request)
                ),
            },
        );
    }
    // The source's first address or title (SOURCES.md has the rest).
    let src = m.source.split([';', '(']).next().unwrap_or("").trim();
    note(ui, size, format!("{}: {src}", cx.t("source", "来源")));
    ui.add_space(size * 0.6);
    token_blocks(cx, ui, o, size);
}

/// One token's KV as the cache holds it: a column per layer, K's row and V's row, each cell one KV head's
/// head_dim values (an MLA model: one row of c_KV + k_R per layer). The query heads have no cell: they are
/// not cached.
fn token_blocks(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let m = o.model();
    let r = o.report();
    let lang = cx.lang;
    let per_layer = format_bytes(r.kv_bytes_per_token_per_layer);
    let rows: Vec<(String, style::Rgba, usize)> = match mla_dims(m) {
        None => vec![
            ("K".to_string(), style::request(0), m.kv_heads),
            ("V".to_string(), style::request(1), m.kv_heads),
        ],
        Some(d) => vec![(format!("c_KV + k_R ({} + {})", d.d_c, d.d_r), style::request(0), 1)],
    };
    let full = ui.available_rect_before_wrap();
    let label_w = size * 2.2;
    let legend_h = size * 4.0;
    let row_h = ((full.height() - legend_h - size * 1.5) / rows.len() as f32).clamp(size * 1.2, size * 5.0);
    let col_w = (full.width() - label_w) / m.layers.max(1) as f32;
    let painter = ui.painter_at(full);
    let text = ui.visuals().text_color();
    let font = egui::FontId::proportional(crate::style::fit(size * 0.85));
    for (ri, (name, c, cells)) in rows.iter().enumerate() {
        let y0 = full.min.y + row_h * ri as f32;
        if !name.starts_with("c_KV") {
            painter.text(
                egui::pos2(full.min.x, y0 + row_h * 0.5),
                egui::Align2::LEFT_CENTER,
                name,
                font.clone(),
                text,
            );
        }
        // Cells thinner than 3 px are drawn as one block per layer (GPT-3's 96 heads).
        let split = if row_h / *cells as f32 >= 3.0 { *cells } else { 1 };
        for l in 0..m.layers {
            let x0 = full.min.x + label_w + col_w * l as f32;
            for h in 0..split {
                let ch = (row_h - 4.0) / split as f32;
                let cell = egui::Rect::from_min_size(
                    egui::pos2(x0 + 1.0, y0 + 2.0 + ch * h as f32),
                    egui::vec2((col_w - 2.0).max(1.0), (ch - 1.0).max(1.0)),
                );
                painter.rect_filled(cell, 1.0, style::c32(*c));
            }
        }
    }
    let grid_h = row_h * rows.len() as f32;
    ui.allocate_rect(
        egui::Rect::from_min_size(full.min, egui::vec2(full.width(), grid_h)),
        egui::Sense::hover(),
    );
    note(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "one token's KV: a column per layer ({} layers, {per_layer} each)",
                m.layers
            ),
            Lang::Zh => format!("一个 token 的 KV：每层一列（{} 层，每层 {per_layer}）", m.layers),
        },
    );
    let entries: Vec<(style::Rgba, String)> = match mla_dims(m) {
        None => vec![
            (
                style::request(0),
                match lang {
                    Lang::En => format!("K: a cell per KV head, {} values", m.head_dim),
                    Lang::Zh => format!("K：每个 KV 头一格，{} 个值", m.head_dim),
                },
            ),
            (
                style::request(1),
                match lang {
                    Lang::En => format!("V: a cell per KV head, {} values", m.head_dim),
                    Lang::Zh => format!("V：每个 KV 头一格，{} 个值", m.head_dim),
                },
            ),
        ],
        Some(d) => vec![(
            style::request(0),
            match lang {
                Lang::En => format!(
                    "one latent row per layer, {} values, shared by every head",
                    d.d_c + d.d_r
                ),
                Lang::Zh => format!("每层一行潜向量，{} 个值，所有头共享", d.d_c + d.d_r),
            },
        )],
    };
    let entries: Vec<(style::Rgba, &str)> = entries.iter().map(|(c, t)| (*c, t.as_str())).collect();
    legend(ui, &entries, size * 0.85);
}

/// A bar of `value` out of `max` with its label and value as text.
fn byte_bar(ui: &mut Ui, size: f32, label: &str, value: f64, max: f64, color: Color32, selected: bool) {
    ui.horizontal(|ui| {
        let avail = ui.available_width();
        let lw = (avail * 0.38).min(size * 16.0);
        let vw = size * 5.0;
        let w = (avail - lw - vw - 3.0 * ui.spacing().item_spacing.x).max(10.0);
        let t = RichText::new(label).size(crate::style::fit(size * 0.85));
        ui.add_sized(
            [lw, size + 2.0],
            egui::Label::new(if selected { t.strong() } else { t }).truncate(),
        );
        let (r, _) = ui.allocate_exact_size(egui::vec2(w, size * 0.9), egui::Sense::hover());
        ui.painter().rect_filled(r, 2.0, style::track(ui.visuals()));
        let frac = (value / max.max(1.0)) as f32;
        let fill = egui::Rect::from_min_size(r.min, egui::vec2((r.width() * frac).clamp(1.0, r.width()), r.height()));
        ui.painter().rect_filled(fill, 2.0, color);
        if value > max {
            // Longer than the scale: the bar is broken, two slanted cuts in the background colour.
            let bg = ui.visuals().panel_fill;
            for dx in [0.80, 0.84] {
                let x = r.min.x + r.width() * dx;
                ui.painter().line_segment(
                    [egui::pos2(x - 3.0, r.max.y + 1.0), egui::pos2(x + 3.0, r.min.y - 1.0)],
                    egui::Stroke::new(3.0, bg),
                );
            }
        }
        if selected {
            ui.painter().rect_stroke(
                r.expand(1.5),
                2.0,
                egui::Stroke::new(2.0, style::CURRENT_32),
                egui::StrokeKind::Outside,
            );
        }
        ui.label(
            RichText::new(format_bytes(value))
                .monospace()
                .size(crate::style::fit(size * 0.85)),
        );
    });
}

fn bars(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let lang = cx.lang;
    title(
        ui,
        size,
        lang.t(
            "KV bytes per token, bf16, all layers (no window): every bundled config",
            "每个 token 的 KV 字节数，bf16，全部层（不计窗口）：所有内置配置",
        ),
    );
    let mut order: Vec<usize> = (0..o.models.len()).collect();
    order.sort_by(|&a, &b| o.bf16_bpt[b].total_cmp(&o.bf16_bpt[a]));
    // One scale for all but an outlier: where the largest is more than 2.5× the next (GPT-3's MHA
    // against the rest), the scale ends a little past the next and the outlier's bar is drawn broken,
    // so that the MQA and MLA bars are not a pixel wide.
    let [max, next] = [0, 1].map(|k| order.get(k).map_or(0.0, |&i| o.bf16_bpt[i]));
    let broken = next > 0.0 && max > 2.5 * next;
    let scale = if broken { next * 1.15 } else { max };
    for &i in &order {
        let m = &o.models[i];
        let label = format!("{}  {} {}/{}", m.name, attention_kind(m), m.heads, m.kv_heads);
        byte_bar(
            ui,
            size,
            &label,
            o.bf16_bpt[i],
            scale,
            style::c32(kind_color(m)),
            i == o.selected,
        );
    }
    if broken {
        let m = &o.models[order[0]];
        let ratio = max / next;
        note(
            ui,
            size,
            match lang {
                Lang::En => format!(
                    "{}'s bar is broken: to scale it would be {ratio:.1}× the next one's.",
                    m.name
                ),
                Lang::Zh => format!("{} 的条是截断的：按比例画，它是下一条的 {ratio:.1} 倍长。", m.name),
            },
        );
    }
    ui.add_space(size * 0.3);
    legend(
        ui,
        &[
            (
                kind("MHA"),
                lang.t("MHA: a KV head per query head", "MHA：每个查询头一个 KV 头"),
            ),
            (
                kind("GQA"),
                lang.t("GQA: groups share one (lesson 3)", "GQA：一组共享一个（第 3 课）"),
            ),
            (kind("MQA"), lang.t("MQA: one KV head", "MQA：一个 KV 头")),
            (kind("MLA"), lang.t("MLA: one latent row", "MLA：一行潜向量")),
        ],
        size,
    );
    note(
        ui,
        size,
        lang.t(
            "label: name, kind, query heads / KV heads",
            "标签：名称、类型、查询头 / KV 头",
        ),
    );
}

/// One token's cached values as a strip of `parts` (values, colour, label), `scale` points per value;
/// a part after the first is set off by a gap in the background colour (parts may share a colour: the
/// rows are coloured by attention kind).
fn strip_row(ui: &mut Ui, size: f32, label: &str, parts: &[(usize, style::Rgba, String)], per_value: f32) {
    ui.label(RichText::new(label).size(crate::style::fit(size * 0.9)));
    let total: usize = parts.iter().map(|p| p.0).sum();
    let w = (total as f32 * per_value).max(4.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(w, size * 1.3), egui::Sense::hover());
    let p = ui.painter();
    let mut x = rect.min.x;
    for (n, c, name) in parts {
        let pw = *n as f32 * per_value;
        let r = egui::Rect::from_min_size(egui::pos2(x, rect.min.y), egui::vec2(pw.max(1.0), rect.height()));
        p.rect_filled(r, 0.0, style::c32(*c));
        if x > rect.min.x {
            let gap = egui::Rect::from_min_size(r.min, egui::vec2(2.0, r.height()));
            p.rect_filled(gap, 0.0, ui.visuals().panel_fill);
        }
        let font = egui::FontId::proportional(crate::style::fit(size * 0.75));
        let ink = style::ink_on(*c);
        let g = p.layout_no_wrap(name.clone(), font, ink);
        if g.size().x + 4.0 < pw {
            p.galley(r.center() - g.size() / 2.0, g, ink);
        }
        x += pw;
    }
}

fn strip(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let lang = cx.lang;
    let d = o.mla.dims;
    let width = ui.available_width() - size;
    let mut rows: Vec<(String, crate::math::mla::MlaDims)> = vec![(
        match lang {
            Lang::En => format!("the layer that ran: {} heads", d.heads),
            Lang::Zh => format!("运行的这一层：{} 个头", d.heads),
        },
        d,
    )];
    if let Some(ds) = o.deepseek {
        let m = &o.models[ds];
        if let Some(dd) = mla_dims(m) {
            rows.push((format!("{}: {} {}", m.name, dd.heads, lang.t("heads", "个头")), dd));
        }
    }
    title(
        ui,
        size,
        lang.t(
            "What one token caches in one layer: expanded K and V (as MHA) against MLA's row",
            "一个 token 在一层中缓存的内容：展开的 K 与 V（如 MHA）对比 MLA 的一行",
        ),
    );
    for (name, dd) in rows {
        ui.add_space(size * 0.3);
        ui.label(RichText::new(name).strong().size(crate::style::fit(size * 0.95)));
        let mha = dd.heads * (dd.d_nope + dd.d_r + dd.d_v);
        let per_value = width / mha as f32;
        strip_row(
            ui,
            size,
            &match lang {
                Lang::En => format!(
                    "expanded: {} heads × (K {} + {} RoPE, V {}) = {} values",
                    dd.heads, dd.d_nope, dd.d_r, dd.d_v, mha
                ),
                Lang::Zh => format!(
                    "展开：{} 个头 × (K {} + {} RoPE，V {}) = {} 个值",
                    dd.heads, dd.d_nope, dd.d_r, dd.d_v, mha
                ),
            },
            &[
                (dd.heads * (dd.d_nope + dd.d_r), kind("MHA"), "K".into()),
                (dd.heads * dd.d_v, kind("MHA"), "V".into()),
            ],
            per_value,
        );
        strip_row(
            ui,
            size,
            &match lang {
                Lang::En => format!(
                    "MLA: c_KV {} + k_R {} = {} values, shared by every head ({:.1}× fewer)",
                    dd.d_c,
                    dd.d_r,
                    dd.row(),
                    mha as f64 / dd.row() as f64
                ),
                Lang::Zh => format!(
                    "MLA：c_KV {} + k_R {} = {} 个值，所有头共享（少 {:.1} 倍）",
                    dd.d_c,
                    dd.d_r,
                    dd.row(),
                    mha as f64 / dd.row() as f64
                ),
            },
            &[
                (dd.d_c, kind("MLA"), "c_KV".into()),
                (dd.d_r, kind("MLA"), "k_R".into()),
            ],
            per_value,
        );
    }
    ui.add_space(size * 0.3);
    check_line(
        cx,
        ui,
        Some(&o.mla.check),
        &match lang {
            Lang::En => format!(
                "mla_decode · W_UV over {} cached rows vs the expanded attention",
                o.mla.tokens
            ),
            Lang::Zh => format!("mla_decode · W_UV（{} 行缓存）对比展开注意力", o.mla.tokens),
        },
    );
}

/// The cases whose decode costs lesson 11's MLA step compares: the layer that ran at its cached tokens,
/// and DeepSeek-V3 at the context (when the facts name it): name, dimensions and tokens.
fn cost_cases(cx: &ViewCtx, o: &ArchOut) -> Vec<(String, crate::math::mla::MlaDims, usize)> {
    let lang = cx.lang;
    let mut cases = vec![(
        match lang {
            Lang::En => format!("the layer that ran, {} tokens", o.mla.tokens),
            Lang::Zh => format!("运行的这一层，{} 个 token", o.mla.tokens),
        },
        o.mla.dims,
        o.mla.tokens,
    )];
    if let Some(ds) = o.deepseek
        && let Some(dd) = mla_dims(&o.models[ds])
    {
        let n = o.report().context_tokens;
        cases.push((
            format!("{}, {} {}", o.models[ds].name, n, lang.t("tokens", "个 token")),
            dd,
            n,
        ));
    }
    cases
}

/// The decode costs of each case of [`cost_cases`], or of case `only`.
fn cost(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32, only: Option<usize>) {
    let lang = cx.lang;
    let cases = cost_cases(cx, o);
    title(
        ui,
        size,
        lang.t(
            "One decode step of one layer: three ways (FLOPs count a multiply-add as 2)",
            "一层的一个解码步：三种做法（一次乘加计 2 FLOPs）",
        ),
    );
    let paths = [
        lang.t("MHA-style cache (K, V expanded)", "MHA 式缓存（K、V 已展开）"),
        lang.t("latent cache, expand each step", "潜向量缓存，每步展开"),
        lang.t(
            "latent cache, absorbed (MQA-style: read once)",
            "潜向量缓存，吸收投影（MQA 式：只读一遍）",
        ),
    ];
    for (ci, (name, d, t)) in cases.into_iter().enumerate() {
        if only.is_some_and(|k| k != ci) {
            continue;
        }
        ui.add_space(size * 0.3);
        ui.label(RichText::new(name).strong().size(crate::style::fit(size * 0.95)));
        let c = mla_costs(d, t);
        let mut t = Table::new([
            lang.t("path", "做法"),
            lang.t("values / token", "值 / token"),
            lang.t("cache read", "读缓存"),
            lang.t("weights read", "读权重"),
            "FLOPs",
        ]);
        for (k, (p, pc)) in paths.iter().zip(c).enumerate() {
            t.row([
                Cell::new(*p),
                Cell::new(pc.cached_values.to_string()).mono(),
                Cell::new(format_bytes(pc.cache_bytes)).mono(),
                Cell::new(format_bytes(pc.weight_bytes)).mono(),
                Cell::new(flops(pc.flops)).mono(),
            ]);
            if k == 2 {
                t.marked.push(k);
            }
        }
        if ci == 0 {
            // The kernel that ran: a block per (request, head), each reading every latent row.
            let pc = &c[2];
            let ran = pc.cache_bytes * d.heads as f64;
            t.row([
                Cell::new(lang.t(
                    "mla_decode as it ran (latent read per head)",
                    "实际运行的 mla_decode（每个头各读一遍潜向量）",
                )),
                Cell::new(pc.cached_values.to_string()).mono(),
                Cell::new(format_bytes(ran)).mono(),
                Cell::new(format_bytes(pc.weight_bytes)).mono(),
                Cell::new(flops(pc.flops)).mono(),
            ]);
        }
        table(ui, lang, size, &t);
    }
    note(
        ui,
        size,
        lang.t(
            "Cache in f16/bf16 (2 bytes a value). The weights W_UK and W_UV are read once per step for the whole batch; the cache once per request.",
            "缓存按 f16/bf16（每值 2 字节）。权重 W_UK 和 W_UV 每步为整批读取一次；缓存每个请求读取一次。",
        ),
    );
}
