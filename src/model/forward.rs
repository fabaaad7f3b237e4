//! The forward pass in f32: RMSNorm, RoPE ("rotate half"), GQA attention through the backend's
//! attention op, SwiGLU and the tied output projection.

use ndarray::{Array2, Array3, ArrayView2, Axis, s};
use rayon::prelude::*;

use super::{Block, Model, ModelName, Prefill, TokenId};
use crate::compute::{AttnInput, Backend};
use crate::math::{Mask, matmul};

impl Model {
    /// `x · w` for the model's projections. SmolLM2's single rows (a decode step) go through
    /// [`row_times`] and its prompts through [`rows_times`], which sums every output in the same order,
    /// so a token's numbers do not depend on whether it came in a prompt or a decode step, nor on the
    /// machine (the `gemm` crate's blocking and kernels follow the CPU's caches and vector width, and
    /// moved pixels of the real-model snapshots between an AVX2 and an AVX-512 machine); the tiny model
    /// keeps `math::matmul` for everything, the one path its stored measurements were made with.
    pub fn linear(&self, x: ArrayView2<f32>, w: ArrayView2<f32>) -> Array2<f32> {
        match self.name {
            ModelName::Smollm2 if x.nrows() == 1 => {
                let y = row_times(&x.row(0).to_vec(), w);
                Array2::from_shape_vec((1, w.ncols()), y).expect("one row of w's columns")
            }
            ModelName::Smollm2 => rows_times(x, w),
            ModelName::Tiny => matmul(x, w),
        }
    }

    /// RMSNorm of each row of `x` with weight `w`: `x / √(mean(x²) + ε) · w`.
    pub fn rms_norm(&self, x: &Array2<f32>, w: &[f32]) -> Array2<f32> {
        let eps = self.config.norm_eps as f32;
        let mut out = x.clone();
        for mut row in out.rows_mut() {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
            let inv = 1.0 / (ms + eps).sqrt();
            row.iter_mut().zip(w).for_each(|(v, g)| *v = *v * inv * g);
        }
        out
    }

    /// `[T, n·hd]` rows at positions `pos0..` → `[n, T, hd]` with RoPE applied ("rotate half": dimension
    /// `i < hd/2` pairs with `i + hd/2`, rotated by angle `pos · θ^(−2i/hd)`).
    pub fn heads_with_rope(&self, a: &Array2<f32>, n: usize, pos0: usize, rope: bool) -> Array3<f32> {
        let (t, hd) = (a.nrows(), self.config.head_dim);
        let half = hd / 2;
        let (cos, sin) = &self.rope;
        let mut out = Array3::<f32>::zeros((n, t, hd));
        for h in 0..n {
            for i in 0..t {
                let x = a.slice(s![i, h * hd..(h + 1) * hd]);
                let p = pos0 + i;
                for d in 0..hd {
                    out[[h, i, d]] = if !rope {
                        x[d]
                    } else if d < half {
                        x[d] * cos[[p, d]] - x[d + half] * sin[[p, d]]
                    } else {
                        x[d] * cos[[p, d - half]] + x[d - half] * sin[[p, d - half]]
                    };
                }
            }
        }
        out
    }

    /// Embeddings of `tokens`, `[T, d]`.
    pub fn embed_tokens<T: TokenId>(&self, tokens: &[T]) -> Array2<f32> {
        let d = self.config.d_model;
        let mut x = Array2::<f32>::zeros((tokens.len(), d));
        for (i, &t) in tokens.iter().enumerate() {
            // An id past the vocabulary reads row 0 (callers check ids; this must not panic).
            let row = if t.index() < self.config.vocab { t.index() } else { 0 };
            x.row_mut(i).assign(&self.embed.row(row));
        }
        x
    }

    /// The SwiGLU MLP with its residual: `x + W2(silu(W1 h) ⊙ W3 h)`, `h = RMSNorm(x)`.
    pub fn mlp(&self, b: &Block, x: &Array2<f32>) -> Array2<f32> {
        let h = self.rms_norm(x, &b.ffn_norm);
        let mut g = self.linear(h.view(), b.w1.view());
        let u = self.linear(h.view(), b.w3.view());
        g.zip_mut_with(&u, |a, &up| *a = *a / (1.0 + (-*a).exp()) * up);
        x + &self.linear(g.view(), b.w2.view())
    }

    /// Logits `[T, vocab]` of the final hidden states `x`.
    pub fn logits(&self, x: &Array2<f32>) -> Array2<f32> {
        let h = self.rms_norm(x, &self.norm);
        self.linear(h.view(), self.embed.t())
    }

