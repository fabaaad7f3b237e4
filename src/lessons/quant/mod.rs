//! Lesson 10, KV-cache quantisation (kind `quant`): the trained model decodes a 256-byte window of the
//! held-out text byte by byte from an empty cache in each format ([`crate::drivers::quant`]): f16, INT8 per
//! token and FP8 E4M3/E5M2 through the quantising append and dequantising decode kernels on the active
//! backend; INT8 per channel and KIVI (2 and 4 bits) through the group kernels (`group_append`,
//! `group_decode`) on the same backend. Everything the views draw is measured
//! here; the table over the whole held-out file is stored ([`stored`]) and drawn labelled as stored.

pub mod bench;
pub mod export;
pub mod stored;

use std::sync::Arc;

use super::{LessonKind, Output, Params, get, heat};
use crate::cache::KvDtype;
use crate::cache::dtype::quant::{E4M3, E5M2, Fp8, int8_decode, int8_encode, int8_scale};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::cache::CacheFormat;
use crate::drivers::quant::QuantRun;
use crate::model::{HELDOUT, shared};
use crate::figure::HeatmapData;

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
/// A simulated GPU runs every thread as an OS thread: it reads this many bytes at most.
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
        5 => CacheFormat::Kivi { bits: 4, group, residual },
        6 => CacheFormat::Kivi { bits: 2, group, residual },
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

/// |a − b| per value of KV head `h`, from `[T, KVH, hd]` to `[hd, T]`.
fn err_map(a: &[f32], b: &[f32], t: usize, kvh: usize, hd: usize, h: usize) -> Vec<f32> {
    let mut m = vec![0f32; hd * t];
    for i in 0..t {
        for d in 0..hd {
            let at = (i * kvh + h) * hd + d;
            m[d * t + i] = (a[at] - b[at]).abs();
        }
    }
    m
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
    Encoded { code, value: f.decode(code) }
}

impl Schema for Quant {
    fn name(&self) -> &'static str {
        "quant"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["format", "scale", "group", "residual", "value", "layer", "kv_head", "text"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &[]
    }
}

impl LessonKind for Quant {
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
            v.push(("group", ["KIVI's group size: pick format 5 or 6.", "KIVI 的分组大小：请选格式 5 或 6。"]));
            v.push(("residual", ["KIVI's residual: pick format 5 or 6.", "KIVI 的残差：请选格式 5 或 6。"]));
        }
        if !matches!(get(p, "format", 3), 3 | 4) && !views.contains(&"table") {
            v.push(("scale", ["The scale granularity applies to FP8: pick format 3 or 4.", "缩放粒度只用于 FP8：请选格式 3 或 4。"]));
        }
        if !views.contains(&"encoder") {
            v.push(("value", ["The value is the encoder's (step 2).", "这个值属于编码器（第 2 步）。"]));
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
            let cached = MEMO
                .lock()
                .ok()
                .and_then(|m| m.iter().find(|(k, ..)| *k == key).map(|(_, r, l)| (r.clone(), l.clone())));
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
            k_err: heat(hd, n, err_map(&sel.k[layer], &sel.k_deq[layer], n, kvh, hd, kv_head)),
            v_err: heat(hd, n, err_map(&sel.v[layer], &sel.v_deq[layer], n, kvh, hd, kv_head)),
            dims: (l_n, kvh, hd),
            checks,
            numbers: Vec::new(),
            runs,
        };
        out.numbers = numbers(&out);
        Ok(Box::new(out))
    }
}

