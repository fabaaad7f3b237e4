//! What each lesson kind computes, on the active backend, for one set of slider values.
//!
//! How it works: [`compute`] turns a lesson, its parameters and a backend into an [`Output`]: the
//! tensors the views draw (as heatmap data) and the raw arrays hover and export need. Lessons 1–3 run
//! the attention kernels ([`crate::compute::Backend::attention`]); lesson 4 runs a small transformer
//! stack that appends to a real [`StaticKvCache`] and decodes through the decode kernel; lesson 5
//! replays the lesson file's scenario on the paged cache with [`Scheduler`], writes every token's K/V
//! through the paged-append kernel and runs paged decode after every step. Every kernel result is
//! checked against the f64 reference with the shared checker; lessons 1–3 do that in a second phase
//! ([`verify`]) so the view appears first.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use half::f16;
use ndarray::{Array2, Array3, Axis, s};

use crate::cache::{PagedShape, PagedStats, RequestId, RequestSpec, Scheduler, StaticKvCache, StaticShape, StepEvents};
use crate::compute::{AttnInput, Backend, CheckReport, PagedDecodeInput, Tolerance, check, reference};
use crate::lesson::{Lesson, LessonKind};
use crate::math::{AttnCore, AttnShape, AttnWeights, Qkv, matmul, output_projection, project, softmax_row};
use crate::math::{Mask, Rng};
use crate::render::blocks::BlockGridData;
use crate::render::heatmap::HeatmapData;

/// Slider values by parameter id.
pub type Params = BTreeMap<String, i64>;

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A fresh generation number for new heatmap data (the renderer re-uploads when it changes).
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Heatmap data of a `rows × cols` row-major matrix.
pub fn heat(rows: usize, cols: usize, values: Vec<f32>) -> Arc<HeatmapData> {
    let g = next_generation();
    Arc::new(
        HeatmapData::new(rows, cols, values, g)
            .unwrap_or_else(|_| HeatmapData::new(1, 1, vec![0.0], g).expect("1×1 is valid")),
    )
}

fn heat2(a: &Array2<f32>) -> Arc<HeatmapData> {
    heat(a.nrows(), a.ncols(), a.iter().copied().collect())
}

fn heat_head(a: &Array3<f32>, h: usize) -> Arc<HeatmapData> {
    heat2(&a.index_axis(Axis(0), h).to_owned())
}

/// Read a parameter, falling back to `default` when a teacher's lesson file leaves it out.
pub fn get(p: &Params, id: &str, default: i64) -> i64 {
    p.get(id).copied().unwrap_or(default)
}

fn divisors(n: i64) -> Vec<i64> {
    (1..=n.max(1)).filter(|d| n % d == 0).collect()
}

fn snap_to(v: i64, allowed: &[i64]) -> i64 {
    allowed.iter().copied().min_by_key(|a| (a - v).abs()).unwrap_or(v)
}

/// The values a parameter may take given the others, when the lesson restricts them (heads must
/// divide d_model, KV heads must divide heads); `None` means every value in the slider's range.
pub fn allowed_values(kind: LessonKind, id: &str, p: &Params) -> Option<Vec<i64>> {
    match (kind, id) {
        (LessonKind::MultiHead, "heads") => Some(divisors(get(p, "d_model", 32))),
        (LessonKind::MultiHead | LessonKind::Decode, "kv_heads") => Some(divisors(get(p, "heads", 1))),
        _ => None,
    }
}

/// Bring dependent parameters back to valid values (in slider order), so that no slider
/// combination reaches a kernel with an impossible shape.
pub fn normalize(lesson: &Lesson, p: &mut Params) {
    for prm in &lesson.file.params {
        let id = prm.id.get_ref();
        let v = get(p, id, *prm.default.get_ref()).clamp(prm.min, prm.max);
        p.insert(id.clone(), v);
    }
    for prm in &lesson.file.params {
        let id = prm.id.get_ref();
        if let Some(allowed) = allowed_values(lesson.kind, id, p) {
            let allowed: Vec<i64> = allowed
                .into_iter()
                .filter(|v| (prm.min..=prm.max).contains(v))
                .collect();
            if !allowed.is_empty() {
                let v = snap_to(p[id], &allowed);
                p.insert(id.clone(), v);
            }
        }
    }
}

