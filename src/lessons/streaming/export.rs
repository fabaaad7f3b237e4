//! Lesson 8's export (`kvscope export streaming`), written through the shared `.npy` + `manifest.json` writer
//! (`lessons::export`).

use anyhow::Result;

use crate::compute::Backend;
use crate::lessons::export::*;

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