fn numbers(o: &QuantOut) -> Vec<(&'static str, String)> {
    let (l_n, kvh, hd) = o.dims;
    let long = CONTEXTS[1];
    let short = CONTEXTS[0];
    let pool = |dtype| CacheFormat::Pool { dtype, calibrated: true };
    let kivi2 = CacheFormat::Kivi {
        bits: 2,
        group: o.group,
        residual: o.residual,
    };
    let bpt = |f: &CacheFormat| o.bytes_per_token(f, long);
    let f16 = &o.runs[0].1;
    let (sel_f, sel) = o.chosen();
    let mut v = vec![
        ("layers", l_n.to_string()),
        ("kv_heads", kvh.to_string()),
        ("head_dim", hd.to_string()),
        ("f16_bpt", super::format_bytes(bpt(&pool(KvDtype::F16)))),
        ("f16_tokens", tokens_per_pool(bpt(&pool(KvDtype::F16)))),
        ("int8_bpt", super::format_bytes(bpt(&pool(KvDtype::INT8_TOKEN)))),
        ("int8_tokens", tokens_per_pool(bpt(&pool(KvDtype::INT8_TOKEN)))),
        ("fp8_bpt", super::format_bytes(bpt(&pool(KvDtype::FP8_E4M3)))),
        ("kivi2_bpt", super::format_bytes(bpt(&kivi2))),
        ("long_ctx", long.to_string()),
        ("short_ctx", short.to_string()),
        ("value", show_value(o.value)),
        ("layer", o.layer.to_string()),
        ("kv_head", o.kv_head.to_string()),
        ("row_amax", show_value(o.row.0)),
        ("row_scale", format!("{:.3e}", o.row.1)),
        ("int8_value", show_value(o.int8.value)),
        ("int8_err", show_value((o.int8.value - o.value).abs())),
        ("e4m3_max", show_value(E4M3.max())),
        ("e5m2_max", show_value(E5M2.max())),
        ("e4m3_value", show_value(o.e4m3.value)),
        ("e5m2_value", show_value(o.e5m2.value)),
        ("format", format_label(sel_f)),
        ("out_err", pct(sel.out_rel_rms.iter().sum::<f64>() / sel.out_rel_rms.len().max(1) as f64)),
        ("bpb_here", fmt_bpb(sel.bits_per_byte())),
        ("bpb_f16", fmt_bpb(f16.bits_per_byte())),
        ("group", o.group.to_string()),
        ("residual", o.residual.to_string()),
    ];
    // Outliers: max over median channel, K against V.
    let (kr, vr) = (
        outlier_ratio(&o.k_channel_max.values, hd),
        outlier_ratio(&o.v_channel_max.values, hd),
    );
    v.push(("k_ratio", format!("{kr:.2}×")));
    v.push(("v_ratio", format!("{vr:.2}×")));
    let (en, zh) = outlier_words(kr, vr);
    v.push(("outlier_verdict", en.into()));
    v.push(("outlier_verdict_zh", zh.into()));
    if let (Some(t), Some(ch)) = (o.run("int8-token"), o.run("int8-channel")) {
        let (kt, kc, vt, vc) = (rel_err(&t.k, &t.k_deq), rel_err(&ch.k, &ch.k_deq), rel_err(&t.v, &t.v_deq), rel_err(&ch.v, &ch.v_deq));
        v.push(("k_err_token", pct(kt)));
        v.push(("k_err_channel", pct(kc)));
        v.push(("v_err_token", pct(vt)));
        v.push(("v_err_channel", pct(vc)));
        let (en, zh) = granularity_words(kt, kc, vt, vc, hd);
        v.push(("granularity_verdict", en));
        v.push(("granularity_verdict_zh", zh));
    }
    // KIVI's cost.
    let kivi_bits = match sel_f {
        CacheFormat::Kivi { bits, .. } => *bits,
        _ => 2,
    };
    let cost = kivi_bits as f64 + 32.0 / o.group as f64;
    v.push(("kivi_bits", kivi_bits.to_string()));
    v.push(("kivi_cost", format!("{cost:.2}")));
    v.push(("kivi_ratio", format!("{:.2}×", 16.0 / cost)));
    v.push(("kivi_nominal", format!("{:.0}×", 16.0 / kivi_bits as f64)));
    let kf = CacheFormat::Kivi {
        bits: kivi_bits,
        group: o.group,
        residual: o.residual,
    };
    let ratio_at = |ctx: usize| {
        let f16b = o.bytes_per_token(&pool(KvDtype::F16), ctx);
        format!("{:.2}×", f16b / o.bytes_per_token(&kf, ctx))
    };
    v.push(("kivi_ratio_short", ratio_at(short)));
    v.push(("kivi_ratio_long", ratio_at(long)));
    if let Some(s) = stored::embedded() {
        v.push(("stored_windows", s.windows.to_string()));
        if let Some(c) = s.cell("f16") {
            v.push(("stored_f16", fmt_bpb(c.bits_per_byte)));
        }
        if let (Some(c1), Some(c)) = (s.cell("fp8-e4m3-scale1"), s.cell("fp8-e4m3")) {
            v.push(("stored_e4m3_scale1", fmt_bpb(c1.bits_per_byte)));
            v.push(("stored_e4m3", fmt_bpb(c.bits_per_byte)));
            // The largest |K| or |V| of this text, against E4M3's range at scale 1.
            let amax = f16
                .k
                .iter()
                .chain(&f16.v)
                .flatten()
                .fold(0f32, |m, x| m.max(x.abs()));
            let d = c1.bits_per_byte - c.bits_per_byte;
            let (en, zh) = if d.abs() < 0.005 {
                (
                    format!(
                        "calibration changes little here. This model's K and V reach only {} on this text, well inside E4M3's range without a scale, and E4M3's relative step is the same across its normal range.",
                        show_value(amax)
                    ),
                    format!(
                        "这里校准几乎没有影响。这个模型的 K、V 在这段文本上最大只到 {}，不加缩放也远在 E4M3 的范围之内，而 E4M3 在正规数范围内的相对步长处处相同。",
                        show_value(amax)
                    ),
                )
            } else if d > 0.0 {
                (
                    "calibration helps: without it values fall outside the range the format resolves well.".to_string(),
                    "校准有帮助：不校准时，数值落在该格式分辨得好的范围之外。".to_string(),
                )
            } else {
                (
                    "here the uncalibrated scale does better, against the usual advice.".to_string(),
                    "这里未校准的缩放因子反而更好，与通常的建议相反。".to_string(),
                )
            };
            v.push(("scale_verdict", en));
            v.push(("scale_verdict_zh", zh));
        }
        if let Some((en, zh)) = quality_words(s) {
            v.push(("quality_verdict", en));
            v.push(("quality_verdict_zh", zh));
        }
        v.push(("speed_line", s.speed_line(false)));
        v.push(("speed_line_zh", s.speed_line(true)));
    }
    v.extend(real_numbers());
    v
}

