//! Lesson 10's measurements: the trained model decoding byte by byte from an empty KV cache held in a
//! quantised format, every attention read from that cache.
//!
//! - **8-bit pools** (`f16` as the baseline, `int8-token`, `fp8-e4m3`, `fp8-e5m2` and their per-head
//!   variants): a [`KvEngine`] of the dtype, so every K/V row goes through the quantising append and
//!   every attention through the dequantising decode (`quant_append`, `quant_decode`) on the chosen
//!   backend. FP8 scales are calibrated from the window's f32 prefill (its absolute maximum of K, or V,
//!   over the format's largest value: fixed before the first byte), or left at vLLM's 1.0.
//! - **Formats quantised in groups** (`int8-channel`, `kivi2`, `kivi4`): a [`KvEngine`] of the cache
//!   quantised in groups ([`KvEngine::grouped`]): every row goes into the request's f16 ring through
//!   `group_append`, whose `group_quant` kernel quantises the groups the rule completes (K per channel in
//!   groups of G tokens once R have gathered; KIVI's V per token as it leaves the last R; INT8 per
//!   channel a block of B tokens when it fills), and every attention runs `group_decode` on the chosen
//!   backend. This file drives no kernel itself: the engine does, for both kinds.
//!
//! Every run also measures the attention output's error against attention over the unquantised f32
//! K/V, per layer.

use ndarray::Array3;

use crate::cache::dtype::quant::Quant;
use crate::cache::formats::CHANNEL_BLOCK;
use crate::cache::group::{GroupCache, GroupShape};
use crate::cache::{CacheFormat, PagedShape, RequestId};
use crate::compute::Backend;
use crate::kv::KvEngine;

use crate::model::{Model, TokenId};

/// Block size of the runs' pools (and of INT8 per channel's blocks: [`CHANNEL_BLOCK`]).
pub const BLOCK: usize = CHANNEL_BLOCK;

/// One window decoded through one format.
#[derive(Debug, Clone)]
pub struct QuantRun {
    /// The format's name.
    pub format: String,
    /// Natural-log loss of each next byte (`text.len() − 1`).
    pub nll: Vec<f32>,
    /// Per layer, the rows written: `[T, KVH, hd]` f32, K and V.
    pub k: Vec<Vec<f32>>,
    /// V rows, as `k`.
    pub v: Vec<Vec<f32>>,
    /// Per layer, what the cache held for each row at the end (read back from the pool, dequantised).
    pub k_deq: Vec<Vec<f32>>,
    /// V, as `k_deq`.
    pub v_deq: Vec<Vec<f32>>,
    /// Per layer, each value's code as stored (`[T, KVH, hd]`; INT8 as two's complement; empty for f16).
    pub k_codes: Vec<Vec<u8>>,
    /// V, as `k_codes`.
    pub v_codes: Vec<Vec<u8>>,
    /// Per layer, the scale each value was quantised with (`[T, KVH, hd]`; 0 while it is still f16).
    pub k_scales: Vec<Vec<f32>>,
    /// V, as `k_scales`.
    pub v_scales: Vec<Vec<f32>>,
    /// Per layer, each value's zero point (KIVI; 0 elsewhere), as `k_scales`.
    pub k_zeros: Vec<Vec<f32>>,
    /// V, as `k_zeros`.
    pub v_zeros: Vec<Vec<f32>>,
    /// Per layer, the last step's attention output through the cache (`[H, hd]`).
    pub last_out: Vec<Vec<f32>>,
    /// Per layer: the attention output's largest |error| over every step and head, against attention
    /// over the unquantised f32 rows.
    pub out_max_err: Vec<f64>,
    /// Per layer: the output error's RMS over the output's RMS.
    pub out_rel_rms: Vec<f64>,
    /// Per layer, the FP8 scales the pools held (K's then V's), empty for other formats.
    pub scales: Vec<Vec<f32>>,
    /// Whether attention ran through a kernel of the backend (false: the host simulation).
    pub kernel: bool,
    /// The kernel's last step, every layer, against the f64 reference on the same codes (pool formats).
    pub check: Option<crate::compute::CheckReport>,
    /// Seconds the run took.
    pub seconds: f64,
}

impl QuantRun {
    /// Bits per byte over the predictions.
    pub fn bits_per_byte(&self) -> f64 {
        self.nll.iter().map(|&x| f64::from(x)).sum::<f64>() / (std::f64::consts::LN_2 * self.nll.len().max(1) as f64)
    }
}

