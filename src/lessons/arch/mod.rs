//! Lesson 11, where the KV bytes come from (kind `arch`): the KV formula term by term on the bundled
//! real configs ([`crate::calc`]), MHA → GQA → MQA across them, MLA with its absorbed decode kernel
//! (`mla_decode`) running on a random MLA layer at the sliders' sizes and checked against the naive
//! expanded attention, cross-layer KV sharing (CLA) and sliding-window/hybrid layers as layer maps, and
//! the calculator with its common wrong formulas. Every figure is computed here: the calculator's from the
//! configs' fields, the kernel's from its run, FLOPs and bytes of each MLA path from the layer's sizes.

mod numbers;

use crate::calc::{self, Attention, Format, ModelSpec, Query, Report, context_limit};
use crate::compute::ops::mla_decode::suite::layer_check;
use crate::compute::{Backend, CheckReport, Kernel, Tolerance, check};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, LessonKind, Output, Params, Schema, format_bytes, get};
use crate::math::mla::MlaDims;

crate::views! {
    /// The views of lesson 11.
    pub enum View {
        /// KV bytes per token of the chosen model, term by term.
        Formula = "formula",
        /// The course notes' table of model scales, filled from the bundled configs.
        Scale = "scale",
        /// KV bytes per token of every bundled model, coloured by how it attends.
        Bars = "bars",
        /// What one token caches (MLA's latent row against the expanded K and V), the FLOPs and bytes of
        /// each MLA decode path, and the kernel's check.
        Mla = "mla",
        /// Layer maps: windows and cross-layer sharing, and bytes per token at three contexts.
        LayerMap = "layer_map",
        /// The calculator: what fits in a GPU, and the wrong formulas.
        Calculator = "calculator",
        /// The kernel that ran.
        Kernel = "kernel",
    }
}

/// Lesson 11.
pub struct Arch;

/// The contexts the layer maps give bytes per token at.
pub const CONTEXTS: [usize; 3] = [4096, 32768, 131072];

/// The hybrid models the layer map draws (bundled names), in order.
pub const HYBRID: [&str; 3] = ["Mistral-7B-v0.1", "Gemma-2-9B", "Gemma-3-12B"];

/// The course notes' table of model scales (their size class, layers, heads and d_model, as the notes
/// give them), with the bundled model each example names.
pub const SEED_TABLE: [SeedRow; 7] = [
    SeedRow::new("1B-3B", (16, 24), (16, 32), 2048, "Llama-3.2-3B"),
    SeedRow::new("1B-3B", (16, 24), (16, 32), 2048, "Gemma-2B"),
    SeedRow::new("7B-8B", (30, 32), (32, 32), 4096, "Llama-3-8B"),
    SeedRow::new("7B-8B", (30, 32), (32, 32), 4096, "Mistral-7B-v0.1"),
    SeedRow::new("14B-32B", (40, 60), (32, 40), 5120, "Qwen2.5-32B"),
    SeedRow::new("70B-175B", (80, 96), (64, 128), 8192, "Llama-3-70B"),
    SeedRow::new("70B-175B", (80, 96), (64, 128), 8192, "GPT-3-175B"),
];

/// One row of the notes' table.
#[derive(Debug, Clone, Copy)]
pub struct SeedRow {
    /// Size class.
    pub class: &'static str,
    /// Layers (band).
    pub layers: (usize, usize),
    /// Heads (band).
    pub heads: (usize, usize),
    /// d_model.
    pub d_model: usize,
    /// The bundled model.
    pub model: &'static str,
}

impl SeedRow {
    const fn new(
        class: &'static str,
        layers: (usize, usize),
        heads: (usize, usize),
        d_model: usize,
        model: &'static str,
    ) -> Self {
        Self {
            class,
            layers,
            heads,
            d_model,
            model,
        }
    }
    /// Which of layers, heads and d_model the model's config puts outside the notes' figures.
    pub fn outside(&self, m: &ModelSpec) -> [bool; 3] {
        let out = |v: usize, (lo, hi): (usize, usize)| v < lo || v > hi;
        [
            out(m.layers, self.layers),
            out(m.heads, self.heads),
            m.hidden != self.d_model,
        ]
    }
}

