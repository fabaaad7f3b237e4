//! `.npy` exports with a JSON manifest: `kvscope export attention` (the arrays of
//! [`crate::lessons::attention_layer::AttnOut`]), `kvscope export paged-decode` and the app's Ctrl+E
//! write the tensors of one computation so they can be checked in NumPy.

use std::path::Path;

use anyhow::{Context, Result, bail};
use half::f16;
use npyz::WriterBuilder;
use serde::Serialize;

use crate::cache::{PagedShape, Pool};
use crate::compute::{Backend, CheckReport};
use crate::kv::KvEngine;
use crate::math::Rng;

/// The values of one exported array.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    /// float32.
    F32(Vec<f32>),
    /// float16.
    F16(Vec<f16>),
    /// int32.
    I32(Vec<i32>),
    /// uint8 (codes).
    U8(Vec<u8>),
}

impl ArrayData {
    fn dtype(&self) -> &'static str {
        match self {
            ArrayData::F32(_) => "float32",
            ArrayData::F16(_) => "float16",
            ArrayData::I32(_) => "int32",
            ArrayData::U8(_) => "uint8",
        }
    }
    fn len(&self) -> usize {
        match self {
            ArrayData::F32(v) => v.len(),
            ArrayData::F16(v) => v.len(),
            ArrayData::I32(v) => v.len(),
            ArrayData::U8(v) => v.len(),
        }
    }
}

/// One named array.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedArray {
    /// File stem (`x` → `x.npy`).
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values, C order.
    pub data: ArrayData,
}

impl NamedArray {
    pub fn new(name: &str, shape: &[usize], data: ArrayData) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len(), "{name}");
        Self {
            name: name.to_string(),
            shape: shape.to_vec(),
            data,
        }
    }
}

/// One manifest entry.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct ArrayEntry {
    /// File name in the export folder.
    pub file: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// NumPy dtype name.
    pub dtype: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Manifest {
    /// What was exported (`attention`, `paged-decode`).
    pub kind: String,
    /// Every parameter, the seed included.
    pub params: serde_json::Value,
    /// The seed.
    pub seed: u64,
    /// The backend that computed the outputs, and its device.
    pub backend: String,
    /// The backend's output compared with the f64 reference.
    pub check: Vec<serde_json::Value>,
    /// The arrays, by name.
    pub arrays: std::collections::BTreeMap<String, ArrayEntry>,
    /// Further top-level entries of a particular export (`io` for `export attention --kernel flash`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The `.npy` file of `a`, in memory.
pub fn npy_bytes(a: &NamedArray) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
    macro_rules! put {
        ($v:expr, $t:ty) => {{
            let mut w = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut bytes)
                .begin_nd()?;
            w.extend($v.iter().copied())?;
            w.finish()?;
        }};
    }
    match &a.data {
        ArrayData::F32(v) => put!(v, f32),
        ArrayData::F16(v) => put!(v, f16),
        ArrayData::I32(v) => put!(v, i32),
        ArrayData::U8(v) => put!(v, u8),
    }
    Ok(bytes)
}

/// Write `arrays` and `manifest.json` into `dir` (created if missing).
pub fn write_export(
    dir: &Path,
    kind: &str,
    params: serde_json::Value,
    seed: u64,
    backend: &dyn Backend,
    check: &[CheckReport],
    arrays: &[NamedArray],
) -> Result<Manifest> {
    write_export_with(dir, kind, params, seed, backend, check, arrays, serde_json::Map::new())
}

/// [`write_export`] with further top-level manifest entries.
#[allow(clippy::too_many_arguments)]
pub fn write_export_with(
    dir: &Path,
    kind: &str,
    params: serde_json::Value,
    seed: u64,
    backend: &dyn Backend,
    check: &[CheckReport],
    arrays: &[NamedArray],
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<Manifest> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the output folder {}", dir.display()))?;
    let (manifest, files) = export_files(kind, params, seed, backend, check, arrays, extra)?;
    for (name, bytes) in files {
        let path = dir.join(&name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(manifest)
}

/// The files of an export, in memory: each array's `.npy`, then `manifest.json` (what
/// [`write_export_with`] writes, and what the web build zips for a download).
#[allow(clippy::too_many_arguments)]
pub fn export_files(
    kind: &str,
    params: serde_json::Value,
    seed: u64,
    backend: &dyn Backend,
    check: &[CheckReport],
    arrays: &[NamedArray],
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<(Manifest, Files)> {
    let mut files = Vec::new();
    let mut entries = std::collections::BTreeMap::new();
    for a in arrays {
        let file = format!("{}.npy", a.name);
        files.push((file.clone(), npy_bytes(a)?));
        entries.insert(
            a.name.clone(),
            ArrayEntry {
                file,
                shape: a.shape.clone(),
                dtype: a.data.dtype().to_string(),
            },
        );
    }
    let check = check
        .iter()
        .map(
            |r| serde_json::json!({"label": r.label, "passed": r.passed(), "max_abs": r.max_abs, "max_rel": r.max_rel}),
        )
        .collect();
    let manifest = Manifest {
        kind: kind.to_string(),
        params,
        seed,
        backend: format!("{} ({})", backend.kind().name(), backend.device()),
        check,
        arrays: entries,
        extra,
    };
    files.push((
        "manifest.json".to_string(),
        serde_json::to_string_pretty(&manifest)?.into_bytes(),
    ));
    Ok((manifest, files))
}

/// Files in memory: (file name, bytes).
pub type Files = Vec<(String, Vec<u8>)>;

/// A zip archive of `files` (stored, not compressed: `.npy` arrays of floats barely shrink), as the web
/// build downloads an export.
pub fn zip_stored(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
            }
        }
        !c
    }
    let (mut out, mut central) = (Vec::new(), Vec::new());
    let put16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let put32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    for (name, data) in files {
        let (crc, len, at) = (crc32(data), data.len() as u32, out.len() as u32);
        // Local header: version 2.0, no flags, stored, 1980-01-01 00:00.
        put32(&mut out, 0x0403_4b50);
        for x in [20, 0, 0, 0, 0x21] {
            put16(&mut out, x);
        }
        for x in [crc, len, len] {
            put32(&mut out, x);
        }
        put16(&mut out, name.len() as u16);
        put16(&mut out, 0);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        put32(&mut central, 0x0201_4b50);
        for x in [20, 20, 0, 0, 0, 0x21] {
            put16(&mut central, x);
        }
        for x in [crc, len, len] {
            put32(&mut central, x);
        }
        for x in [name.len() as u16, 0, 0, 0, 0] {
            put16(&mut central, x);
        }
        put32(&mut central, 0);
        put32(&mut central, at);
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_at, cd_len, n) = (out.len() as u32, central.len() as u32, files.len() as u16);
    out.extend_from_slice(&central);
    put32(&mut out, 0x0605_4b50);
    for x in [0, 0, n, n] {
        put16(&mut out, x);
    }
    put32(&mut out, cd_len);
    put32(&mut out, cd_at);
    put16(&mut out, 0);
    out
}