/// Lessons 1–3: one attention layer.
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
    /// Concatenated heads `[T, H·hd]`.
    pub concat: Array2<f32>,
    /// Output after W_O, `[T, d_model]`.
    pub y: Array2<f32>,
    /// Heatmaps, by view.
    pub maps: AttnMaps,
}

/// The heatmaps of an [`AttnOut`].
pub struct AttnMaps {
    /// X.
    pub x: Arc<HeatmapData>,
    /// W_Q, W_K, W_V.
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
    /// Lesson 2: unmasked scores and probabilities of head 0, and masked − unmasked probabilities.
    pub unmasked_scores: Option<Arc<HeatmapData>>,
    /// Unmasked probabilities.
    pub unmasked_probs: Option<Arc<HeatmapData>>,
    /// Difference.
    pub diff: Option<Arc<HeatmapData>>,
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
    pub max_seq: usize,
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
}

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

/// Lesson 5: the scenario replayed on the paged cache.
pub struct PagedOut {
    /// The pool.
    pub shape: PagedShape,
    /// The static reservation compared against.
    pub max_seq_len: usize,
    /// The requests.
    pub specs: Vec<RequestSpec>,
    /// Why the scenario cannot run, if it cannot.
    pub error: Option<String>,
    /// One frame per scheduler step.
    pub frames: Vec<PagedFrame>,
}

/// The state after one scheduler step.
pub struct PagedFrame {
    /// What happened.
    pub events: StepEvents,
    /// The pool for the block-grid renderer.
    pub grid: BlockGridData,
    /// Block tables.
    pub tables: BTreeMap<RequestId, Vec<u32>>,
    /// Tokens per request.
    pub lens: BTreeMap<RequestId, usize>,
    /// The free list (the allocator pops from its end).
    pub free: Vec<u32>,
    /// Accounting.
    pub stats: PagedStats,
    /// Running and waiting requests.
    pub running: Vec<RequestId>,
    /// Waiting.
    pub waiting: Vec<RequestId>,
    /// The (request, pos) the highlighted write went to.
    pub write: Option<(RequestId, usize)>,
    /// Paged decode of every running request checked against contiguous attention.
    pub check: Option<CheckReport>,
    /// K/V bytes the decode read through the block tables.
    pub decode_bytes: usize,
    /// The allocator invariants after this step.
    pub invariants: Result<(), String>,
}

/// Any lesson's output.
pub enum Output {
    /// Lessons 1–3.
    Attn(Box<AttnOut>),
    /// Lesson 4.
    Decode(Box<DecodeOut>),
    /// Lesson 5.
    Paged(Box<PagedOut>),
}

/// Compute a lesson's output for `params` on `backend`.
pub fn compute(lesson: &Lesson, params: &Params, backend: &dyn Backend) -> Result<Output, String> {
    let mut p = params.clone();
    normalize(lesson, &mut p);
    match lesson.kind {
        LessonKind::Attention | LessonKind::Causal | LessonKind::MultiHead => {
            attention(lesson.kind, &p, backend).map(|o| Output::Attn(Box::new(o)))
        }
        LessonKind::Decode => decode(&p, backend).map(|o| Output::Decode(Box::new(o))),
        LessonKind::Paged => paged(lesson, &p, backend).map(|o| Output::Paged(Box::new(o))),
    }
}

