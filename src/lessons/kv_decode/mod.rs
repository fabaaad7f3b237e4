//! Lesson 4, KV-cache append and why decode is memory-bound (kind `decode`): a small transformer stack
//! prefills a prompt, then decodes token by token. Every token's K/V is written into a real
//! [`StaticKvCache`] by the backend's static-append kernel, and each layer's attention reads the cache
//! through the backend's paged-decode kernel (one block of `max_seq_len` per request), so the same decode
//! kernel serves lessons 4 and 5. Every kernel result is checked against the f64 reference as it is
//! computed. The timeline has one frame per (token, layer).

#[cfg(feature = "native")]
pub mod cli;
pub mod generate;
pub mod sweep;

use std::sync::Arc;

use ndarray::{Array2, Array3, Axis, s};

use super::{LessonKind, Output, Params, any_nan, get, heat, heat_probs};
use crate::cache::{PagedShape, PoolRef, StaticKvCache, StaticShape, kv_bytes_per_token};

use crate::compute::ops::paged_decode::decode_and_check;
use crate::compute::{
    AttnInput, Backend, CheckReport, Kernel, PagedDecodeInput, StaticAppendInput, Tolerance, check, reference,
};
use crate::figure::HeatmapData;
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::math::{Mask, Rng, matmul, output_projection, softmax_row};

crate::views! {
    /// The views of lesson 4.
    pub enum View {
        /// The prompt's causal attention after prefill.
        Prefill = "prefill",
        /// The static cache as a memory strip: stored, written, read, reserved.
        StaticCache = "static_cache",
        /// The attention matrix growing by one row per token, and the new row for every head.
        DecodeRow = "decode_row",
        /// FLOPs against bytes read: arithmetic intensity.
        Intensity = "intensity",
        /// Decode kernel bandwidth against a copy of the same bytes, measured live.
        Bandwidth = "bandwidth",
        /// The trained model generating through the static cache, step by step.
        ModelDecode = "model_decode",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 4.
pub struct KvDecode;

impl Schema for KvDecode {
    fn name(&self) -> &'static str {
        "decode"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &[
            "layers",
            "heads",
            "kv_heads",
            "head_dim",
            "prompt",
            "generate",
            "max_seq_len",
            "batch",
            "model",
            "text",
            "seed",
        ]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }
}

impl LessonKind for KvDecode {
    #[cfg(feature = "native")]
    fn benches(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::BENCH_SWEEP]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::StaticCacheAppend, Kernel::PagedDecode]
    }

    fn allowed_values(&self, id: &str, p: &Params) -> Option<Vec<i64>> {
        (id == "kv_heads").then(|| super::divisors(get(p, "heads", 1)))
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        if views.contains(&"model_decode") {
            const WHY: [&str; 2] = [
                "The trained model fixes this: its layers, heads and head size are the model's, the prompt is the text, and the static cache holds exactly the text.",
                "训练好的模型固定了它：层数、头数与头维度由模型决定，提示就是所选文本，静态缓存正好容纳这段文本。",
            ];
            [
                "layers",
                "heads",
                "kv_heads",
                "head_dim",
                "prompt",
                "max_seq_len",
                "batch",
                "seed",
            ]
            .map(|id| (id, WHY))
            .to_vec()
        } else {
            Vec::new()
        }
    }

    fn compute(&self, lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let mut out = decode(p, backend)?;
        let text = get(p, "text", 0);
        // The file offers the tiny model and SmolLM2 (`min = 1`).
        let m = crate::model::choice::Choice::from_value(get(p, "model", 1)).trained_model()?;
        out.generation = Some(generate::ModelDecode::compute(m, text, out.generate, backend)?);
        out.model = lesson
            .file
            .models
            .iter()
            .find_map(|m| Some((m.name.clone(), m.weight_bytes()?, m.kv_bytes_per_token())));
        Ok(Box::new(out))
    }
}