/// Read a `.npy` file as f64 values with its shape (any of our dtypes). For tests and round trips.
pub fn read_npy(path: &Path) -> Result<(Vec<usize>, Vec<f64>)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])?;
    let shape = npy.shape().iter().map(|&d| d as usize).collect();
    let dtype = npy.dtype();
    let values = match dtype.descr().trim_matches('\'') {
        "<f4" => npy.into_vec::<f32>()?.into_iter().map(f64::from).collect(),
        "<f2" => npy.into_vec::<f16>()?.into_iter().map(f64::from).collect(),
        "<i4" => npy.into_vec::<i32>()?.into_iter().map(f64::from).collect(),
        "|u1" => npy.into_vec::<u8>()?.into_iter().map(f64::from).collect(),
        other => bail!("{}: unsupported dtype {other}", path.display()),
    };
    Ok((shape, values))
}

/// Parameters of a paged-decode export.
#[derive(Debug, Clone, Serialize)]
pub struct PagedDecodeParams {
    /// Tokens of each request.
    pub context_lens: Vec<usize>,
    /// Tokens per block.
    pub block_size: usize,
    /// Blocks in the pool.
    pub num_blocks: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Values per head.
    pub head_dim: usize,
}

/// A pool's values as f16, for the `.npy` export (which writes f16 pools as float16).
fn f16_values(p: &Pool) -> Result<Vec<f16>> {
    p.as_f16()
        .map(<[f16]>::to_vec)
        .with_context(|| format!("the export writes f16 pools; this one holds {}", p.dtype()))
}

/// Fill a one-layer KV engine as a serving engine would: all requests decode together, one token each
/// per step, so their blocks interleave in the pool. K/V rows are written through the engine (the
/// backend's `paged_append`).
pub fn fill_round_robin(backend: &dyn Backend, shape: PagedShape, lens: &[usize], rng: &mut Rng) -> Result<KvEngine> {
    let needed: usize = lens.iter().map(|&l| shape.blocks_for(l)).sum();
    if needed > shape.num_blocks {
        bail!(
            "OOM: the requests need {needed} blocks of {} tokens but the pool has {} (raise --num-blocks or shorten the contexts)",
            shape.block_size,
            shape.num_blocks
        );
    }
    let mut engine = KvEngine::new(shape, 1);
    let row = shape.kv_heads * shape.head_dim;
    for pos in 0..lens.iter().copied().max().unwrap_or(0) {
        let mut slots = Vec::new();
        for (r, &len) in lens.iter().enumerate() {
            if pos < len {
                slots.extend(engine.reserve(r as u32, 1)?);
            }
        }
        let (k, v) = (
            rng.normal_vec(slots.len() * row, 1.0),
            rng.normal_vec(slots.len() * row, 1.0),
        );
        engine.write(backend, 0, &slots, &k, &v)?;
    }
    Ok(engine)
}