/// Max over median channel of each (layer, KV head) row of `maxima` (`[rows, hd]`).
fn row_ratios(maxima: &[f32], hd: usize) -> Vec<f64> {
    maxima.chunks(hd).map(|c| outlier_ratio(c, hd)).collect()
}

/// In how many (layer, KV head) rows of `maxima` (`[rows, hd]`) the largest channel is one of the `top`
/// channels that are most often a row's largest, and how many rows there are.
fn fixed_channels(maxima: &[f32], hd: usize, top: usize) -> (usize, usize) {
    let mut count = vec![0usize; hd];
    let rows = maxima.chunks(hd).count();
    for r in maxima.chunks(hd) {
        if let Some(c) = (0..r.len()).max_by(|&a, &b| r[a].total_cmp(&r[b])) {
            count[c] += 1;
        }
    }
    count.sort_unstable_by(|a, b| b.cmp(a));
    (count.iter().take(top).sum(), rows)
}

/// The real-model step's numbers, all from SmolLM2's stored table (`assets/measurements/smollm2/quant.json`).
fn real_numbers() -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let Some(s) = stored::embedded_smollm2() else {
        return v;
    };
    v.push(("real_windows", s.windows.to_string()));
    v.push(("real_window_tokens", TEXT.to_string()));
    if let Some(ch) = &s.channels {
        let hd = ch.head_dim;
        let (kr, vr) = (outlier_ratio(&ch.k, hd), outlier_ratio(&ch.v, hd));
        v.push(("real_k_ratio", format!("{kr:.2}×")));
        v.push(("real_v_ratio", format!("{vr:.2}×")));
        let (en, zh) = outlier_words(kr, vr);
        v.push(("real_outlier_verdict", en.into()));
        v.push(("real_outlier_verdict_zh", zh.into()));
        // Whether the same few channels are the largest across layers and heads.
        let (k_fixed, rows) = fixed_channels(&ch.k, hd, 4);
        let (v_fixed, _) = fixed_channels(&ch.v, hd, 4);
        v.push(("real_k_fixed", k_fixed.to_string()));
        v.push(("real_v_fixed", v_fixed.to_string()));
        v.push(("real_rows", rows.to_string()));
        // The most uneven K row, and its largest channel.
        let ratios = row_ratios(&ch.k, hd);
        if let Some((row, r)) = ratios.iter().copied().enumerate().max_by(|a, b| a.1.total_cmp(&b.1)) {
            let cells = &ch.k[row * hd..(row + 1) * hd];
            let c = (0..hd).max_by(|&a, &b| cells[a].total_cmp(&cells[b])).unwrap_or(0);
            let (l, h) = (row / ch.kv_heads, row % ch.kv_heads);
            v.push(("real_top_where", format!("channel {c} of layer {l}'s KV head {h}")));
            v.push(("real_top_where_zh", format!("第 {l} 层 KV 头 {h} 的通道 {c}")));
            v.push(("real_top_ratio", format!("{r:.1}×")));
        }
    }
    if let (Some(t), Some(c)) = (s.cell("int8-token"), s.cell("int8-channel"))
        && let (Some(kt), Some(kc), Some(vt), Some(vc)) = (t.k_rel_err, c.k_rel_err, t.v_rel_err, c.v_rel_err)
    {
        v.push(("real_k_err_token", pct(kt)));
        v.push(("real_k_err_channel", pct(kc)));
        v.push(("real_v_err_token", pct(vt)));
        v.push(("real_v_err_channel", pct(vc)));
        let hd = s.channels.as_ref().map_or(0, |c| c.head_dim);
        let (en, zh) = granularity_words(kt, kc, vt, vc, hd);
        v.push(("real_granularity_verdict", en));
        v.push(("real_granularity_verdict_zh", zh));
    }
    if let Some(c) = s.cell("f16") {
        v.push(("real_f16", fmt_bpb(c.bits_per_byte)));
    }
    // How many formats stay within 0.01 bits per byte of f16, and the worst.
    let base = s.cell("f16").map_or(f64::NAN, |c| c.bits_per_byte);
    let others: Vec<_> = s.cells.iter().filter(|c| c.format != "f16").collect();
    let close = others.iter().filter(|c| c.bits_per_byte - base <= 0.01).count();
    if let Some(w) = others.iter().max_by(|a, b| a.bits_per_byte.total_cmp(&b.bits_per_byte)) {
        let label = CacheFormat::all(s.group, s.residual)
            .into_iter()
            .find(|f| f.name() == w.format)
            .map_or(w.format.clone(), |f| format_label(&f));
        v.push((
            "real_quality_verdict",
            format!(
                "{close} of the {} other formats stay within 0.01 of it; the worst is {label} at {}.",
                others.len(),
                fmt_bpb(w.bits_per_byte)
            ),
        ));
        v.push((
            "real_quality_verdict_zh",
            format!(
                "其余 {} 种格式中有 {close} 种与它相差不超过 0.01；最差的是 {label}，为 {}。",
                others.len(),
                fmt_bpb(w.bits_per_byte)
            ),
        ));
    }
    v
}