fn attention(kind: LessonKind, p: &Params, backend: &dyn Backend) -> Result<AttnOut, String> {
    let (heads, kv_heads) = match kind {
        LessonKind::MultiHead => (get(p, "heads", 4), get(p, "kv_heads", get(p, "heads", 4))),
        _ => (1, 1),
    };
    let shape = AttnShape {
        seq: get(p, "seq", 8).max(1) as usize,
        d_model: get(p, "d_model", 16).max(1) as usize,
        n_heads: heads.max(1) as usize,
        n_kv_heads: kv_heads.max(1) as usize,
    }
    .validated()
    .map_err(|e| e.to_string())?;
    let mask = if kind == LessonKind::Attention {
        Mask::None
    } else {
        Mask::Causal
    };
    let w = AttnWeights::random(shape, get(p, "seed", 0).max(0) as u64);
    let qkv = project(&w);
    let inp = AttnInput {
        q: &qkv.q,
        k: &qkv.k,
        v: &qkv.v,
        mask,
    };
    let core = backend.attention(&inp).map_err(|e| e.to_string())?;
    let unmasked = if kind == LessonKind::Causal {
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
    let y = output_projection(&core.out, &w.wo);
    let mask_values: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if mask.visible(i, j) { 1.0 } else { 0.0 }))
        .collect();
    let maps = AttnMaps {
        x: heat2(&w.x),
        wq: heat2(&w.wq),
        wk: heat2(&w.wk),
        wv: heat2(&w.wv),
        q: (0..h).map(|i| heat_head(&qkv.q, i)).collect(),
        k: (0..shape.n_kv_heads).map(|i| heat_head(&qkv.k, i)).collect(),
        v: (0..shape.n_kv_heads).map(|i| heat_head(&qkv.v, i)).collect(),
        scores: (0..h).map(|i| heat_head(&core.scores, i)).collect(),
        probs: (0..h).map(|i| heat_head(&core.probs, i)).collect(),
        out: (0..h).map(|i| heat_head(&core.out, i)).collect(),
        q_heads: heat2(&concat_heads(&qkv.q)),
        concat: heat2(&concat),
        y: heat2(&y),
        mask: heat(t, t, mask_values),
        unmasked_scores: unmasked.as_ref().map(|u| heat_head(&u.scores, 0)),
        unmasked_probs: unmasked.as_ref().map(|u| heat_head(&u.probs, 0)),
        diff: unmasked.as_ref().map(|u| {
            let d = &core.probs.index_axis(Axis(0), 0) - &u.probs.index_axis(Axis(0), 0);
            heat2(&d)
        }),
    };
    Ok(AttnOut {
        shape,
        mask,
        w,
        qkv,
        core,
        unmasked,
        concat,
        y,
        maps,
    })
}

