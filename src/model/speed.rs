//! `kvscope bench model`: how fast a model runs on a backend, and how close its decode comes to the limit
//! that binds it. A decode step reads every weight once (the tied embedding included, for the logits)
//! and the whole KV cache; [`measure`] times prefill and decode, counts those bytes, and measures in the
//! same run how fast this machine reads the model's own weight buffers (a parallel sum on every core).

use rayon::prelude::*;
use serde::Serialize;

use super::decode::{CacheKind, Sampler};
use super::{Model, TokenId};
use crate::compute::Backend;
use crate::compute::timing::median_time;

/// One model's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSpeed {
    /// `tiny` or `smollm2`.
    pub model: String,
    /// Its parameters.
    pub parameters: usize,
    /// The backend's name and device.
    pub backend: String,
    /// Prompt tokens prefilled.
    pub prefill_tokens: usize,
    /// Prefill tokens per second (median of three).
    pub prefill_tok_s: f64,
    /// Tokens decoded (after the first, which the prefill gives).
    pub decode_tokens: usize,
    /// Decode tokens per second through the paged cache.
    pub decode_tok_s: f64,
    /// Weight bytes a decode step reads (f32).
    pub weight_bytes: usize,
    /// KV bytes a decode step reads, averaged over the steps (f16 K and V of every layer).
    pub kv_bytes: usize,
    /// This machine's read rate over the model's weights, GB/s.
    pub read_gbs: f64,
    /// Decode's bytes per second over that read rate: the fraction of the binding limit reached.
    pub fraction_of_limit: f64,
}

/// Read every weight buffer of `m` once as 32-bit words, summed in parallel; returns the median seconds
/// and the bytes read.
fn read_weights(m: &Model) -> (f64, usize) {
    let mut bufs: Vec<&[f32]> = vec![m.embed.as_slice_memory_order().unwrap_or_default(), &m.norm];
    for b in &m.blocks {
        for w in [&b.wq, &b.wk, &b.wv, &b.wo, &b.w1, &b.w3, &b.w2] {
            bufs.push(w.as_slice_memory_order().unwrap_or_default());
        }
        bufs.push(&b.attention_norm);
        bufs.push(&b.ffn_norm);
    }
    let t = median_time(5, || {
        let s: u64 = bufs
            .par_iter()
            .flat_map(|b| b.par_chunks(1 << 14))
            .map(|c| c.iter().fold(0u32, |a, v| a.wrapping_add(v.to_bits())) as u64)
            .sum();
        std::hint::black_box(s);
    });
    (t.as_secs_f64(), bufs.iter().map(|b| b.len() * 4).sum())
}

/// Measure `m` on `backend`: prefill of `prompt`, then `decode` tokens through the paged cache.
pub fn measure<T: TokenId>(
    m: &Model,
    backend: &dyn Backend,
    prompt: &[T],
    decode: usize,
) -> Result<ModelSpeed, String> {
    let c = m.config;
    let mut prefill_err = None;
    let t_pre = median_time(3, || {
        if let Err(e) = m.prefill(prompt, backend, false) {
            prefill_err = Some(e);
        }
    })
    .as_secs_f64();
    if let Some(e) = prefill_err {
        return Err(e);
    }
    let g = m.generate(
        prompt,
        decode + 1,
        CacheKind::Paged { block_size: 16 },
        &mut Sampler::greedy(),
        backend,
    )?;
    let decode_s = g.decode_s / decode.max(1) as f64;
    let weight_bytes = m.parameters * 4;
    let mean_len = prompt.len() + decode / 2;
    let kv_bytes = c.n_layers * 2 * c.n_kv_heads * c.head_dim * 2 * mean_len;
    let (read_s, read_bytes) = read_weights(m);
    if read_bytes != weight_bytes {
        return Err(format!(
            "the read roof covered {read_bytes} bytes of the {weight_bytes} of the weights"
        ));
    }
    let read_gbs = weight_bytes as f64 / read_s / 1e9;
    let decode_gbs = (weight_bytes + kv_bytes) as f64 / decode_s / 1e9;
    Ok(ModelSpeed {
        model: m.name.id().into(),
        parameters: m.parameters,
        backend: format!("{} ({})", backend.kind().name(), backend.device()),
        prefill_tokens: prompt.len(),
        prefill_tok_s: prompt.len() as f64 / t_pre,
        decode_tokens: decode,
        decode_tok_s: 1.0 / decode_s,
        weight_bytes,
        kv_bytes,
        read_gbs,
        fraction_of_limit: decode_gbs / read_gbs,
    })
}
