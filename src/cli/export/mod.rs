//! `kvscope export attention|paged-decode|logits|model-attention`: the exports that belong to no lesson,
//! the tensors of one computation as `.npy` files plus `manifest.json`, checked against the f64
//! reference. Each lesson kind's own exports (schedule, prefix-schedule, streaming, eviction,
//! eviction-table, quant, quant-table, fp8-table, serving, speculative) are in its folder
//! (`src/lessons/<kind>/cli.rs`), and `main.rs` finds them through the registry.

use std::path::Path;

use anyhow::{Result, bail};
use kvscope::compute::BackendKind;
use kvscope::lessons::Output;
use kvscope::lessons::attention_layer::AttnOut;
use kvscope::lessons::export::{self, PagedDecodeParams};
use kvscope::math::{AttnShape, Rng};

use super::backend;

mod args;
pub use args::{ExportCmd, Kernel};

/// The arrays and manifest entries of the tiny model on `prompt`.
type ModelArrays = (Vec<export::NamedArray>, serde_json::Map<String, serde_json::Value>);

/// `export logits` / `export model-attention`: run `arrays` on backend `kind` and write them as `kind_name`.
fn model_export(
    kind: BackendKind,
    prompt: &str,
    out: &Path,
    kind_name: &str,
    model: &crate::cli::ModelArgs,
    arrays: fn(&dyn kvscope::compute::Backend, &kvscope::model::Model, &str) -> Result<ModelArrays>,
) -> Result<()> {
    let m = model.load()?;
    let b = backend(kind)?;
    let (arrays, extra) = arrays(b.as_ref(), &m, prompt)?;
    let params = serde_json::json!({ "prompt": prompt, "model": m.name.id() });
    export::write_export_with(out, kind_name, params, 0, b.as_ref(), &[], &arrays, extra)?;
    outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
    Ok(())
}

/// Run `kvscope export …`.
pub fn run(cmd: ExportCmd) -> Result<()> {
    match cmd {
        ExportCmd::Logits {
            prompt,
            model,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "logits", &model, export::model_logits)?,
        ExportCmd::ModelAttention {
            prompt,
            model,
            backend: kind,
            out,
        } => model_export(kind, &prompt, &out, "model-attention", &model, export::model_attention)?,
        ExportCmd::Attention {
            seq,
            d_model,
            heads,
            kv_heads,
            mask,
            seed,
            kernel,
            block_q,
            block_k,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let shape = AttnShape {
                seq,
                d_model,
                n_heads: heads,
                n_kv_heads: kv_heads,
            };
            let layer = AttnOut::compute(shape, mask, seed, false, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
            let (mut arrays, mut checks) = (layer.arrays(), layer.verify());
            let mut params = serde_json::json!({"seq": seq, "d_model": d_model, "heads": heads, "kv_heads": kv_heads,
                "head_dim": d_model / heads, "mask": mask.to_string(), "seed": seed});
            let mut extra = serde_json::Map::new();
            if kernel == Kernel::Flash {
                let (a, c, io) = export::flash_arrays(
                    b.as_ref(),
                    &layer.qkv.q,
                    &layer.qkv.k,
                    &layer.qkv.v,
                    mask,
                    block_q,
                    block_k,
                )?;
                arrays.push(a);
                checks.push(c);
                params["kernel"] = "flash".into();
                params["block_q"] = block_q.into();
                params["block_k"] = block_k.into();
                extra.insert("io".into(), io);
            }
            export::write_export_with(&out, "attention", params, seed, b.as_ref(), &checks, &arrays, extra)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
        ExportCmd::PagedDecode {
            requests,
            context_lens,
            max_context,
            block_size,
            num_blocks,
            heads,
            kv_heads,
            head_dim,
            seed,
            backend: kind,
            out,
        } => {
            let b = backend(kind)?;
            let lens = match (context_lens, max_context) {
                (Some(l), _) => {
                    if l.len() != requests {
                        bail!("--context-lens has {} values but --requests is {requests}", l.len());
                    }
                    l
                }
                (None, Some(n)) if n >= 1 => {
                    let mut rng = Rng::stream(seed, 3);
                    (0..requests).map(|_| 1 + rng.below(n)).collect()
                }
                (None, Some(_)) => bail!("--max-context must be at least 1"),
                (None, None) => bail!("give --context-lens a,b,... or --max-context N"),
            };
            let p = PagedDecodeParams {
                context_lens: lens,
                block_size,
                num_blocks,
                heads,
                kv_heads,
                head_dim,
            };
            let (arrays, checks) = export::paged_decode_arrays(b.as_ref(), &p, seed)?;
            let mut params = serde_json::to_value(&p)?;
            params["requests"] = requests.into();
            params["seed"] = seed.into();
            export::write_export(&out, "paged-decode", params, seed, b.as_ref(), &checks, &arrays)?;
            outln!("wrote {} arrays and manifest.json to {}", arrays.len(), out.display());
        }
    }
    Ok(())
}