/// The GPU presets the slider picks.
pub const GPUS: [&str; 2] = ["h100", "h200"];

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "model",
    "terms",
    "heads",
    "dtype",
    "bpt_layer",
    "bpt",
    "head_dim_note",
    "head_dim_note_zh",
    "seed_outside",
    "seed_rows",
    "gpt3_hidden",
    "seed_gpt3_hidden",
    "mha_model",
    "mha_bpt",
    "gqa_model",
    "gqa_bpt",
    "gqa_ratio",
    "mqa_model",
    "mqa_bpt",
    "largest_model",
    "largest_bpt",
    "smallest_model",
    "smallest_bpt",
    "mla_heads",
    "d_c",
    "d_r",
    "mla_row",
    "mha_row",
    "row_ratio",
    "mla_tokens",
    "mla_err",
    "ds_row",
    "ds_mha_row",
    "ds_ratio",
    "ds_heads",
    "ds_ctx",
    "ds_absorbed_flops",
    "ds_expanded_flops",
    "ds_absorbed_bytes",
    "ds_mha_flops",
    "ds_mha_bytes",
    "ds_mtp",
    "ds_layers",
    "ds_row_all",
    "mla_bytes_ran",
    "mla_bytes_once",
    "ds_wrong_ratio",
    "cla",
    "cla_model",
    "cla_bpt",
    "cla_full_bpt",
    "cla_ctx",
    "ctx_a",
    "ctx_c",
    "mistral_window",
    "mistral_ctx",
    "mistral_at",
    "mistral_full_at",
    "mistral_max",
    "gemma2_window",
    "gemma2_a",
    "gemma2_ctx",
    "gemma2_at",
    "gemma2_full_at",
    "gemma3_window",
    "gemma3_local",
    "gemma3_global",
    "gemma3_a",
    "gemma3_c",
    "gemma3_full_c",
    "calc_model",
    "gpu",
    "gpu_mem",
    "params",
    "weights",
    "weights_dtype",
    "budget",
    "context",
    "reserve_line",
    "reserve_line_zh",
    "context_line",
    "context_line_zh",
    "request_kv",
    "requests_fit",
    "tokens_fit",
    "blocks",
    "block_size",
    "wrong_line",
    "wrong_line_zh",
];

/// The formats the dtype slider picks (1-based), in `Format::all` order.
pub fn slider_format(i: i64) -> Format {
    let all = Format::all();
    let k = (i.max(1) as usize - 1).min(all.len() - 1);
    all[k].clone()
}

/// The MLA layer the sliders describe (d_model 64, d_nope = d_v = 32).
pub fn slider_dims(p: &Params) -> MlaDims {
    MlaDims {
        d_model: 64,
        heads: get(p, "mla_heads", 4).clamp(1, 64) as usize,
        d_c: get(p, "latent", 64).clamp(8, 512) as usize,
        d_r: get(p, "rope", 16).clamp(0, 128) as usize / 2 * 2,
        d_nope: 32,
        d_v: 32,
    }
}

/// One way to decode a token of an MLA layer: what it caches per token, the bytes it reads per step
/// (cache and weights) and its FLOPs (multiply-adds count 2) for one query token over `t` cached tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathCost {
    /// Values cached per token (all heads).
    pub cached_values: usize,
    /// Bytes of cache read per decode step (f16).
    pub cache_bytes: f64,
    /// Bytes of weights read per step besides the cache (W_UK, W_UV; bf16), shared across a batch.
    pub weight_bytes: f64,
    /// FLOPs of one step for one request.
    pub flops: f64,
}

