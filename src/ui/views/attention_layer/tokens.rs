//! What every view of lessons 1–3 labels its cells with: the step's highlight, token names on the axes, a
//! head's label, and the hover texts that show the numbers behind a score or a P·V cell.

use crate::lessons::attention_layer::AttnOut;
use crate::model::heads::{Label, Profile};
use crate::render::heatmap::Highlight;
use crate::ui::text::Lang;
use crate::ui::widgets::{ViewCtx, step_highlight};

/// The step's highlight on the T×T matrices.
pub fn seq_highlight(cx: &ViewCtx, a: &AttnOut) -> Highlight {
    step_highlight(cx.highlight, a.shape.seq, a.shape.seq)
}

/// Only the row of a highlight (for `[T, ·]` matrices whose columns are not keys).
pub fn rows_only(h: Highlight) -> Highlight {
    match h {
        Highlight::Row(r) | Highlight::Cell(r, _) => Highlight::Row(r),
        _ => Highlight::None,
    }
}

/// A trained head's label in `lang`: the measured pattern, or, when no pattern tested meets the rule,
/// what was measured ([`crate::model::heads`]).
pub fn head_label(lang: Lang, label: Option<Label>, profile: Option<Profile>) -> String {
    let pct = |x: f64| (x * 100.0).round();
    match (label, profile) {
        (Some(l), _) => l.pattern.describe(l.share, l.argmax, lang == Lang::Zh),
        (None, Some(p)) => format!(
            "{} (i−{} {}%, 0 {}%, |i−j|≤{} {}%)",
            lang.t("no pattern tested", "不符合所测模式"),
            p.best_offset,
            pct(p.offset_share),
            pct(p.sink_share),
            crate::model::heads::BAND,
            pct(p.band)
        ),
        (None, None) => lang.t("no pattern tested", "不符合所测模式").to_string(),
    }
}

/// With trained weights, the next heatmap labels its token axes with the text's characters.
pub fn token_ticks(cx: &mut ViewCtx, a: &AttnOut) {
    if let Some(t) = &a.trained {
        cx.widgets.heat.tokens = Some(t.ticks.clone());
    }
}

/// A trained layer's token `i` as a hover names it ("'a'"), else nothing.
pub(super) fn token_name(a: &AttnOut, i: usize) -> String {
    a.trained
        .as_ref()
        .and_then(|t| t.names.get(i).cloned())
        .unwrap_or_default()
}

/// `s` after a space, or nothing when empty.
pub(super) fn spaced(s: String) -> String {
    if s.is_empty() { s } else { format!(" {s}") }
}

/// "'a' → 'b': " before a trained layer's hover text, naming the two tokens of cell (i, j).
pub(super) fn token_pair(a: &AttnOut, (i, j): (usize, usize)) -> String {
    if a.trained.is_none() {
        return String::new();
    }
    format!("{} → {}: ", token_name(a, i), token_name(a, j))
}

pub(super) fn dot(a: ndarray::ArrayView1<f32>, b: ndarray::ArrayView1<f32>) -> f32 {
    a.iter().zip(b.iter()).map(|(x, y)| x * y).sum()
}

/// The numbers behind score/probability cell (i, j) of head `h`.
pub fn score_hover(
    lang: Lang,
    a: &AttnOut,
    h: usize,
    probs: &ndarray::Array3<f32>,
    mask_on: bool,
    (i, j): (usize, usize),
) -> String {
    let kvh = a.shape.kv_head_of(h);
    let hd = a.shape.head_dim();
    let qk = dot(
        a.qkv.q.slice(ndarray::s![h, i, ..]),
        a.qkv.k.slice(ndarray::s![kvh, j, ..]),
    );
    let pair = token_pair(a, (i, j));
    let masked = mask_on && !a.mask.visible(i, j);
    let state = if masked {
        lang.t("masked → −∞", "被掩码 → −∞")
    } else {
        lang.t("visible", "可见")
    };
    if a.scaled {
        format!(
            "{pair}q{i}·k{j} = {qk:.3}   /√{hd} = {:.3}   {state}   p = {:.4}",
            qk / (hd as f32).sqrt(),
            probs[[h, i, j]]
        )
    } else {
        let not_scaled = lang.t("(not scaled)", "（未缩放）");
        format!(
            "{pair}q{i}·k{j} = {qk:.3}   {not_scaled}   {state}   p = {:.4}",
            probs[[h, i, j]]
        )
    }
}

/// What P·V cell (i, d) of head `h` is made of: its largest terms p_ij · v_jd.
pub fn pv_hover(a: &AttnOut, h: usize, (i, d): (usize, usize)) -> String {
    let kvh = a.shape.kv_head_of(h);
    let t = a.shape.seq;
    let mut terms: Vec<(usize, f32)> = (0..t)
        .map(|j| (j, a.core.probs[[h, i, j]] * a.qkv.v[[kvh, j, d]]))
        .collect();
    terms.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()));
    let top: Vec<String> = terms
        .iter()
        .take(3)
        .map(|(j, v)| format!("p{i},{j}·v{j},{d} = {v:.3}"))
        .collect();
    format!(
        "out[{i},{d}] = {:.4} = Σ_j p·v; largest: {}",
        a.core.out[[h, i, d]],
        top.join(", ")
    )
}
