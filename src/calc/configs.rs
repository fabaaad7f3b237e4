//! The bundled model configs (`assets/configs/*.json`), embedded: fields copied from each model's
//! published `config.json` (or its paper), the source in each file's `_source`.

/// (name, file text), in the order the calculator lists them.
pub const BUNDLED: &[(&str, &str)] = &[
    ("Llama-2-7B", include_str!("../../assets/configs/llama-2-7b.json")),
    ("Llama-3-8B", include_str!("../../assets/configs/llama-3-8b.json")),
    ("Llama-3-70B", include_str!("../../assets/configs/llama-3-70b.json")),
    ("Llama-3.1-70B", include_str!("../../assets/configs/llama-3.1-70b.json")),
    ("Llama-3.2-1B", include_str!("../../assets/configs/llama-3.2-1b.json")),
    ("Llama-3.2-3B", include_str!("../../assets/configs/llama-3.2-3b.json")),
    (
        "Mistral-7B-v0.1",
        include_str!("../../assets/configs/mistral-7b-v0.1.json"),
    ),
    ("Gemma-2B", include_str!("../../assets/configs/gemma-2b.json")),
    ("Qwen2.5-7B", include_str!("../../assets/configs/qwen2.5-7b.json")),
    ("Qwen2.5-32B", include_str!("../../assets/configs/qwen2.5-32b.json")),
    ("Qwen3-4B", include_str!("../../assets/configs/qwen3-4b.json")),
    ("Qwen3-8B", include_str!("../../assets/configs/qwen3-8b.json")),
    ("Qwen3-32B", include_str!("../../assets/configs/qwen3-32b.json")),
    ("Gemma-2-9B", include_str!("../../assets/configs/gemma-2-9b.json")),
    ("Gemma-3-12B", include_str!("../../assets/configs/gemma-3-12b.json")),
    ("Falcon-7B", include_str!("../../assets/configs/falcon-7b.json")),
    ("GPT-3-175B", include_str!("../../assets/configs/gpt-3-175b.json")),
    ("DeepSeek-V3", include_str!("../../assets/configs/deepseek-v3.json")),
];

/// The bundled model called `name` (case-insensitive).
pub fn bundled(name: &str) -> Result<super::ModelSpec, String> {
    let (n, text) = BUNDLED
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let known: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
            format!("no bundled model `{name}` (known: {})", known.join(", "))
        })?;
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{n}: {e}"))?;
    super::ModelSpec::from_hf(n, &json)
}

/// Every bundled model.
pub fn all() -> Result<Vec<super::ModelSpec>, String> {
    BUNDLED.iter().map(|(n, _)| bundled(n)).collect()
}
