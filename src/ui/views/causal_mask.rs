//! Lesson 2's views: the mask, the scores before and after it, the probabilities with the mask on or
//! off, their difference and the last row's softmax.

use eframe::egui::{RichText, Ui};

use crate::lessons::attention_layer::AttnOut;
use crate::lessons::causal_mask::{CausalMask, View};
use crate::lessons::{LessonKind, Output, get};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::views::attention_layer as attn;
use crate::ui::widgets::{Axes, ViewCtx, heat_panel, kernel_panel, view_id};

impl LessonUi for CausalMask {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(a), Some(view)) = (out.downcast_ref::<AttnOut>(), View::from_name(view)) else {
            return;
        };
        let m = &a.maps;
        match view {
            View::Mask => mask(cx, ui, a),
            View::Scores => {
                let data = m.unmasked_scores.clone().unwrap_or_else(|| m.scores[0].clone());
                attn::scores(cx, ui, a, "scores", &data, false);
            }
            View::MaskedScores => attn::scores(cx, ui, a, "masked_scores", &m.scores[0], true),
            View::Probs => probs(cx, ui, a),
            View::MaskDiff => mask_diff(cx, ui, a),
            View::LastRow => attn::softmax_row(cx, ui, a, a.shape.seq - 1, true),
            View::Trained => attn::trained_info(cx, ui, a),
            View::Lines => attn::lines(cx, ui, a),
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
        }
    }
}

/// The causal mask: 1 where query i may attend to key j (j ≤ i), 0 for the future.
fn mask(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let (t, lang) = (a.shape.seq, cx.lang);
    let title = format!(
        "{}  [T={t}, T={t}]",
        cx.t(
            "causal mask: 1 = may attend, 0 = future",
            "因果掩码：1 = 可见，0 = 未来"
        )
    );
    attn::token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id("mask", 0),
        &title,
        &a.maps.mask,
        Colormap::Sequential,
        Some((0.0, 1.0)),
        Highlight::None,
        Axes::QueryKey,
        &|(i, j)| {
            format!(
                "query {i}, key {j}: {}",
                if a.mask.visible(i, j) {
                    lang.t("j ≤ i, visible", "j ≤ i，可见")
                } else {
                    lang.t("j > i, future → masked", "j > i，未来 → 被掩码")
                }
            )
        },
    );
}

/// The probabilities with the mask on or off (the `mask_on` slider switches between the two computed
/// results), under a line saying which.
fn probs(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let mask_on = get(cx.params, "mask_on", 1) != 0;
    ui.label(
        RichText::new(if mask_on {
            cx.t("causal mask ON", "因果掩码：开")
        } else {
            cx.t(
                "causal mask OFF: every token sees the future",
                "因果掩码：关——每个 token 都能看到未来",
            )
        })
        .strong()
        .color(if mask_on {
            crate::style::pass(ui.visuals())
        } else {
            crate::style::warn(ui.visuals())
        }),
    );
    let m = &a.maps;
    let (data, probs) = match (&a.unmasked, mask_on) {
        (Some(u), false) => (m.unmasked_probs.clone().unwrap_or_else(|| m.probs[0].clone()), &u.probs),
        _ => (m.probs[0].clone(), &a.core.probs),
    };
    attn::probs(cx, ui, a, &data, probs, mask_on);
}

/// P(mask on) − P(mask off) for head 0.
fn mask_diff(cx: &mut ViewCtx, ui: &mut Ui, a: &AttnOut) {
    let Some(diff) = a.maps.diff.clone() else { return };
    let t = a.shape.seq;
    let title = format!(
        "{}  [T={t}, T={t}]",
        cx.t("P(mask on) − P(mask off)", "P(有掩码) − P(无掩码)")
    );
    // The last query already sees every key, so the mask changes nothing in its row: decode in miniature.
    let last = diff.values[(t - 1) * t..].iter().fold(0f32, |m, x| m.max(x.abs()));
    cx.widgets.heat.reserve_below = 1.6 * cx.size;
    attn::token_ticks(cx, a);
    heat_panel(
        cx,
        ui,
        view_id("diff", 0),
        &title,
        &diff,
        Colormap::Diverging,
        None,
        Highlight::Row(t - 1),
        Axes::QueryKey,
        &|(i, j)| format!("ΔP[{i},{j}] = {:+.4}", diff.values[i * t + j]),
    );
    ui.label(
        RichText::new(format!(
            "{} {}: max |ΔP| = {last:.1e} {}",
            cx.t("last row, query", "最后一行，query"),
            t - 1,
            cx.t(
                "(it sees every key with or without the mask)",
                "（无论有没有掩码，它都能看到所有 key）"
            )
        ))
        .size(crate::style::fit(cx.size * 0.9)),
    );
}
