//! Reading a model's config: [`ModelSpec::from_hf`] and what a spec derives from its fields (layers by
//! kind, KV heads and dims per layer, parameter counts).

use serde_json::Value;

use super::*;

fn uint(v: &Value, key: &str) -> Option<usize> {
    v.get(key).and_then(Value::as_u64).map(|x| x as usize)
}

impl ModelSpec {
    /// Read a Hugging Face `config.json` (a nested `text_config`, as Gemma 3's, is read in its place;
    /// `_defaults_not_in_published_config` supplies values the published file leaves to transformers'
    /// defaults).
    pub fn from_hf(name: &str, json: &Value) -> Result<Self, String> {
        let top = json;
        let mut c = top.get("text_config").cloned().unwrap_or_else(|| top.clone());
        if let (Some(obj), Some(Value::Object(d))) = (c.as_object_mut(), top.get("_defaults_not_in_published_config")) {
            for (k, v) in d {
                obj.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let need = |key: &str| uint(&c, key).ok_or_else(|| format!("{name}: the config has no `{key}`"));
        let model_type = c
            .get("model_type")
            .or_else(|| top.get("model_type"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let layers = need("num_hidden_layers")?;
        let hidden = need("hidden_size")?;
        let heads = need("num_attention_heads")?;
        if layers == 0 || hidden == 0 || heads == 0 {
            return Err(format!("{name}: layers, hidden_size and heads must be positive"));
        }
        let falcon_mqa = c.get("multi_query").and_then(Value::as_bool) == Some(true)
            && c.get("new_decoder_architecture").and_then(Value::as_bool) != Some(true);
        let kv_heads = if falcon_mqa {
            1
        } else {
            uint(&c, "num_key_value_heads")
                .or_else(|| uint(&c, "num_kv_heads"))
                .or_else(|| uint(&c, "n_head_kv"))
                .unwrap_or(heads)
        };
        let head_dim_explicit = uint(&c, "head_dim").is_some();
        let head_dim = uint(&c, "head_dim").unwrap_or(hidden / heads);
        let vocab = uint(&c, "vocab_size").or_else(|| uint(top, "vocab_size")).unwrap_or(0);
        let tied = c
            .get("tie_word_embeddings")
            .or_else(|| top.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(matches!(
                model_type.as_str(),
                "gemma" | "gemma2" | "gemma3" | "gemma3_text" | "falcon"
            ));
        let torch_dtype = c
            .get("torch_dtype")
            .or_else(|| top.get("torch_dtype"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let attention = match uint(&c, "kv_lora_rank") {
            Some(r) => Attention::Mla {
                kv_lora_rank: r,
                qk_rope_head_dim: need("qk_rope_head_dim")?,
                qk_nope_head_dim: need("qk_nope_head_dim")?,
                v_head_dim: need("v_head_dim")?,
                q_lora_rank: uint(&c, "q_lora_rank"),
            },
            None => Attention::Standard,
        };
        // Which layers attend within a window: `layer_types` when the config lists them, else the rule
        // of its model type (as transformers' configuration classes derive it).
        let window = uint(&c, "sliding_window");
        let windows: Vec<Option<usize>> = if let Some(types) = c.get("layer_types").and_then(Value::as_array) {
            types
                .iter()
                .map(|t| {
                    if t.as_str() == Some("sliding_attention") {
                        window
                    } else {
                        None
                    }
                })
                .collect()
        } else {
            (0..layers)
                .map(|i| match model_type.as_str() {
                    "mistral" => window,
                    // Qwen2/Qwen3: a window only where `use_sliding_window` is on, from layer
                    // `max_window_layers` up.
                    "qwen2" | "qwen3" | "qwen2_moe" | "qwen3_moe" => {
                        let on = c.get("use_sliding_window").and_then(Value::as_bool) == Some(true);
                        let from = uint(&c, "max_window_layers").unwrap_or(layers);
                        window.filter(|_| on && i >= from)
                    }
                    // Gemma 2: even layers local, odd global.
                    "gemma2" => window.filter(|_| (i + 1) % 2 != 0),
                    // Gemma 3: every `sliding_window_pattern`-th layer global, the rest local.
                    "gemma3" | "gemma3_text" => {
                        let p = uint(&c, "sliding_window_pattern").unwrap_or(6).max(1);
                        window.filter(|_| (i + 1) % p != 0)
                    }
                    _ => None,
                })
                .collect()
        };
        let intermediate = uint(&c, "intermediate_size").unwrap_or(4 * hidden);
        let ffn = match (uint(&c, "n_routed_experts"), uint(&c, "moe_intermediate_size")) {
            (Some(routed), Some(moe)) => Ffn::Moe {
                dense_layers: uint(&c, "first_k_dense_replace").unwrap_or(0),
                intermediate,
                moe_intermediate: moe,
                routed,
                shared: uint(&c, "n_shared_experts").unwrap_or(0),
            },
            _ if matches!(model_type.as_str(), "" | "falcon" | "gpt2" | "gpt_neox") => Ffn::Plain { intermediate },
            _ => Ffn::Gated { intermediate },
        };
        let source = top
            .get("_source")
            .and_then(Value::as_str)
            .unwrap_or("a user's config.json")
            .to_string();
        Ok(Self {
            name: name.to_string(),
            source,
            model_type,
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            head_dim_explicit,
            vocab,
            tied_embeddings: tied,
            torch_dtype,
            attention,
            windows,
            ffn,
            mtp_layers: uint(&c, "num_nextn_predict_layers").unwrap_or(0),
            max_context: uint(&c, "max_position_embeddings"),
        })
    }

    /// Values one token caches in one layer: `2 · KV heads · head_dim`, or MLA's `d_c + d_r`.
    pub fn values_per_token_layer(&self) -> usize {
        match self.attention {
            Attention::Standard => 2 * self.kv_heads * self.head_dim,
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => kv_lora_rank + qk_rope_head_dim,
        }
    }

    /// Bytes one token takes in one layer in `fmt` at a context of `ctx` tokens stored in that layer
    /// (scales and KIVI's residual amortised over them).
    pub fn bytes_per_token_layer(&self, fmt: &Format, ctx: usize) -> f64 {
        match self.attention {
            Attention::Standard => fmt.cache.bytes_per_token(self.kv_heads, self.head_dim, ctx),
            // One tensor of d_c + d_r values (the format's K half).
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => fmt.cache.bytes_per_token(1, kv_lora_rank + qk_rope_head_dim, ctx) / 2.0,
        }
    }

    /// Tokens layer `l` stores of a request of `n` tokens: min(n, window).
    pub fn stored(&self, l: usize, n: usize) -> usize {
        self.windows.get(l).copied().flatten().map_or(n, |w| w.min(n))
    }

    /// Parameters, counted from the config: (main model, multi-token-prediction layers).
    pub fn parameters(&self) -> (u64, u64) {
        let (h, hd) = (self.hidden as u64, self.head_dim as u64);
        let (q, kv) = (self.heads as u64, self.kv_heads as u64);
        let norms = match self.model_type.as_str() {
            "gemma2" | "gemma3" | "gemma3_text" => 4 * h,
            "falcon" => 2 * h, // one LayerNorm (weight and bias) before the parallel attention and MLP
            "" => 4 * h,       // GPT: two LayerNorms with biases
            _ => 2 * h,
        };
        let qk_norm = if matches!(
            self.model_type.as_str(),
            "qwen3" | "qwen3_moe" | "gemma3" | "gemma3_text"
        ) {
            2 * hd
        } else {
            0
        };
        let attn = match self.attention {
            Attention::Standard => {
                let bias = match self.model_type.as_str() {
                    "qwen2" => q * hd + 2 * kv * hd,
                    "" => 3 * q * hd + h,
                    _ => 0,
                };
                h * q * hd + 2 * h * kv * hd + q * hd * h + bias + qk_norm
            }
            Attention::Mla {
                kv_lora_rank: dc,
                qk_rope_head_dim: dr,
                qk_nope_head_dim: dn,
                v_head_dim: dv,
                q_lora_rank,
            } => {
                let (dc, dr, dn, dv) = (dc as u64, dr as u64, dn as u64, dv as u64);
                let qp = match q_lora_rank {
                    Some(r) => h * r as u64 + r as u64 + r as u64 * q * (dn + dr),
                    None => h * q * (dn + dr),
                };
                qp + h * (dc + dr) + dc + dc * q * (dn + dv) + q * dv * h
            }
        };
        let gated = |i: u64| 3 * h * i;
        let ffn_layer = |l: usize| -> u64 {
            match self.ffn {
                Ffn::Gated { intermediate } => gated(intermediate as u64),
                Ffn::Plain { intermediate } => {
                    let i = intermediate as u64;
                    2 * h * i + if self.model_type.is_empty() { i + h } else { 0 }
                }
                Ffn::Moe {
                    dense_layers,
                    intermediate,
                    moe_intermediate,
                    routed,
                    shared,
                } => {
                    if l < dense_layers {
                        gated(intermediate as u64)
                    } else {
                        (routed + shared) as u64 * gated(moe_intermediate as u64) + h * routed as u64
                    }
                }
            }
        };
        let layers: u64 = (0..self.layers).map(|l| attn + ffn_layer(l) + norms).sum();
        let embed = self.vocab as u64 * h;
        let head = if self.tied_embeddings { 0 } else { embed };
        let final_norm = if self.model_type.is_empty() { 2 * h } else { h };
        // An MTP module: one more decoder layer (of the last layer's kind), two norms and the 2h → h
        // projection; it shares the embedding and the output head.
        let mtp = self.mtp_layers as u64 * (attn + ffn_layer(self.layers) + norms + 2 * h + 2 * h * h + h);
        (embed + head + layers + final_norm, mtp)
    }
}
