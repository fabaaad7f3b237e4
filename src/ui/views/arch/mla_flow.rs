//! Lesson 11 step 4's picture: MLA as a projection diagram, with the sizes of the layer that ran. What a
//! new token writes into the cache (c_KV and k_R, once, for every head), what a decode step reads (every
//! cached row, once), and where W_UK and W_UV go when they are absorbed (into the query, and after the
//! weighted sum), with the K and V that absorbed decode never builds and what building them would cost.

use eframe::egui::{self, Color32, RichText, Ui};

use super::parts::{kind, title};
use crate::lessons::arch::{ArchOut, flops, mla_costs};
use crate::lessons::format_bytes;
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{ViewCtx, arrow, compare_bars, legend};

/// A vector as a chip: its name and length, filled with `fill`.
fn chip(ui: &mut Ui, size: f32, text: &str, fill: Color32) {
    let font = egui::FontId::proportional(style::fit(size * 0.85));
    let ink = style::ink_on(fill.to_array());
    let g = ui.painter().layout_no_wrap(text.to_string(), font, ink);
    let (r, _) = ui.allocate_exact_size(egui::vec2(g.size().x + size * 0.8, size * 1.5), egui::Sense::hover());
    ui.painter().rect_filled(r, 4.0, fill);
    ui.painter().galley(r.center() - g.size() / 2.0, g, ink);
}

/// An arrow to the next chip, with what it multiplies by written above it.
fn step(ui: &mut Ui, size: f32, label: &str) {
    let font = egui::FontId::proportional(style::fit(size * 0.75));
    let color = ui.visuals().text_color();
    let g = ui.painter().layout_no_wrap(label.to_string(), font, color);
    let w = g.size().x.max(size * 1.5) + size * 0.6;
    let h = (g.size().y + size * 0.25) * 2.0;
    let (r, _) = ui.allocate_exact_size(egui::vec2(w, h.max(size * 1.5)), egui::Sense::hover());
    let y = r.center().y;
    let at = egui::pos2(r.center().x - g.size().x / 2.0, y - g.size().y - size * 0.2);
    ui.painter().galley(at, g, color);
    arrow(
        ui.painter(),
        egui::pos2(r.min.x + size * 0.2, y),
        egui::pos2(r.max.x - size * 0.2, y),
        egui::Stroke::new(2.0, color),
        size * 0.45,
    );
}

/// A heading of the diagram.
fn heading(ui: &mut Ui, size: f32, s: &str) {
    ui.add_space(size * 0.3);
    ui.label(RichText::new(s).strong().size(style::fit(size * 0.9)));
}

/// The cache as a block of `t` rows, c_KV then k_R in each, outlined as read.
fn cache_block(ui: &mut Ui, size: f32, t: usize, d_c: usize, d_r: usize, fill: Color32) {
    let w = (ui.available_width() * 0.3).clamp(size * 4.0, size * 12.0);
    let h = size * 2.8;
    let (r, _) = ui.allocate_exact_size(egui::vec2(w, h), egui::Sense::hover());
    let p = ui.painter();
    let split = r.min.x + w * d_c as f32 / (d_c + d_r) as f32;
    let row_h = h / t.max(1) as f32;
    let gap = if row_h >= 3.0 { 1.0 } else { 0.0 };
    for i in 0..t {
        let y0 = r.min.y + i as f32 * row_h;
        let y1 = y0 + row_h - gap;
        p.rect_filled(
            egui::Rect::from_min_max(egui::pos2(r.min.x, y0), egui::pos2(split - 1.0, y1)),
            0.0,
            fill,
        );
        p.rect_filled(
            egui::Rect::from_min_max(egui::pos2(split + 1.0, y0), egui::pos2(r.max.x, y1)),
            0.0,
            fill,
        );
    }
    p.rect_stroke(
        r.expand(3.0),
        2.0,
        egui::Stroke::new(2.5, style::c32(style::READ)),
        egui::StrokeKind::Outside,
    );
}