const REQ: RequestId = 0;

/// Exact attention (f64) of `q` (`[H, hd]`, not scaled) over `t` rows of `k`, `v` (`[T, KVH, hd]`):
/// `math::decode_attention_f64` on the rows laid out `[KVH, T, hd]`.
fn attend_f64(q: &[f32], k: &[f32], v: &[f32], t: usize, h: usize, kvh: usize, hd: usize) -> Vec<f64> {
    let heads =
        |x: &[f32]| ndarray::Array3::from_shape_fn((kvh, t, hd), |(kv, i, d)| f64::from(x[(i * kvh + kv) * hd + d]));
    let q = ndarray::Array2::from_shape_fn((h, hd), |(head, d)| f64::from(q[head * hd + d]));
    crate::math::decode_attention_f64(&q, &heads(k), &heads(v))
        .into_iter()
        .collect()
}

impl Model {
    /// Decode `text` byte by byte from an empty cache held in `fmt`, on `backend` (8-bit pools: the
    /// quantising append and dequantising decode; f16: the paged ones). The loss of each next byte, the
    /// rows and what the cache held for them, and the attention output's error.
    pub fn quant_run<T: TokenId>(
        &self,
        text: &[T],
        fmt: CacheFormat,
        backend: &dyn Backend,
    ) -> Result<QuantRun, String> {
        let c = self.config;
        let n = text.len();
        if n < 2 || n > c.context {
            return Err(format!("a run takes 2 to {} bytes, not {n}", c.context));
        }
        if let CacheFormat::Kivi { bits, group, residual } = fmt
            && (!(bits == 2 || bits == 4) || group == 0 || residual == 0 || !residual.is_multiple_of(group))
        {
            return Err(format!(
                "KIVI takes 2 or 4 bits, a group G ≥ 1 and a residual R that is a multiple of G (got {bits} bits, G {group}, R {residual})"
            ));
        }
        let (l_n, kvh, h, hd) = (c.n_layers, c.n_kv_heads, c.n_heads, c.head_dim);
        let row = kvh * hd;
        let t0 = web_time::Instant::now();
        let mut run = QuantRun {
            format: fmt.name(),
            nll: Vec::with_capacity(n - 1),
            k: vec![Vec::with_capacity(n * row); l_n],
            v: vec![Vec::with_capacity(n * row); l_n],
            k_deq: Vec::new(),
            v_deq: Vec::new(),
            k_codes: Vec::new(),
            v_codes: Vec::new(),
            k_scales: Vec::new(),
            v_scales: Vec::new(),
            k_zeros: Vec::new(),
            v_zeros: Vec::new(),
            last_out: vec![Vec::new(); l_n],
            out_max_err: vec![0.0; l_n],
            out_rel_rms: vec![0.0; l_n],
            scales: vec![Vec::new(); l_n],
            kernel: true,
            check: None,
            seconds: 0.0,
        };
        let (mut got_last, mut want_last) = (Vec::new(), Vec::new());
        let (mut err2, mut ref2) = (vec![0f64; l_n], vec![0f64; l_n]);
        // Both kinds of cache are a `KvEngine`: a pool of the dtype, or the cache quantised in groups
        // (one request, which holds ring 0).
        let mut engine = match fmt {
            CacheFormat::Pool { dtype, calibrated } => {
                let shape = PagedShape {
                    num_blocks: n.div_ceil(BLOCK),
                    block_size: BLOCK,
                    kv_heads: kvh,
                    head_dim: hd,
                    dtype,
                };
                let mut e = KvEngine::new(shape, l_n);
                if let Some(Quant::Fp8(f8)) = dtype.format().quant {
                    let pre = if calibrated {
                        Some(self.prefill(text, backend, false)?)
                    } else {
                        None
                    };
                    let per_head = dtype.format().scales == crate::cache::ScaleLayout::PerHead;
                    for l in 0..l_n {
                        // One scale per tensor, or per KV head: absmax / max over the prompt (the window).
                        let scale_of = |a: &Array3<f32>, head: Option<usize>| -> f32 {
                            let amax = a
                                .indexed_iter()
                                .filter(|((hh, _, _), _)| head.is_none_or(|x| x == *hh))
                                .fold(0f32, |m, (_, v)| m.max(v.abs()));
                            if amax > 0.0 { amax / f8.max() } else { 1.0 }
                        };
                        let (ks, vs): (Vec<f32>, Vec<f32>) = match &pre {
                            Some(p) => {
                                let (k, v) = &p.kv[l];
                                if per_head {
                                    (0..kvh).map(|x| (scale_of(k, Some(x)), scale_of(v, Some(x)))).unzip()
                                } else {
                                    (vec![scale_of(k, None)], vec![scale_of(v, None)])
                                }
                            }
                            None => {
                                let m = if per_head { kvh } else { 1 };
                                (vec![1.0; m], vec![1.0; m])
                            }
                        };
                        e.set_fp8_scales(l, &ks, &vs).map_err(|e| e.to_string())?;
                        run.scales[l] = ks.iter().chain(&vs).copied().collect();
                    }
                }
                e
            }
            _ => {
                let gf = fmt.group().ok_or("a group format")?;
                KvEngine::grouped(gf, n.div_ceil(gf.group), kvh, hd, 1, l_n).map_err(|e| e.to_string())?
            }
        };
        for t in 0..n {
            let slot = engine.reserve(REQ, 1).map_err(|e| format!("step {t}: {e}"))?[0];
            let mut x = self.embed_tokens(&text[t..=t]);
            for (l, b) in self.blocks.iter().enumerate() {
                let (q, k, v) = self.qkv(b, &x, t);
                let (kf, vf): (Vec<f32>, Vec<f32>) = (k.iter().copied().collect(), v.iter().copied().collect());
                run.k[l].extend_from_slice(&kf);
                run.v[l].extend_from_slice(&vf);
                let qs = q.as_slice().unwrap_or_default();
                let e = &mut engine;
                let got: Vec<f32> = if fmt.group().is_none() {
                    e.write(backend, l, &[slot], &kf, &vf).map_err(|e| e.to_string())?;
                    let tables = e.tables(&[REQ]);
                    let got = e
                        .decode(backend, l, &tables, qs, h)
                        .map_err(|e| format!("step {t}, layer {l}: {e}"))?;
                    if t + 1 == n {
                        let inp = e.input(l, &tables, qs, h).map_err(|e| e.to_string())?;
                        want_last.extend(crate::compute::reference::paged_decode(&inp));
                        got_last.extend_from_slice(&got);
                    }
                    got
                } else {
                    e.write_tokens(backend, l, &[(REQ, t)], &kf, &vf)
                        .map_err(|e| format!("step {t}, layer {l}: {e}"))?;
                    let tables = e.group_tables(&[REQ]).map_err(|e| e.to_string())?;
                    let got = e
                        .decode_groups(backend, l, &tables, qs, h)
                        .map_err(|e| format!("step {t}, layer {l}: {e}"))?;
                    if t + 1 == n {
                        let inp = e.group_input(l, &tables, qs, h).map_err(|e| e.to_string())?;
                        want_last.extend(crate::compute::ops::group_decode::reference(&inp));
                        got_last.extend_from_slice(&got);
                    }
                    got
                };
                let exact = attend_f64(qs, &run.k[l], &run.v[l], t + 1, h, kvh, hd);
                for (&g, &w) in got.iter().zip(&exact) {
                    let d = (f64::from(g) - w).abs();
                    run.out_max_err[l] = run.out_max_err[l].max(d);
                    err2[l] += d * d;
                    ref2[l] += w * w;
                }
                if t + 1 == n {
                    run.last_out[l] = got.clone();
                }
                let o = Array3::from_shape_vec((h, 1, hd), got).map_err(|e| e.to_string())?;
                x = self.attn_residual(b, &x, &o);
                x = self.mlp(b, &x);
            }
            if t + 1 < n {
                let logits = self.logits(&x).row(0).to_vec();
                let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let z: f64 = logits.iter().map(|&v| f64::from(v - m).exp()).sum();
                run.nll
                    .push((f64::from(m) + z.ln() - f64::from(logits[text[t + 1].index()])) as f32);
            }
        }
        for l in 0..l_n {
            run.out_rel_rms[l] = (err2[l] / ref2[l].max(f64::MIN_POSITIVE)).sqrt();
        }
        if !got_last.is_empty() {
            run.check = Some(crate::compute::check(
                &format!("{} decode, last step, every layer", run.format),
                &[l_n, h, hd],
                &got_last,
                &want_last,
                crate::compute::Tolerance::F32,
            ));
        }
        // What the cache holds for each row, read back.
        let contents: Vec<Contents> = if fmt.group().is_none() {
            let rows: Vec<(RequestId, usize)> = (0..n).map(|t| (REQ, t)).collect();
            (0..l_n)
                .map(|l| pool_contents(&engine, l, &rows))
                .collect::<Result<_, _>>()?
        } else {
            let shape = engine.group_shape().map_err(|e| e.to_string())?;
            let table: Vec<i32> = engine
                .cache()
                .table(REQ)
                .unwrap_or_default()
                .iter()
                .map(|&b| b as i32)
                .collect();
            let req = GroupReq {
                table: &table,
                ring: engine.ring_of(REQ).ok_or("the request holds no ring")?,
                len: n,
                quantised: shape.fmt.quantised(n),
            };
            (0..l_n)
                .map(|l| {
                    Ok(group_contents(
                        &shape,
                        engine.group_cache(l).map_err(|e| e.to_string())?,
                        &[req],
                    ))
                })
                .collect::<Result<_, String>>()?
        };
        for c in contents {
            let Contents {
                deq: [kd, vd],
                codes: [kc, vc],
                scales: [ks, vs],
                zeros: [kz, vz],
            } = c;
            run.k_deq.push(kd);
            run.v_deq.push(vd);
            run.k_codes.push(kc);
            run.v_codes.push(vc);
            run.k_scales.push(ks);
            run.v_scales.push(vs);
            run.k_zeros.push(kz);
            run.v_zeros.push(vz);
        }
        run.seconds = t0.elapsed().as_secs_f64();
        Ok(run)
    }
}

