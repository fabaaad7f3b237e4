//! Lesson 2's views: the mask, masked and unmasked scores and probabilities, their difference, and the
//! last row's softmax.

use eframe::egui::{Color32, RichText, Ui};

use super::{CausalMask, View};
use crate::lessons::attention_layer::AttnOut;
use crate::lessons::attention_layer::view as attn;
use crate::lessons::ui::LessonUi;
use crate::lessons::{LessonKind, Output, get};
use crate::render::colormap::Colormap;
use crate::render::heatmap::Highlight;
use crate::ui::widgets::{ViewCtx, heat_panel, kernel_panel, view_id};

impl LessonUi for CausalMask {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(a), Some(view)) = (out.downcast_ref::<AttnOut>(), View::from_name(view)) else {
            return;
        };
        let (t, m) = (a.shape.seq, &a.maps);
        match view {
            View::Mask => {
                let title = format!(
                    "{}  [T={t}, T={t}]",
                    cx.t(
                        "causal mask: 1 = may attend, 0 = future",
                        "因果掩码：1 = 可见，0 = 未来"
                    )
                );
                heat_panel(
                    cx,
                    ui,
                    view_id("mask", 0),
                    &title,
                    &m.mask,
                    Colormap::Sequential,
                    Some((0.0, 1.0)),
                    Highlight::None,
                    &|(i, j)| {
                        format!(
                            "query {i}, key {j}: {}",
                            if a.mask.visible(i, j) {
                                "j ≤ i, visible"
                            } else {
                                "j > i, future → masked"
                            }
                        )
                    },
                );
            }
            View::Scores => {
                let data = m.unmasked_scores.clone().unwrap_or_else(|| m.scores[0].clone());
                attn::scores(cx, ui, a, "scores", &data, false);
            }
            View::MaskedScores => attn::scores(cx, ui, a, "masked_scores", &m.scores[0], true),
            View::Probs => {
                // The `mask_on` slider (1 = on, 0 = off) switches between the two computed results.
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
                        Color32::from_rgb(90, 200, 110)
                    } else {
                        Color32::from_rgb(240, 150, 80)
                    }),
                );
                match (&a.unmasked, mask_on) {
                    (Some(u), false) => {
                        let data = m.unmasked_probs.clone().unwrap_or_else(|| m.probs[0].clone());
                        attn::probs(cx, ui, a, &data, &u.probs, false);
                    }
                    _ => attn::probs(cx, ui, a, &m.probs[0], &a.core.probs, true),
                }
            }
            View::MaskDiff => {
                let Some(diff) = m.diff.clone() else { return };
                let title = format!(
                    "{}  [T={t}, T={t}]",
                    cx.t("P(mask on) − P(mask off)", "P(有掩码) − P(无掩码)")
                );
                heat_panel(
                    cx,
                    ui,
                    view_id("diff", 0),
                    &title,
                    &diff,
                    Colormap::Diverging,
                    None,
                    Highlight::None,
                    &|(i, j)| format!("ΔP[{i},{j}] = {:+.4}", diff.values[i * t + j]),
                );
            }
            View::LastRow => attn::softmax_row(cx, ui, a, t - 1, true),
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
        }
    }
}
