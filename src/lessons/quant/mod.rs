//! Lesson 10, KV-cache quantisation (kind `quant`): the trained model decodes a 256-byte window of the
//! held-out text byte by byte from an empty cache in each format ([`crate::drivers::quant`]): f16, INT8 per
//! token and FP8 E4M3/E5M2 through the quantising append and dequantising decode kernels on the active
//! backend; INT8 per channel and KIVI (2 and 4 bits) through the group kernels (`group_append`,
//! `group_decode`) on the same backend. Everything the views draw is measured
//! here; the table over the whole held-out file is stored ([`stored`]) and drawn labelled as stored.

pub mod bench;
#[cfg(feature = "native")]
pub mod cli;
pub mod export;
mod numbers;
pub mod stored;

use std::sync::Arc;

use super::{LessonKind, Output, Params, get, heat};
use crate::cache::CacheFormat;
use crate::cache::KvDtype;
use crate::cache::dtype::quant::{E4M3, E5M2, Fp8, int8_decode, int8_encode, int8_scale};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::drivers::quant::QuantRun;
use crate::figure::HeatmapData;
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::model::{HELDOUT, shared};

crate::views! {
    /// The views of lesson 10.
    pub enum View {
        /// Bytes per token of each format, and tokens per pool.
        Bytes = "bytes",
        /// The interactive encoder: a value's bits in INT8, E4M3 and E5M2, and the two FP8 ranges.
        Encoder = "encoder",
        /// The trained model's per-channel maxima of K and V, per layer and KV head.
        Outliers = "outliers",
        /// |K − dequant(K)|, |V − dequant(V)| and the attention output's error, for the chosen format.
        Error = "error",
        /// KIVI's groups, its residual and its real compression ratio.
        Kivi = "kivi",
        /// Bits per byte, bytes per token, tokens per pool and speed, per format.
        Table = "table",
        /// SmolLM2-135M's stored channel maxima of K and V, and every format's errors and bits per byte.
        Real = "real",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 10.
pub struct Quant;

/// Bytes of the held-out text a window takes.
pub const TEXT: usize = 256;
/// A simulated GPU runs its threads one after another on the CPU: it reads this many bytes at most.
pub const SIM_BYTES: usize = 64;
/// The contexts the memory figures are given at.
pub const CONTEXTS: [usize; 2] = [256, 8192];
/// The pool the token counts fill.
pub const POOL_BYTES: f64 = (1u64 << 30) as f64;

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "layers",
    "kv_heads",
    "head_dim",
    "f16_bpt",
    "f16_tokens",
    "int8_bpt",
    "int8_tokens",
    "fp8_bpt",
    "kivi2_bpt",
    "long_ctx",
    "short_ctx",
    "value",
    "layer",
    "kv_head",
    "row_amax",
    "row_scale",
    "int8_value",
    "int8_err",
    "e4m3_max",
    "e5m2_max",
    "e5m2_ebits",
    "f16_max",
    "e5m2_min_sub",
    "f16_min_sub",
    "e4m3_value",
    "e5m2_value",
    "k_ratio",
    "v_ratio",
    "outlier_verdict",
    "outlier_verdict_zh",
    "k_err_token",
    "k_err_channel",
    "v_err_token",
    "v_err_channel",
    "granularity_verdict",
    "granularity_verdict_zh",
    "format",
    "out_err",
    "bpb_here",
    "bpb_f16",
    "group",
    "residual",
    "kivi_bits",
    "kivi_cost",
    "kivi_ratio",
    "kivi_nominal",
    "kivi_ratio_short",
    "kivi_ratio_long",
    "stored_windows",
    "stored_f16",
    "stored_e4m3_scale1",
    "stored_e4m3",
    "scale_verdict",
    "scale_verdict_zh",
    "quality_verdict",
    "quality_verdict_zh",
    "speed_line",
    "speed_line_zh",
    "real_windows",
    "real_window_tokens",
    "real_k_ratio",
    "real_v_ratio",
    "real_outlier_verdict",
    "real_outlier_verdict_zh",
    "real_top_where",
    "real_top_where_zh",
    "real_top_ratio",
    "real_k_fixed",
    "real_v_fixed",
    "real_rows",
    "real_k_err_token",
    "real_k_err_channel",
    "real_v_err_token",
    "real_v_err_channel",
    "real_granularity_verdict",
    "real_granularity_verdict_zh",
    "real_f16",
    "real_quality_verdict",
    "real_quality_verdict_zh",
];

/// The formats the slider picks (1-based), in order.
pub fn slider_format(i: i64, scale: i64, group: usize, residual: usize) -> CacheFormat {
    let fp8 = |per_tensor: KvDtype, per_head: KvDtype| match scale {
        1 => CacheFormat::Pool {
            dtype: per_head,
            calibrated: true,
        },
        2 => CacheFormat::Pool {
            dtype: per_tensor,
            calibrated: false,
        },
        _ => CacheFormat::Pool {
            dtype: per_tensor,
            calibrated: true,
        },
    };
    match i {
        1 => CacheFormat::Pool {
            dtype: KvDtype::INT8_TOKEN,
            calibrated: true,
        },
        2 => CacheFormat::Int8Channel,
        4 => fp8(KvDtype::FP8_E5M2, KvDtype::FP8_E5M2_HEAD),
        5 => CacheFormat::Kivi {
            bits: 4,
            group,
            residual,
        },
        6 => CacheFormat::Kivi {
            bits: 2,
            group,
            residual,
        },
        _ => fp8(KvDtype::FP8_E4M3, KvDtype::FP8_E4M3_HEAD),
    }
}

/// A value's encoding in one 8-bit format.
#[derive(Debug, Clone, Copy)]
pub struct Encoded {
    /// The code.
    pub code: u8,
    /// What it decodes to.
    pub value: f32,
}

/// What lesson 10 computed.
#[derive(Debug, Clone)]
pub struct QuantOut {
    /// The runs on this text: f16, INT8 per token, INT8 per channel, E4M3, E5M2, KIVI-4, KIVI-2 (the FP8
    /// ones at the scale slider's granularity).
    pub runs: Vec<(CacheFormat, QuantRun)>,
    /// The format the slider picks (index into `runs`).
    pub selected: usize,
    /// Which window of the held-out text.
    pub text_index: usize,
    /// Bytes read (fewer on a simulated GPU).
    pub bytes: usize,
    /// Bytes asked for, when a simulated backend read fewer.
    pub capped_from: Option<usize>,
    /// The layer and KV head the error maps show.
    pub layer: usize,
    /// The KV head.
    pub kv_head: usize,
    /// KIVI's G and R (R rounded up to a multiple of G).
    pub group: usize,
    /// KIVI's residual.
    pub residual: usize,
    /// The encoder's value.
    pub value: f32,
    /// The INT8 row the encoder uses: (absmax, scale), the chosen layer and KV head's last K row.
    pub row: (f32, f32),
    /// The value in INT8 at that row's scale (code, value), E4M3 and E5M2 (scale 1).
    pub int8: Encoded,
    /// E4M3.
    pub e4m3: Encoded,
    /// E5M2.
    pub e5m2: Encoded,
    /// Per (layer, KV head) row, per channel: the largest |K| over the text `[L·KVH, hd]`.
    pub k_channel_max: Arc<HeatmapData>,
    /// The same for V.
    pub v_channel_max: Arc<HeatmapData>,
    /// |K| as written (f16 run), chosen layer and KV head, `[hd, T]`: the outlier channels are rows.
    pub k_abs: Arc<HeatmapData>,
    /// The same for V.
    pub v_abs: Arc<HeatmapData>,
    /// |K − dequant(K)| in INT8 with one scale per token, chosen layer and KV head, `[hd, T]`.
    pub k_err_token: Arc<HeatmapData>,
    /// The same with one scale per channel.
    pub k_err_channel: Arc<HeatmapData>,
    /// |K − dequant(K)| of the chosen format, layer and KV head, `[hd, T]`.
    pub k_err: Arc<HeatmapData>,
    /// The same for V.
    pub v_err: Arc<HeatmapData>,
    /// Model shape: layers, KV heads, head_dim.
    pub dims: (usize, usize, usize),
    /// Each kernel run's last step against the f64 reference.
    pub checks: Vec<CheckReport>,
    numbers: Vec<(&'static str, String)>,
}

impl QuantOut {
    /// The run of the chosen format.
    pub fn chosen(&self) -> &(CacheFormat, QuantRun) {
        &self.runs[self.selected]
    }

    /// The run named `name`, if computed.
    pub fn run(&self, name: &str) -> Option<&QuantRun> {
        self.runs.iter().find(|(_, r)| r.format == name).map(|(_, r)| r)
    }

    /// Bytes one token takes in every layer of this model, in `fmt`, at context `ctx`.
    pub fn bytes_per_token(&self, fmt: &CacheFormat, ctx: usize) -> f64 {
        let (l, kvh, hd) = self.dims;
        l as f64 * fmt.bytes_per_token(kvh, hd, ctx)
    }
}

/// A format's key in the colour grammar's [`crate::style::FORMATS`] (its colour in every view).
pub fn format_key(f: &CacheFormat) -> String {
    match *f {
        CacheFormat::Pool { dtype, .. } => {
            let n = dtype.name();
            if n.contains("e4m3") {
                "fp8-e4m3".into()
            } else if n.contains("e5m2") {
                "fp8-e5m2".into()
            } else {
                n.into()
            }
        }
        CacheFormat::Int8Channel => "int8-channel".into(),
        CacheFormat::Kivi { bits, .. } => format!("kivi-{bits}"),
    }
}

/// A format's display name.
pub fn format_label(f: &CacheFormat) -> String {
    match *f {
        CacheFormat::Pool { dtype, calibrated } => {
            let base = match dtype.name() {
                "f16" => "f16".to_string(),
                "int8-token" => "INT8 per token".to_string(),
                n => {
                    let e = if n.contains("e4m3") { "E4M3" } else { "E5M2" };
                    let g = if n.ends_with("-head") { " per head" } else { "" };
                    format!("FP8 {e}{g}")
                }
            };
            if !calibrated && dtype.format().scales == crate::cache::ScaleLayout::PerTensor && dtype != KvDtype::F16 {
                format!("{base}, scale 1")
            } else {
                base
            }
        }
        CacheFormat::Int8Channel => "INT8 per channel".into(),
        CacheFormat::Kivi { bits, .. } => format!("KIVI {bits}-bit"),
    }
}

/// `f(i)` of each value of KV head `h`, from `[T, KVH, hd]` (index `i`) to `[hd, T]`.
fn head_map(t: usize, kvh: usize, hd: usize, h: usize, f: impl Fn(usize) -> f32) -> Vec<f32> {
    let mut m = vec![0f32; hd * t];
    for i in 0..t {
        for d in 0..hd {
            m[d * t + i] = f((i * kvh + h) * hd + d);
        }
    }
    m
}

/// |a − b| per value of KV head `h`, from `[T, KVH, hd]` to `[hd, T]`.
fn err_map(a: &[f32], b: &[f32], t: usize, kvh: usize, hd: usize, h: usize) -> Vec<f32> {
    head_map(t, kvh, hd, h, |at| (a[at] - b[at]).abs())
}

use crate::drivers::quant::channel_max;
pub use crate::drivers::quant::{outlier_ratio, rel_err};

fn fmt_bpb(x: f64) -> String {
    format!("{x:.3}")
}

fn pct(x: f64) -> String {
    if x < 0.001 {
        format!("{:.3}%", 100.0 * x)
    } else {
        format!("{:.2}%", 100.0 * x)
    }
}

/// A value as the encoder view prints it.
pub fn show_value(x: f32) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == 0.0 || (x.abs() >= 0.01 && x.abs() < 1e5) {
        format!("{}", (x as f64 * 1e4).round() / 1e4)
    } else {
        format!("{x:.3e}")
    }
}

/// The tokens of `bytes` a 1 GiB pool holds.
pub fn tokens_per_pool(bytes: f64) -> String {
    let n = POOL_BYTES / bytes.max(1e-9);
    if n >= 1e6 {
        format!("{:.2} M", n / 1e6)
    } else {
        format!("{:.0} k", n / 1e3)
    }
}

fn encode(f: Fp8, x: f32) -> Encoded {
    let code = f.encode(x);
    Encoded {
        code,
        value: f.decode(code),
    }
}

impl Schema for Quant {
    fn name(&self) -> &'static str {
        "quant"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &[
            "format", "scale", "group", "residual", "value", "layer", "kv_head", "text",
        ]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["last"]
    }
}