/// What a cache holds for a run of rows, each array `[rows, KVH, hd]`, K's then V's: the values read back
/// through the format's decoder, and each value's code (one per element, unpacked; INT8 as two's
/// complement), scale and zero point (0 while a value is still f16). Empty codes and scales: an f16
/// pool; empty zeros: a format without them.
#[derive(Debug, Clone, Default)]
pub struct Contents {
    /// Dequantised values.
    pub deq: [Vec<f32>; 2],
    /// Codes.
    pub codes: [Vec<u8>; 2],
    /// Scales.
    pub scales: [Vec<f32>; 2],
    /// Zero points (group formats).
    pub zeros: [Vec<f32>; 2],
}

/// The rows `rows` ((request, position), in order) of layer `layer` of a pool engine, read back.
pub fn pool_contents(e: &KvEngine, layer: usize, rows: &[(RequestId, usize)]) -> Result<Contents, String> {
    let (kp, vp) = e.pools(layer).map_err(|e| e.to_string())?;
    let s = e.shape();
    let (kvh, hd) = (s.kv_heads, s.head_dim);
    let n = rows.len() * kvh * hd;
    let quant = s.dtype.format().quant.is_some();
    let q = if quant { n } else { 0 };
    let mut c = Contents {
        deq: [vec![0.0; n], vec![0.0; n]],
        codes: [vec![0; q], vec![0; q]],
        scales: [vec![0.0; q], vec![0.0; q]],
        zeros: Default::default(),
    };
    for (i, &(req, t)) in rows.iter().enumerate() {
        let slot = e.cache().slot(req, t).ok_or("a row lost its slot")?;
        let (blk, off) = (slot / s.block_size, slot % s.block_size);
        for hh in 0..kvh {
            let at = s.index(blk, hh, off, 0);
            let sc = s.row_scales(blk, hh, off);
            let dst = (i * kvh + hh) * hd..(i * kvh + hh + 1) * hd;
            for (w, p) in [kp, vp].into_iter().enumerate() {
                p.read(at, hd, &p.scales[sc.clone()], &mut c.deq[w][dst.clone()]);
                if quant {
                    c.codes[w][dst.clone()].copy_from_slice(&p.bytes[at..at + hd]);
                    c.scales[w][dst.clone()].fill(p.scales[sc.start]);
                }
            }
        }
    }
    Ok(c)
}

