//! One attention layer, as lessons 1–3 and `kvscope export attention` compute it: X and random weights
//! from a seed, Q/K/V projections, attention on the backend (scores, softmax and P·V as three kernels,
//! and once more as the fused online-softmax kernel, which must agree), heads concatenated and projected
//! by W_O. The heatmaps of every tensor are built once here.
//!
//! Lessons 1–3 are three kinds ([`super::attention_matrix`], [`super::causal_mask`],
//! [`super::multi_head`]) over this one computation; their shared views are in `view.rs`.

pub mod heads;
pub mod trained;

use std::sync::Arc;

use ndarray::{Array2, Array3, Axis, s};
use rayon::prelude::*;

use super::{OpIo, Output, any_nan, heat, heat_head, heat_matrix, heat_probs};

use crate::compute::Against;
use crate::compute::profile::span;
use crate::compute::{AttnInput, Backend, CheckReport, Kernel, Tolerance, check, reference};
use crate::figure::HeatmapData;
use crate::lessons::export::{ArrayData, NamedArray};
use crate::math::{AttnCore, AttnShape, AttnWeights, Mask, Qkv, output_projection, project};

/// One attention layer computed on a backend.
pub struct AttnOut {
    /// Its shape.
    pub shape: AttnShape,
    /// The mask the lesson applies.
    pub mask: Mask,
    /// X and the weights.
    pub w: AttnWeights<f32>,
    /// Q, K, V per head.
    pub qkv: Qkv<f32>,
    /// Scores, probabilities and per-head output, from the backend.
    pub core: AttnCore<f32>,
    /// Lesson 2: the same with the mask off (for the toggle and the difference).
    pub unmasked: Option<AttnCore<f32>>,
    /// Whether the scores are scaled by 1/√d_k (lesson 1's switch turns it off to show saturation).
    pub scaled: bool,
    /// The output of the fused kernel on the same input `[H,T,hd]`.
    pub fused: Array3<f32>,
    /// The fused kernel's output checked against the three kernels' (`out`).
    pub fused_check: CheckReport,
    /// Concatenated heads `[T, H·hd]`.
    pub concat: Array2<f32>,
    /// Output after W_O, `[T, d_model]`.
    pub y: Array2<f32>,
    /// Heatmaps, by view.
    pub maps: AttnMaps,
    /// Lesson 3: the trained model's attention in one layer, on one of the lesson's texts.
    pub model: Option<heads::ModelHeads>,
    /// Lessons 1–2 with trained weights: which head of the model this layer is, on which text.
    pub trained: Option<heads::TrainedHead>,
}

/// The heatmaps of an [`AttnOut`].
pub struct AttnMaps {
    /// X.
    pub x: Arc<HeatmapData>,
    /// W_Q.
    pub wq: Arc<HeatmapData>,
    /// W_K.
    pub wk: Arc<HeatmapData>,
    /// W_V.
    pub wv: Arc<HeatmapData>,
    /// Q per query head.
    pub q: Vec<Arc<HeatmapData>>,
    /// K per KV head.
    pub k: Vec<Arc<HeatmapData>>,
    /// V per KV head.
    pub v: Vec<Arc<HeatmapData>>,
    /// Scaled (masked) scores per head.
    pub scores: Vec<Arc<HeatmapData>>,
    /// Probabilities per head.
    pub probs: Vec<Arc<HeatmapData>>,
    /// Output per head.
    pub out: Vec<Arc<HeatmapData>>,
    /// Q of every head side by side, `[T, H·hd]` (lesson 3's head split).
    pub q_heads: Arc<HeatmapData>,
    /// Concatenation.
    pub concat: Arc<HeatmapData>,
    /// After W_O.
    pub y: Arc<HeatmapData>,
    /// The mask (1 = visible, 0 = masked).
    pub mask: Arc<HeatmapData>,
    /// Lesson 2: unmasked scores of head 0.
    pub unmasked_scores: Option<Arc<HeatmapData>>,
    /// Unmasked probabilities of head 0.
    pub unmasked_probs: Option<Arc<HeatmapData>>,
    /// Masked − unmasked probabilities of head 0.
    pub diff: Option<Arc<HeatmapData>>,
}