/// Check an attention output against the f64 reference (probabilities and output).
pub fn verify(out: &AttnOut) -> Vec<CheckReport> {
    let inp = AttnInput {
        q: &out.qkv.q,
        k: &out.qkv.k,
        v: &out.qkv.v,
        mask: out.mask,
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
    vec![c("P", &out.core.probs, &want.probs), c("P·V", &out.core.out, &want.out)]
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

fn decode(p: &Params, backend: &dyn Backend) -> Result<DecodeOut, String> {
    let layers = get(p, "layers", 2).clamp(1, 64) as usize;
    let batch = get(p, "batch", 1).clamp(1, 64) as usize;
    let heads = get(p, "heads", 4).max(1) as usize;
    let mut kv_heads = get(p, "kv_heads", 2).max(1) as usize;
    if !heads.is_multiple_of(kv_heads) {
        kv_heads = 1;
    }
    let hd = get(p, "head_dim", 8).clamp(1, crate::compute::MAX_HEAD_DIM as i64) as usize;
    let max_seq = get(p, "max_seq", 24).max(1) as usize;
    let prompt = (get(p, "prompt", 5).max(1) as usize).min(max_seq);
    let want_gen = get(p, "generate", 8).max(0) as usize;
    let generate = want_gen.min(max_seq - prompt);
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
        max_seq,
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
            backend
                .static_cache_append(shape, &mut cache.k, &mut cache.v, l, pos, &gather(&ks), &gather(&vs))
                .map_err(err)?;
            cache.mark_written(l, pos);
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
                    prefill_probs = Some(heat_head(&core.probs, 0));
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
    let kv_token_layer = 2 * kv_heads * hd * 2; // K and V, f16, one request, one layer
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
    let slab = batch * kv_heads * max_seq * hd;
    let tables: Vec<i32> = (0..batch as i32).collect();
    for t in 1..=generate {
        let pos = prompt + t - 1;
        let mut h: Vec<Array2<f32>> = embed.iter().map(|e| e.slice(s![pos..pos + 1, ..]).to_owned()).collect();
        for (l, w) in weights.iter().enumerate() {
            let mut q = Vec::with_capacity(batch * heads * hd);
            let mut k_new = Vec::with_capacity(batch * kv_heads * hd);
            let mut v_new = Vec::with_capacity(batch * kv_heads * hd);
            for hb in &h {
                q.extend(matmul(hb.view(), w.wq.view()).iter().copied());
                k_new.extend(matmul(hb.view(), w.wk.view()).iter().copied());
                v_new.extend(matmul(hb.view(), w.wv.view()).iter().copied());
            }
            backend
                .static_cache_append(shape, &mut cache.k, &mut cache.v, l, pos, &k_new, &v_new)
                .map_err(err)?;
            cache.mark_written(l, pos);
            // The static cache of one layer is `[batch, kv_heads, max_seq, hd]`: a paged pool whose
            // blocks are max_seq long, one per request. The decode kernel reads it through that table.
            let lens = vec![(pos + 1) as i32; batch];
            let inp = PagedDecodeInput {
                q: &q,
                n_heads: heads,
                shape: PagedShape {
                    num_blocks: batch,
                    block_size: max_seq,
                    kv_heads,
                    head_dim: hd,
                },
                k_pool: &cache.k[l * slab..(l + 1) * slab],
                v_pool: &cache.v[l * slab..(l + 1) * slab],
                block_tables: &tables,
                max_blocks: 1,
                context_lens: &lens,
            };
            let got = backend.paged_decode(&inp).map_err(err)?;
            let want = reference::paged_decode(&inp);
            let report = check(
                &format!("decode token {t} layer {l}"),
                &[batch, heads, hd],
                &got,
                &want,
                Tolerance::F32,
            );
            // The new row of the attention matrix (batch 0), from the cached keys.
            let kf = &cache.k[l * slab..l * slab + kv_heads * max_seq * hd];
            let mut row_values = Vec::with_capacity(heads * (pos + 1));
            for head in 0..heads {
                let kvh = head / group;
                let qh = &q[head * hd..(head + 1) * hd];
                let mut sc: Vec<f32> = (0..=pos)
                    .map(|j| {
                        let kj = &kf[(kvh * max_seq + j) * hd..(kvh * max_seq + j + 1) * hd];
                        qh.iter().zip(kj).map(|(a, b)| a * f32::from(*b)).sum::<f32>() / (hd as f32).sqrt()
                    })
                    .collect();
                softmax_row(&mut sc);
                if head == 0 {
                    rows[l].push(sc.clone());
                }
                row_values.extend(sc);
            }
            let out = Array3::from_shape_vec((batch, heads, hd), got).map_err(|e| e.to_string())?;
            h = (0..batch)
                .map(|b| {
                    let o = out
                        .index_axis(Axis(0), b)
                        .to_owned()
                        .into_shape_with_order((1, heads * hd));
                    let o = o.expect("contiguous");
                    residual(&h[b], &matmul(o.view(), w.wo.view()))
                })
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
        max_seq,
        dropped: want_gen - generate,
        reserved_bytes: cache.bytes_reserved(),
        bytes_per_token: batch * layers * kv_token_layer,
        frames,
        rows,
        prefill_probs: prefill_probs.unwrap_or_else(|| heat(1, 1, vec![0.0])),
        prefill_check,
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
                let mut v = vec![0.0f32; n * n];
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

/// The K/V values of token `pos` of `req` (the same every time, so a preempted request's recompute
/// writes what it wrote before).
fn token_kv(seed: u64, req: RequestId, pos: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::stream(seed, 1_000_000 + ((req as u64) << 20) + pos as u64);
    (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0))
}

/// Heads and head_dim of lesson 5's small pool.
pub const PAGED_KV_HEADS: usize = 2;
/// Query heads of lesson 5's decode (GQA group of 2).
pub const PAGED_HEADS: usize = 4;
/// Head dim of lesson 5's pool.
pub const PAGED_HEAD_DIM: usize = 8;

/// The lesson's scripted requests, the first `requests` of them.
pub fn scenario(lesson: &Lesson, p: &Params) -> Vec<RequestSpec> {
    let n = get(p, "requests", lesson.file.requests.len() as i64).max(0) as usize;
    lesson
        .file
        .requests
        .iter()
        .take(n)
        .map(|r| {
            let r = r.get_ref();
            RequestSpec {
                arrive: r.arrive as usize,
                prompt: r.prompt as usize,
                generate: r.generate as usize,
            }
        })
        .collect()
}

/// Most scheduler steps one replay runs.
pub const MAX_STEPS: usize = 4096;

fn paged(lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<PagedOut, String> {
    let shape = PagedShape {
        num_blocks: get(p, "num_blocks", 16).clamp(1, 8192) as usize,
        block_size: get(p, "block_size", 4).clamp(1, 1024) as usize,
        kv_heads: PAGED_KV_HEADS,
        head_dim: PAGED_HEAD_DIM,
    };
    let max_seq_len = get(p, "max_seq_len", 32).max(1) as usize;
    let seed = get(p, "seed", 0).max(0) as u64;
    let specs = scenario(lesson, p);
    let mut out = PagedOut {
        shape,
        max_seq_len,
        specs: specs.clone(),
        error: None,
        frames: Vec::new(),
    };
    let mut sched = match Scheduler::new(shape, specs) {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e.to_string());
            return Ok(out);
        }
    };
    let mut k_pool = vec![f16::ZERO; shape.numel()];
    let mut v_pool = vec![f16::ZERO; shape.numel()];
    let per_token = shape.kv_heads * shape.head_dim;
    let err = |e: crate::compute::BackendError| e.to_string();
    while !sched.is_done() && out.frames.len() < MAX_STEPS {
        let ev = sched.step();
        let cache = sched.cache();
        // Write the K/V of every token stored this step through the paged-append kernel.
        let mut writes: Vec<(RequestId, usize)> = Vec::new();
        for &(r, n) in &ev.admitted {
            writes.extend((0..n).map(|pos| (r, pos)));
        }
        writes.extend(ev.decoded.iter().copied());
        let live: Vec<(RequestId, usize)> = writes
            .into_iter()
            .filter(|&(r, pos)| cache.slot(r, pos).is_some())
            .collect();
        if !live.is_empty() {
            let slots: Vec<i32> = live
                .iter()
                .map(|&(r, pos)| cache.slot(r, pos).map_or(-1, |s| s as i32))
                .collect();
            let mut k = Vec::with_capacity(live.len() * per_token);
            let mut v = Vec::with_capacity(live.len() * per_token);
            for &(r, pos) in &live {
                let (kk, vv) = token_kv(seed, r, pos, per_token);
                k.extend(kk);
                v.extend(vv);
            }
            backend
                .paged_append(shape, &mut k_pool, &mut v_pool, &slots, &k, &v)
                .map_err(err)?;
        }
        let running: Vec<RequestId> = sched.running().into_iter().filter(|&r| cache.len(r) > 0).collect();
        let (check_report, decode_bytes) = if running.is_empty() {
            (None, 0)
        } else {
            let (tables, max_blocks, lens) = cache.block_table_matrix(&running);
            let q =
                Rng::stream(seed, 77 + ev.step as u64).normal_vec(running.len() * PAGED_HEADS * shape.head_dim, 1.0);
            let inp = PagedDecodeInput {
                q: &q,
                n_heads: PAGED_HEADS,
                shape,
                k_pool: &k_pool,
                v_pool: &v_pool,
                block_tables: &tables,
                max_blocks,
                context_lens: &lens,
            };
            let got = backend.paged_decode(&inp).map_err(err)?;
            let want = reference::paged_decode(&inp);
            let bytes = lens.iter().map(|&l| l as usize).sum::<usize>() * per_token * 2 * 2;
            (
                Some(check(
                    "paged decode == contiguous",
                    &[running.len(), PAGED_HEADS, shape.head_dim],
                    &got,
                    &want,
                    Tolerance::F32,
                )),
                bytes,
            )
        };
        let write = ev
            .decoded
            .first()
            .copied()
            .or_else(|| ev.admitted.first().map(|&(r, n)| (r, n.saturating_sub(1))));
        let written = write.and_then(|(r, pos)| {
            let b = *cache.table(r)?.get(pos / shape.block_size)?;
            Some((b as usize, pos % shape.block_size))
        });
        out.frames.push(PagedFrame {
            grid: BlockGridData::from_cache(cache, written),
            tables: cache.tables().clone(),
            lens: cache.tables().keys().map(|&r| (r, cache.len(r))).collect(),
            free: cache.allocator().free_list().to_vec(),
            stats: cache.stats(max_seq_len),
            running: sched.running(),
            waiting: sched.waiting(),
            write: write.filter(|&(r, _)| cache.table(r).is_some()),
            check: check_report,
            decode_bytes,
            invariants: cache.check_invariants(),
            events: ev,
        });
    }
    if !sched.is_done() {
        out.error = Some(format!("the scenario did not finish within {MAX_STEPS} steps"));
    }
    Ok(out)
}

impl Output {
    /// Every check report the output carries (lessons 4–5 check while they compute).
    pub fn reports(&self) -> Vec<&CheckReport> {
        match self {
            Output::Attn(_) => Vec::new(),
            Output::Decode(d) => std::iter::once(&d.prefill_check)
                .chain(d.frames.iter().filter_map(|f| f.check.as_ref()))
                .collect(),
            Output::Paged(p) => p.frames.iter().filter_map(|f| f.check.as_ref()).collect(),
        }
    }
}

/// The worst of several reports (largest max abs error; any failure first).
pub fn worst<'a>(reports: impl IntoIterator<Item = &'a CheckReport>) -> Option<&'a CheckReport> {
    reports.into_iter().max_by(|a, b| {
        (!a.passed(), a.max_abs)
            .partial_cmp(&(!b.passed(), b.max_abs))
            .unwrap_or(std::cmp::Ordering::Equal)
    })
}

impl Output {
    /// Whether any value the views draw is NaN (masked entries are −∞, which is allowed).
    pub fn has_nan(&self) -> bool {
        let nan = |v: &[f32]| v.iter().any(|x| x.is_nan());
        match self {
            Output::Attn(a) => {
                let m = &a.maps;
                let singles = [&m.x, &m.wq, &m.wk, &m.wv, &m.q_heads, &m.concat, &m.y, &m.mask];
                singles.iter().any(|d| nan(&d.values))
                    || [&m.q, &m.k, &m.v, &m.scores, &m.probs, &m.out]
                        .iter()
                        .any(|v| v.iter().any(|d| nan(&d.values)))
                    || [&m.unmasked_scores, &m.unmasked_probs, &m.diff]
                        .iter()
                        .any(|d| d.as_ref().is_some_and(|d| nan(&d.values)))
            }
            Output::Decode(d) => {
                nan(&d.prefill_probs.values)
                    || d.frames.iter().any(|f| nan(&f.row.values))
                    || d.rows.iter().flatten().any(|r| nan(r))
            }
            Output::Paged(p) => p
                .frames
                .iter()
                .any(|f| f.check.as_ref().is_some_and(|c| c.max_abs.is_nan())),
        }
    }
}