/// The arrays of one paged decode step computed on `backend`.
pub fn paged_decode_arrays(
    backend: &dyn Backend,
    p: &PagedDecodeParams,
    seed: u64,
) -> Result<(Vec<NamedArray>, Vec<CheckReport>)> {
    if p.block_size == 0
        || p.num_blocks == 0
        || p.heads == 0
        || p.kv_heads == 0
        || p.head_dim == 0
        || p.context_lens.is_empty()
    {
        bail!(
            "block size, number of blocks, heads, kv-heads, head_dim and the number of requests must all be at least 1"
        );
    }
    if !p.heads.is_multiple_of(p.kv_heads) {
        bail!("kv-heads ({}) must divide heads ({})", p.kv_heads, p.heads);
    }
    let shape = PagedShape {
        num_blocks: p.num_blocks,
        block_size: p.block_size,
        kv_heads: p.kv_heads,
        head_dim: p.head_dim,
        dtype: crate::cache::KvDtype::F16,
    };
    const MAX_POOL: usize = 1 << 28; // f16 values per pool: 512 MiB
    let numel = p
        .num_blocks
        .saturating_mul(p.kv_heads)
        .saturating_mul(p.block_size)
        .saturating_mul(p.head_dim);
    if numel > MAX_POOL {
        bail!(
            "the K/V pools would hold {numel} values each (limit {MAX_POOL}): lower --num-blocks, --block-size, --kv-heads or --head-dim"
        );
    }
    if p.head_dim > crate::compute::MAX_HEAD_DIM {
        bail!(
            "head_dim {} is larger than the kernels' limit {}",
            p.head_dim,
            crate::compute::MAX_HEAD_DIM
        );
    }
    let mut rng = Rng::stream(seed, 1);
    let engine = fill_round_robin(backend, shape, &p.context_lens, &mut rng)?;
    let cache = engine.cache();
    let reqs: Vec<u32> = (0..p.context_lens.len() as u32).collect();
    let dt = engine.tables(&reqs);
    let r = reqs.len();
    let q = Rng::stream(seed, 2).normal_vec(r * p.heads * p.head_dim, 1.0);
    let (out, check) = engine.decode_checked(backend, 0, &dt, &q, p.heads)?;
    let checks = vec![check];
    let pool = [p.num_blocks, p.kv_heads, p.block_size, p.head_dim];
    let arrays = vec![
        NamedArray::new("q", &[r, p.heads, p.head_dim], ArrayData::F32(q.clone())),
        NamedArray::new("k_pool", &pool, ArrayData::F16(f16_values(&cache.k_pool)?)),
        NamedArray::new("v_pool", &pool, ArrayData::F16(f16_values(&cache.v_pool)?)),
        NamedArray::new("block_tables", &[r, dt.max_blocks], ArrayData::I32(dt.tables.clone())),
        NamedArray::new("context_lens", &[r], ArrayData::I32(dt.context_lens.clone())),
        NamedArray::new("out", &[r, p.heads, p.head_dim], ArrayData::F32(out)),
    ];
    Ok((arrays, checks))
}

/// `export attention --kernel flash`: the tiled kernel's output on `q`, `k`, `v` (as `flash_out`), its
/// check against the f64 reference, and the global-memory traffic of the naive three-kernel path and of
/// the tiled kernel, in elements, over all query heads (the walker's counts for one head times H; every
/// query head reads its KV head's K and V in both paths), with the tile sizes.
pub fn flash_arrays(
    backend: &dyn Backend,
    q: &ndarray::Array3<f32>,
    k: &ndarray::Array3<f32>,
    v: &ndarray::Array3<f32>,
    mask: crate::math::Mask,
    block_q: usize,
    block_k: usize,
) -> Result<(NamedArray, CheckReport, serde_json::Value)> {
    use crate::compute::{AttnInput, FlashInput, Tolerance, check, reference};
    let attn = AttnInput { q, k, v, mask };
    let out = backend
        .flash_attention(&FlashInput { attn, block_q, block_k })
        .map_err(|e| anyhow::anyhow!("flash_attention: {e}"))?;
    let want = reference::attention(&attn);
    let report = check(
        "flash_out",
        out.shape(),
        out.as_slice().unwrap_or_default(),
        want.out.as_slice().unwrap_or_default(),
        Tolerance::F32,
    );
    let (h, t, hd) = q.dim();
    let zeros = ndarray::Array2::<f32>::zeros((t, hd));
    let one = crate::math::flash::forward_io(zeros.view(), mask, block_q, block_k);
    let naive = crate::math::flash::naive_io(t, hd);
    let n = h as u64;
    let io = serde_json::json!({
        "unit": "elements",
        "heads": h,
        "block_q": block_q,
        "block_k": block_k,
        "naive": {"read": naive.read * n, "write": naive.write * n},
        "flash": {"read": one.read * n, "write": one.write * n},
    });
    let shape = [h, t, hd];
    Ok((
        NamedArray::new("flash_out", &shape, ArrayData::F32(out.iter().copied().collect())),
        report,
        io,
    ))
}

/// The tiny model's architecture constants, for manifests.
fn model_manifest(m: &crate::model::Model) -> serde_json::Map<String, serde_json::Value> {
    let c = m.config;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "model".into(),
        serde_json::json!({
            "file": crate::model::EMBEDDED_PATH,
            "parameters": m.parameters,
            "vocab": c.vocab, "d_model": c.d_model, "n_layers": c.n_layers,
            "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads, "head_dim": c.head_dim,
            "ffn_hidden": c.ffn_hidden, "context": c.context,
            "rope": {"base": c.rope_base, "layout": "rotate_half: dimension i < hd/2 pairs with i + hd/2"},
            "rms_norm_eps": c.norm_eps,
            "tokenizer": "bytes of the UTF-8 text",
            "tied_embeddings": true,
        }),
    );
    extra
}

/// `export logits`: the committed model's tokens `[T]` and next-byte logits `[T, vocab]` for `prompt`.
pub fn model_logits(
    backend: &dyn Backend,
    prompt: &[u8],
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let m = crate::model::Model::embedded()?;
    let out = m.prefill(prompt, backend, false).map_err(|e| anyhow::anyhow!(e))?;
    let t = prompt.len();
    let arrays = vec![
        NamedArray::new(
            "tokens",
            &[t],
            ArrayData::I32(prompt.iter().map(|&b| i32::from(b)).collect()),
        ),
        NamedArray::new(
            "logits",
            &[t, m.config.vocab],
            ArrayData::F32(out.logits.iter().copied().collect()),
        ),
    ];
    Ok((arrays, model_manifest(&m)))
}

