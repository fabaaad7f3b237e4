//! A small multi-head latent attention (MLA) layer on the model of DeepSeek-V2/V3, with seeded random
//! weights: what lesson 11's `mla_decode` kernel is checked against.
//!
//! Per token x (d_model values) the cache keeps one row for all heads: the latent `c_KV = x · W_DKV`
//! (d_c), RMS-normalised before it is cached (DeepSeek-V3's `kv_norm`), and the decoupled RoPE key
//! `k_R = RoPE(x · W_KR)` (d_r), shared by every head. Head h's query is `[q_nope ; q_R]` (d_nope + d_r),
//! its key `[c_KV · W_UK_h ; k_R]` and its value `c_KV · W_UV_h` (d_v). The **expanded** path
//! materialises those keys and values; the **absorbed** path (DeepSeek's inference) folds W_UK into the
//! query (`q̃_h = W_UK_h q_nope`, d_c values) and W_UV after the latent-space output, so the kernel reads
//! only the cached rows. Both scale scores by `1/√(d_nope + d_r)`, the query-key head size.

use super::Rng;

/// The layer's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlaDims {
    /// Model width.
    pub d_model: usize,
    /// Query heads.
    pub heads: usize,
    /// Latent width d_c (DeepSeek-V3's `kv_lora_rank`).
    pub d_c: usize,
    /// RoPE key width d_r (`qk_rope_head_dim`).
    pub d_r: usize,
    /// Per-head no-RoPE query/key width (`qk_nope_head_dim`).
    pub d_nope: usize,
    /// Per-head value width (`v_head_dim`).
    pub d_v: usize,
}

impl MlaDims {
    /// Values one cached row holds: d_c + d_r.
    pub fn row(&self) -> usize {
        self.d_c + self.d_r
    }
    /// The softmax scale: 1/√(d_nope + d_r).
    pub fn scale(&self) -> f32 {
        1.0 / ((self.d_nope + self.d_r) as f32).sqrt()
    }
}

/// The weights, row-major `[in, out]` each; per-head matrices stacked on a leading head axis.
#[derive(Debug, Clone)]
pub struct MlaLayer {
    /// Sizes.
    pub dims: MlaDims,
    w_dkv: Vec<f32>,
    w_kr: Vec<f32>,
    w_q_nope: Vec<f32>,
    w_q_rope: Vec<f32>,
    w_uk: Vec<f32>,
    w_uv: Vec<f32>,
}

/// `x [n] · w [n, m]`.
fn matvec(x: &[f32], w: &[f32], m: usize) -> Vec<f32> {
    let mut out = vec![0f32; m];
    if m == 0 {
        return out;
    }
    for (xi, row) in x.iter().zip(w.chunks_exact(m)) {
        for (o, &wv) in out.iter_mut().zip(row) {
            *o += xi * wv;
        }
    }
    out
}

/// Rotary embedding of adjacent pairs (DeepSeek's complex view of the last axis), base 10000.
fn rope(x: &mut [f32], pos: usize) {
    let n = x.len();
    for i in 0..n / 2 {
        let theta = (pos as f64) * 10000f64.powf(-2.0 * i as f64 / n as f64);
        let (s, c) = theta.sin_cos();
        let (a, b) = (f64::from(x[2 * i]), f64::from(x[2 * i + 1]));
        x[2 * i] = (a * c - b * s) as f32;
        x[2 * i + 1] = (a * s + b * c) as f32;
    }
}

impl MlaLayer {
    /// Seeded weights, each entry normal with variance 1/fan_in.
    pub fn random(dims: MlaDims, seed: u64) -> Self {
        let mut rng = Rng::stream(seed, 41);
        let d = dims;
        let mut w = |rows: usize, cols: usize, fan_in: usize| rng.normal_vec(rows * cols, 1.0 / (fan_in as f64).sqrt());
        Self {
            dims,
            w_dkv: w(d.d_model, d.d_c, d.d_model),
            w_kr: w(d.d_model, d.d_r, d.d_model),
            w_q_nope: w(d.heads * d.d_model, d.d_nope, d.d_model),
            w_q_rope: w(d.heads * d.d_model, d.d_r, d.d_model),
            w_uk: w(d.heads * d.d_c, d.d_nope, d.d_c),
            w_uv: w(d.heads * d.d_c, d.d_v, d.d_c),
        }
    }

    /// The cached row of token `x` at position `pos`: `[RMSNorm(x · W_DKV) ; RoPE(x · W_KR)]`.
    pub fn cache_row(&self, x: &[f32], pos: usize) -> Vec<f32> {
        let d = self.dims;
        let mut c = matvec(x, &self.w_dkv, d.d_c);
        let rms = (c.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / d.d_c as f64 + 1e-6).sqrt();
        c.iter_mut().for_each(|v| *v = (f64::from(*v) / rms) as f32);
        let mut kr = matvec(x, &self.w_kr, d.d_r);
        rope(&mut kr, pos);
        c.extend(kr);
        c
    }