impl AttnOut {
    /// Compute one layer of `shape` with `mask` from `seed` on `backend`; with `unmasked`, also the
    /// same layer without the mask.
    pub fn compute(
        shape: AttnShape,
        mask: Mask,
        seed: u64,
        unmasked: bool,
        backend: &dyn Backend,
    ) -> Result<AttnOut, String> {
        Self::compute_scaled(shape, mask, seed, unmasked, true, backend)
    }

    /// [`AttnOut::compute`], with the 1/√d_k scaling of the scores switched off when `scaled` is false
    /// (the kernels always scale, so they get Q·√d_k: the scores are then the raw dot products).
    pub fn compute_scaled(
        shape: AttnShape,
        mask: Mask,
        seed: u64,
        unmasked: bool,
        scaled: bool,
        backend: &dyn Backend,
    ) -> Result<AttnOut, String> {
        let shape = shape.validated().map_err(|e| e.to_string())?;
        let w = span("random weights", || AttnWeights::random(shape, seed));
        let qkv = span("Q, K, V projections", || project(&w));
        Self::run(shape, mask, w, qkv, unmasked, scaled, backend)
    }

    /// Attention on `backend` over given X, weights and Q/K/V (random ones, or one head of the trained
    /// model), and every heatmap of the result.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        shape: AttnShape,
        mask: Mask,
        w: AttnWeights<f32>,
        qkv: Qkv<f32>,
        unmasked: bool,
        scaled: bool,
        backend: &dyn Backend,
    ) -> Result<AttnOut, String> {
        let q_in = if scaled {
            None
        } else {
            Some(qkv.q.mapv(|x| x * (shape.head_dim() as f32).sqrt()))
        };
        let inp = AttnInput {
            q: q_in.as_ref().unwrap_or(&qkv.q),
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let core = span("attention kernels", || backend.attention(&inp)).map_err(|e| e.to_string())?;
        let fused = span("fused kernel", || backend.attention_fused(&inp)).map_err(|e| e.to_string())?;
        let fused_check = check(
            "fused == three kernels",
            fused.shape(),
            fused.as_slice().unwrap_or_default(),
            &core.out.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            Tolerance::F32,
        )
        .against(Against::ThreeKernels);
        let unmasked = if unmasked {
            Some(
                backend
                    .attention(&AttnInput {
                        mask: Mask::None,
                        ..inp
                    })
                    .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        let (h, t, _) = core.out.dim();
        let concat = concat_heads(&core.out);
        let y = span("W_O", || output_projection(&core.out, &w.wo));
        let mask_values: Vec<f32> = (0..t)
            .flat_map(|i| (0..t).map(move |j| if mask.visible(i, j) { 1.0 } else { 0.0 }))
            .collect();
        let maps = span("heatmaps", || AttnMaps {
            x: heat_matrix(&w.x),
            wq: heat_matrix(&w.wq),
            wk: heat_matrix(&w.wk),
            wv: heat_matrix(&w.wv),
            // One T×T copy per head and map: spread over the CPU's threads (at T = 1024 and 16 heads
            // these are 32 maps of 4 MB each, the largest part of a lesson-3 change after the kernels).
            q: (0..h).into_par_iter().map(|i| heat_head(&qkv.q, i)).collect(),
            k: (0..shape.n_kv_heads)
                .into_par_iter()
                .map(|i| heat_head(&qkv.k, i))
                .collect(),
            v: (0..shape.n_kv_heads)
                .into_par_iter()
                .map(|i| heat_head(&qkv.v, i))
                .collect(),
            scores: (0..h).into_par_iter().map(|i| heat_head(&core.scores, i)).collect(),
            probs: (0..h)
                .into_par_iter()
                .map(|i| heat_probs(&core.probs, i, mask))
                .collect(),
            out: (0..h).into_par_iter().map(|i| heat_head(&core.out, i)).collect(),
            q_heads: heat_matrix(&concat_heads(&qkv.q)),
            concat: heat_matrix(&concat),
            y: heat_matrix(&y),
            mask: heat(t, t, mask_values),
            unmasked_scores: unmasked.as_ref().map(|u| heat_head(&u.scores, 0)),
            unmasked_probs: unmasked.as_ref().map(|u| heat_head(&u.probs, 0)),
            diff: unmasked.as_ref().map(|u| {
                let d = &core.probs.index_axis(Axis(0), 0) - &u.probs.index_axis(Axis(0), 0);
                heat_matrix(&d)
            }),
        });
        Ok(AttnOut {
            shape,
            mask,
            w,
            qkv,
            core,
            unmasked,
            scaled,
            fused,
            fused_check,
            concat,
            y,
            maps,
            model: None,
            trained: None,
        })
    }

    /// Every tensor of the layer, named as in the `.npy` export.
    pub fn arrays(&self) -> Vec<NamedArray> {
        fn f<D: ndarray::Dimension>(name: &str, a: &ndarray::Array<f32, D>) -> NamedArray {
            NamedArray::new(name, a.shape(), ArrayData::F32(a.iter().copied().collect()))
        }
        let mut v = vec![
            f("x", &self.w.x),
            f("wq", &self.w.wq),
            f("wk", &self.w.wk),
            f("wv", &self.w.wv),
            f("wo", &self.w.wo),
            f("q", &self.qkv.q),
            f("k", &self.qkv.k),
            f("v", &self.qkv.v),
            f("scores", &self.core.scores),
            f("probs", &self.core.probs),
            f("out", &self.core.out),
            f("y", &self.y),
        ];
        if let Some(u) = &self.unmasked {
            v.push(f("probs_unmasked", &u.probs));
        }
        v.push(f("out_fused", &self.fused));
        if let Some(t) = &self.trained {
            let ids: Vec<i32> = t.tokens.iter().map(|&b| b as i32).collect();
            v.push(NamedArray::new("tokens", &[ids.len()], ArrayData::I32(ids)));
        }
        v
    }

    /// The Q the kernels were given: Q itself, or Q·√d_k when the scaling is switched off.
    pub fn kernel_q(&self) -> Array3<f32> {
        if self.scaled {
            self.qkv.q.clone()
        } else {
            self.qkv.q.mapv(|x| x * (self.shape.head_dim() as f32).sqrt())
        }
    }
}

/// The placeholders every attention layer's result fills (lessons 1 and 2 ask about them): the tokens
/// `seq`, the score cells `cells` (T²), head 0's first row sum `row_sum`, its masked cells `masked`
/// (scores of −∞), and token 0's weight on itself `first_self`.
pub const LAYER_PLACEHOLDERS: &[&str] = &["seq", "cells", "row_sum", "masked", "first_self"];

impl AttnOut {
    /// The values of [`LAYER_PLACEHOLDERS`], from head 0 of this result, as far as `declared` (a kind's
    /// placeholders) names them (the kinds share this result and each fills only its own).
    pub fn layer_values(&self, declared: &[&str]) -> Vec<(&'static str, String)> {
        let t = self.core.scores.shape()[1];
        let scores = self.core.scores.index_axis(Axis(0), 0);
        let probs = self.core.probs.index_axis(Axis(0), 0);
        let masked = scores
            .iter()
            .filter(|v| v.is_infinite() && v.is_sign_negative())
            .count();
        let row_sum: f64 = probs.row(0).iter().map(|&p| f64::from(p)).sum();
        // The key the last query weighs most (the first on ties), as a cell of the heatmap.
        let last = probs.row(t.saturating_sub(1));
        let (top, top_p) = last.iter().enumerate().fold(
            (0, f32::NEG_INFINITY),
            |(bi, bp), (i, &p)| if p > bp { (i, p) } else { (bi, bp) },
        );
        vec![
            ("last_row_top", (t.saturating_sub(1) * t + top).to_string()),
            (
                "last_row_top_key",
                self.token_labels().get(top).cloned().unwrap_or_default(),
            ),
            ("last_row_top_pct", format!("{:.0}%", 100.0 * top_p)),
            ("seq", t.to_string()),
            ("cells", (t * t).to_string()),
            ("row_sum", format!("{row_sum:.3}")),
            ("masked", masked.to_string()),
            ("first_self", format!("{:.2}", probs[[0, 0]])),
        ]
        .into_iter()
        .filter(|(n, _)| declared.contains(n))
        .collect()
    }
}

impl AttnOut {
    /// Each token's name (the trained model's tokens, else its position).
    pub fn token_labels(&self) -> Vec<String> {
        match &self.trained {
            Some(t) => t.names.clone(),
            None => (0..self.shape.seq).map(|i| i.to_string()).collect(),
        }
    }
}

impl Output for AttnOut {
    /// Probabilities and output of the three kernels, and the fused kernel's output, against the f64
    /// reference.
    fn verify(&self) -> Vec<CheckReport> {
        let q = self.kernel_q();
        let inp = AttnInput {
            q: &q,
            k: &self.qkv.k,
            v: &self.qkv.v,
            mask: self.mask,
        };
        let want = reference::attention(&inp);
        let c = |label: &str, got: &Array3<f32>, want: &Array3<f64>| {
            check(
                label,
                got.shape(),
                got.as_slice().unwrap_or_default(),
                want.as_slice().unwrap_or_default(),
                Tolerance::F32,
            )
        };
        vec![
            c("probs", &self.core.probs, &want.probs),
            c("out", &self.core.out, &want.out),
            c("fused.out", &self.fused, &want.out),
        ]
    }

    fn op_check(&self, op: Kernel) -> Option<&CheckReport> {
        (op == Kernel::AttentionFused).then_some(&self.fused_check)
    }

    /// The probabilities' heatmap, its cells for a pick (those the mask hides drawn as unavailable).
    fn pick_surface(&self, view: &str) -> Option<crate::lessons::questions::PickSurface> {
        (view == "probs").then(|| {
            crate::lessons::questions::PickSurface::heatmap(
                crate::lesson_file::PickOn::Cell,
                self.token_labels(),
                self.mask == Mask::Causal,
            )
        })
    }

    fn io(&self, op: Kernel) -> Option<OpIo> {
        let (h, kvh, t, hd) = (
            self.shape.n_heads,
            self.shape.n_kv_heads,
            self.shape.seq,
            self.shape.head_dim(),
        );
        let (q, k, v) = (vec![h, t, hd], vec![kvh, t, hd], vec![kvh, t, hd]);
        let (s, o) = (vec![h, t, t], vec![h, t, hd]);
        let (reads, writes) = match op {
            Kernel::AttentionScores => (vec![("Q", q), ("K", k)], vec![("S", s)]),
            Kernel::Softmax => (vec![("S", s.clone())], vec![("P", s)]),
            Kernel::AttentionPv => (vec![("P", s), ("V", v)], vec![("O", o)]),
            Kernel::AttentionFused => (vec![("Q", q), ("K", k), ("V", v)], vec![("O", o)]),
            _ => return None,
        };
        Some(OpIo {
            reads,
            writes,
            elem_bytes: 4,
        })
    }

    fn has_nan(&self) -> bool {
        let m = &self.maps;
        let singles = [&m.x, &m.wq, &m.wk, &m.wv, &m.q_heads, &m.concat, &m.y, &m.mask];
        singles.iter().any(|d| any_nan(&d.values))
            || [&m.q, &m.k, &m.v, &m.scores, &m.probs, &m.out]
                .iter()
                .any(|v| v.iter().any(|d| any_nan(&d.values)))
            || any_nan(self.fused.as_slice().unwrap_or_default())
            || [&m.unmasked_scores, &m.unmasked_probs, &m.diff]
                .iter()
                .any(|d| d.as_ref().is_some_and(|d| any_nan(&d.values)))
    }

    fn export_arrays(&self, _cursor: usize, verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        (self.arrays(), verified.map(|r| r.to_vec()).unwrap_or_default())
    }
}

/// `[H, T, hd]` → `[T, H·hd]`: the heads side by side.
fn concat_heads(a: &Array3<f32>) -> Array2<f32> {
    let (h, t, hd) = a.dim();
    let mut out = Array2::<f32>::zeros((t, h * hd));
    for head in 0..h {
        out.slice_mut(s![.., head * hd..(head + 1) * hd])
            .assign(&a.index_axis(Axis(0), head));
    }
    out
}