/// Whether K's channels are more uneven than V's (max over median channel, `kr` for K, `vr` for V), in
/// English and Chinese.
fn outlier_words(kr: f64, vr: f64) -> (&'static str, &'static str) {
    if kr > 2.0 * vr {
        ("this model shows it: K's channels are far more uneven than V's", "这个模型表现出这一点：K 各通道的差异远大于 V")
    } else if kr > 1.3 * vr {
        ("this model shows it: K's channels are more uneven than V's", "这个模型表现出这一点：K 各通道比 V 更不均匀")
    } else if kr > vr {
        (
            "this model shows it mildly: K's channels are more uneven than V's, but not by much",
            "这个模型只轻微地表现出这一点：K 各通道比 V 更不均匀，但差得不多",
        )
    } else {
        ("this model does not show it: V's channels are as uneven as K's", "这个模型没有表现出这一点：V 各通道与 K 一样不均匀")
    }
}

/// Which INT8 granularity suits K and which suits V, from their relative errors per token (`kt`, `vt`)
/// and per channel (`kc`, `vc`), in English and Chinese.
fn granularity_words(kt: f64, kc: f64, vt: f64, vc: f64, hd: usize) -> (String, String) {
    match (kc < kt, vc < vt) {
        (true, false) => (
            "Per channel suits K and per token suits V, as KIVI found.".into(),
            "按通道适合 K，按 token 适合 V，与 KIVI 的发现一致。".into(),
        ),
        (true, true) => {
            let b = crate::cache::formats::CHANNEL_BLOCK;
            (
                format!(
                    "Per channel wins for both here: one of its scales covers {b} tokens of one channel, a smaller group than the {hd} channels of a token that one per-token scale covers, so it fits V too."
                ),
                format!(
                    "这里按通道对两者都更好：它的一个缩放因子只覆盖一个通道上的 {b} 个 token，比按 token 时一个缩放因子覆盖的一个 token 的 {hd} 个通道更小，所以对 V 也合适。"
                ),
            )
        }
        (false, true) => (
            "Here per token suits K and per channel suits V: the opposite of KIVI's finding.".into(),
            "这里按 token 适合 K，按通道适合 V：与 KIVI 的发现相反。".into(),
        ),
        (false, false) => (
            "Per token wins for both here: this model's channels are even enough that one scale per row is enough.".into(),
            "这里按 token 对两者都更好：这个模型各通道足够均匀，每行一个缩放因子就够了。".into(),
        ),
    }
}