/// `export model-attention`: every layer's and head's attention probabilities `[H, T, T]` for `prompt`,
/// with each head's measured pattern label.
pub fn model_attention(
    backend: &dyn Backend,
    prompt: &[u8],
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let m = crate::model::Model::embedded()?;
    let out = m.prefill(prompt, backend, false).map_err(|e| anyhow::anyhow!(e))?;
    let t = prompt.len();
    let mut arrays = vec![NamedArray::new(
        "tokens",
        &[t],
        ArrayData::I32(prompt.iter().map(|&b| i32::from(b)).collect()),
    )];
    let mut labels = Vec::new();
    for (l, p) in out.probs.iter().enumerate() {
        let (h, _, _) = p.dim();
        arrays.push(NamedArray::new(
            &format!("probs_layer{l}"),
            &[h, t, t],
            ArrayData::F32(p.iter().copied().collect()),
        ));
        let per_head: Vec<serde_json::Value> = crate::model::heads::labels(p)
            .into_iter()
            .map(|lab| match lab {
                Some(x) => serde_json::json!({"pattern": x.pattern.name(), "share": x.share, "argmax_rows": x.argmax}),
                None => serde_json::Value::Null,
            })
            .collect();
        labels.push(per_head);
    }
    let mut extra = model_manifest(&m);
    extra.insert("head_labels".into(), serde_json::json!(labels));
    Ok((arrays, extra))
}

/// `export streaming`: the tiny model streaming the first `bytes` bytes of the held-out file under
/// `cfg` (lesson 8). Arrays: `tokens [N]`, `nll [N−1]` (natural-log loss of byte i+1 after reading byte
/// i), `blocks_in_use [N]` (after each step's append and frees), `sink_mass [layers, heads, N]` (the
/// mass each head puts on text bytes 0…S−1, 0 where they are not kept); the manifest defines each.
pub fn streaming(
    backend: &dyn Backend,
    cfg: crate::drivers::stream::StreamConfig,
    bytes: usize,
    model: Option<&std::path::Path>,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let loaded;
    let m = match model {
        Some(p) => {
            loaded = crate::model::Model::load(p)?;
            &loaded
        }
        None => crate::model::shared()?,
    };
    // A model trained with a start byte reads it first, as it saw it at the head of every window.
    let held = &crate::model::HELDOUT[..bytes.min(crate::model::HELDOUT.len())];
    let owned: Vec<u8> = m.config.start_byte.into_iter().chain(held.iter().copied()).collect();
    let text = &owned[..];
    let run = m.stream(text, cfg, backend, &[]).map_err(|e| anyhow::anyhow!(e))?;
    let n = text.len();
    let arrays = vec![
        NamedArray::new(
            "tokens",
            &[n],
            ArrayData::I32(text.iter().map(|&b| i32::from(b)).collect()),
        ),
        NamedArray::new("nll", &[n - 1], ArrayData::F32(run.nll.clone())),
        NamedArray::new(
            "blocks_in_use",
            &[n],
            ArrayData::I32(run.blocks_in_use.iter().map(|&b| b as i32).collect()),
        ),
        NamedArray::new(
            "sink_mass",
            &[run.layers, run.heads, n],
            ArrayData::F32(run.sink_mass.clone()),
        ),
    ];
    let mut extra = model_manifest(m);
    let defs = serde_json::json!({
        "tokens": "the bytes streamed: the first N of kvscope-tiny.heldout.txt, after the model's start byte when it was trained with one (start_byte)",
        "nll": "nll[i] = -ln p(byte i+1 | the step that reads byte i); N-1 values",
        "blocks_in_use": "blocks of the paged pool in use after step t's evictions and append (0 for recompute: no cache)",
        "sink_mass": "[layer, query head, step t]: the attention weight the head puts on text bytes 0..S-1 at step t (0 where they are not kept)",
        "step t attends to": {
            "dense": "bytes 0..t",
            "window": "bytes t-W+1..t (W bytes; fewer while t < W-1)",
            "sinks": "bytes 0..S-1 and t-W+1..t, without duplicates",
            "recompute": "no cache: the model runs afresh on bytes max(0,t-W+1)..t at positions 0..",
        },
        "positions": {
            "cache": "the kept bytes in text order take positions 0,1,2,...; the byte read is last",
            "text": "each byte keeps its position in the text",
        },
        "keys": "each byte's K and V are computed once, when it is read, and cached before RoPE (f16); the stream_decode kernel turns keys and the query at read time",
        "bits_per_byte": "sum(nll) / (ln 2 * (N-1))",
    });
    extra.insert("definitions".into(), defs);
    extra.insert(
        "streaming".into(),
        serde_json::json!({
            "policy": cfg.policy.name(),
            "positions": cfg.positions.name(),
            "model": model.map_or("assets/models/kvscope-tiny.safetensors".to_string(), |p| p.display().to_string()),
            "start_byte": m.config.start_byte,
            "text": "assets/models/kvscope-tiny.heldout.txt",
            "bytes": n,
            "heldout_bytes": held.len(),
            "window": cfg.window,
            "sinks": cfg.sinks,
            "block_size": cfg.block_size,
            "pool_blocks": run.pool_blocks,
            "bits_per_byte": run.bits_per_byte(),
            "max_blocks_in_use": run.blocks_in_use.iter().copied().max().unwrap_or(0),
            "seconds": run.seconds,
        }),
    );
    Ok((arrays, extra))
}