    /// The queries of `x` at `pos`: `q_nope [H, d_nope]` and `q_R [H, d_r]` (rotated).
    pub fn queries(&self, x: &[f32], pos: usize) -> (Vec<f32>, Vec<f32>) {
        let d = self.dims;
        let mut qn = Vec::with_capacity(d.heads * d.d_nope);
        let mut qr = Vec::with_capacity(d.heads * d.d_r);
        for h in 0..d.heads {
            qn.extend(matvec(
                x,
                &self.w_q_nope[h * d.d_model * d.d_nope..][..d.d_model * d.d_nope],
                d.d_nope,
            ));
            let mut r = matvec(x, &self.w_q_rope[h * d.d_model * d.d_r..][..d.d_model * d.d_r], d.d_r);
            rope(&mut r, pos);
            qr.extend(r);
        }
        (qn, qr)
    }

    /// The absorbed query `q̃_h = W_UK_h · q_nope_h` (`[H, d_c]`), computed on the host.
    pub fn absorb(&self, q_nope: &[f32]) -> Vec<f32> {
        let d = self.dims;
        let mut out = Vec::with_capacity(d.heads * d.d_c);
        for h in 0..d.heads {
            let w = &self.w_uk[h * d.d_c * d.d_nope..][..d.d_c * d.d_nope];
            let q = &q_nope[h * d.d_nope..][..d.d_nope];
            out.extend(
                w.chunks_exact(d.d_nope)
                    .map(|row| row.iter().zip(q).map(|(a, b)| a * b).sum::<f32>()),
            );
        }
        out
    }

    /// W_UV after the kernel: `o_h = õ_h · W_UV_h` (`[H, d_v]` from `[H, d_c]`).
    pub fn up_v(&self, o_latent: &[f32]) -> Vec<f32> {
        let d = self.dims;
        (0..d.heads)
            .flat_map(|h| {
                matvec(
                    &o_latent[h * d.d_c..][..d.d_c],
                    &self.w_uv[h * d.d_c * d.d_v..][..d.d_c * d.d_v],
                    d.d_v,
                )
            })
            .collect()
    }

    /// The naive expanded attention in f64 over `t` cached rows (`[t, d_c + d_r]`): per head, every key
    /// `[c · W_UK_h ; k_R]` and value `c · W_UV_h` materialised, then ordinary attention. `[H, d_v]`.
    pub fn expanded_f64(&self, q_nope: &[f32], q_rope: &[f32], rows: &[f32], t: usize) -> Vec<f64> {
        let d = self.dims;
        let scale = 1.0 / ((d.d_nope + d.d_r) as f64).sqrt();
        let mut out = Vec::with_capacity(d.heads * d.d_v);
        for h in 0..d.heads {
            let wk = &self.w_uk[h * d.d_c * d.d_nope..][..d.d_c * d.d_nope];
            let wv = &self.w_uv[h * d.d_c * d.d_v..][..d.d_c * d.d_v];
            let (mut keys, mut vals) = (Vec::with_capacity(t), Vec::with_capacity(t));
            for row in rows.chunks_exact(d.row()).take(t) {
                let (c, kr) = row.split_at(d.d_c);
                let mut k = vec![0f64; d.d_nope + d.d_r];
                let mut v = vec![0f64; d.d_v];
                for (ci, (wkr, wvr)) in c.iter().zip(wk.chunks_exact(d.d_nope).zip(wv.chunks_exact(d.d_v))) {
                    for (kk, &w) in k.iter_mut().zip(wkr) {
                        *kk += f64::from(*ci) * f64::from(w);
                    }
                    for (vv, &w) in v.iter_mut().zip(wvr) {
                        *vv += f64::from(*ci) * f64::from(w);
                    }
                }
                for (kk, &x) in k[d.d_nope..].iter_mut().zip(kr) {
                    *kk = f64::from(x);
                }
                keys.push(k);
                vals.push(v);
            }
            let q: Vec<f64> = q_nope[h * d.d_nope..][..d.d_nope]
                .iter()
                .chain(&q_rope[h * d.d_r..][..d.d_r])
                .map(|&x| f64::from(x))
                .collect();
            let mut s: Vec<f64> = keys
                .iter()
                .map(|k| k.iter().zip(&q).map(|(a, b)| a * b).sum::<f64>() * scale)
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s
                .iter_mut()
                .map(|x| {
                    *x = (*x - m).exp();
                    *x
                })
                .sum();
            let mut o = vec![0f64; d.d_v];
            for (p, v) in s.iter().zip(&vals) {
                for (oo, vv) in o.iter_mut().zip(v) {
                    *oo += p / z * vv;
                }
            }
            out.extend(o);
        }
        out
    }
}