/// One request of a group-quantised cache: its block table, ring, length and quantised counts.
#[derive(Debug, Clone, Copy)]
pub struct GroupReq<'a> {
    /// Its block table.
    pub table: &'a [i32],
    /// Its ring.
    pub ring: usize,
    /// Tokens.
    pub len: usize,
    /// Tokens whose K, and whose V, are quantised.
    pub quantised: (usize, usize),
}

/// Every row of `reqs` (in order) of a group-quantised cache, read back through [`GroupCache::at`].
pub fn group_contents(shape: &GroupShape, c: &GroupCache, reqs: &[GroupReq]) -> Contents {
    let (kvh, hd) = (shape.kv_heads, shape.head_dim);
    let n = reqs.iter().map(|r| r.len).sum::<usize>() * kvh * hd;
    let mut out = Contents {
        deq: [vec![0.0; n], vec![0.0; n]],
        codes: [vec![0; n], vec![0; n]],
        scales: [vec![0.0; n], vec![0.0; n]],
        zeros: [vec![0.0; n], vec![0.0; n]],
    };
    let mut base = 0;
    for r in reqs {
        for (w, q) in [(0, r.quantised.0), (1, r.quantised.1)] {
            for t in 0..r.len {
                for hh in 0..kvh {
                    for d in 0..hd {
                        let i = base + (t * kvh + hh) * hd + d;
                        let (x, code, sc, z) = c.at(shape, w == 1, r.table, r.ring, q, t, hh, d);
                        out.deq[w][i] = x;
                        out.codes[w][i] = code;
                        out.scales[w][i] = sc;
                        out.zeros[w][i] = z;
                    }
                }
            }
        }
        base += r.len * kvh * hd;
    }
    out
}