/// `kvscope export eviction`: one eviction run (lesson 9) on `text` with a prompt of `prompt_len` bytes
/// (SnapKV compresses after it), its keep sets, accumulated scores and losses.
pub fn eviction(
    backend: &dyn Backend,
    cfg: crate::drivers::evict::EvictConfig,
    text: &[u8],
    prompt_len: usize,
    source: &str,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let m = crate::model::shared()?;
    let opt = crate::drivers::evict::EvictOptions {
        record: true,
        ..Default::default()
    };
    let run = m
        .evict_run(text, prompt_len, cfg, backend, opt)
        .map_err(|e| anyhow::anyhow!(e))?;
    let n = text.len();
    let rows = run.layers * run.kv_heads;
    let width = run.kept.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let mut kept = vec![-1i32; n * rows * width];
    for (t, step) in run.kept.iter().enumerate() {
        for (row, set) in step.iter().enumerate() {
            for (j, &i) in set.iter().enumerate() {
                kept[(t * rows + row) * width + j] = i as i32;
            }
        }
    }
    let scores: Vec<f32> = run.scores.iter().flatten().copied().collect();
    let arrays = vec![
        NamedArray::new(
            "tokens",
            &[n],
            ArrayData::I32(text.iter().map(|&b| i32::from(b)).collect()),
        ),
        NamedArray::new("kept", &[n, run.layers, run.kv_heads, width], ArrayData::I32(kept)),
        NamedArray::new("scores", &[n, run.layers, run.kv_heads, n], ArrayData::F32(scores)),
        NamedArray::new("nll", &[n - 1], ArrayData::F32(run.nll.clone())),
    ];
    let mut extra = model_manifest(m);
    let defs = serde_json::json!({
        "budget": "K: tokens kept per KV head per layer, counting the tokens a step attends to, the one it reads included; after step t's append and before its attention, while more than K would be kept, one token is evicted",
        "tokens": "the bytes read, one decode step each (step t reads byte t at position t; positions stay text positions)",
        "kept": "[step t, layer, kv_head, width]: the text indices step t attends to for that layer and KV head, ascending, padded with -1; width is the most any step attends to (K for the budgeted policies; more for full, and for snapkv, whose cache grows by one per byte after the prompt)",
        "scores": "[step t, layer, kv_head, T]: accumulated scores after step t's attention: for each token, the sum over steps s <= t of the attention mass the KV head's query group (its query heads, summed) put on it at step s, with the keep set in force at s (0 for tokens never attended)",
        "nll": "nll[i] = -ln p(byte i+1 | the step that reads byte i); T-1 values",
        "policies": {
            "full": "no eviction",
            "window": "the most recent K",
            "sinks": "the first 4 and the most recent K-4",
            "h2o": "the most recent R and, outside them, the tokens with the highest accumulated score; evicted: the lowest score outside the recent R, the older on ties; per layer and KV head",
            "snapkv": "no eviction during the prompt; when the step after the prompt starts (if the prompt is longer than K): votes = the scores the last w prompt steps put on the prompt tokens before those w, summed; pooled = avg_pool1d(votes, kernel k, padding k//2, stride 1, zero padding counted); keep the top K-w by pooled vote (the older on ties) and the w window tokens; then no further eviction. Selected per KV head over its query group's summed votes (the reference code selects per query head: an adaptation to GQA)",
            "random": "a uniformly random token outside the most recent R, drawn per layer and KV head from a stream seeded by seed",
        },
    });
    extra.insert("definitions".into(), defs);
    extra.insert(
        "eviction".into(),
        serde_json::json!({
            "policy": cfg.policy.name(),
            "budget": cfg.budget,
            "budget_unit": "tokens kept per KV head per layer",
            "recent": cfg.recent_tokens(),
            "obs_window": cfg.window_tokens(),
            "pool_kernel": cfg.pool_kernel,
            "seed": cfg.seed,
            "block_size": cfg.block_size,
            "prompt_length": prompt_len,
            "text": source,
            "bytes": n,
            "layers": run.layers,
            "kv_heads": run.kv_heads,
            "width": width,
            "bits_per_byte_after_prompt": run.bits_per_byte_in(prompt_len.saturating_sub(1)..n),
            "dead_fraction": run.dead_fraction(),
            "score_bytes": run.score_bytes,
            "kv_bytes_read": run.read_bytes,
            "seconds": run.seconds,
        }),
    );
    Ok((arrays, extra))
}