/// Lesson 4: prefill and decode through a static cache.
pub struct DecodeOut {
    /// Layers.
    pub layers: usize,
    /// Batch.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Head dim.
    pub head_dim: usize,
    /// Prompt tokens.
    pub prompt: usize,
    /// Tokens decoded (after clamping to the cache).
    pub generate: usize,
    /// The static cache's max_seq_len.
    pub max_seq_len: usize,
    /// Tokens the lesson asked for that did not fit in max_seq_len.
    pub dropped: usize,
    /// Bytes the static cache reserves.
    pub reserved_bytes: usize,
    /// K+V bytes of one token over all layers and the batch.
    pub bytes_per_token: usize,
    /// Timeline frames: 0 is "after prefill", then one per (token, layer).
    pub frames: Vec<DecodeFrame>,
    /// Head-0 probability rows of batch 0, per layer and position (row `i` has `i + 1` entries).
    pub rows: Vec<Vec<Vec<f32>>>,
    /// The prompt's causal attention matrix (layer 0, batch 0, head 0).
    pub prefill_probs: Arc<HeatmapData>,
    /// Backend check of every prefill attention against the reference.
    pub prefill_check: CheckReport,
    /// The lesson file's first model with a parameter count: its name, the bytes of its weights and
    /// the K/V bytes one token takes over all layers (for "weights against K/V").
    pub model: Option<(String, u64, u64)>,
    /// The tiny trained model generating as many steps as the timeline has tokens.
    pub generation: Option<generate::ModelDecode>,
}

/// The batch of the narration's worked example of where K/V reads pass weight reads.
const EXAMPLE_BATCH: u64 = 32;

/// The numbers lesson 4's narration may show.
const PLACEHOLDERS: &[&str] = &[
    "prompt",
    "first_pos",
    "model",
    "model_weights",
    "model_kv_per_token",
    "crossover_tokens",
    "example_batch",
    "example_context",
    "gen_prompt",
    "gen_steps",
    "gen_layers",
    "gen_bytes_per_token",
    "gen_check",
    "gen_prompt_tokens",
    "gen_weight_bytes",
    "gen_kv_bytes_last",
    "gen_weight_share",
    "gen_weight_bytes_16",
    "gen_crossover_tokens",
    "h100_balance",
    "model_name",
    "model_name_zh",
    "unit",
    "units",
    "unit_zh",
];

/// One point of lesson 4's timeline.
pub struct DecodeFrame {
    /// Decode token (0 = prefill done).
    pub token: usize,
    /// The layer this frame computed (None for the prefill frame).
    pub layer: Option<usize>,
    /// Position of the newest token.
    pub pos: usize,
    /// Filled length of each layer's cache.
    pub lens: Vec<usize>,
    /// Probabilities of the new token over `0..=pos`, per head (batch 0): `[H, pos+1]`.
    pub row: Arc<HeatmapData>,
    /// The decode kernel's output checked against the f64 reference.
    pub check: Option<CheckReport>,
    /// K/V bytes this layer's decode read (all requests of the batch).
    pub bytes_read: usize,
    /// FLOPs of this layer's decode attention (Q·K and P·V).
    pub flops: usize,
    /// The head-0 causal matrix up to this frame, built the first time a view asks for it.
    matrix: std::sync::OnceLock<Arc<HeatmapData>>,
}

fn random_matrix(seed: u64, stream: u64, rows: usize, cols: usize, scale: f64) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), Rng::stream(seed, stream).normal_vec(rows * cols, scale))
        .expect("length matches shape")
}

/// Split `[n, heads·hd]` into `[heads, n, hd]`.
fn split_heads(a: &Array2<f32>, heads: usize) -> Array3<f32> {
    let (n, w) = a.dim();
    let hd = w / heads;
    Array3::from_shape_fn((heads, n, hd), |(h, i, d)| a[[i, h * hd + d]])
}