/// Which formats of table `s` stay within 0.01 bits per byte of f16, and the worst, in English and Chinese.
fn quality_words(s: &crate::drivers::quant::QuantTable) -> Option<(String, String)> {
    let base = s.cell("f16").map_or(f64::NAN, |c| c.bits_per_byte);
    let close: Vec<&str> = s
        .cells
        .iter()
        .filter(|c| c.format != "f16" && c.bits_per_byte - base <= 0.01)
        .map(|c| c.format.as_str())
        .collect();
    let w = s.cells.iter().max_by(|a, b| a.bits_per_byte.total_cmp(&b.bits_per_byte))?;
    Some((
        format!(
            "Within 0.01 bits per byte of f16: {}. The worst is {} at {}.",
            if close.is_empty() { "none".to_string() } else { close.join(", ") },
            w.format,
            fmt_bpb(w.bits_per_byte)
        ),
        format!(
            "与 f16 相差不超过 0.01 比特/字节的有：{}。最差的是 {}，为 {}。",
            if close.is_empty() { "无".to_string() } else { close.join("、") },
            w.format,
            fmt_bpb(w.bits_per_byte)
        ),
    ))
}

impl crate::drivers::quant::QuantTable {
    /// The narration's line on decode speed: the stored benchmark's ratios, or that none is stored.
    pub fn speed_line(&self, zh: bool) -> String {
        match &self.bench {
            Some(b) if !b.lines.is_empty() => {
                let parts: Vec<String> = b
                    .lines
                    .iter()
                    .filter(|l| l.format != "f16")
                    .map(|l| format!("{} {:.2}×", l.format, l.speedup))
                    .collect();
                let faster = b.lines.iter().filter(|l| l.format != "f16").all(|l| l.speedup >= 1.2);
                let grouped = b
                    .lines
                    .iter()
                    .any(|l| l.format == "int8-channel" || l.format.starts_with("kivi"));
                let (group_en, group_zh) = if grouped && !faster {
                    (
                        " INT8 per channel and KIVI unpack each tile of codes to f32 in plain Rust, with no SIMD path of their own.",
                        "INT8 按通道和 KIVI 在普通 Rust 代码中把每块编码解包成 f32，没有自己的 SIMD 路径。",
                    )
                } else {
                    ("", "")
                };
                if zh {
                    format!(
                        "解码速度（{} 个请求 × {} 上下文，{}）相对 f16：{}。{}{}",
                        b.requests,
                        b.context,
                        b.backend,
                        parts.join("，"),
                        if faster {
                            "读取的字节减半，解码随之加快。"
                        } else {
                            "并没有更快：这个 CPU 路径先把编码转换成 f16，再走同一个 SIMD 循环，转换的开销抵消了少读的字节（`kvscope bench` 给出各部分的时间）。"
                        },
                        group_zh
                    )
                } else {
                    format!(
                        "Decode speed ({} requests × {} context, {}) against f16: {}. {}{}",
                        b.requests,
                        b.context,
                        b.backend,
                        parts.join(", "),
                        if faster {
                            "Half the bytes read, and decode is faster for it."
                        } else {
                            "Not faster: the 8-bit CPU path converts the codes to f16 before the same SIMD loop, and the conversion costs about what the halved reads save (`kvscope bench` shows where the time goes)."
                        },
                        group_en
                    )
                }
            }
            _ => {
                if zh {
                    "速度未存储：运行 `kvscope bench --only p3-int8-token` 等测量。".into()
                } else {
                    "No speed is stored: `kvscope bench --only p3-int8-token` and its siblings measure it.".into()
                }
            }
        }
    }
}

impl Output for QuantOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.checks.iter().collect()
    }

    fn has_nan(&self) -> bool {
        self.runs.iter().any(|(_, r)| r.nll.iter().any(|x| x.is_nan()) || r.out_rel_rms.iter().any(|x| x.is_nan()))
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
            v.push(NamedArray::new("k_codes", &[l, n, kvh, hd], ArrayData::U8(codes(&r.k_codes))));
            v.push(NamedArray::new("v_codes", &[l, n, kvh, hd], ArrayData::U8(codes(&r.v_codes))));
        }
        (v, self.checks.clone())
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
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
    }
}