/// One format's row of the lesson's table.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QuantCell {
    /// The format's name.
    pub format: String,
    /// Held-out bits per byte, every window decoded byte by byte from an empty cache of the format.
    pub bits_per_byte: f64,
    /// The attention output's error RMS over its RMS, averaged over windows and layers.
    pub out_rel_rms: f64,
    /// Whether attention ran through a kernel (false: the host simulation).
    pub kernel: bool,
    /// What the cache held for K against the rows written: ‖K − dequant(K)‖ / ‖K‖ over every window,
    /// layer and value (absent in tables stored before it was recorded).
    #[serde(default)]
    pub k_rel_err: Option<f64>,
    /// V, as `k_rel_err`.
    #[serde(default)]
    pub v_rel_err: Option<f64>,
}

/// Per layer, KV head and channel, the largest |value| of the keys and values the model wrote over
/// every window (the rows the cache stores: K after RoPE).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChannelMax {
    /// Layers.
    pub layers: usize,
    /// KV heads per layer.
    pub kv_heads: usize,
    /// Channels per head.
    pub head_dim: usize,
    /// `[layers × kv_heads, head_dim]`, row-major.
    pub k: Vec<f32>,
    /// V, as `k`.
    pub v: Vec<f32>,
}

/// Sums of (a − b)² and a² over every value.
fn err_sums(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f64) {
    let (mut e, mut r) = (0f64, 0f64);
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        e += f64::from(x - y).powi(2);
        r += f64::from(*x).powi(2);
    }
    (e, r)
}

/// ‖a − b‖ / ‖a‖ over every value.
pub fn rel_err(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let (e, r) = err_sums(a, b);
    (e / r.max(f64::MIN_POSITIVE)).sqrt()
}

/// Per (layer, KV head), per channel: the largest |x| over the tokens of `rows` (`[T, KVH, hd]` per
/// layer), folded into `out` (`[layers × KVH, hd]`).
pub fn fold_channel_max(out: &mut [f32], rows: &[Vec<f32>], kvh: usize, hd: usize) {
    for (l, r) in rows.iter().enumerate() {
        for (i, &x) in r.iter().enumerate() {
            let at = l * kvh * hd + i % (kvh * hd);
            out[at] = out[at].max(x.abs());
        }
    }
}

/// Per (layer, KV head), per channel: the largest |x| over the tokens of `rows` (`[T, KVH, hd]` per layer).
pub fn channel_max(rows: &[Vec<f32>], kvh: usize, hd: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows.len() * kvh * hd];
    fold_channel_max(&mut out, rows, kvh, hd);
    out
}