/// `(h + o) / rms(h + o)` per row: a residual connection with an RMS norm, so that activations stay
/// O(1) through the layers.
fn residual(h: &Array2<f32>, o: &Array2<f32>) -> Array2<f32> {
    let mut r = h + o;
    for mut row in r.rows_mut() {
        let ms = row.iter().map(|x| x * x).sum::<f32>() / row.len().max(1) as f32;
        let inv = 1.0 / (ms.sqrt() + 1e-6);
        row.mapv_inplace(|x| x * inv);
    }
    r
}

struct LayerWeights {
    wq: Array2<f32>,
    wk: Array2<f32>,
    wv: Array2<f32>,
    wo: Array2<f32>,
}

/// Write one token's K/V (`[batch, kv_heads, hd]`) of layer `l` at `pos` through the backend's
/// static-append kernel, and mark it written.
fn append(
    backend: &dyn Backend,
    cache: &mut StaticKvCache,
    l: usize,
    pos: usize,
    k_new: &[f32],
    v_new: &[f32],
) -> Result<(), String> {
    let shape = cache.shape();
    backend
        .static_cache_append(StaticAppendInput {
            shape,
            k_cache: &mut cache.k,
            v_cache: &mut cache.v,
            layer: l,
            pos,
            k_new,
            v_new,
        })
        .map_err(|e| e.to_string())?;
    cache.mark_written(l, pos);
    Ok(())
}

