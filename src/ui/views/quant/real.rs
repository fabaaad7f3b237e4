//! Lesson 10's real-model view: SmolLM2's stored per-channel maxima of K and V, and every format's errors
//! and bits per byte.

use eframe::egui::{self, Ui};

use super::common::*;
use crate::cache::CacheFormat;
use crate::lessons::quant::{format_label, stored};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::ui::text::Lang;
use crate::ui::widgets::{Axes, ViewCtx, heat_panel, view_id, view_in};

/// SmolLM2-135M's stored measurements: its keys' and values' channel maxima, side by side, and every
/// format's errors and bits per byte.
pub(super) fn real(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let (Some(s), Some(heat)) = (stored::embedded_smollm2(), stored::smollm2_channel_heat()) else {
        note(
            ui,
            size,
            lang.t(
                "SmolLM2's stored table (assets/measurements/smollm2/quant.json) is missing or has no channel maxima.",
                "缺少 SmolLM2 的存储表（assets/measurements/smollm2/quant.json），或其中没有通道最大值。",
            ),
        );
        return;
    };
    let kvh = s.channels.as_ref().map_or(1, |c| c.kv_heads);
    title(
        ui,
        size,
        match lang {
            Lang::En => format!(
                "SmolLM2-135M-Instruct, stored: kvscope export quant-table --model smollm2 on {}, {} windows of 256 tokens",
                s.backend, s.windows
            ),
            Lang::Zh => format!(
                "SmolLM2-135M-Instruct，存储的结果：kvscope export quant-table --model smollm2，在 {} 上，{} 个 256 token 的窗口",
                s.backend, s.windows
            ),
        },
    );
    let full = ui.available_rect_before_wrap();
    let split = full.min.x + full.width() * 0.58;
    let gap = 12.0;
    let maps = stacked(egui::Rect::from_min_max(
        full.min,
        egui::pos2(split - gap / 2.0, full.max.y),
    ));
    for (i, name) in ["K", "V"].into_iter().enumerate() {
        view_in(ui, maps[i], |ui| {
            let t = match lang {
                Lang::En => format!("{name}: largest |value| per channel (columns: layer·KV head)"),
                Lang::Zh => format!("{name}：每个通道的最大绝对值（列：层·KV 头）"),
            };
            heat_panel(
                cx,
                ui,
                view_id("quant-real", i),
                &t,
                &heat[i],
                Colormap::Sequential,
                None,
                Highlight::None,
                Axes::DimLayerHead,
                &|(r, c)| format!("L{} KV{} ch {r}", c / kvh, c % kvh),
            );
        });
    }
    let right = egui::Rect::from_min_max(egui::pos2(split + gap / 2.0, full.min.y), full.max);
    view_in(ui, right, |ui| {
        let mut t = crate::ui::widgets::Table::new([
            lang.t("format", "格式"),
            lang.t("bits/byte (quality)", "比特/字节（质量）"),
            lang.t("K error", "K 误差"),
            lang.t("V error", "V 误差"),
        ])
        .below(4.0);
        let pct = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{:.2}%", 100.0 * x));
        for f in CacheFormat::all(s.group, s.residual) {
            let Some(c) = s.cell(&f.name()) else { continue };
            t.row([
                crate::ui::widgets::Cell::new(format_label(&f)),
                crate::ui::widgets::Cell::new(format!("{:.3}", c.bits_per_byte)).mono(),
                crate::ui::widgets::Cell::new(pct(c.k_rel_err)).mono(),
                crate::ui::widgets::Cell::new(pct(c.v_rel_err)).mono(),
            ]);
        }
        crate::ui::widgets::table(ui, lang, size, &t);
        note(
            ui,
            size,
            lang.t(
                "bits/byte: the loss on the held-out text, lower is better (not a storage cost). Error: RMS of x − dequant(x) over RMS of x, every value the cache held",
                "比特/字节：留出文本上的损失，越低越好（不是存储开销）。误差：缓存所存全部值上 x − dequant(x) 的均方根除以 x 的均方根",
            ),
        );
    });
}
