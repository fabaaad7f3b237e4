//! A trained model's attention in one layer, on a text ([`crate::model::texts`]): every head's
//! probabilities as the backend's attention kernels computed them inside the model's forward pass,
//! checked against the f64 reference on the same Q, K and V, and each head's label measured on the text
//! (`model::heads`).
//!
//! [`AttnOut::trained`] is lessons 1–2 with trained weights: one head of the model, on a text, as a
//! one-head layer whose X is the layer's normalised input, whose W_Q, W_K, W_V are that head's columns
//! and whose Q and K are rotated by RoPE, as the model's attention kernel receives them.

use std::sync::Arc;

use ndarray::{Array3, Axis, s};

use super::AttnOut;
use super::heads::TrainedHead;
use crate::compute::Backend;
use crate::math::{AttnShape, AttnWeights, Mask, Qkv};
use crate::model::heads::{labels, profiles};
use crate::model::{Model, texts};

impl AttnOut {
    /// Lessons 1–2 with trained weights: query head `head` of layer `layer` (both clamped) of model
    /// `m` (the tiny one or SmolLM2) on text `text` (an id of [`texts`]), as a one-head layer run on `backend` with
    /// `mask`: X = the layer's RMSNorm'd input `[T, d_model]`, W_Q the head's columns of W_Q, W_K and
    /// W_V its KV head's, Q and K after RoPE, W_O the head's rows of W_O (so the output is this head's
    /// contribution to the layer's).
    #[allow(clippy::too_many_arguments)]
    pub fn trained(
        m: &Model,
        text: i64,
        layer: usize,
        head: usize,
        mask: Mask,
        unmasked: bool,
        scaled: bool,
        backend: &dyn Backend,
    ) -> Result<AttnOut, String> {
        let c = &m.config;
        let text = texts::get(text);
        let tokens = m.tokenizer.encode(&text)?;
        if tokens.is_empty() {
            return Err("the text has no tokens".into());
        }
        let (layer, head) = (layer.min(c.n_layers - 1), head.min(c.n_heads - 1));
        let kv_head = head / (c.n_heads / c.n_kv_heads).max(1);
        let hd = c.head_dim;
        let pre = crate::model::memo::prefill_ids(m, &tokens, backend)?;
        let b = &m.blocks[layer];
        let cols = |w: &ndarray::Array2<f32>, i: usize| w.slice(s![.., i * hd..(i + 1) * hd]).to_owned();
        let one = |a: &Array3<f32>, i: usize| a.index_axis(Axis(0), i).insert_axis(Axis(0)).to_owned();
        // One head as a layer: the kernels see d_model = head_dim and one head; X keeps the model's width.
        let shape = AttnShape {
            seq: tokens.len(),
            d_model: hd,
            n_heads: 1,
            n_kv_heads: 1,
        };
        let w = AttnWeights {
            shape,
            x: pre.attn_in[layer].clone(),
            wq: cols(&b.wq, head),
            wk: cols(&b.wk, kv_head),
            wv: cols(&b.wv, kv_head),
            wo: b.wo.slice(s![head * hd..(head + 1) * hd, ..]).to_owned(),
        };
        let qkv = Qkv {
            q: one(&pre.q[layer], head),
            k: one(&pre.kv[layer].0, kv_head),
            v: one(&pre.kv[layer].1, kv_head),
        };
        let head_probs = one(&pre.probs[layer], head);
        let mut out = AttnOut::run(shape, mask, w, qkv, unmasked, scaled, backend)?;
        out.trained = Some(TrainedHead {
            ticks: Arc::new(m.tokenizer.tick_labels(&tokens)),
            names: tokens.iter().map(|&t| m.tokenizer.token_label(t)).collect(),
            model: m.name,
            text,
            tokens,
            layer,
            layers: c.n_layers,
            head,
            kv_head,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            label: labels(&head_probs)[0],
            profile: profiles(&head_probs)[0],
            census: super::heads::HeadCensus::of(&pre.probs),
        });
        Ok(out)
    }
}