    /// Project one block's attention input `x` (positions `pos0..`): Q `[H,T,hd]`, K and V `[KVH,T,hd]`,
    /// RoPE applied to Q and K.
    pub fn qkv(&self, b: &Block, x: &Array2<f32>, pos0: usize) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
        self.qkv_normed(b, &self.rms_norm(x, &b.attention_norm), pos0)
    }

    /// [`Model::qkv`] from the block's already normalised input `h` = RMSNorm(x).
    pub fn qkv_normed(&self, b: &Block, h: &Array2<f32>, pos0: usize) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
        let c = &self.config;
        let q = self.heads_with_rope(&self.linear(h.view(), b.wq.view()), c.n_heads, pos0, true);
        let k = self.heads_with_rope(&self.linear(h.view(), b.wk.view()), c.n_kv_heads, pos0, true);
        let v = self.heads_with_rope(&self.linear(h.view(), b.wv.view()), c.n_kv_heads, pos0, false);
        (q, k, v)
    }

    /// Q `[H,T,hd]`, K and V `[KVH,T,hd]` of the block's normalised input `h`, **without** RoPE: what a
    /// cache that turns keys on read stores (StreamingLLM's positions by cache slot, [`super::stream`]).
    pub fn qkv_unrotated(&self, b: &Block, h: &Array2<f32>) -> (Array3<f32>, Array3<f32>, Array3<f32>) {
        let c = &self.config;
        let q = self.heads_with_rope(&self.linear(h.view(), b.wq.view()), c.n_heads, 0, false);
        let k = self.heads_with_rope(&self.linear(h.view(), b.wk.view()), c.n_kv_heads, 0, false);
        let v = self.heads_with_rope(&self.linear(h.view(), b.wv.view()), c.n_kv_heads, 0, false);
        (q, k, v)
    }

    /// `x + Wo · concat(heads)` for attention output `o` `[H, T, hd]`.
    pub fn attn_residual(&self, b: &Block, x: &Array2<f32>, o: &Array3<f32>) -> Array2<f32> {
        let (h, t, hd) = o.dim();
        let mut cat = Array2::<f32>::zeros((t, h * hd));
        for head in 0..h {
            cat.slice_mut(s![.., head * hd..(head + 1) * hd])
                .assign(&o.index_axis(Axis(0), head));
        }
        x + &self.linear(cat.view(), b.wo.view())
    }

    /// The whole sequence at once, attention through `backend.attention` with the causal mask. With
    /// `round_kv`, K and V are rounded to f16 first, as a cache stores them.
    pub fn prefill<T: TokenId>(&self, tokens: &[T], backend: &dyn Backend, round_kv: bool) -> Result<Prefill, String> {
        if tokens.is_empty() || tokens.len() > self.config.context {
            return Err(format!(
                "{} tokens: the model takes 1 to {} (its context)",
                tokens.len(),
                self.config.context
            ));
        }
        if let Some(t) = tokens.iter().find(|t| t.index() >= self.config.vocab) {
            return Err(format!(
                "token id {t:?} is past the vocabulary of {}",
                self.config.vocab
            ));
        }
        let mut x = self.embed_tokens(tokens);
        let mut probs = Vec::new();
        let mut kv = Vec::new();
        let mut qs = Vec::new();
        let mut inputs = Vec::new();
        for b in &self.blocks {
            let h = self.rms_norm(&x, &b.attention_norm);
            let (q, mut k, mut v) = self.qkv_normed(b, &h, 0);
            inputs.push(h);
            if round_kv {
                k.mapv_inplace(|a| half::f16::from_f32(a).to_f32());
                v.mapv_inplace(|a| half::f16::from_f32(a).to_f32());
            }
            let core = backend
                .attention(&AttnInput {
                    q: &q,
                    k: &k,
                    v: &v,
                    mask: Mask::Causal,
                })
                .map_err(|e| e.to_string())?;
            x = self.attn_residual(b, &x, &core.out);
            x = self.mlp(b, &x);
            probs.push(core.probs);
            kv.push((k, v));
            qs.push(q);
        }
        Ok(Prefill {
            logits: self.logits(&x),
            probs,
            kv,
            q: qs,
            attn_in: inputs,
        })
    }

    /// Bits per byte on `text`, the training script's way: non-overlapping windows of `context` inputs,
    /// window `s` predicting `text[s+1 .. s+context+1]`; every byte after the first is predicted once.
    /// Returns (bits per byte, bytes predicted).
    pub fn bits_per_byte(&self, text: &[u8], backend: &dyn Backend) -> Result<(f64, usize), String> {
        let ctx = self.config.context;
        let (mut nll, mut n) = (0f64, 0usize);
        let mut s = 0;
        while s + 1 < text.len() {
            let y = &text[s + 1..(s + ctx + 1).min(text.len())];
            let x = &text[s..s + y.len()];
            let out = self.prefill(x, backend, false)?;
            for (i, &target) in y.iter().enumerate() {
                let row: Vec<f64> = out.logits.row(i).iter().map(|&v| f64::from(v)).collect();
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                nll += lse - row[target as usize];
            }
            n += y.len();
            s += ctx;
        }
        Ok((nll / n.max(1) as f64 / std::f64::consts::LN_2, n))
    }
}