/// The three decode paths of an MLA layer at `t` cached tokens: (0) K and V expanded per head and cached
/// as MHA would; (1) the latent cached, every head's K and V expanded from it each step; (2) the latent
/// cached and the projections absorbed (`mla_decode`, then W_UV).
pub fn mla_costs(d: MlaDims, t: usize) -> [PathCost; 3] {
    let (h, dc, dr, dn, dv, t) = (
        d.heads as f64,
        d.d_c as f64,
        d.d_r as f64,
        d.d_nope as f64,
        d.d_v as f64,
        t as f64,
    );
    let attn = 2.0 * h * t * (dn + dr) + 2.0 * h * t * dv;
    let up_weights = 2.0 * h * dc * (dn + dv);
    let mha_values = d.heads * (d.d_nope + d.d_r + d.d_v);
    [
        PathCost {
            cached_values: mha_values,
            cache_bytes: 2.0 * t * mha_values as f64,
            weight_bytes: 0.0,
            flops: attn,
        },
        PathCost {
            cached_values: d.row(),
            cache_bytes: 2.0 * t * (dc + dr),
            weight_bytes: up_weights,
            flops: 2.0 * t * h * dc * (dn + dv) + attn,
        },
        PathCost {
            cached_values: d.row(),
            cache_bytes: 2.0 * t * (dc + dr),
            weight_bytes: up_weights,
            flops: 2.0 * h * dn * dc + 2.0 * h * t * (dc + dr) + 2.0 * h * t * dc + 2.0 * h * dc * dv,
        },
    ]
}

/// An MLA model's layer sizes from its config (none for other models).
pub fn mla_dims(m: &ModelSpec) -> Option<MlaDims> {
    match m.attention {
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
            qk_nope_head_dim,
            v_head_dim,
            ..
        } => Some(MlaDims {
            d_model: m.hidden,
            heads: m.heads,
            d_c: kv_lora_rank,
            d_r: qk_rope_head_dim,
            d_nope: qk_nope_head_dim,
            d_v: v_head_dim,
        }),
        Attention::Standard => None,
    }
}

/// What the kernel step ran: a random MLA layer decoding one token over its latent cache.
#[derive(Debug, Clone)]
pub struct MlaRun {
    /// The layer's sizes.
    pub dims: MlaDims,
    /// Tokens cached.
    pub tokens: usize,
    /// The kernel's output times W_UV, `[H, d_v]`.
    pub out: Vec<f32>,
    /// The naive expanded attention in f64, `[H, d_v]`.
    pub want: Vec<f64>,
    /// The two compared.
    pub check: CheckReport,
}

/// How a layer attends, for labels: MHA, GQA, MQA or MLA.
pub fn attention_kind(m: &ModelSpec) -> &'static str {
    match m.attention {
        Attention::Mla { .. } => "MLA",
        Attention::Standard if m.kv_heads == m.heads => "MHA",
        Attention::Standard if m.kv_heads == 1 => "MQA",
        Attention::Standard => "GQA",
    }
}

