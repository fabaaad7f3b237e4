//! Lesson 11's calculator on the bundled configs: every figure below is derived by hand from the config
//! fields in the comments (bf16 KV: 2 bytes a value), and reconciled with the paged allocator.

use kvscope::calc::{Format, ModelSpec, Query, Report, calculate, configs, gpu_memory, request_bytes};

fn query(dtype: &str, context: usize) -> Query {
    Query {
        format: Format::parse(dtype).unwrap(),
        weights_dtype: None,
        context,
        batch: 1,
        gpu: gpu_memory("h100").unwrap(),
        block_size: 16,
        utilization: 1.0,
        reserve_bytes: 0.0,
    }
}

fn report(model: &str, dtype: &str, context: usize) -> Report {
    calculate(&configs::bundled(model).unwrap(), &query(dtype, context)).unwrap()
}

#[test]
fn every_bundled_config_parses_and_its_kv_per_token_is_exact() {
    // (model, layers, KV values per token per layer, bytes per token over all layers in bf16)
    let want: &[(&str, usize, usize, f64)] = &[
        // 32 layers · 2 · 32 KV heads (MHA) · 128 = 8192 values; · 2 B · 32 = 524,288 B (512 KiB)
        ("Llama-2-7B", 32, 8192, 524_288.0),
        // 32 · 2 · 8 · 128 = 2048 values; · 2 · 32 = 131,072 B (128 KiB)
        ("Llama-3-8B", 32, 2048, 131_072.0),
        // 80 layers · 2 · 8 · 128 = 2048; · 2 · 80 = 327,680 B
        ("Llama-3-70B", 80, 2048, 327_680.0),
        ("Llama-3.1-70B", 80, 2048, 327_680.0),
        // 16 layers · 2 · 8 · 64 = 1024; · 2 · 16 = 32,768 B
        ("Llama-3.2-1B", 16, 1024, 32_768.0),
        // 28 layers · 2 · 8 · 128 = 2048; · 2 · 28 = 114,688 B
        ("Llama-3.2-3B", 28, 2048, 114_688.0),
        // 32 · 2 · 8 · 128 = 2048; · 2 · 32 = 131,072 B
        ("Mistral-7B-v0.1", 32, 2048, 131_072.0),
        // 18 layers · 2 · 1 KV head (MQA) · 256 = 512; · 2 · 18 = 18,432 B
        ("Gemma-2B", 18, 512, 18_432.0),
        // 28 layers · 2 · 4 · 128 = 1024; · 2 · 28 = 57,344 B
        ("Qwen2.5-7B", 28, 1024, 57_344.0),
        // 64 layers · 2 · 8 · 128 = 2048; · 2 · 64 = 262,144 B
        ("Qwen2.5-32B", 64, 2048, 262_144.0),
        // 36 layers · 2 · 8 · head_dim 128 (not 2560/32 = 80) = 2048; · 2 · 36 = 147,456 B
        ("Qwen3-4B", 36, 2048, 147_456.0),
        // 36 · 2 · 8 · 128 = 2048; · 2 · 36 = 147,456 B
        ("Qwen3-8B", 36, 2048, 147_456.0),
        // 64 · 2 · 8 · 128 (not 5120/64 = 80) = 2048; · 2 · 64 = 262,144 B
        ("Qwen3-32B", 64, 2048, 262_144.0),
        // 42 layers · 2 · 8 · 256 (not 3584/16 = 224) = 4096; · 2 · 42 = 344,064 B
        ("Gemma-2-9B", 42, 4096, 344_064.0),
        // 48 layers · 2 · 8 · 256 (not 3840/16 = 240) = 4096; · 2 · 48 = 393,216 B
        ("Gemma-3-12B", 48, 4096, 393_216.0),
        // 32 layers · 2 · 1 (multi_query) · 4544/71 = 64 = 128; · 2 · 32 = 8,192 B
        ("Falcon-7B", 32, 128, 8_192.0),
        // 96 layers · 2 · 96 · 128 = 24,576; · 2 · 96 = 4,718,592 B (4.5 MiB)
        ("GPT-3-175B", 96, 24_576, 4_718_592.0),
        // 61 layers · (kv_lora_rank 512 + qk_rope_head_dim 64) = 576; · 2 · 61 = 70,272 B
        ("DeepSeek-V3", 61, 576, 70_272.0),
    ];
    assert_eq!(configs::BUNDLED.len(), want.len());
    for &(name, layers, values, bytes) in want {
        let m = configs::bundled(name).unwrap();
        assert_eq!(m.layers, layers, "{name}");
        let r = report(name, "bf16", 1);
        assert_eq!(r.values_per_token_per_layer, values, "{name}");
        assert_eq!(r.kv_bytes_per_token, bytes, "{name}");
    }
}