/// The mean over (layer, KV head) rows of max channel / median channel.
pub fn outlier_ratio(maxima: &[f32], hd: usize) -> f64 {
    let rows: Vec<f64> = maxima
        .chunks(hd)
        .map(|c| {
            let mut s = c.to_vec();
            s.sort_by(f32::total_cmp);
            let med = if s.len() % 2 == 1 {
                s[s.len() / 2]
            } else {
                (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
            };
            f64::from(s[s.len() - 1]) / f64::from(med).max(1e-12)
        })
        .collect();
    rows.iter().sum::<f64>() / rows.len().max(1) as f64
}

/// The lesson's stored quality table (`kvscope export quant-table`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QuantTable {
    /// The model that ran (`tiny` for tables stored before it was recorded).
    #[serde(default = "crate::drivers::tiny_name")]
    pub model: String,
    /// The text the windows were cut from.
    #[serde(default)]
    pub text: String,
    /// Held-out windows of 256 tokens.
    pub windows: usize,
    /// KIVI's group size and residual.
    pub group: usize,
    /// KIVI's residual length.
    pub residual: usize,
    /// The backend that ran it.
    pub backend: String,
    /// One cell per format, in [`CacheFormat::all`]'s order.
    pub cells: Vec<QuantCell>,
    /// The keys' and values' channel maxima over the windows (from the f16 runs; absent in tables stored
    /// before it was recorded).
    #[serde(default)]
    pub channels: Option<ChannelMax>,
    /// The decode benchmark run with it (`kvscope bench`'s P3 lines per format), if one ran.
    #[serde(default)]
    pub bench: Option<QuantBench>,
}

/// Decode speed per 8-bit format against f16, measured in one run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QuantBench {
    /// The backend.
    pub backend: String,
    /// The machine (CPU model or adapter).
    pub machine: String,
    /// Requests × context of the paged decode.
    pub requests: usize,
    /// Context per request.
    pub context: usize,
    /// One line per format.
    pub lines: Vec<QuantBenchLine>,
}

/// One format's decode speed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QuantBenchLine {
    /// The dtype's name.
    pub format: String,
    /// Decoded tokens per second (one token per request per step).
    pub tokens_per_s: f64,
    /// K and V bytes one step reads.
    pub bytes_read: f64,
    /// Tokens per second over f16's in the same run.
    pub speedup: f64,
}

impl Model {
    /// Every format over the first `windows` 256-token windows of the model's held-out text (bits per
    /// byte of the predicted tokens' bytes).
    pub fn quant_table(
        &self,
        backend: &dyn Backend,
        windows: usize,
        group: usize,
        residual: usize,
    ) -> Result<QuantTable, String> {
        let (held, text_source) = self.heldout_tokens(usize::MAX)?;
        let windows = windows.clamp(1, held.len() / 256);
        let c = self.config;
        let (kvh, hd) = (c.n_kv_heads, c.head_dim);
        let mut channels = ChannelMax {
            layers: c.n_layers,
            kv_heads: kvh,
            head_dim: hd,
            k: vec![0.0; c.n_layers * kvh * hd],
            v: vec![0.0; c.n_layers * kvh * hd],
        };
        let mut cells = Vec::new();
        for fmt in CacheFormat::all(group, residual) {
            let (mut nll, mut count, mut rel) = (0f64, 0usize, 0f64);
            let (mut ke, mut kr, mut ve, mut vr) = (0f64, 0f64, 0f64, 0f64);
            for wi in 0..windows {
                let text = &held[wi * 256..(wi + 1) * 256];
                let r = self.quant_run(text, fmt, backend)?;
                nll += r.nll.iter().map(|&x| f64::from(x)).sum::<f64>();
                count += self.tokenizer.byte_count(&text[1..]);
                rel += r.out_rel_rms.iter().sum::<f64>() / r.out_rel_rms.len().max(1) as f64;
                let (e, s) = err_sums(&r.k, &r.k_deq);
                (ke, kr) = (ke + e, kr + s);
                let (e, s) = err_sums(&r.v, &r.v_deq);
                (ve, vr) = (ve + e, vr + s);
                if cells.is_empty() {
                    fold_channel_max(&mut channels.k, &r.k, kvh, hd);
                    fold_channel_max(&mut channels.v, &r.v, kvh, hd);
                }
            }
            cells.push(QuantCell {
                format: fmt.name(),
                bits_per_byte: nll / (std::f64::consts::LN_2 * count.max(1) as f64),
                out_rel_rms: rel / windows as f64,
                kernel: true,
                k_rel_err: Some((ke / kr.max(f64::MIN_POSITIVE)).sqrt()),
                v_rel_err: Some((ve / vr.max(f64::MIN_POSITIVE)).sqrt()),
            });
        }
        Ok(QuantTable {
            model: self.name.id().to_string(),
            text: text_source,
            windows,
            group,
            residual,
            backend: backend.kind().name().to_string(),
            cells,
            channels: Some(channels),
            bench: None,
        })
    }
}