/// What lesson 11 computed.
#[derive(Debug, Clone)]
pub struct ArchOut {
    /// Every bundled model.
    pub models: Vec<ModelSpec>,
    /// The calculator's report of each, at the sliders' format, context and GPU.
    pub reports: Vec<Report>,
    /// The model the sliders pick (index).
    pub selected: usize,
    /// The KV format.
    pub format: Format,
    /// KV bytes per token of each model in bf16, all layers, no window (the bars).
    pub bf16_bpt: Vec<f64>,
    /// Average KV bytes per token of one request at each of [`CONTEXTS`], per model, windows applied.
    pub at_contexts: Vec<[f64; 3]>,
    /// The CLA sharing factor.
    pub cla: usize,
    /// The chosen model's average bytes per token at [`CONTEXTS`] with CLA.
    pub cla_at_contexts: [f64; 3],
    /// Whether the wrong formulas are shown.
    pub wrong: bool,
    /// The MLA kernel run.
    pub mla: MlaRun,
    /// DeepSeek-V3's index in `models`.
    pub deepseek: Option<usize>,
    numbers: Vec<(&'static str, String)>,
}

impl ArchOut {
    /// The chosen model.
    pub fn model(&self) -> &ModelSpec {
        &self.models[self.selected]
    }
    /// The chosen model's report.
    pub fn report(&self) -> &Report {
        &self.reports[self.selected]
    }
    /// The model called `name`.
    pub fn named(&self, name: &str) -> Option<(usize, &ModelSpec)> {
        self.models.iter().enumerate().find(|(_, m)| m.name == name)
    }
}

/// Average KV bytes per token of one request of `n` tokens.
pub fn avg_bpt(m: &ModelSpec, f: &Format, n: usize) -> f64 {
    calc::request_bytes(m, f, n) / n.max(1) as f64
}

/// The KV-owning layers of `m` when groups of `s` adjacent layers share one KV (CLA): the first layer of
/// each group caches, the others read it. A model of those layers only, for KV accounting.
pub fn with_cla(m: &ModelSpec, s: usize) -> ModelSpec {
    let s = s.max(1);
    let owners: Vec<usize> = (0..m.layers).step_by(s).collect();
    ModelSpec {
        layers: owners.len(),
        windows: owners.iter().map(|&l| m.windows.get(l).copied().flatten()).collect(),
        ..m.clone()
    }
}

/// FLOPs as text (k, M, G, T).
pub fn flops(x: f64) -> String {
    if x >= 1e12 {
        format!("{:.2} T", x / 1e12)
    } else if x >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A parameter count as text.
pub fn params_text(x: u64) -> String {
    format!("{:.2}B", x as f64 / 1e9)
}

/// GPU memory as the presets state it (decimal GB).
pub fn gb(x: f64) -> String {
    format!("{:.1} GB", x / 1e9)
}

/// Tokens as "4k", "32k", "128k".
pub fn ktokens(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{}k", n / 1024)
    } else {
        n.to_string()
    }
}

impl Schema for Arch {
    fn name(&self) -> &'static str {
        "arch"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &[
            "model",
            "dtype",
            "gpu",
            "context",
            "wrong",
            "vllm_claim",
            "reserve",
            "cla",
            "mla_heads",
            "latent",
            "rope",
            "tokens",
            "seed",
        ]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &[]
    }
}

