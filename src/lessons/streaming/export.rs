//! Lesson 8's export (`kvscope export streaming`), written through the shared `.npy` + `manifest.json` writer
//! (`lessons::export`).

use anyhow::Result;

use crate::compute::Backend;
use crate::lessons::export::*;

/// `export streaming`: model `m` streaming the start of its held-out text under `cfg` (lesson 8): the
/// tiny model the first `count` bytes of its held-out file (after its start byte when it was trained with
/// one), SmolLM2 the first `count` tokens of `assets/texts/heldout-en.txt`. Arrays: `tokens [N]`,
/// `nll [N−1]` (natural-log loss of token i+1 after reading token i), `blocks_in_use [N]` (after each
/// step's append and frees), `sink_mass [layers, heads, N]` (the mass each head puts on text tokens
/// 0…S−1, 0 where they are not kept); the manifest defines each.
pub fn streaming(
    backend: &dyn Backend,
    cfg: crate::drivers::stream::StreamConfig,
    count: Option<usize>,
    m: &crate::model::Model,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    use crate::model::ModelName;
    // A model trained with a start byte reads it first, as it saw it at the head of every window.
    let (held, _) = m
        .heldout_tokens(count.unwrap_or(usize::MAX))
        .map_err(anyhow::Error::msg)?;
    let held_len = held.len();
    let ids: Vec<u32> = m.config.start_byte.map(u32::from).into_iter().chain(held).collect();
    let text_file = match m.name {
        ModelName::Tiny => "assets/models/kvscope-tiny.heldout.txt",
        ModelName::Smollm2 => "assets/texts/heldout-en.txt",
    };
    let run = m.stream(&ids, cfg, backend, &[]).map_err(|e| anyhow::anyhow!(e))?;
    let n = ids.len();
    // Bytes the predicted tokens stand for: bits per byte for either tokenizer.
    let predicted_bytes: usize = ids[1..].iter().map(|&i| m.tokenizer.piece_bytes(i).len()).sum();
    let bits: f64 = run.nll.iter().map(|&x| f64::from(x)).sum::<f64>() / std::f64::consts::LN_2;
    let mut arrays = vec![
        NamedArray::new("tokens", &[n], ArrayData::I32(ids.iter().map(|&b| b as i32).collect())),
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
    // A BPE model's tokens stand for several bytes each: their byte counts give bits per byte over any
    // stretch of the stream (the tiny model's tokens are one byte each).
    if m.name != ModelName::Tiny {
        arrays.push(NamedArray::new(
            "token_bytes",
            &[n],
            ArrayData::I32(ids.iter().map(|&i| m.tokenizer.piece_bytes(i).len() as i32).collect()),
        ));
    }
    let mut extra = model_manifest(m);
    let defs = serde_json::json!({
        "tokens": "the tokens streamed (bytes for the tiny model: the first N of kvscope-tiny.heldout.txt, after the model's start byte when it was trained with one (start_byte); BPE ids for smollm2: the first N of assets/texts/heldout-en.txt)",
        "nll": "nll[i] = -ln p(token i+1 | the step that reads token i); N-1 values",
        "blocks_in_use": "blocks of the paged pool in use after step t's evictions and append (0 for recompute: no cache)",
        "sink_mass": "[layer, query head, step t]: the attention weight the head puts on text tokens 0..S-1 at step t (0 where they are not kept)",
        "step t attends to": {
            "dense": "tokens 0..t",
            "window": "tokens t-W+1..t (W tokens; fewer while t < W-1)",
            "sinks": "tokens 0..S-1 and t-W+1..t, without duplicates",
            "recompute": "no cache: the model runs afresh on tokens max(0,t-W+1)..t at positions 0..",
        },
        "positions": {
            "cache": "the kept tokens in text order take positions 0,1,2,...; the token read is last",
            "text": "each token keeps its position in the text",
        },
        "keys": "each token's K and V are computed once, when it is read, and cached before RoPE (f16); the stream_decode kernel turns keys and the query at read time",
        "bits_per_byte": "sum(nll) / ln 2 / the UTF-8 bytes of tokens 1..N-1 (for the tiny model: N-1)",
        "bits_per_token": "sum(nll) / (ln 2 * (N-1))",
    });
    let mut defs = defs;
    if m.name != ModelName::Tiny {
        defs["token_bytes"] = serde_json::json!("token_bytes[i] = the UTF-8 bytes token i stands for");
    }
    extra.insert("definitions".into(), defs);
    extra.insert(
        "streaming".into(),
        serde_json::json!({
            "policy": cfg.policy.name(),
            "positions": cfg.positions.name(),
            "model": m.describe(),
            "start_byte": m.config.start_byte,
            "text": text_file,
            "tokens": n,
            "bytes": if m.name == ModelName::Tiny { n } else { predicted_bytes },
            "heldout_bytes": held_len,
            "window": cfg.window,
            "sinks": cfg.sinks,
            "block_size": cfg.block_size,
            "pool_blocks": run.pool_blocks,
            // The tiny model's tokens are its bytes: its figure stays the run's own.
            "bits_per_byte": if m.name == ModelName::Tiny { run.bits_per_byte() } else { bits / predicted_bytes.max(1) as f64 },
            "bits_per_token": run.bits_per_byte(),
            "max_blocks_in_use": run.blocks_in_use.iter().copied().max().unwrap_or(0),
            "seconds": run.seconds,
        }),
    );
    Ok((arrays, extra))
}
