//! `.npy` exports with a JSON manifest: `kvscope export attention` (the arrays of
//! [`crate::lessons::attention_layer::AttnOut`]), `kvscope export paged-decode` and the app's Ctrl+E
//! write the tensors of one computation so they can be checked in NumPy. The writer is shared; a
//! lesson's own exports live in its folder (`streaming::export`, `eviction::export`, `quant::export`).

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

/// A model's architecture constants, for manifests.
pub(crate) fn model_manifest(m: &crate::model::Model) -> serde_json::Map<String, serde_json::Value> {
    let c = m.config;
    let mut extra = serde_json::Map::new();
    let file = match m.name {
        crate::model::ModelName::Tiny => crate::model::EMBEDDED_PATH.to_string(),
        crate::model::ModelName::Smollm2 => crate::model::smollm2::FILE_NAME.to_string(),
    };
    extra.insert(
        "model".into(),
        serde_json::json!({
            "name": m.name.id(),
            "describe": m.describe(),
            "file": file,
            "parameters": m.parameters,
            "vocab": c.vocab, "d_model": c.d_model, "n_layers": c.n_layers,
            "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads, "head_dim": c.head_dim,
            "ffn_hidden": c.ffn_hidden, "context": c.context,
            "rope": {"base": c.rope_base, "layout": "rotate_half: dimension i < hd/2 pairs with i + hd/2"},
            "rms_norm_eps": c.norm_eps,
            "tokenizer": m.tokenizer.describe(),
            "tied_embeddings": true,
        }),
    );
    extra
}

/// The ids of `prompt` for model `m`, with the error a lesson shows.
pub fn prompt_ids(m: &crate::model::Model, prompt: &str) -> Result<Vec<u32>> {
    let ids = m.tokenizer.encode(prompt).map_err(|e| anyhow::anyhow!(e))?;
    anyhow::ensure!(!ids.is_empty(), "the prompt is empty: give at least one token");
    Ok(ids)
}

/// `export logits`: model `m`'s tokens `[T]` and next-token logits `[T, vocab]` for `prompt`.
pub fn model_logits(
    backend: &dyn Backend,
    m: &crate::model::Model,
    prompt: &str,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let ids = prompt_ids(m, prompt)?;
    let out = m.prefill(&ids, backend, false).map_err(|e| anyhow::anyhow!(e))?;
    let t = ids.len();
    let arrays = vec![
        NamedArray::new("tokens", &[t], ArrayData::I32(ids.iter().map(|&b| b as i32).collect())),
        NamedArray::new(
            "logits",
            &[t, m.config.vocab],
            ArrayData::F32(out.logits.iter().copied().collect()),
        ),
    ];
    Ok((arrays, model_manifest(m)))
}

/// `export model-attention`: every layer's and head's attention probabilities `[H, T, T]` of model `m`
/// for `prompt`, with each head's measured pattern label.
pub fn model_attention(
    backend: &dyn Backend,
    m: &crate::model::Model,
    prompt: &str,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let ids = prompt_ids(m, prompt)?;
    let out = m.prefill(&ids, backend, false).map_err(|e| anyhow::anyhow!(e))?;
    let t = ids.len();
    let mut arrays = vec![NamedArray::new(
        "tokens",
        &[t],
        ArrayData::I32(ids.iter().map(|&b| b as i32).collect()),
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
    let mut extra = model_manifest(m);
    extra.insert("head_labels".into(), serde_json::json!(labels));
    Ok((arrays, extra))
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