fn decode(p: &Params, backend: &dyn Backend) -> Result<DecodeOut, String> {
    let layers = get(p, "layers", 2).clamp(1, 64) as usize;
    let batch = get(p, "batch", 1).clamp(1, 64) as usize;
    let heads = get(p, "heads", 4).max(1) as usize;
    let mut kv_heads = get(p, "kv_heads", 2).max(1) as usize;
    if !heads.is_multiple_of(kv_heads) {
        kv_heads = 1;
    }
    let hd = get(p, "head_dim", 8).clamp(1, crate::compute::MAX_HEAD_DIM as i64) as usize;
    let max_seq_len = get(p, "max_seq_len", 24).max(1) as usize;
    let prompt = (get(p, "prompt", 5).max(1) as usize).min(max_seq_len);
    let want_gen = get(p, "generate", 8).max(0) as usize;
    let generate = want_gen.min(max_seq_len - prompt);
    let seed = get(p, "seed", 0).max(0) as u64;
    let d = heads * hd;
    let group = heads / kv_heads;
    let scale = 1.0 / (d as f64).sqrt();
    let weights: Vec<LayerWeights> = (0..layers as u64)
        .map(|l| LayerWeights {
            wq: random_matrix(seed, 100 + 8 * l, d, heads * hd, scale),
            wk: random_matrix(seed, 101 + 8 * l, d, kv_heads * hd, scale),
            wv: random_matrix(seed, 102 + 8 * l, d, kv_heads * hd, scale),
            wo: random_matrix(seed, 103 + 8 * l, heads * hd, d, scale),
        })
        .collect();
    let total = prompt + generate;
    let embed: Vec<Array2<f32>> = (0..batch as u64)
        .map(|b| random_matrix(seed, 10_000 + b, total, d, 1.0))
        .collect();
    let shape = StaticShape {
        layers,
        batch,
        kv_heads,
        max_seq_len,
        head_dim: hd,
    };
    let mut cache = StaticKvCache::new(shape);
    let err = |e: crate::compute::BackendError| e.to_string();
    let mut rows: Vec<Vec<Vec<f32>>> = vec![Vec::new(); layers];

    // Prefill: layer by layer, every prompt token at once.
    let mut hidden: Vec<Array2<f32>> = embed.iter().map(|e| e.slice(s![0..prompt, ..]).to_owned()).collect();
    let mut prefill_probs = None;
    let mut prefill_reports = Vec::new();
    for (l, w) in weights.iter().enumerate() {
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for h in &hidden {
            qs.push(split_heads(&matmul(h.view(), w.wq.view()), heads));
            ks.push(split_heads(&matmul(h.view(), w.wk.view()), kv_heads));
            vs.push(split_heads(&matmul(h.view(), w.wv.view()), kv_heads));
        }
        for pos in 0..prompt {
            let gather = |a: &[Array3<f32>]| -> Vec<f32> {
                a.iter()
                    .flat_map(|x| x.slice(s![.., pos, ..]).iter().copied().collect::<Vec<_>>())
                    .collect()
            };
            append(backend, &mut cache, l, pos, &gather(&ks), &gather(&vs))?;
        }
        let mut next = Vec::new();
        for b in 0..batch {
            let inp = AttnInput {
                q: &qs[b],
                k: &ks[b],
                v: &vs[b],
                mask: Mask::Causal,
            };
            let core = backend.attention(&inp).map_err(err)?;
            if b == 0 {
                let want = reference::attention(&inp);
                prefill_reports.push(check(
                    &format!("prefill layer {l}"),
                    core.probs.shape(),
                    core.probs.as_slice().unwrap_or_default(),
                    want.probs.as_slice().unwrap_or_default(),
                    Tolerance::F32,
                ));
                for i in 0..prompt {
                    rows[l].push(core.probs.slice(s![0, i, 0..=i]).to_vec());
                }
                if l == 0 {
                    prefill_probs = Some(heat_probs(&core.probs, 0, inp.mask));
                }
            }
            next.push(residual(&hidden[b], &output_projection(&core.out, &w.wo)));
        }
        hidden = next;
    }
    let prefill_check = prefill_reports
        .into_iter()
        .max_by(|a, b| a.max_abs.total_cmp(&b.max_abs))
        .unwrap_or_else(|| check("prefill", &[0], &[0f32; 0], &[0f64; 0], Tolerance::F32));
    let kv_token_layer = kv_bytes_per_token(1, kv_heads as u64, hd as u64, crate::cache::KvDtype::F16) as usize; // one request, one layer
    let mut frames = vec![DecodeFrame {
        token: 0,
        layer: None,
        pos: prompt - 1,
        lens: vec![prompt; layers],
        row: heat(1, 1, vec![0.0]),
        check: None,
        bytes_read: 0,
        flops: 0,
        matrix: Default::default(),
    }];
    let slab = batch * kv_heads * max_seq_len * hd;
    let tables: Vec<i32> = (0..batch as i32).collect();
    for t in 1..=generate {
        let pos = prompt + t - 1;
        let mut h: Vec<Array2<f32>> = embed.iter().map(|e| e.slice(s![pos..pos + 1, ..]).to_owned()).collect();
        for (l, w) in weights.iter().enumerate() {
            // The batch's new tokens as one `[batch, d]` matrix: one product per weight matrix (the same
            // numbers as one per request, row by row, without packing each weight `batch` times).
            let hs = ndarray::concatenate(Axis(0), &h.iter().map(|hb| hb.view()).collect::<Vec<_>>())
                .map_err(|e| e.to_string())?;
            let q: Vec<f32> = matmul(hs.view(), w.wq.view()).iter().copied().collect();
            let k_new: Vec<f32> = matmul(hs.view(), w.wk.view()).iter().copied().collect();
            let v_new: Vec<f32> = matmul(hs.view(), w.wv.view()).iter().copied().collect();
            append(backend, &mut cache, l, pos, &k_new, &v_new)?;
            // The static cache of one layer is `[batch, kv_heads, max_seq_len, hd]`: a paged pool whose
            // blocks are max_seq_len long, one per request. The decode kernel reads it through that table.
            let lens = vec![(pos + 1) as i32; batch];
            let inp = PagedDecodeInput {
                q: &q,
                n_heads: heads,
                shape: PagedShape {
                    num_blocks: batch,
                    block_size: max_seq_len,
                    kv_heads,
                    head_dim: hd,
                    dtype: crate::cache::KvDtype::F16,
                },
                k_pool: PoolRef::f16(&cache.k[l * slab..(l + 1) * slab]),
                v_pool: PoolRef::f16(&cache.v[l * slab..(l + 1) * slab]),
                block_tables: &tables,
                max_blocks: 1,
                context_lens: &lens,
            };
            let (got, mut report) = decode_and_check(backend, &inp).map_err(err)?;
            report.label = format!("decode token {t} layer {l}");
            // The new row of the attention matrix (batch 0), from the cached keys.
            let kf = &cache.k[l * slab..l * slab + kv_heads * max_seq_len * hd];
            let mut row_values = Vec::with_capacity(heads * (pos + 1));
            for head in 0..heads {
                let kvh = head / group;
                let qh = &q[head * hd..(head + 1) * hd];
                let mut sc: Vec<f32> = (0..=pos)
                    .map(|j| {
                        let kj = &kf[(kvh * max_seq_len + j) * hd..(kvh * max_seq_len + j + 1) * hd];
                        qh.iter().zip(kj).map(|(a, b)| a * f32::from(*b)).sum::<f32>() / (hd as f32).sqrt()
                    })
                    .collect();
                softmax_row(&mut sc);
                if head == 0 {
                    rows[l].push(sc.clone());
                }
                row_values.extend(sc);
            }
            let out = Array2::from_shape_vec((batch, heads * hd), got).map_err(|e| e.to_string())?;
            let projected = matmul(out.view(), w.wo.view());
            h = (0..batch)
                .map(|b| residual(&h[b], &projected.slice(s![b..b + 1, ..]).to_owned()))
                .collect();
            frames.push(DecodeFrame {
                token: t,
                layer: Some(l),
                pos,
                lens: (0..layers).map(|x| if x <= l { pos + 1 } else { pos }).collect(),
                row: heat(heads, pos + 1, row_values),
                check: Some(report),
                bytes_read: batch * (pos + 1) * kv_token_layer,
                flops: batch * heads * 4 * hd * (pos + 1),
                matrix: Default::default(),
            });
        }
    }
    Ok(DecodeOut {
        layers,
        batch,
        heads,
        kv_heads,
        head_dim: hd,
        prompt,
        generate,
        max_seq_len,
        dropped: want_gen - generate,
        reserved_bytes: cache.bytes_reserved(),
        bytes_per_token: batch * layers * kv_token_layer,
        frames,
        rows,
        prefill_probs: prefill_probs.unwrap_or_else(|| heat(1, 1, vec![0.0])),
        prefill_check,
        model: None,
        generation: None,
    })
}