/// Lesson 10's export: the tiny model reads `text` byte by byte from an empty cache held in `fmt`. Per
/// layer (`[L, T, KVH, hd]`): the f32 K and V written, the codes as stored, each value's scale (and
/// KIVI's zero point), what the cache held (dequantised), and the last step's attention output through
/// the cache (`[L, H, hd]`).
pub fn quant(
    backend: &dyn Backend,
    fmt: crate::cache::CacheFormat,
    text: &[u8],
    source: &str,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let m = crate::model::shared()?;
    let run = m.quant_run(text, fmt, backend).map_err(|e| anyhow::anyhow!(e))?;
    let c = m.config;
    let (l, n, kvh, hd) = (c.n_layers, text.len(), c.n_kv_heads, c.head_dim);
    let dims = [l, n, kvh, hd];
    let flat = |v: &[Vec<f32>]| v.iter().flatten().copied().collect::<Vec<f32>>();
    let mut arrays = vec![
        NamedArray::new(
            "tokens",
            &[n],
            ArrayData::I32(text.iter().map(|&b| i32::from(b)).collect()),
        ),
        NamedArray::new("k", &dims, ArrayData::F32(flat(&run.k))),
        NamedArray::new("v", &dims, ArrayData::F32(flat(&run.v))),
        NamedArray::new("k_deq", &dims, ArrayData::F32(flat(&run.k_deq))),
        NamedArray::new("v_deq", &dims, ArrayData::F32(flat(&run.v_deq))),
        NamedArray::new("out", &[l, c.n_heads, hd], ArrayData::F32(flat(&run.last_out))),
        NamedArray::new("nll", &[n - 1], ArrayData::F32(run.nll.clone())),
    ];
    if !run.k_codes.iter().all(Vec::is_empty) {
        let codes = |v: &[Vec<u8>]| v.iter().flatten().copied().collect::<Vec<u8>>();
        arrays.push(NamedArray::new("k_codes", &dims, ArrayData::U8(codes(&run.k_codes))));
        arrays.push(NamedArray::new("v_codes", &dims, ArrayData::U8(codes(&run.v_codes))));
        arrays.push(NamedArray::new("k_scales", &dims, ArrayData::F32(flat(&run.k_scales))));
        arrays.push(NamedArray::new("v_scales", &dims, ArrayData::F32(flat(&run.v_scales))));
    }
    if !run.k_zeros.iter().all(Vec::is_empty) && matches!(fmt, crate::cache::CacheFormat::Kivi { .. }) {
        arrays.push(NamedArray::new("k_zeros", &dims, ArrayData::F32(flat(&run.k_zeros))));
        arrays.push(NamedArray::new("v_zeros", &dims, ArrayData::F32(flat(&run.v_zeros))));
    }
    let mut extra = model_manifest(m);
    let decode = match fmt {
        crate::cache::CacheFormat::Kivi { .. } => {
            "deq = code * scale + zero (asymmetric; code unsigned); 0 scale and zero: the value is still f16 (deq = the f16 rounding of k)"
        }
        crate::cache::CacheFormat::Int8Channel => {
            "deq = int8(code) * scale (code two's complement); 0 scale: the value is still f16 (its block is filling)"
        }
        crate::cache::CacheFormat::Pool { dtype, .. } => match dtype.format().quant {
            Some(crate::cache::dtype::quant::Quant::Int8Token) => {
                "deq = int8(code) * scale (two's complement; the scale is the row's absmax / 127 rounded up to an f16 value)"
            }
            Some(crate::cache::dtype::quant::Quant::Fp8(_)) => {
                "deq = fp8_value(code) * scale (see fp8; scale per tensor or per KV head, broadcast)"
            }
            None => "f16: no codes; deq is the f16 rounding of k",
        },
    };
    extra.insert(
        "definitions".into(),
        serde_json::json!({
            "tokens": "the bytes read, one decode step each from an empty cache (step t reads byte t at position t)",
            "k": "[layer, t, kv_head, d]: the f32 key rows written (RoPE applied), before the cache stores them; v likewise",
            "k_codes": "[layer, t, kv_head, d] uint8: each value's code as stored, one code per element, unpacked",
            "k_scales": "[layer, t, kv_head, d] f32: the scale each value was quantised with (its f16 or f32 value), broadcast to the values' shape",
            "k_zeros": "KIVI only: each value's zero point (the group's minimum, as f16), broadcast",
            "k_deq": "what the cache held for each value at the end, read back through the format's decoder",
            "decode": decode,
            "out": "[layer, head, d]: the last step's attention output, read from the cache",
            "nll": "nll[i] = -ln p(byte i+1 | the step that reads byte i); T-1 values",
            "fp8": {"e4m3": "OCP E4M3FN: bias 7, 3 mantissa bits, no infinities, max 448 (0x7E), NaN 0x7F/0xFF", "e5m2": "OCP E5M2: bias 15, 2 mantissa bits, Inf 0x7C/0xFC, max 57344 (0x7B)", "nan_code": "0x7F (written for NaN in both formats)", "saturation": "finite values beyond max and +-Inf encode as +-max"},
        }),
    );
    extra.insert(
        "quant".into(),
        serde_json::json!({
            "format": run.format,
            "kernel": run.kernel,
            "bits_per_byte": run.bits_per_byte(),
            "out_rel_rms_per_layer": run.out_rel_rms,
            "out_max_abs_err_per_layer": run.out_max_err,
            "fp8_scales_per_layer": run.scales,
            "bytes_per_token_per_layer_at_256": fmt.bytes_per_token(kvh, hd, 256),
            "text": source,
        }),
    );
    Ok((arrays, extra))
}

/// The shapes of `kvscope export quant`'s shape mode: random seeded K/V rows instead of the model's.
#[derive(Debug, Clone)]
pub struct QuantShapes {
    /// Tokens of each request.
    pub lens: Vec<usize>,
    /// Tokens per block of a pool format (and INT8 per channel's block).
    pub block_size: usize,
    /// Blocks of a pool format's pools.
    pub num_blocks: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Seed of the rows and queries.
    pub seed: u64,
}