impl LessonKind for Arch {
    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::MlaDecode]
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        let mut v = Vec::new();
        let mla = views.iter().any(|x| ["mla", "kernel"].contains(x));
        if !mla {
            for id in ["mla_heads", "latent", "rope", "tokens", "seed"] {
                v.push((
                    id,
                    [
                        "The MLA layer's sizes: steps 3 and 6.",
                        "MLA 层的尺寸：第 3 步和第 6 步。",
                    ],
                ));
            }
        }
        if !views.contains(&"layer_map") {
            v.push(("cla", ["Cross-layer sharing: step 4.", "跨层共享：第 4 步。"]));
        }
        if !views.contains(&"calculator") {
            v.push(("gpu", ["The GPU: the calculator (step 5).", "GPU：计算器（第 5 步）。"]));
            v.push((
                "vllm_claim",
                [
                    "vLLM's claim: the calculator (step 5).",
                    "vLLM 的显存占比：计算器（第 5 步）。",
                ],
            ));
            v.push((
                "reserve",
                ["The reserve: the calculator (step 5).", "预留：计算器（第 5 步）。"],
            ));
            v.push((
                "wrong",
                [
                    "The wrong formulas: the calculator (step 5).",
                    "错误公式：计算器（第 5 步）。",
                ],
            ));
        }
        v
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let models = calc::configs::all()?;
        let selected = (get(p, "model", 2).max(1) as usize - 1).min(models.len() - 1);
        let format = slider_format(get(p, "dtype", 1));
        let gpu = calc::gpu_memory(GPUS[(get(p, "gpu", 1).clamp(1, 2) - 1) as usize])?;
        let context = (get(p, "context", 8).clamp(1, 1024) as usize) * 1024;
        let wrong = get(p, "wrong", 0) != 0;
        let cla = get(p, "cla", 1).clamp(1, 8) as usize;
        let q = Query {
            format: format.clone(),
            weights_dtype: None,
            context,
            batch: 1,
            gpu,
            block_size: 16,
            utilization: if get(p, "vllm_claim", 0) != 0 {
                crate::facts::fact("vllm_gpu_memory_utilization").number()
            } else {
                1.0
            },
            reserve_bytes: get(p, "reserve", 0).clamp(0, 1000) as f64 * 1e9,
        };
        let reports = models
            .iter()
            .map(|m| calc::calculate(m, &q))
            .collect::<Result<Vec<_>, _>>()?;
        let bf16 = Format::parse("bf16")?;
        let bf16_bpt = models
            .iter()
            .map(|m| m.bytes_per_token_layer(&bf16, 1) * m.layers as f64)
            .collect();
        let at = |m: &ModelSpec| CONTEXTS.map(|n| avg_bpt(m, &format, n));
        let at_contexts = models.iter().map(at).collect();
        let cla_at_contexts = at(&with_cla(&models[selected], cla));
        // The kernel: a random MLA layer at the sliders' sizes decodes its last token over the latent cache.
        let dims = slider_dims(p);
        let tokens = get(p, "tokens", 48).clamp(1, 4096) as usize;
        let seed = get(p, "seed", 0).max(0) as u64;
        let (out, want) = layer_check(backend, dims, tokens, seed).map_err(|e| e.to_string())?;
        let tag = format!(
            "mla_decode · W_UV vs expanded: d_c{} d_r{} H{} ctx{tokens}",
            dims.d_c, dims.d_r, dims.heads
        );
        let check = check(&tag, &[dims.heads, dims.d_v], &out, &want, Tolerance::F32);
        let deepseek = models.iter().position(|m| mla_dims(m).is_some());
        let mut o = ArchOut {
            reports,
            selected,
            format,
            bf16_bpt,
            at_contexts,
            cla,
            cla_at_contexts,
            wrong,
            mla: MlaRun {
                dims,
                tokens,
                out,
                want,
                check,
            },
            deepseek,
            models,
            numbers: Vec::new(),
        };
        o.numbers = o.narration_numbers()?;
        Ok(Box::new(o))
    }
}