#[test]
fn windows_cap_what_a_layer_stores() {
    // Mistral-7B v0.1: every layer has a 4096 window; at 8192 tokens each stores 4096:
    // 32 · 4096 · 4096 B = 536,870,912 B.
    assert_eq!(
        report("Mistral-7B-v0.1", "bf16", 8192).kv_bytes_per_request,
        536_870_912.0
    );
    // Gemma 2 9B at 8192: 21 even layers local (4096 tokens), 21 odd global (8192), 8192 B a token-layer:
    // 21 · 4096 · 8192 + 21 · 8192 · 8192 = 704,643,072 + 1,409,286,144.
    let g2 = report("Gemma-2-9B", "bf16", 8192);
    assert_eq!(g2.kv_bytes_per_request, 2_113_929_216.0);
    // Gemma 3 12B at 32,768: layers 5, 11, …, 47 global (8 of 48), 40 local with a 1024 window:
    // 8 · 32768 · 8192 + 40 · 1024 · 8192 = 2,147,483,648 + 335,544,320.
    let g3 = report("Gemma-3-12B", "bf16", 32_768);
    assert_eq!(g3.kv_bytes_per_request, 2_483_027_968.0);
    let windows: Vec<_> = g3
        .groups
        .iter()
        .map(|g| (g.window, g.layers, g.blocks_per_request))
        .collect();
    assert_eq!(windows, vec![(Some(1024), 40, 64), (None, 8, 2048)]);
    // Qwen2.5 ships sliding_window 131072 with use_sliding_window false: no layer has a window.
    let q = configs::bundled("Qwen2.5-7B").unwrap();
    assert!(q.windows.iter().all(Option::is_none));
    // 28 · 2048 B · 32768 tokens.
    assert_eq!(
        report("Qwen2.5-7B", "bf16", 32_768).kv_bytes_per_request,
        1_879_048_192.0
    );
}

#[test]
fn the_wrong_formulas_are_shown_with_their_error() {
    let w = |name: &str, ctx| report(name, "bf16", ctx).wrong;
    // Qwen3-4B: head_dim as 2560/32 = 80 gives 80/128 of the right figure.
    let q = w("Qwen3-4B", 4096);
    assert!(
        q.iter()
            .any(|x| x.formula.starts_with("head_dim") && (x.ratio - 0.625).abs() < 1e-12)
    );
    // DeepSeek-V3 counted as K and V: 2 · 128 · 192 = 49,152 values against 576: 85.33×.
    let d = w("DeepSeek-V3", 4096);
    let mla = d.iter().find(|x| x.formula.starts_with("MLA")).unwrap();
    assert!((mla.ratio - 49_152.0 / 576.0).abs() < 1e-9, "{}", mla.ratio);
    // Llama-3-8B without GQA: 32 KV heads instead of 8, 4×.
    let l = w("Llama-3-8B", 4096);
    assert!(
        l.iter()
            .any(|x| x.formula.starts_with("GQA") && (x.ratio - 4.0).abs() < 1e-12)
    );
    // Mistral with the window ignored at 8192: twice the bytes.
    let m = w("Mistral-7B-v0.1", 8192);
    assert!(
        m.iter()
            .any(|x| x.formula.starts_with("window") && (x.ratio - 2.0).abs() < 1e-12)
    );
    // Llama-2-7B (MHA, no explicit head_dim, no window): nothing to correct.
    assert!(w("Llama-2-7B", 4096).is_empty());
}

