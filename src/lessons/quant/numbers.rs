//! Lesson 10's narration numbers: what the placeholders of [`super::PLACEHOLDERS`] are filled with,
//! from the lesson's own run ([`numbers`]) and from SmolLM2's stored table ([`real_numbers`]).

use super::*;

impl QuantOut {
    /// The values of the lesson's placeholders, from this result.
    pub(super) fn narration_numbers(&self) -> Vec<(&'static str, String)> {
        numbers(self)
    }
}

fn numbers(o: &QuantOut) -> Vec<(&'static str, String)> {
    let (l_n, kvh, hd) = o.dims;
    let long = CONTEXTS[1];
    let short = CONTEXTS[0];
    let pool = |dtype| CacheFormat::Pool {
        dtype,
        calibrated: true,
    };
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
        ("f16_bpt", crate::lessons::format_bytes(bpt(&pool(KvDtype::F16)))),
        ("f16_tokens", tokens_per_pool(bpt(&pool(KvDtype::F16)))),
        (
            "int8_bpt",
            crate::lessons::format_bytes(bpt(&pool(KvDtype::INT8_TOKEN))),
        ),
        ("int8_tokens", tokens_per_pool(bpt(&pool(KvDtype::INT8_TOKEN)))),
        ("fp8_bpt", crate::lessons::format_bytes(bpt(&pool(KvDtype::FP8_E4M3)))),
        ("kivi2_bpt", crate::lessons::format_bytes(bpt(&kivi2))),
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
        ("e5m2_ebits", E5M2.ebits.to_string()),
        ("f16_max", show_value(half::f16::MAX.to_f32())),
        ("e5m2_min_sub", pow2_label(E5M2.decode(1))),
        ("f16_min_sub", pow2_label(half::f16::from_bits(1).to_f32())),
        ("e4m3_value", show_value(o.e4m3.value)),
        ("e5m2_value", show_value(o.e5m2.value)),
        ("format", format_label(sel_f)),
        (
            "out_err",
            pct(sel.out_rel_rms.iter().sum::<f64>() / sel.out_rel_rms.len().max(1) as f64),
        ),
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
        let (kt, kc, vt, vc) = (
            rel_err(&t.k, &t.k_deq),
            rel_err(&ch.k, &ch.k_deq),
            rel_err(&t.v, &t.v_deq),
            rel_err(&ch.v, &ch.v_deq),
        );
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
            let amax = f16.k.iter().chain(&f16.v).flatten().fold(0f32, |m, x| m.max(x.abs()));
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
        (
            "this model shows it: K's channels are far more uneven than V's",
            "这个模型表现出这一点：K 各通道的差异远大于 V",
        )
    } else if kr > 1.3 * vr {
        (
            "this model shows it: K's channels are more uneven than V's",
            "这个模型表现出这一点：K 各通道比 V 更不均匀",
        )
    } else if kr > vr {
        (
            "this model shows it mildly: K's channels are more uneven than V's, but not by much",
            "这个模型只轻微地表现出这一点：K 各通道比 V 更不均匀，但差得不多",
        )
    } else {
        (
            "this model does not show it: V's channels are as uneven as K's",
            "这个模型没有表现出这一点：V 各通道与 K 一样不均匀",
        )
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
            "Per token wins for both here: this model's channels are even enough that one scale per row is enough."
                .into(),
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
    let w = s
        .cells
        .iter()
        .max_by(|a, b| a.bits_per_byte.total_cmp(&b.bits_per_byte))?;
    Some((
        format!(
            "Within 0.01 bits per byte of f16: {}. The worst is {} at {}.",
            if close.is_empty() {
                "none".to_string()
            } else {
                close.join(", ")
            },
            w.format,
            fmt_bpb(w.bits_per_byte)
        ),
        format!(
            "与 f16 相差不超过 0.01 比特/字节的有：{}。最差的是 {}，为 {}。",
            if close.is_empty() {
                "无".to_string()
            } else {
                close.join("、")
            },
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

/// A power of two as `2^e` (the formats' smallest subnormals); other values as [`show_value`] gives them.
fn pow2_label(x: f32) -> String {
    let e = x.log2();
    if x > 0.0 && e == e.round() {
        format!("2^{}", e as i32)
    } else {
        show_value(x)
    }
}