impl LessonKind for Quant {
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::QUANT, &cli::FP8_TABLE, &cli::QUANT_TABLE]
    }

    #[cfg(feature = "native")]
    fn ratio_lines(&self) -> Option<&'static dyn crate::command::RatioLines> {
        Some(&cli::P3_FORMATS)
    }

    fn ops(&self) -> &'static [Kernel] {
        &[
            Kernel::QuantAppend,
            Kernel::QuantDecode,
            Kernel::GroupStore,
            Kernel::GroupQuant,
            Kernel::GroupDecode,
        ]
    }

    fn idle_params(&self, p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        let mut v = Vec::new();
        let kivi = matches!(get(p, "format", 3), 5 | 6) || views.contains(&"kivi");
        if !kivi {
            v.push((
                "group",
                [
                    "KIVI's group size: pick format 5 or 6.",
                    "KIVI 的分组大小：请选格式 5 或 6。",
                ],
            ));
            v.push((
                "residual",
                ["KIVI's residual: pick format 5 or 6.", "KIVI 的残差：请选格式 5 或 6。"],
            ));
        }
        if !matches!(get(p, "format", 3), 3 | 4) && !views.contains(&"table") {
            v.push((
                "scale",
                [
                    "The scale granularity applies to FP8: pick format 3 or 4.",
                    "缩放粒度只用于 FP8：请选格式 3 或 4。",
                ],
            ));
        }
        if !views.contains(&"encoder") {
            v.push((
                "value",
                ["The value is the encoder's (step 2).", "这个值属于编码器（第 2 步）。"],
            ));
        }
        v
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let m = shared().map_err(|e| e.to_string())?;
        let c = m.config;
        let (l_n, kvh, hd) = (c.n_layers, c.n_kv_heads, c.head_dim);
        let group = (get(p, "group", 32).max(1) as usize).clamp(1, 256);
        let residual = (get(p, "residual", 32).max(1) as usize).div_ceil(group) * group;
        let scale = get(p, "scale", 0).clamp(0, 2);
        let fmt_i = get(p, "format", 3).clamp(1, 6);
        let layer = (get(p, "layer", 0).max(0) as usize).min(l_n - 1);
        let kv_head = (get(p, "kv_head", 0).max(0) as usize).min(kvh - 1);
        let windows = HELDOUT.len() / TEXT;
        let text_index = (get(p, "text", 0).max(0) as usize).min(windows - 1);
        let value = get(p, "value", 314) as f32 / 100.0;
        let simulated = backend.kind().info().simulated;
        let n = if simulated { SIM_BYTES } else { TEXT };
        let text = &HELDOUT[text_index * TEXT..][..n];
        let chosen = slider_format(fmt_i, scale, group, residual);
        // The formats computed on this text: f16, INT8 per token and per channel, both FP8 at the scale
        // slider's granularity, and KIVI at 4 and 2 bits.
        let mut formats = vec![
            CacheFormat::Pool {
                dtype: KvDtype::F16,
                calibrated: true,
            },
            slider_format(1, scale, group, residual),
            slider_format(2, scale, group, residual),
            slider_format(3, scale, group, residual),
            slider_format(4, scale, group, residual),
            slider_format(5, scale, group, residual),
            slider_format(6, scale, group, residual),
        ];
        if !formats.contains(&chosen) {
            formats.push(chosen);
        }
        // A run depends on its format, the text and the backend: sliders that only change what is shown
        // (layer, head, value) recompute nothing; a format's own sliders recompute that run alone. A
        // reused run reports the launches that computed it again, for the kernel panel.
        type Key = (String, usize, usize, usize, usize, String);
        type Memo = Vec<(Key, QuantRun, Vec<crate::compute::launch::Launch>)>;
        static MEMO: std::sync::Mutex<Memo> = std::sync::Mutex::new(Vec::new());
        let device = format!("{:?} {}", backend.kind(), backend.device());
        let mut runs = Vec::new();
        for f in formats {
            let (g, r) = match f {
                CacheFormat::Kivi { group, residual, .. } => (group, residual),
                _ => (0, 0),
            };
            let key = (f.name(), g, r, text_index, n, device.clone());
            let cached = MEMO.lock().ok().and_then(|m| {
                m.iter()
                    .find(|(k, ..)| *k == key)
                    .map(|(_, r, l)| (r.clone(), l.clone()))
            });
            let run = match cached {
                Some((r, l)) => {
                    crate::compute::launch::report(l);
                    r
                }
                None => {
                    let (r, launches) = crate::compute::launch::capture(|| m.quant_run(text, f, backend));
                    let r = r?;
                    if let Ok(mut memo) = MEMO.lock() {
                        if memo.len() >= 32 {
                            memo.remove(0);
                        }
                        memo.push((key, r.clone(), launches));
                    }
                    r
                }
            };
            runs.push((f, run));
        }
        let selected = runs.iter().position(|(f, _)| *f == chosen).unwrap_or(0);
        let checks: Vec<CheckReport> = runs.iter().filter_map(|(_, r)| r.check.clone()).collect();
        let f16 = &runs[0].1;
        let row_at = ((n - 1) * kvh + kv_head) * hd;
        let krow = &f16.k[layer][row_at..row_at + hd];
        let amax = krow.iter().fold(0f32, |a, x| a.max(x.abs()));
        let s = int8_scale(krow);
        let code = int8_encode(value, s);
        let sel = &runs[selected].1;
        let abs_map = |rows: &[f32]| head_map(n, kvh, hd, kv_head, |at| rows[at].abs());
        let int8_err = |f: &CacheFormat| {
            let r = &runs.iter().find(|(g, _)| g == f).unwrap_or(&runs[0]).1;
            heat(hd, n, err_map(&r.k[layer], &r.k_deq[layer], n, kvh, hd, kv_head))
        };
        let mut out = QuantOut {
            selected,
            text_index,
            bytes: n,
            capped_from: simulated.then_some(TEXT),
            layer,
            kv_head,
            group,
            residual,
            value,
            row: (amax, s),
            int8: Encoded {
                code,
                value: int8_decode(code, s),
            },
            e4m3: encode(E4M3, value),
            e5m2: encode(E5M2, value),
            k_channel_max: heat(l_n * kvh, hd, channel_max(&f16.k, kvh, hd)),
            v_channel_max: heat(l_n * kvh, hd, channel_max(&f16.v, kvh, hd)),
            k_abs: heat(hd, n, abs_map(&f16.k[layer])),
            v_abs: heat(hd, n, abs_map(&f16.v[layer])),
            k_err_token: int8_err(&slider_format(1, scale, group, residual)),
            k_err_channel: int8_err(&CacheFormat::Int8Channel),
            k_err: heat(hd, n, err_map(&sel.k[layer], &sel.k_deq[layer], n, kvh, hd, kv_head)),
            v_err: heat(hd, n, err_map(&sel.v[layer], &sel.v_deq[layer], n, kvh, hd, kv_head)),
            dims: (l_n, kvh, hd),
            checks,
            numbers: Vec::new(),
            runs,
        };
        out.numbers = out.narration_numbers();
        Ok(Box::new(out))
    }
}