#[test]
fn weights_and_what_fits() {
    // Llama-3-8B: 8,030,261,248 parameters (its model card's 8.03B), counted from the config:
    // embeddings 128256 · 4096 twice (untied) + 32 · (attention 4096·4096·2 + 2·4096·1024, gated MLP
    // 3·4096·14336, two norms 2·4096) + the final norm 4096.
    let r = report("Llama-3-8B", "bf16", 8192);
    assert_eq!(r.parameters, 8_030_261_248);
    assert_eq!(r.weights_bytes, 2.0 * 8_030_261_248.0);
    // H100: 80e9 B; KV budget 80e9 − 16,060,522,496 = 63,939,477,504 B; a request of 8192 tokens takes
    // 8192 · 131,072 = 1,073,741,824 B: 59 requests (59.55).
    assert_eq!(r.kv_budget_bytes, 63_939_477_504.0);
    assert_eq!(r.requests_fit, 59);
    assert_eq!(r.blocks_per_request, 512);
    // DeepSeek-V3 reports its multi-token-prediction layer apart, and (in bf16) does not fit an H100.
    let d = report("DeepSeek-V3", "bf16", 4096);
    assert!(d.mtp_parameters > 0);
    assert!(
        d.parameters > 600_000_000_000 && d.parameters < 700_000_000_000,
        "{}",
        d.parameters
    );
    assert_eq!(d.requests_fit, 0);
    // Units: GB and GiB differ, presets name their source, and a size without a unit is refused.
    assert_eq!(gpu_memory("80GiB").unwrap().0, 80 * (1 << 30));
    assert_eq!(gpu_memory("141 GB").unwrap().0, 141_000_000_000);
    assert!(gpu_memory("h200").unwrap().1.contains("H200"));
    assert!(gpu_memory("80").is_err());
}

#[test]
fn quantised_formats_count_their_scales() {
    // Llama-3-8B at 8192 tokens, one layer-token: f16 4096 B; INT8 per token 2048 B of codes plus one f16
    // scale per KV head and tensor (2 · 8 · 2 = 32 B); FP8 per tensor 2048 B plus two f32 scales over
    // the context (8 B / 8192).
    let at = |d: &str| report("Llama-3-8B", d, 8192).kv_bytes_per_token_per_layer;
    assert_eq!(at("f16"), 4096.0);
    assert_eq!(at("int8-token"), 2048.0 + 32.0);
    assert_eq!(at("fp8-e4m3"), 2048.0 + 8.0 / 8192.0);
    assert!(at("kivi2") < at("kivi4") && at("kivi4") < at("int8-token"));
}

