//! Lesson 9's export (`kvscope export eviction`), written through the shared `.npy` + `manifest.json` writer
//! (`lessons::export`).

use anyhow::Result;

use crate::compute::Backend;
use crate::lessons::export::*;

/// `kvscope export eviction`: one eviction run (lesson 9) of model `m` on the tokens `text` (bytes for
/// the tiny model) with a prompt of `prompt_len` tokens (SnapKV compresses after it), its keep sets,
/// accumulated scores and losses.
pub fn eviction(
    backend: &dyn Backend,
    cfg: crate::drivers::evict::EvictConfig,
    text: &[u32],
    prompt_len: usize,
    source: &str,
    m: &crate::model::Model,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
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
        NamedArray::new("tokens", &[n], ArrayData::I32(text.iter().map(|&b| b as i32).collect())),
        NamedArray::new("kept", &[n, run.layers, run.kv_heads, width], ArrayData::I32(kept)),
        NamedArray::new("scores", &[n, run.layers, run.kv_heads, n], ArrayData::F32(scores)),
        NamedArray::new("nll", &[n - 1], ArrayData::F32(run.nll.clone())),
    ];
    // The bytes the scored tokens stand for (1 each for the tiny model).
    let scored = &text[prompt_len.clamp(1, n)..];
    let (after_tokens, after_bytes) = (
        scored.len(),
        scored.iter().map(|&i| m.tokenizer.piece_bytes(i).len()).sum::<usize>(),
    );
    let mut extra = model_manifest(m);
    let defs = serde_json::json!({
        "budget": "K: tokens kept per KV head per layer, counting the tokens a step attends to, the one it reads included; after step t's append and before its attention, while more than K would be kept, one token is evicted",
        "tokens": "the tokens read (bytes for the tiny model, BPE ids for smollm2), one decode step each (step t reads token t at position t; positions stay text positions)",
        "kept": "[step t, layer, kv_head, width]: the text indices step t attends to for that layer and KV head, ascending, padded with -1; width is the most any step attends to (K for the budgeted policies; more for full, and for snapkv, whose cache grows by one per byte after the prompt)",
        "scores": "[step t, layer, kv_head, T]: accumulated scores after step t's attention: for each token, the sum over steps s <= t of the attention mass the KV head's query group (its query heads, summed) put on it at step s, with the keep set in force at s (0 for tokens never attended)",
        "nll": "nll[i] = -ln p(token i+1 | the step that reads token i); T-1 values",
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
            "bits_per_byte_after_prompt": run.bits_per_byte_in(prompt_len.saturating_sub(1)..n) * after_tokens as f64
                / after_bytes.max(1) as f64,
            "bits_per_token_after_prompt": run.bits_per_byte_in(prompt_len.saturating_sub(1)..n),
            "dead_fraction": run.dead_fraction(),
            "score_bytes": run.score_bytes,
            "kv_bytes_read": run.read_bytes,
            "seconds": run.seconds,
        }),
    );
    Ok((arrays, extra))
}