pub(super) fn mla_flow(cx: &ViewCtx, ui: &mut Ui, o: &ArchOut, size: f32) {
    let lang = cx.lang;
    let d = o.mla.dims;
    let t = o.mla.tokens;
    let cached = style::c32(kind("MLA"));
    let fresh = style::bar_fill(ui.visuals());
    let zh = lang == Lang::Zh;
    title(
        ui,
        size,
        if zh {
            format!("MLA 的投影，在运行的这一层：{} 个头，已缓存 {t} 个 token", d.heads)
        } else {
            format!(
                "MLA's projections in the layer that ran: {} heads, {t} tokens cached",
                d.heads
            )
        },
    );
    heading(
        ui,
        size,
        lang.t(
            "A new token, once: what it writes to the cache",
            "新 token，只一次：写入缓存的内容",
        ),
    );
    ui.horizontal(|ui| {
        chip(ui, size, &format!("x_t · {}", d.d_model), fresh);
        step(ui, size, "× W_DKV, RMSNorm");
        chip(ui, size, &format!("c_KV · {}", d.d_c), cached);
        ui.add_space(size);
        chip(ui, size, &format!("x_t · {}", d.d_model), fresh);
        step(ui, size, "× W_KR, RoPE");
        chip(ui, size, &format!("k_R · {}", d.d_r), cached);
    });
    heading(
        ui,
        size,
        lang.t(
            "The cache: one row per token, for every head",
            "缓存：每个 token 一行，所有头共用",
        ),
    );
    ui.add_space(size * 0.25);
    ui.horizontal(|ui| {
        ui.add_space(4.0);
        cache_block(ui, size, t, d.d_c, d.d_r, cached);
        ui.add_space(size * 0.5);
        ui.add(
            egui::Label::new(RichText::new(if zh {
                format!(
                    "{t} 行，每行 c_KV {} + k_R {} = {} 个值，{} 个头共用。每个解码步都要读每一行（黄框）：引擎的吸收解码为所有头只读一遍；这里的 mla_decode 为每个头各读一遍（后面一页的表）",
                    d.d_c,
                    d.d_r,
                    d.row(),
                    d.heads
                )
            } else {
                format!(
                    "{t} rows of c_KV {} + k_R {} = {} values, shared by the {} heads. Every decode step reads every row (yellow outline): an engine's absorbed decode once for all heads, mla_decode here once per head (the table a page on)",
                    d.d_c,
                    d.d_r,
                    d.row(),
                    d.heads
                )
            })
            .size(style::fit(size * 0.85)))
            .wrap(),
        );
    });
    heading(
        ui,
        size,
        &if zh {
            format!("每个解码步，对每个头 h（共 {} 个），吸收投影", d.heads)
        } else {
            format!("Each decode step, for each head h of {}, absorbed", d.heads)
        },
    );
    ui.horizontal(|ui| {
        chip(ui, size, &format!("q_nope,h · {}", d.d_nope), fresh);
        step(
            ui,
            size,
            lang.t("× W_UK,h^T: absorbed into the query", "× W_UK,h^T：吸收进查询"),
        );
        chip(ui, size, &format!("q_abs,h · {}", d.d_c), fresh);
        ui.add_space(size);
        chip(ui, size, &format!("q_R,h · {}", d.d_r), fresh);
    });
    ui.label(
        RichText::new(if zh {
            format!(
                "对 {t} 行中的每一行 j：分数 = (q_abs,h · c_KV,j + q_R,h · k_R,j) / √{}，softmax 得 p_j",
                d.d_nope + d.d_r
            )
        } else {
            format!(
                "for each of the {t} rows j: score = (q_abs,h · c_KV,j + q_R,h · k_R,j) / √{}, softmax → p_j",
                d.d_nope + d.d_r
            )
        })
        .size(style::fit(size * 0.85)),
    );
    ui.horizontal(|ui| {
        chip(ui, size, &format!("Σ_j p_j c_KV,j · {}", d.d_c), fresh);
        step(
            ui,
            size,
            lang.t("× W_UV,h: absorbed after the sum", "× W_UV,h：求和之后再乘"),
        );
        chip(ui, size, &format!("o_h · {}", d.d_v), fresh);
    });
    let c = mla_costs(d, t);
    ui.add_space(size * 0.3);
    ui.add(
        egui::Label::new(
            RichText::new(if zh {
                format!(
                    "从不构造：{t} 行中每一行的 K_h = c_KV W_UK,h 与 V_h = c_KV W_UV,h。吸收后每步读 {} 缓存。",
                    format_bytes(c[2].cache_bytes).replace(' ', "\u{a0}")
                )
            } else {
                format!(
                    "Never built: K_h = c_KV W_UK,h and V_h = c_KV W_UV,h for each of the {t} rows. Absorbed, a step reads {} of cache.",
                    format_bytes(c[2].cache_bytes).replace(' ', "\u{a0}")
                )
            })
            .size(style::fit(size * 0.85)),
        )
        .wrap(),
    );
    ui.add_space(size * 0.3);
    // What absorbing saves, as lengths on one scale: rebuilding K and V from the latent every step
    // against the absorbed step, both counted for this layer's shape (mla_costs).
    let fresh_rgba = fresh.to_array();
    compare_bars(
        ui,
        size,
        lang.t("FLOPs of one decode step in this layer", "这一层一个解码步的 FLOPs"),
        &[
            (
                lang.t("expand K, V every step", "每步展开 K、V"),
                vec![(c[1].flops, fresh_rgba)],
            ),
            (lang.t("absorbed", "吸收后"), vec![(c[2].flops, fresh_rgba)]),
        ],
        &|v| flops(v),
    );
    legend(
        ui,
        &[
            (
                kind("MLA"),
                lang.t("cached: c_KV and k_R", "缓存的：c_KV 与 k_R").to_string(),
            ),
            (
                fresh.to_array(),
                lang.t("computed in the step, never cached", "在本步计算，从不缓存")
                    .to_string(),
            ),
            (
                style::READ,
                lang.t("read by every decode step", "每个解码步都读取").to_string(),
            ),
        ],
        size,
    );
}
