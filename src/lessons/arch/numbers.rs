//! Lesson 11's narration numbers: what its placeholders are filled with, from the lesson's run.

use super::*;

impl ArchOut {
    /// The values of the lesson's placeholders, from this result.
    pub(super) fn narration_numbers(&self) -> Result<Vec<(&'static str, String)>, String> {
        numbers(self)
    }
}

fn numbers(o: &ArchOut) -> Result<Vec<(&'static str, String)>, String> {
    let m = o.model();
    let r = o.report();
    let fb = format_bytes;
    let bytes = format!(
        "{:.3}",
        r.kv_bytes_per_token_per_layer / m.values_per_token_layer().max(1) as f64
    )
    .trim_end_matches('0')
    .trim_end_matches('.')
    .to_string();
    let mut v: Vec<(&'static str, String)> = vec![
        ("model", m.name.clone()),
        ("heads", m.heads.to_string()),
        ("dtype", o.format.name.to_string()),
        // The formula's terms for this model: 2 · layers · KV heads · head_dim · bytes, or for MLA
        // layers · (d_c + d_r) · bytes (one latent row per layer, no K and V per head).
        (
            "terms",
            match mla_dims(m) {
                None => format!("2 · {} · {} · {} · {bytes}", m.layers, m.kv_heads, m.head_dim),
                Some(d) => format!("{} · ({} + {}) · {bytes}", m.layers, d.d_c, d.d_r),
            },
        ),
        ("bpt_layer", fb(r.kv_bytes_per_token_per_layer)),
        ("bpt", fb(r.kv_bytes_per_token)),
    ];
    let quotient = m.hidden / m.heads.max(1);
    let (note, note_zh) = match m.attention {
        Attention::Mla { .. } => (
            format!(
                "{} uses MLA: it caches a latent row, not K and V per head (step 3).",
                m.name
            ),
            format!(
                "{} 使用 MLA：它缓存的是一行潜向量，而不是每个头的 K 和 V（第 3 步）。",
                m.name
            ),
        ),
        _ if m.head_dim != quotient => (
            format!(
                "Here head_dim is the config's own `head_dim` = {}, not d_model / heads = {} / {} = {quotient}: a calculator that divides is wrong by a factor of {:.2}.",
                m.head_dim,
                m.hidden,
                m.heads,
                m.head_dim as f64 / quotient as f64
            ),
            format!(
                "这里 head_dim 取配置自己的 `head_dim` = {}，而不是 d_model / 头数 = {} / {} = {quotient}：用除法的计算器会差 {:.2} 倍。",
                m.head_dim,
                m.hidden,
                m.heads,
                m.head_dim as f64 / quotient as f64
            ),
        ),
        _ => (
            format!(
                "Here head_dim = {} equals d_model / heads = {} / {}; in Qwen3-4B, Qwen3-32B, Gemma-2-9B and Gemma-3-12B it does not (pick them with the model slider).",
                m.head_dim, m.hidden, m.heads
            ),
            format!(
                "这里 head_dim = {} 恰好等于 d_model / 头数 = {} / {}；在 Qwen3-4B、Qwen3-32B、Gemma-2-9B 和 Gemma-3-12B 中并不相等（用模型滑块选它们）。",
                m.head_dim, m.hidden, m.heads
            ),
        ),
    };
    v.push(("head_dim_note", note));
    v.push(("head_dim_note_zh", note_zh));
    let mut outside = 0;
    for row in SEED_TABLE {
        if let Some((_, sm)) = o.named(row.model)
            && row.outside(sm).iter().any(|b| *b)
        {
            outside += 1;
        }
    }
    v.push(("seed_outside", outside.to_string()));
    v.push(("seed_rows", SEED_TABLE.len().to_string()));
    if let Some((_, g)) = o.named("GPT-3-175B") {
        v.push(("gpt3_hidden", g.hidden.to_string()));
    }
    v.push(("seed_gpt3_hidden", SEED_TABLE[6].d_model.to_string()));
    // Step 2: MHA, GQA, MQA.
    let bpt_of = |name: &str| o.named(name).map(|(i, m)| (m.name.clone(), o.bf16_bpt[i]));
    if let (Some(mha), Some(gqa)) = (bpt_of("Llama-2-7B"), bpt_of("Llama-3-8B")) {
        v.push(("gqa_ratio", format!("{:.0}", mha.1 / gqa.1)));
        v.push(("mha_model", mha.0));
        v.push(("mha_bpt", fb(mha.1)));
        v.push(("gqa_model", gqa.0));
        v.push(("gqa_bpt", fb(gqa.1)));
    }
    if let Some(mqa) = bpt_of("Falcon-7B") {
        v.push(("mqa_model", mqa.0));
        v.push(("mqa_bpt", fb(mqa.1)));
    }
    let order = |hi: bool| {
        (0..o.models.len()).max_by(|&a, &b| {
            let (x, y) = (o.bf16_bpt[a], o.bf16_bpt[b]);
            if hi { x.total_cmp(&y) } else { y.total_cmp(&x) }
        })
    };
    if let (Some(hi), Some(lo)) = (order(true), order(false)) {
        v.push(("largest_model", o.models[hi].name.clone()));
        v.push(("largest_bpt", fb(o.bf16_bpt[hi])));
        v.push(("smallest_model", o.models[lo].name.clone()));
        v.push(("smallest_bpt", fb(o.bf16_bpt[lo])));
    }
    // Step 3: MLA.
    let d = o.mla.dims;
    let small = mla_costs(d, o.mla.tokens);
    v.extend([
        ("mla_heads", d.heads.to_string()),
        ("d_c", d.d_c.to_string()),
        ("d_r", d.d_r.to_string()),
        ("mla_row", d.row().to_string()),
        ("mha_row", small[0].cached_values.to_string()),
        (
            "row_ratio",
            format!("{:.1}", small[0].cached_values as f64 / d.row() as f64),
        ),
        ("mla_tokens", o.mla.tokens.to_string()),
        ("mla_err", format!("{:.1e}", o.mla.check.max_abs)),
        // Latent bytes (f16) one decode step read: mla_decode runs a block per (request, head) and each
        // reads every row; an MQA-style kernel reads each row once for all heads.
        ("mla_bytes_ran", fb((d.heads * o.mla.tokens * d.row() * 2) as f64)),
        ("mla_bytes_once", fb((o.mla.tokens * d.row() * 2) as f64)),
    ]);
    if let Some(ds) = o.deepseek {
        let dm = &o.models[ds];
        let dd = mla_dims(dm).ok_or("DeepSeek-V3 has MLA sizes")?;
        let n = o.report().context_tokens;
        let c = mla_costs(dd, n);
        v.extend([
            ("ds_row", dd.row().to_string()),
            ("ds_mha_row", c[0].cached_values.to_string()),
            (
                "ds_ratio",
                format!("{:.0}", c[0].cached_values as f64 / dd.row() as f64),
            ),
            ("ds_heads", dd.heads.to_string()),
            ("ds_ctx", n.to_string()),
            ("ds_absorbed_flops", flops(c[2].flops)),
            ("ds_expanded_flops", flops(c[1].flops)),
            ("ds_absorbed_bytes", fb(c[2].cache_bytes)),
            ("ds_mha_flops", flops(c[0].flops)),
            ("ds_mha_bytes", fb(c[0].cache_bytes)),
            ("ds_mtp", dm.mtp_layers.to_string()),
            ("ds_layers", dm.layers.to_string()),
            ("ds_row_all", (dd.row() * dm.layers).to_string()),
        ]);
        if let Some(w) = o.reports[ds]
            .wrong
            .iter()
            .find(|w| w.formula.starts_with("MLA counted"))
        {
            v.push(("ds_wrong_ratio", format!("{:.0}", w.ratio)));
        }
    }
    // Step 4: CLA and windows.
    let [a, b, c] = CONTEXTS;
    // CLA is counted at 32k, or at the chosen model's own longest context when that is shorter.
    let cla_n = context_limit(m).unwrap_or(b).min(b);
    v.extend([
        ("cla", o.cla.to_string()),
        ("cla_model", m.name.clone()),
        ("cla_bpt", fb(avg_bpt(&with_cla(m, o.cla), &o.format, cla_n))),
        ("cla_full_bpt", fb(avg_bpt(m, &o.format, cla_n))),
        ("cla_ctx", ktokens(cla_n)),
        ("ctx_a", ktokens(a)),
        ("ctx_c", ktokens(c)),
    ]);
    let window = |mm: &ModelSpec| mm.windows.iter().flatten().next().copied().unwrap_or(0);
    let full_at = |mm: &ModelSpec, n: usize| {
        avg_bpt(
            &ModelSpec {
                windows: vec![None; mm.layers],
                ..mm.clone()
            },
            &o.format,
            n,
        )
    };
    let full = |mm: &ModelSpec| full_at(mm, c);
    // Mistral and Gemma 2 are counted at the longest context each serves, not at 128k (context_limit).
    if let Some((_, mm)) = o.named(HYBRID[0]) {
        let n = context_limit(mm).unwrap_or(c).min(c);
        v.push(("mistral_window", window(mm).to_string()));
        v.push(("mistral_ctx", ktokens(n)));
        v.push(("mistral_at", fb(avg_bpt(mm, &o.format, n))));
        v.push(("mistral_full_at", fb(full_at(mm, n))));
        v.push(("mistral_max", ktokens(mm.max_context.unwrap_or(n))));
    }
    if let Some((i, mm)) = o.named(HYBRID[1]) {
        let n = context_limit(mm).unwrap_or(c).min(c);
        v.push(("gemma2_window", window(mm).to_string()));
        v.push(("gemma2_a", fb(o.at_contexts[i][0])));
        v.push(("gemma2_ctx", ktokens(n)));
        v.push(("gemma2_at", fb(avg_bpt(mm, &o.format, n))));
        v.push(("gemma2_full_at", fb(full_at(mm, n))));
    }
    if let Some((i, mm)) = o.named(HYBRID[2]) {
        let local = mm.windows.iter().filter(|w| w.is_some()).count();
        v.push(("gemma3_window", window(mm).to_string()));
        v.push(("gemma3_local", local.to_string()));
        v.push(("gemma3_global", (mm.layers - local).to_string()));
        v.push(("gemma3_a", fb(o.at_contexts[i][0])));
        v.push(("gemma3_c", fb(o.at_contexts[i][2])));
        v.push(("gemma3_full_c", fb(full(mm))));
    }
    // Step 5: the calculator.
    v.extend([
        ("calc_model", m.name.clone()),
        ("gpu", r.gpu_memory_source.split(':').next().unwrap_or("").to_string()),
        ("gpu_mem", gb(r.gpu_memory_bytes as f64)),
        ("params", params_text(r.parameters)),
        ("weights", gb(r.weights_bytes)),
        ("weights_dtype", r.weights_dtype.clone()),
        ("budget", gb(r.kv_budget_bytes)),
        (
            "reserve_line",
            match (r.gpu_memory_utilization < 1.0, r.reserve_bytes > 0.0) {
                (false, false) => "all of the GPU, no other reserve".into(),
                (true, false) => format!("claiming {} of the GPU's memory", r.gpu_memory_utilization),
                (false, true) => format!("keeping back {} for activations", gb(r.reserve_bytes)),
                (true, true) => format!(
                    "claiming {} of the GPU's memory and keeping back {} for activations",
                    r.gpu_memory_utilization,
                    gb(r.reserve_bytes)
                ),
            },
        ),
        (
            "reserve_line_zh",
            match (r.gpu_memory_utilization < 1.0, r.reserve_bytes > 0.0) {
                (false, false) => "整块 GPU，不另留余量".into(),
                (true, false) => format!("占用 GPU 显存的 {}", r.gpu_memory_utilization),
                (false, true) => format!("为激活预留 {}", gb(r.reserve_bytes)),
                (true, true) => format!(
                    "占用 GPU 显存的 {}，并为激活预留 {}",
                    r.gpu_memory_utilization,
                    gb(r.reserve_bytes)
                ),
            },
        ),
        (
            "context_line",
            match context_limit(m) {
                Some(l) if r.context_tokens > l => format!(
                    "{} serves at most {l} tokens, so a request this long is hypothetical.",
                    m.name
                ),
                _ => String::new(),
            },
        ),
        (
            "context_line_zh",
            match context_limit(m) {
                Some(l) if r.context_tokens > l => format!("{} 最多服务 {l} 个 token，这么长的请求只是假设。", m.name),
                _ => String::new(),
            },
        ),
        ("context", r.context_tokens.to_string()),
        ("request_kv", fb(r.kv_bytes_per_request)),
        ("requests_fit", r.requests_fit.to_string()),
        ("tokens_fit", r.tokens_fit.to_string()),
        ("blocks", r.blocks_per_request.to_string()),
        ("block_size", r.block_size.to_string()),
    ]);
    let fits = |bytes: f64| (r.kv_budget_bytes / bytes).floor() as u64;
    let (wl, wl_zh) = match (o.wrong, r.wrong.first()) {
        (_, None) => (
            format!("None of the common shortcuts changes {}'s answer.", m.name),
            format!("常见的捷径公式都不会改变 {} 的答案。", m.name),
        ),
        (false, Some(_)) => (
            format!(
                "For {}, {} common shortcut(s) give a different answer: turn the wrong-formula switch on to see them.",
                m.name,
                r.wrong.len()
            ),
            format!(
                "对 {}，有 {} 个常见捷径公式给出不同的答案：打开“错误公式”开关即可看到。",
                m.name,
                r.wrong.len()
            ),
        ),
        (true, Some(w)) => (
            format!(
                "The first shortcut, {}, gives {} per request ({:.2}× the right figure), so {} requests instead of {}.",
                w.formula,
                fb(w.kv_bytes_per_request),
                w.ratio,
                fits(w.kv_bytes_per_request),
                r.requests_fit
            ),
            format!(
                "第一个捷径公式（{}）给出每个请求 {}（正确值的 {:.2} 倍），于是能放 {} 个请求，而不是 {} 个。",
                w.formula_zh,
                fb(w.kv_bytes_per_request),
                w.ratio,
                fits(w.kv_bytes_per_request),
                r.requests_fit
            ),
        ),
    };
    v.push(("wrong_line", wl));
    v.push(("wrong_line_zh", wl_zh));
    Ok(v)
}