#[test]
fn the_calculator_agrees_with_the_allocator() {
    use kvscope::cache::{KvDtype, PagedKvCache, PagedShape, kv_bytes_per_token};
    // The tiny trained model, and a scaled-down GQA config, as config.json.
    let c = kvscope::model::shared().unwrap().config;
    let tiny = serde_json::json!({
        "model_type": "llama", "num_hidden_layers": c.n_layers, "hidden_size": c.d_model,
        "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.head_dim,
        "vocab_size": c.vocab,
    });
    let small = serde_json::json!({
        "model_type": "llama", "num_hidden_layers": 3, "hidden_size": 96, "num_attention_heads": 6,
        "num_key_value_heads": 2, "vocab_size": 256,
    });
    for (name, json) in [("tiny", tiny), ("small", small)] {
        let m = ModelSpec::from_hf(name, &json).unwrap();
        for n in [1usize, 15, 16, 17, 100] {
            let r = calculate(&m, &query("f16", n)).unwrap();
            // Bytes per token: the allocator's accounting.
            let per = kv_bytes_per_token(m.layers as u64, m.kv_heads as u64, m.head_dim as u64, KvDtype::F16);
            assert_eq!(r.kv_bytes_per_token, per as f64, "{name}");
            assert_eq!(request_bytes(&m, &r_format(), n), (per * n as u64) as f64);
            // Blocks: what a paged cache of that shape takes for one request of n tokens.
            let mut cache = PagedKvCache::new(PagedShape {
                num_blocks: 64,
                block_size: 16,
                kv_heads: m.kv_heads,
                head_dim: m.head_dim,
                dtype: KvDtype::F16,
            });
            cache.append_slots(0, n).unwrap();
            assert_eq!(r.blocks_per_request, cache.tables()[&0].len(), "{name} n{n}");
            // The pool's bytes for those blocks, every layer: blocks · block bytes.
            let block_bytes = 2 * 16 * m.kv_heads * m.head_dim * 2 * m.layers;
            assert_eq!(r.groups[0].block_bytes, block_bytes as f64);
        }
    }
}

fn r_format() -> Format {
    Format::parse("f16").unwrap()
}

/// Figures published by others, which the calculator must reproduce to the byte (or exactly, for ratios):
/// - vLLM paper (Kwon et al., SOSP 2023, §3): "in OPT-13B, the KV cache of a single token demands 800 KB
///   of space, calculated as 2 (key and value vectors) × 5120 (hidden state size) × 40 (number of layers)
///   × 2 (bytes per FP16)". OPT-13B is not bundled: its shape is given here as the paper states it.
/// - Llama-2-7B in FP16: 2 × 32 layers × 32 heads × 128 × 2 bytes = 524,288 bytes per token, the
///   "0.5 MB per token" that serving write-ups quote.
/// - DeepSeek-V2 paper (arXiv 2405.04434, Table 1): MLA caches (d_c + d_h^R) · l elements per token,
///   "≈ 9/2 d_h l" with d_c = 4 d_h and d_h^R = d_h / 2; DeepSeek-V3's config gives d_h 128, d_c 512,
///   d_h^R 64 and 61 layers, so 4.5 · 128 · 61 = 35,136 elements, 70,272 bytes in bf16.
/// - Mistral 7B paper (arXiv 2310.06825, §2, Rolling Buffer Cache): "on a sequence length of 32k tokens,
///   this reduces the cache memory usage by 8x, without impacting the model quality" (window 4096).
#[test]
fn published_figures_agree_to_the_byte() {
    let opt = ModelSpec::from_hf(
        "OPT-13B (vLLM paper)",
        &serde_json::json!({"num_hidden_layers": 40, "hidden_size": 5120, "num_attention_heads": 40}),
    )
    .unwrap();
    let f16 = Format::parse("f16").unwrap();
    let one = calculate(&opt, &query("f16", 1)).unwrap();
    assert_eq!(one.kv_bytes_per_token, 819_200.0, "800 KB = 819,200 bytes");
    assert_eq!(request_bytes(&opt, &f16, 1), 819_200.0);

    assert_eq!(report("Llama-2-7B", "f16", 1).kv_bytes_per_token, 524_288.0);

    let ds = report("DeepSeek-V3", "bf16", 1);
    assert_eq!(ds.values_per_token_per_layer * 61, 35_136);
    assert_eq!(ds.values_per_token_per_layer as f64, 4.5 * 128.0);
    assert_eq!(ds.kv_bytes_per_token, 70_272.0);

    let mistral = configs::bundled("Mistral-7B-v0.1").unwrap();
    let windowed = request_bytes(&mistral, &f16, 32 * 1024);
    let full = request_bytes(
        &ModelSpec {
            windows: vec![None; mistral.layers],
            ..mistral.clone()
        },
        &f16,
        32 * 1024,
    );
    assert_eq!(full / windowed, 8.0);
}