impl Output for QuantOut {
    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // INT8's scale: a token row's largest |x| maps to 127, in quant_kv.cu and quant_kv.wgsl alike.
        (op == Kernel::QuantAppend).then_some("One scale per row: its largest |x| maps to 127.")
    }

    fn reports(&self) -> Vec<&CheckReport> {
        self.checks.iter().collect()
    }

    fn has_nan(&self) -> bool {
        self.runs
            .iter()
            .any(|(_, r)| r.nll.iter().any(|x| x.is_nan()) || r.out_rel_rms.iter().any(|x| x.is_nan()))
    }

    fn export_arrays(&self, _cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let (_, r) = self.chosen();
        let (l, kvh, hd) = self.dims;
        let n = self.bytes;
        let flat = |v: &[Vec<f32>]| v.iter().flatten().copied().collect::<Vec<f32>>();
        let mut v = vec![
            NamedArray::new("k", &[l, n, kvh, hd], ArrayData::F32(flat(&r.k))),
            NamedArray::new("v", &[l, n, kvh, hd], ArrayData::F32(flat(&r.v))),
            NamedArray::new("k_deq", &[l, n, kvh, hd], ArrayData::F32(flat(&r.k_deq))),
            NamedArray::new("v_deq", &[l, n, kvh, hd], ArrayData::F32(flat(&r.v_deq))),
            NamedArray::new("nll", &[n - 1], ArrayData::F32(r.nll.clone())),
        ];
        if !r.k_codes.iter().all(Vec::is_empty) {
            let codes = |c: &[Vec<u8>]| c.iter().flatten().copied().collect::<Vec<u8>>();
            v.push(NamedArray::new(
                "k_codes",
                &[l, n, kvh, hd],
                ArrayData::U8(codes(&r.k_codes)),
            ));
            v.push(NamedArray::new(
                "v_codes",
                &[l, n, kvh, hd],
                ArrayData::U8(codes(&r.v_codes)),
            ));
        }
        (v, self.checks.clone())
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    /// `last`: the window's last byte (KIVI's cache as the narration describes it, full).
    fn point(&self, name: &str) -> Option<usize> {
        (name == "last").then(|| self.bytes.checked_sub(1)).flatten()
    }

    fn main_op(&self) -> Option<Kernel> {
        // Pools of a built-in dtype run quant_append/quant_decode; INT8 per channel and KIVI the group
        // kernels, starting with the f16 ring's store.
        match self.runs.get(self.selected)?.0 {
            CacheFormat::Pool { .. } => Some(Kernel::QuantAppend),
            CacheFormat::Int8Channel | CacheFormat::Kivi { .. } => Some(Kernel::GroupStore),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled_at_the_defaults() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "quant").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let out = l.kind.compute(l, &p, &crate::compute::CpuBackend).unwrap();
        let vals = out.values();
        for name in PLACEHOLDERS {
            assert!(vals.iter().any(|(n, _)| n == name), "{name} is not filled");
        }
        assert!(!out.has_nan());
        assert!(out.reports().iter().all(|r| r.passed()));
        assert!(!out.reports().is_empty());
        // The formats step: E5M2 shares f16's exponent bits but not its range ends (Micikevicius et al.,
        // arXiv 2209.05433, Table 1: 57344 and 2^-16 against f16's 65504 and 2^-24).
        let get = |k: &str| vals.iter().find(|(n, _)| *n == k).unwrap().1.clone();
        assert_eq!(
            [
                "e5m2_ebits",
                "e5m2_max",
                "f16_max",
                "e5m2_min_sub",
                "f16_min_sub",
                "e4m3_max"
            ]
            .map(get),
            ["5", "57344", "65504", "2^-16", "2^-24", "448"]
        );
    }
}