impl Model {
    /// Bits per byte of a text of `n_bytes` UTF-8 bytes whose ids are `ids` (a model with a real
    /// tokenizer): the stream `[context] + ids` in windows of at most `window` tokens, consecutive windows
    /// sharing one token and each starting with a fresh context, every stream token after the first
    /// scored once; Σ −log₂ p / `n_bytes`. `scripts/smollm2/reference.py --bpb` computes it the same way.
    /// Returns (bits per byte, tokens scored).
    pub fn bits_per_byte_ids(
        &self,
        ids: &[u32],
        n_bytes: usize,
        context: Option<u32>,
        window: usize,
        backend: &dyn Backend,
    ) -> Result<(f64, usize), String> {
        if window < 2 {
            return Err("the window must hold at least two tokens".into());
        }
        let stream: Vec<u32> = context.into_iter().chain(ids.iter().copied()).collect();
        let (mut nll, mut n) = (0f64, 0usize);
        let mut s = 0;
        while s + 1 < stream.len() {
            let w = &stream[s..(s + window).min(stream.len())];
            let out = self.prefill(w, backend, false)?;
            for (i, &target) in w[1..].iter().enumerate() {
                let row: Vec<f64> = out.logits.row(i).iter().map(|&v| f64::from(v)).collect();
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                nll += lse - row[target as usize];
            }
            n += w.len() - 1;
            s += window - 1;
        }
        Ok((nll / std::f64::consts::LN_2 / n_bytes.max(1) as f64, n))
    }
}

/// RoPE tables `[positions, hd/2]` (the model's context or [`super::MAX_POSITIONS`], the larger): angles `pos · θ^(−2i/hd)` in f64, cos and sin rounded to f32 (as the
/// training script computes them).
pub(super) fn rope_tables(context: usize, hd: usize, base: f64) -> (Array2<f32>, Array2<f32>) {
    let half = hd / 2;
    let mut cos = Array2::<f32>::zeros((context, half));
    let mut sin = Array2::<f32>::zeros((context, half));
    for p in 0..context {
        for i in 0..half {
            let inv = 1.0 / base.powf((2 * i) as f64 / hd as f64);
            let a = p as f64 * inv;
            cos[[p, i]] = a.cos() as f32;
            sin[[p, i]] = a.sin() as f32;
        }
    }
    (cos, sin)
}

/// Rows times a matrix, `x · w`, on every core, each output summed exactly as [`row_times`] sums it
/// (the same products added in the same order, so every row equals `row_times` of that row, bit for
/// bit, whatever the machine and the thread count). Each thread owns a band of output columns and runs
/// all the rows through it, so a band of `w` is read from memory once and then from the cache.
pub fn rows_times(x: ArrayView2<f32>, w: ArrayView2<f32>) -> Array2<f32> {
    let (t, inp) = x.dim();
    let (inp2, out) = w.dim();
    assert_eq!(inp, inp2, "x has {inp} columns, w {inp2} rows");
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let mut y = Array2::<f32>::zeros((t, out));
    if let Some(ws) = w.as_slice() {
        const BAND: usize = 64;
        let bands: Vec<(usize, Vec<f32>)> = (0..out.div_ceil(BAND))
            .into_par_iter()
            .map(|bi| {
                let (o0, bw) = (bi * BAND, BAND.min(out - bi * BAND));
                let mut acc = vec![0f32; t * bw];
                for (r, a) in acc.chunks_exact_mut(bw).enumerate() {
                    for (k, &xk) in xs[r * inp..(r + 1) * inp].iter().enumerate() {
                        let row = &ws[k * out + o0..k * out + o0 + bw];
                        a.iter_mut().zip(row).for_each(|(a, &v)| *a += xk * v);
                    }
                }
                (o0, acc)
            })
            .collect();
        for (o0, acc) in bands {
            let bw = acc.len() / t.max(1);
            for (r, a) in acc.chunks_exact(bw.max(1)).enumerate() {
                y.row_mut(r).as_slice_mut().expect("row-major")[o0..o0 + bw].copy_from_slice(a);
            }
        }
    } else if let Some(wt) = w.t().as_slice() {
        // One output's weights (a row of the `[out, in]` matrix) against every row of `x`: the weights
        // are read from memory once, the rows from the cache.
        const CHUNK: usize = 256;
        let chunks: Vec<(usize, Vec<f32>)> = (0..out.div_ceil(CHUNK))
            .into_par_iter()
            .map(|ci| {
                let (o0, n) = (ci * CHUNK, CHUNK.min(out - ci * CHUNK));
                let mut acc = vec![0f32; t * n];
                for j in 0..n {
                    let row = &wt[(o0 + j) * inp..(o0 + j + 1) * inp];
                    for r in 0..t {
                        acc[r * n + j] = dot8(row, &xs[r * inp..(r + 1) * inp]);
                    }
                }
                (o0, acc)
            })
            .collect();
        for (o0, acc) in chunks {
            let n = acc.len() / t.max(1);
            for (r, a) in acc.chunks_exact(n.max(1)).enumerate() {
                y.row_mut(r).as_slice_mut().expect("row-major")[o0..o0 + n].copy_from_slice(a);
            }
        }
    } else {
        for (r, mut yr) in y.rows_mut().into_iter().enumerate() {
            let v = row_times(&xs[r * inp..(r + 1) * inp], w);
            yr.as_slice_mut().expect("row-major").copy_from_slice(&v);
        }
    }
    y
}