impl Output for ArchOut {
    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // A head's absorbed query against one cached latent row (c_KV and k_R together), in
        // mla_attention.cu and mla_attention.wgsl alike.
        (op == Kernel::MlaDecode).then_some("dot += s_q[i] *")
    }

    fn reports(&self) -> Vec<&CheckReport> {
        vec![&self.mla.check]
    }

    fn has_nan(&self) -> bool {
        self.mla.out.iter().any(|x| x.is_nan()) || self.bf16_bpt.iter().any(|x| x.is_nan())
    }

    fn export_arrays(&self, _cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let d = self.mla.dims;
        let n = self.models.len();
        let per_ctx: Vec<f32> = self.at_contexts.iter().flat_map(|a| a.map(|x| x as f32)).collect();
        let v = vec![
            NamedArray::new("mla_out", &[d.heads, d.d_v], ArrayData::F32(self.mla.out.clone())),
            NamedArray::new(
                "mla_expanded",
                &[d.heads, d.d_v],
                ArrayData::F32(self.mla.want.iter().map(|&x| x as f32).collect()),
            ),
            NamedArray::new(
                "kv_bytes_per_token_bf16",
                &[n],
                ArrayData::F32(self.bf16_bpt.iter().map(|&x| x as f32).collect()),
            ),
            NamedArray::new(
                "kv_bytes_per_token_at_contexts",
                &[n, CONTEXTS.len()],
                ArrayData::F32(per_ctx),
            ),
        ];
        (v, vec![self.mla.check.clone()])
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cla_halves_the_owning_layers_and_mla_absorbed_reads_less() {
        let m = calc::configs::bundled("Llama-3-8B").unwrap();
        let f = Format::parse("bf16").unwrap();
        let two = with_cla(&m, 2);
        assert_eq!(two.layers, 16);
        assert_eq!(
            calc::request_bytes(&two, &f, 100) * 2.0,
            calc::request_bytes(&m, &f, 100)
        );
        // Gemma 2's layers alternate: CLA-2's owners are the even layers, all of them windowed.
        let g = calc::configs::bundled("Gemma-2-9B").unwrap();
        assert!(with_cla(&g, 2).windows.iter().all(|w| w.is_some()));
        let ds = mla_dims(&calc::configs::bundled("DeepSeek-V3").unwrap()).unwrap();
        let c = mla_costs(ds, 4096);
        // 128 heads · (128 + 64 + 128) values against 512 + 64.
        assert_eq!((c[0].cached_values, c[2].cached_values), (40960, 576));
        assert!(c[2].flops < c[1].flops && c[2].cache_bytes < c[0].cache_bytes);
    }

    /// The figures truth pass 3 put into lesson 11's narration, at the lesson's defaults: DeepSeek-V3's
    /// row is per layer (576 values, 61 layers: 35,136 a token); Mistral and Gemma 2 are counted at the
    /// longest context they serve (8k each), not at 128k; the calculator's vLLM claim and reserve take
    /// 8 GB and the reserve off the budget; the kernel that ran read the latent once per head.
    #[test]
    fn narration_figures_of_truth_pass_3() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "arch").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let run = |p: &Params| {
            let out = l.kind.compute(l, p, &crate::compute::CpuBackend).unwrap();
            let vals = out.values();
            let get = move |k: &str| {
                vals.iter()
                    .find(|(n, _)| *n == k)
                    .map(|v| v.1.clone())
                    .unwrap_or_default()
            };
            (out, get)
        };
        let (out, get) = run(&p);
        assert_eq!(["ds_row", "ds_layers", "ds_row_all"].map(&get), ["576", "61", "35136"]);
        assert_eq!(
            ["mistral_ctx", "mistral_max", "gemma2_ctx"].map(&get),
            ["8k", "32k", "8k"]
        );
        assert_eq!(get("reserve_line"), "all of the GPU, no other reserve");
        let o = out.as_ref().downcast_ref::<ArchOut>().unwrap();
        let heads = get("mla_heads").parse::<usize>().unwrap();
        let once = o.mla.tokens * o.mla.dims.row() * 2;
        assert_eq!(get("mla_bytes_ran"), format_bytes((heads * once) as f64));
        assert_eq!(get("mla_bytes_once"), format_bytes(once as f64));
        let budget = o.report().kv_budget_bytes;
        let total = o.report().gpu_memory_bytes as f64;
        p.insert("vllm_claim".into(), 1);
        p.insert("reserve".into(), 3);
        let (out, get) = run(&p);
        let r = out.as_ref().downcast_ref::<ArchOut>().unwrap().report().clone();
        assert!(
            (budget - r.kv_budget_bytes - (0.1 * total + 3e9)).abs() < 1.0,
            "{budget} {}",
            r.kv_budget_bytes
        );
        assert!(
            get("reserve_line").starts_with("claiming 0.9 of the GPU's memory and keeping back 3.0 GB"),
            "{}",
            get("reserve_line")
        );
        // A context past the model's own is called hypothetical (Llama-3-8B serves 8192).
        assert_eq!(get("context_line"), "");
        p.insert("context".into(), 16);
        let (_, get) = run(&p);
        assert!(
            get("context_line").contains("serves at most 8192 tokens"),
            "{}",
            get("context_line")
        );
    }
}