/// `kvscope export quant` in shape mode: seeded random K/V rows (`[Σ lens, KVH, hd]`, request after
/// request) appended into a cache of `fmt` through its append op on `backend` (pool formats all at
/// once; group formats token by token under their rule, every request a step), then one decode step of
/// seeded queries through the format's decode op, checked against the f64 reference on the same codes.
pub fn quant_shapes(
    backend: &dyn Backend,
    fmt: crate::cache::CacheFormat,
    sp: &QuantShapes,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    use crate::cache::CacheFormat;
    use crate::cache::{GroupCache, GroupFormat, GroupShape};
    use crate::compute::ops::group_append::GroupAppendInput;
    use crate::compute::ops::group_decode::GroupDecodeInput;
    use crate::drivers::quant::{Contents, GroupReq, group_contents, pool_contents};
    let (r, h, kvh, hd) = (sp.lens.len(), sp.heads, sp.kv_heads, sp.head_dim);
    if r == 0 || sp.lens.contains(&0) {
        anyhow::bail!("every request needs at least one token");
    }
    if kvh == 0 || h == 0 || !h.is_multiple_of(kvh) {
        anyhow::bail!("--heads ({h}) must be a positive multiple of --kv-heads ({kvh})");
    }
    let row = kvh * hd;
    let total: usize = sp.lens.iter().sum();
    let mut rng = Rng::stream(sp.seed, 11);
    let k = rng.normal_vec(total * row, 1.0);
    let v = rng.normal_vec(total * row, 0.5);
    let q = rng.normal_vec(r * h * hd, 1.0);
    let starts: Vec<usize> = sp
        .lens
        .iter()
        .scan(0, |a, &l| {
            let s = *a;
            *a += l;
            Some(s)
        })
        .collect();
    let (got, want, contents, scales): (Vec<f32>, Vec<f64>, Contents, Vec<f32>) = match fmt {
        CacheFormat::Pool { dtype, calibrated } => {
            let shape = crate::cache::PagedShape {
                num_blocks: sp.num_blocks,
                block_size: sp.block_size,
                kv_heads: kvh,
                head_dim: hd,
                dtype,
            };
            if sp.block_size == 0 || sp.num_blocks == 0 || hd == 0 {
                bail!("--block-size, --num-blocks and --head-dim must be at least 1");
            }
            let mut e = KvEngine::new(shape, 1);
            let mut scales = Vec::new();
            if let Some(crate::cache::dtype::quant::Quant::Fp8(f8)) = dtype.format().quant {
                let per_head = dtype.format().scales == crate::cache::ScaleLayout::PerHead;
                let heads: Vec<Option<usize>> = if per_head {
                    (0..kvh).map(Some).collect()
                } else {
                    vec![None]
                };
                let scale_of = |x: &[f32], head: Option<usize>| -> f32 {
                    let amax = x
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| head.is_none_or(|hh| (i / hd) % kvh == hh))
                        .fold(0f32, |m, (_, x)| m.max(x.abs()));
                    if calibrated && amax > 0.0 { amax / f8.max() } else { 1.0 }
                };
                let ks: Vec<f32> = heads.iter().map(|&hh| scale_of(&k, hh)).collect();
                let vs: Vec<f32> = heads.iter().map(|&hh| scale_of(&v, hh)).collect();
                e.set_fp8_scales(0, &ks, &vs).map_err(|e| anyhow::anyhow!("{e}"))?;
                scales = ks.into_iter().chain(vs).collect();
            }
            let reqs: Vec<u32> = (0..r as u32).collect();
            for (i, &len) in sp.lens.iter().enumerate() {
                let slots = e
                    .reserve(i as u32, len)
                    .map_err(|e| anyhow::anyhow!("request {i}: {e} (raise --num-blocks)"))?;
                let rows = starts[i] * row..(starts[i] + len) * row;
                e.write(backend, 0, &slots, &k[rows.clone()], &v[rows])
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            let tables = e.tables(&reqs);
            let got = e
                .decode(backend, 0, &tables, &q, h)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let want = crate::compute::reference::paged_decode(
                &e.input(0, &tables, &q, h).map_err(|e| anyhow::anyhow!("{e}"))?,
            );
            let rows: Vec<(u32, usize)> = reqs
                .iter()
                .zip(&sp.lens)
                .flat_map(|(&q, &l)| (0..l).map(move |t| (q, t)))
                .collect();
            let contents = pool_contents(&e, 0, &rows).map_err(|e| anyhow::anyhow!(e))?;
            (got, want, contents, scales)
        }
        CacheFormat::Int8Channel | CacheFormat::Kivi { .. } => {
            let gf = match fmt {
                CacheFormat::Int8Channel => GroupFormat::int8_channel(sp.block_size),
                _ => fmt.group().expect("a group format"),
            };
            let max_len = sp.lens.iter().copied().max().unwrap_or(0);
            let mb = max_len.div_ceil(gf.group);
            let shape = GroupShape {
                num_blocks: r * mb,
                kv_heads: kvh,
                head_dim: hd,
                rings: r,
                fmt: gf,
            };
            shape
                .validate(crate::compute::MAX_HEAD_DIM)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut cache = GroupCache::new(&shape);
            let block = |ri: usize, i: usize| i * r + ri;
            for t in 0..max_len {
                let (mut rows, mut kt, mut vt, mut jobs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for (ri, _) in sp.lens.iter().enumerate().filter(|&(_, &l)| t < l) {
                    let at = (starts[ri] + t) * row;
                    rows.extend([ri as i32, t as i32]);
                    kt.extend_from_slice(&k[at..at + row]);
                    vt.extend_from_slice(&v[at..at + row]);
                    jobs.extend(gf.step_job_words(ri, t, |b| block(ri, b)));
                }
                backend
                    .group_append(GroupAppendInput {
                        shape,
                        cache: &mut cache,
                        rows: &rows,
                        k: &kt,
                        v: &vt,
                        jobs: &jobs,
                    })
                    .map_err(|e| anyhow::anyhow!("step {t}: {e}"))?;
            }
            let tables: Vec<i32> = (0..r)
                .flat_map(|ri| (0..mb).map(move |i| block(ri, i) as i32))
                .collect();
            let lens: Vec<i32> = sp.lens.iter().map(|&l| l as i32).collect();
            let quantised: Vec<(usize, usize)> = sp.lens.iter().map(|&l| gf.quantised(l)).collect();
            let kq: Vec<i32> = quantised.iter().map(|q| q.0 as i32).collect();
            let vq: Vec<i32> = quantised.iter().map(|q| q.1 as i32).collect();
            let rings: Vec<i32> = (0..r as i32).collect();
            let inp = GroupDecodeInput {
                shape,
                cache: &cache,
                q: &q,
                n_heads: h,
                block_tables: &tables,
                max_blocks: mb,
                context_lens: &lens,
                k_quantised: &kq,
                v_quantised: &vq,
                rings: &rings,
            };
            let got = backend.group_decode(&inp).map_err(|e| anyhow::anyhow!("{e}"))?;
            let want = crate::compute::ops::group_decode::reference(&inp);
            let reqs: Vec<GroupReq> = (0..r)
                .map(|ri| GroupReq {
                    table: &tables[ri * mb..(ri + 1) * mb],
                    ring: ri,
                    len: sp.lens[ri],
                    quantised: quantised[ri],
                })
                .collect();
            (got, want, group_contents(&shape, &cache, &reqs), Vec::new())
        }
    };
    let report = crate::compute::check(
        &format!("export quant {}", fmt.name()),
        &[r, h, hd],
        &got,
        &want,
        crate::compute::Tolerance::F32,
    );
    if !report.passed() {
        anyhow::bail!("the decode disagrees with the f64 reference:\n{report}");
    }
    let dims = [total, kvh, hd];
    let Contents {
        deq: [kd, vd],
        codes: [kc, vc],
        scales: [ks, vs],
        zeros: [kz, vz],
    } = contents;
    let mut arrays = vec![
        NamedArray::new("k", &dims, ArrayData::F32(k)),
        NamedArray::new("v", &dims, ArrayData::F32(v)),
        NamedArray::new("q", &[r, h, hd], ArrayData::F32(q)),
        NamedArray::new(
            "context_lens",
            &[r],
            ArrayData::I32(sp.lens.iter().map(|&l| l as i32).collect()),
        ),
        NamedArray::new("k_deq", &dims, ArrayData::F32(kd)),
        NamedArray::new("v_deq", &dims, ArrayData::F32(vd)),
        NamedArray::new("out", &[r, h, hd], ArrayData::F32(got)),
    ];
    if !kc.is_empty() {
        arrays.push(NamedArray::new("k_codes", &dims, ArrayData::U8(kc)));
        arrays.push(NamedArray::new("v_codes", &dims, ArrayData::U8(vc)));
        arrays.push(NamedArray::new("k_scales", &dims, ArrayData::F32(ks)));
        arrays.push(NamedArray::new("v_scales", &dims, ArrayData::F32(vs)));
    }
    if matches!(fmt, CacheFormat::Kivi { .. }) {
        arrays.push(NamedArray::new("k_zeros", &dims, ArrayData::F32(kz)));
        arrays.push(NamedArray::new("v_zeros", &dims, ArrayData::F32(vz)));
    }
    let mut extra = serde_json::Map::new();
    extra.insert(
        "definitions".into(),
        serde_json::json!({
            "k": "[token, kv_head, d]: the f32 key rows written, request after request (context_lens[i] rows each), seeded normal (sigma 1; v sigma 0.5)",
            "q": "[request, head, d]: the decode step's queries",
            "k_codes": "[token, kv_head, d] uint8: each value's code as stored, unpacked (INT8 as two's complement)",
            "k_scales": "[token, kv_head, d] f32: each value's scale, broadcast; 0 while the value is still f16",
            "k_zeros": "KIVI only: each value's zero point (its group's minimum as f16), broadcast",
            "k_deq": "what the cache holds for each value, read back through the format's decoder",
            "out": "[request, head, d]: one decode step through the format's dequantising decode kernel",
        }),
    );
    extra.insert(
        "quant".into(),
        serde_json::json!({
            "format": fmt.name(),
            "fp8_scales": scales,
            "check": {"max_abs_err": report.max_abs, "max_rel_err": report.max_rel, "passed": report.passed()},
        }),
    );
    Ok((arrays, extra))
}

/// `kvscope export fp8-table`: the code chosen for every f16 bit pattern (scale 1) and every code's value.
pub fn fp8_table(f: crate::cache::dtype::quant::Fp8) -> Vec<NamedArray> {
    let codes: Vec<u8> = (0..=u16::MAX).map(|b| f.encode(f16::from_bits(b).to_f32())).collect();
    let values: Vec<f32> = (0..=255u8).map(|c| f.decode(c)).collect();
    vec![
        NamedArray::new("codes", &[65536], ArrayData::U8(codes)),
        NamedArray::new("values", &[256], ArrayData::F32(values)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zip that the web build downloads opens in Python's zipfile, every member's CRC checks, and the
    /// `.npy` member loads back to the array that went in.
    #[test]
    fn zip_stored_opens_in_python() {
        let a = NamedArray::new("scores", &[2, 3], ArrayData::F32(vec![1.0, -2.5, 3.25, 0.0, 7.0, 1e-3]));
        let files = vec![
            ("scores.npy".to_string(), npy_bytes(&a).expect("npy")),
            ("manifest.json".to_string(), b"{\"kind\": \"test\"}".to_vec()),
        ];
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("export.zip");
        std::fs::write(&path, zip_stored(&files)).expect("write");
        let script = "import sys, zipfile, struct\n\
            z = zipfile.ZipFile(sys.argv[1])\n\
            assert z.testzip() is None\n\
            print(','.join(z.namelist()))\n\
            b = z.read('scores.npy')\n\
            n = struct.unpack('<H', b[8:10])[0]\n\
            print(b[10:10 + n].decode().strip())\n\
            print(struct.unpack('<6f', b[10 + n:]))\n";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "scores.npy,manifest.json");
        assert!(
            lines[1].contains("'shape': (2, 3") && lines[1].contains("<f4"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "(1.0, -2.5, 3.25, 0.0, 7.0, 0.0010000000474974513)");
    }
}