impl DecodeOut {
    /// The head-0 causal matrix (batch 0) of frame `i`'s layer with rows `0..=pos`; the newest row is
    /// `pos`. Built once per frame, so redrawing a step uploads nothing new.
    pub fn matrix(&self, i: usize) -> Arc<HeatmapData> {
        let f = &self.frames[i.min(self.frames.len() - 1)];
        f.matrix
            .get_or_init(|| {
                let n = f.pos + 1;
                // Keys after a row's query are never computed: −∞, drawn hatched as masked.
                let mut v = vec![f32::NEG_INFINITY; n * n];
                if let Some(rows) = self.rows.get(f.layer.unwrap_or(0)) {
                    for (i, r) in rows.iter().take(n).enumerate() {
                        v[i * n..i * n + r.len()].copy_from_slice(r);
                    }
                }
                heat(n, n, v)
            })
            .clone()
    }
}

impl Output for DecodeOut {
    fn reports(&self) -> Vec<&CheckReport> {
        std::iter::once(&self.prefill_check)
            .chain(self.frames.iter().filter_map(|f| f.check.as_ref()))
            .collect()
    }

    fn has_nan(&self) -> bool {
        any_nan(&self.prefill_probs.values)
            || self.frames.iter().any(|f| any_nan(&f.row.values))
            || self.rows.iter().flatten().any(|r| any_nan(r))
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let fr = &self.frames[cursor.min(self.frames.len() - 1)];
        let v = vec![
            NamedArray::new(
                "attention_row",
                &[fr.row.rows, fr.row.cols],
                ArrayData::F32(fr.row.values.clone()),
            ),
            NamedArray::new(
                "cache_lens",
                &[fr.lens.len()],
                ArrayData::I32(fr.lens.iter().map(|&x| x as i32).collect()),
            ),
        ];
        (v, fr.check.iter().cloned().collect())
    }