/// `row · x` with eight partial sums (so the loop vectorises), then the tail: the one dot product of
/// [`row_times`] and [`rows_times`] for weights stored `[out, in]`.
fn dot8(row: &[f32], x: &[f32]) -> f32 {
    let mut part = [0f32; 8];
    let tail = row.len() / 8 * 8;
    for (c, xs) in row.chunks_exact(8).zip(x.chunks_exact(8)) {
        for l in 0..8 {
            part[l] += c[l] * xs[l];
        }
    }
    let mut s: f32 = part.iter().sum();
    for k in tail..row.len() {
        s += row[k] * x[k];
    }
    s
}

/// One row times a matrix, `x · w`, on every core and reading each weight once: a decode step is bound by
/// reading the weights, and a GEMM would first pack all of `w` for a single row. `w` is `[in, out]`
/// stored row-major (each thread accumulates a band of output columns over the rows of `w`) or the
/// transpose of a row-major `[out, in]` (the tied output projection: one dot product per output).
pub fn row_times(x: &[f32], w: ArrayView2<f32>) -> Vec<f32> {
    let (inp, out) = w.dim();
    assert_eq!(x.len(), inp, "x has {} values, w {inp} rows", x.len());
    let mut y = vec![0f32; out];
    if let Some(ws) = w.as_slice() {
        const BAND: usize = 64;
        y.par_chunks_mut(BAND).enumerate().for_each(|(bi, acc)| {
            let o0 = bi * BAND;
            for (k, &xk) in x.iter().enumerate() {
                let row = &ws[k * out + o0..k * out + o0 + acc.len()];
                acc.iter_mut().zip(row).for_each(|(a, &v)| *a += xk * v);
            }
        });
    } else if let Some(wt) = w.t().as_slice() {
        y.par_chunks_mut(256).enumerate().for_each(|(bi, ys)| {
            for (j, yo) in ys.iter_mut().enumerate() {
                let o = bi * 256 + j;
                *yo = dot8(&wt[o * inp..(o + 1) * inp], x);
            }
        });
    } else {
        let xm = ndarray::ArrayView2::from_shape((1, inp), x).expect("one row");
        y = matmul(xm, w).into_raw_vec_and_offset().0;
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prompt's rows through `rows_times` equal each row through `row_times`, bit for bit, for `w`
    /// row-major and for `w` the transpose of a row-major matrix (the tied output projection), at widths
    /// that leave a partial band.
    #[test]
    fn rows_times_equals_row_times_bit_for_bit() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for (t, inp, out) in [(5, 37, 150), (1, 8, 64), (3, 64, 7)] {
            let x = Array2::from_shape_fn((t, inp), |_| next());
            let w = Array2::from_shape_fn((inp, out), |_| next());
            let wt = Array2::from_shape_fn((out, inp), |_| next());
            for w in [w.view(), wt.t()] {
                let y = rows_times(x.view(), w);
                for r in 0..t {
                    let want = row_times(&x.row(r).to_vec(), w);
                    let got: Vec<u32> = y.row(r).iter().map(|v| v.to_bits()).collect();
                    assert_eq!(
                        got,
                        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "row {r} of {t}×{inp}·{inp}×{out}"
                    );
                }
            }
        }
    }
}