    fn frames(&self) -> usize {
        self.frames.len()
    }

    /// The scores of the prompt and the first decoded token, causal, by row, for a pick.
    fn pick_surface(&self, view: &str) -> Option<crate::lessons::questions::PickSurface> {
        (view == "decode_row").then(|| {
            crate::lessons::questions::PickSurface::heatmap(
                crate::lesson_file::PickOn::Row,
                (0..=self.prompt).map(|i| i.to_string()).collect(),
                true,
            )
        })
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        // An H100 SXM's balance point, from two quoted facts: dense BF16 FLOP/s over HBM bytes/s.
        let flops = crate::facts::fact("h100_sxm_bf16_dense").number() * 1e12;
        let bytes_per_s = crate::facts::fact("h100_sxm_hbm_bandwidth").number() * 1e12;
        let mut v = vec![
            ("prompt", self.prompt.to_string()),
            ("first_pos", self.prompt.to_string()),
            ("h100_balance", format!("{:.0}", flops / bytes_per_s)),
        ];
        if let Some((name, weights, per_token)) = &self.model {
            let crossover = weights.div_ceil(*per_token);
            v.extend([
                ("model", name.clone()),
                ("model_weights", gib(*weights)),
                ("model_kv_per_token", gib(*per_token)),
                ("crossover_tokens", crossover.to_string()),
                ("example_batch", EXAMPLE_BATCH.to_string()),
                ("example_context", crossover.div_ceil(EXAMPLE_BATCH).to_string()),
            ]);
        }
        if let Some(g) = &self.generation {
            v.extend(super::model_words(g.model.name));
            v.extend([
                ("gen_prompt", g.prompt.to_string()),
                ("gen_steps", (g.tokens.len() - 1).to_string()),
                ("gen_layers", g.layers.to_string()),
                ("gen_bytes_per_token", g.bytes_per_token().to_string()),
                ("gen_check", format!("{:.1e}", g.check.max_abs)),
                ("gen_prompt_tokens", g.prompt_tokens.to_string()),
            ]);
            // What the last decode step reads at batch 1: every weight (f32, as this CPU path holds
            // them) and the K/V of every token cached so far (f16). (Its time is not shown: a frame
            // must not change from run to run; `kvscope generate --model smollm2` measures it.)
            let steps = g.tokens.len().saturating_sub(1);
            let weights = (g.model.parameters * 4) as f64;
            let kv_last = (g.bytes_per_token() * (g.prompt_tokens + steps)) as f64;
            v.extend([
                ("gen_weight_bytes", super::format_bytes(weights)),
                ("gen_kv_bytes_last", super::format_bytes(kv_last)),
                (
                    "gen_weight_share",
                    format!("{:.2}%", 100.0 * weights / (weights + kv_last)),
                ),
                // In 16 bits, as weights are usually served: where the K/V read per step passes them.
                (
                    "gen_weight_bytes_16",
                    super::format_bytes((g.model.parameters * 2) as f64),
                ),
                (
                    "gen_crossover_tokens",
                    (g.model.parameters * 2).div_ceil(g.bytes_per_token()).to_string(),
                ),
            ]);
        }
        v
    }
}

fn gib(n: u64) -> String {
    super::format_bytes(n as f64)
}
