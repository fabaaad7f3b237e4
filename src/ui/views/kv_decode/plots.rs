//! Lesson 4's plots: arithmetic intensity of decode (FLOPs against K/V bytes read), and the live
//! bandwidth sweep of the paged decode kernel against a read-only stream over the same bytes (its roof)
//! and a copy of them (counted as the bytes it reads plus the bytes it writes).

use crate::ui::text::Slant as _;
use eframe::egui::{self, RichText, Ui};
use egui_plot::{Line, PlotPoints, Points};

use crate::cache::kv_bytes_per_token;
use crate::compute::Device;
use crate::lessons::kv_decode::DecodeOut;
use crate::lessons::kv_decode::sweep::SWEEP_REQUESTS;
use crate::lessons::kv_decode::sweep::{StoredSweep, Sweep};
use crate::style;
use crate::ui::text::Lang;
use crate::ui::widgets::{Chart, ChartAxis, ViewCtx, bytes};

pub fn intensity(cx: &mut ViewCtx, ui: &mut Ui, d: &DecodeOut) {
    let lang = cx.lang;
    let size = cx.size;
    let c = (*cx.cursor).min(d.frames.len() - 1);
    let f = &d.frames[c];
    let ctx = f.pos + 1;
    // Per layer and decode step: Q·K and P·V are 2 FLOPs per multiply-add, each over H·hd·ctx;
    // K and V are read once per KV head: 2 · KVH · hd · ctx values of 2 bytes.
    let flops = |b: usize, h: usize, n: usize| (4 * b * h * d.head_dim * n) as f64;
    let kv_bytes = |b: usize, kvh: usize, n: usize| {
        (b * n) as f64 * kv_bytes_per_token(1, kvh as u64, d.head_dim as u64, crate::cache::KvDtype::F16) as f64
    };
    let (fl, by) = if f.layer.is_some() {
        (f.flops as f64, f.bytes_read as f64)
    } else {
        (flops(d.batch, d.heads, ctx), kv_bytes(d.batch, d.kv_heads, ctx))
    };
    ui.label(
        RichText::new(format!(
            "{} (ctx = {ctx}, batch {}, H {}, KVH {}, hd {}): {} FLOP, {} K/V {} → {:.2} FLOP/byte",
            lang.t("this decode step, one layer", "本解码步，单层"),
            d.batch,
            d.heads,
            d.kv_heads,
            d.head_dim,
            // Whole numbers while they are short (640, not 6.400e2).
            if fl < 1e6 {
                format!("{fl:.0}")
            } else {
                format!("{fl:.3e}")
            },
            bytes(by),
            lang.t("read", "读取"),
            fl / by.max(1.0)
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let sweep = cx.state::<Sweep>();
    let (balance, live) = match sweep.balance {
        Some(b) => (Some(b), true),
        None => (StoredSweep::embedded().and_then(StoredSweep::balance), false),
    };
    // In presentation mode the roofline is the first page and intensity against batch the second: one
    // slide holds one chart at a size the back of the hall can read.
    let page = (!crate::style::views_may_scroll()).then(|| crate::style::view_page(2));
    if page != Some(1) {
        let h = match page {
            Some(_) => ui.available_height() - 6.0 * size,
            None => (ui.available_height() - 5.0 * size) * 0.6,
        };
        roofline(lang, size, ui, d, h.max(80.0), balance, live);
    }
    if page == Some(0) {
        crate::ui::widgets::more_on_next_page(
            ui,
            lang,
            size,
            lang.t("arithmetic intensity against batch", "算术强度随批大小的变化"),
        );
        return;
    }
    let h = (ui.available_height() - 4.0 * size).max(80.0);
    let kv_options: Vec<usize> = (1..=d.heads).filter(|k| d.heads.is_multiple_of(*k)).collect();
    Chart::new(
        "intensity-batch",
        ChartAxis::linear(lang.t("batch size", "批大小")),
        ChartAxis::linear(lang.t("FLOP per byte of K/V", "每字节 K/V 的 FLOP")).from_zero(),
    )
    .height(h)
    .show(ui, size, |p| {
        for (k, &kvh) in kv_options.iter().rev().take(4).enumerate() {
            let name = format!("{} (KVH {kvh})", crate::math::kv_family(d.heads, kvh));
            let pts: PlotPoints = (1..=16)
                .map(|b| [b as f64, flops(b, d.heads, ctx) / kv_bytes(b, kvh, ctx)])
                .collect();
            // The family's colour on the roofline (MHA, the lesson's GQA, MQA), another GQA's after them.
            let c = if kvh == d.heads {
                style::attention_kind("MHA")
            } else if kvh == 1 {
                style::attention_kind("MQA")
            } else if kvh == d.kv_heads {
                style::attention_kind("GQA")
            } else {
                6 + k
            };
            p.line(Line::new(name, pts).color(style::series(c)));
        }
        if let Some((gflops, gbs)) = balance {
            let name = format!(
                "{} {:.0} FLOP/B",
                if live {
                    lang.t("balance point of this machine (measured)", "本机平衡点（实测）")
                } else {
                    lang.t("balance point (stored measurement)", "平衡点（存储的实测值）")
                },
                gflops / gbs
            );
            p.threshold_y(gflops / gbs, name);
        }
    });
    ui.label(
        RichText::new(match balance {
            Some((gflops, gbs)) => format!(
                "{}: {gflops:.0} GFLOP/s ÷ {gbs:.1} GB/s = {:.0} FLOP/byte; {} {:.0} FLOP/byte",
                if live {
                    lang.t("balance point, measured on this machine", "本机实测平衡点")
                } else {
                    lang.t(
                        "balance point, stored measurement (the next step measures this machine)",
                        "平衡点，存储的实测值（下一步实测本机）",
                    )
                },
                gflops / gbs,
                lang.t("decode attention reads K/V at", "解码注意力读取 K/V 的算术强度为"),
                d.heads as f64 / d.kv_heads as f64
            ),
            None => lang
                .t(
                    "The machine's balance point (its FLOP/s ÷ its read bandwidth) is measured in the next step.",
                    "本机的平衡点（FLOP/s ÷ 读取带宽）在下一步实测。",
                )
                .to_string(),
        })
        .size(crate::style::fit(size * 0.9)),
    );
}

/// The roofline (Williams, Waterman and Patterson 2009): attainable FLOP/s = min(peak FLOP/s,
/// bandwidth × arithmetic intensity), on log axes, for an H100 SXM and an H200 SXM from their datasheets
/// (quoted facts: dense BF16 tensor-core peak and HBM bandwidth) and for this machine from its measured
/// GEMM GFLOP/s and read bandwidth (live, or the stored measurement until the next step runs). Decode
/// attention's intensity for MHA, GQA and MQA of the lesson's heads is marked: all sit left of every
/// ridge.
fn roofline(lang: Lang, size: f32, ui: &mut Ui, d: &DecodeOut, h: f32, balance: Option<(f64, f64)>, live: bool) {
    let fact = |id: &str| crate::facts::fact(id).number();
    // (name, bytes/s, FLOP/s)
    let mut roofs: Vec<(String, f64, f64)> = [
        ("H100 SXM", "h100_sxm_hbm_bandwidth", "h100_sxm_bf16_dense"),
        ("H200 SXM", "h200_sxm_hbm_bandwidth", "h200_sxm_bf16_dense"),
    ]
    .into_iter()
    .map(|(name, bw, peak)| {
        (
            format!(
                "{name} ({}: {} TB/s, {} TFLOP/s BF16)",
                lang.t("datasheet", "数据手册"),
                crate::facts::fact(bw).value,
                crate::facts::fact(peak).value
            ),
            fact(bw) * 1e12,
            fact(peak) * 1e12,
        )
    })
    .collect();
    if let Some((gflops, gbs)) = balance {
        roofs.push((
            format!(
                "{} ({gbs:.1} GB/s, {gflops:.0} GFLOP/s)",
                if live {
                    lang.t("this machine, measured", "本机实测")
                } else {
                    lang.t("stored measurement, CPU", "存储的实测值，CPU")
                }
            ),
            gbs * 1e9,
            gflops * 1e9,
        ));
    }
    let (x0, x1) = (0.25f64, 2000.0f64);
    // The decode points: MHA, the lesson's GQA (when it is one) and MQA, at intensity H / KVH.
    // (name, intensity, colour index): MHA, GQA and MQA keep one colour each on both charts of the
    // step (the intensity-against-batch lines use the same), none of them a roof's.
    let kind = style::attention_kind;
    let mut marks = vec![("MHA".to_string(), 1.0, kind("MHA"))];
    if d.kv_heads > 1 && d.kv_heads < d.heads {
        marks.push((
            format!("GQA {}/{}", d.heads, d.kv_heads),
            (d.heads / d.kv_heads) as f64,
            kind("GQA"),
        ));
    }
    if d.heads > 1 {
        marks.push(("MQA".to_string(), d.heads as f64, kind("MQA")));
    }
    let h100 = roofs[0].clone();
    Chart::new(
        "roofline",
        ChartAxis::log10(lang.t(
            "arithmetic intensity, FLOP per byte read (log axis)",
            "算术强度，每读一字节的 FLOP（对数坐标）",
        )),
        ChartAxis::log10(lang.t("attainable FLOP/s (log axis)", "可达到的 FLOP/s（对数坐标）")),
    )
    .height(h)
    .show(ui, size, |p| {
        for (k, (name, bw, peak)) in roofs.iter().enumerate() {
            let ridge = peak / bw;
            let mut pts = vec![[x0.log10(), (bw * x0).log10()]];
            if ridge > x0 && ridge < x1 {
                pts.push([ridge.log10(), peak.log10()]);
            }
            pts.push([x1.log10(), (bw * x1).min(*peak).log10()]);
            let mut line = Line::new(name.clone(), PlotPoints::new(pts))
                .color(style::series(k))
                .width(2.5);
            if k == 2 && !live {
                line = line.style(egui_plot::LineStyle::dashed_loose());
            }
            p.line(line);
        }
        // The decode points are in the legend with the roofs, and the line under the plot gives
        // each one's intensity and share of the peak in its colour.
        for (name, x, c) in &marks {
            let y = (h100.1 * x).min(h100.2);
            p.points(
                Points::new(name.clone(), vec![[x.log10(), y.log10()]])
                    .radius(6.0)
                    .color(style::series(*c)),
            );
        }
    });
    let mut job = egui::text::LayoutJob::default();
    let font = egui::FontId::proportional(crate::style::fit(size * 0.85));
    let text = ui.visuals().text_color();
    job.append(
        lang.t(
            "decode attention, dots on the H100 roof: ",
            "解码注意力（H100 屋顶上的圆点）：",
        ),
        0.0,
        egui::TextFormat::simple(font.clone(), text),
    );
    for (k, (name, x, c)) in marks.iter().enumerate() {
        let y = (h100.1 * x).min(h100.2);
        job.append(
            &format!(
                "{}{name} {x:.0} FLOP/B → ≤ {:.1}%",
                if k > 0 { " · " } else { "" },
                100.0 * y / h100.2
            ),
            0.0,
            egui::TextFormat::simple(font.clone(), style::request_text(ui.visuals(), *c)),
        );
    }
    job.append(
        lang.t(" of its peak", " 的峰值"),
        0.0,
        egui::TextFormat::simple(font, text),
    );
    job.wrap.max_width = ui.available_width();
    ui.label(job);
}

pub fn bandwidth(cx: &mut ViewCtx, ui: &mut Ui) {
    let lang = cx.lang;
    let size = cx.size;
    let (sync, runner) = (cx.sync, cx.runner.clone());
    let sweep = cx.state::<Sweep>();
    let running = sweep.poll();
    if running {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(200));
    }
    let wake = |ctx: egui::Context| move || ctx.request_repaint();
    if !running && !sweep.auto_started && !sync {
        sweep.auto_started = true;
        sweep.start(runner.clone(), wake(ui.ctx().clone()));
    }
    ui.label(
        RichText::new(format!(
            "{} ({SWEEP_REQUESTS} {}, H32/KV8, hd128, block 16, f16)",
            if sweep.points.is_empty() && StoredSweep::embedded().is_some() {
                lang.t(
                    "paged decode kernel vs reading the same bytes",
                    "分页解码 kernel 与读取同样字节的对比",
                )
            } else {
                lang.t(
                    "measured now on this machine: paged decode kernel vs reading the same bytes",
                    "在本机实时测量：分页解码 kernel 与读取同样字节的对比",
                )
            },
            lang.t("requests", "个请求")
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let label = if running {
        lang.t("measuring…", "测量中…")
    } else {
        lang.t("Measure again", "重新测量")
    };
    if ui.add_enabled(!running, egui::Button::new(label)).clicked() {
        sweep.start(runner, wake(ui.ctx().clone()));
    }
    let sw = &*sweep;
    if let Some(e) = &sw.error {
        ui.label(
            RichText::new(format!("{}: {e}", lang.t("measurement failed", "测量失败")))
                .color(style::fail(ui.visuals())),
        );
    }
    // Until a live point arrives (never, in tests and headless renders), the stored measurement is drawn,
    // dashed and labelled with its machine and date.
    let stored = StoredSweep::embedded().filter(|_| sw.points.is_empty());
    let points = stored.map_or_else(|| sw.points.clone(), StoredSweep::sweep_points);
    let balance = if stored.is_some() {
        stored.and_then(StoredSweep::balance)
    } else {
        sw.balance
    };
    if let Some(st) = stored {
        ui.add(
            egui::Label::new(
                RichText::new(format!(
                    "{} {} · {} · {} {} · {}",
                    lang.t("stored measurement, not this machine's:", "存储的实测值，不是本机的："),
                    st.date,
                    st.machine,
                    st.backend,
                    lang.t("backend", "后端"),
                    if running {
                        lang.t("measuring the first context length…", "正在测量第一个上下文长度…")
                    } else {
                        lang.t(
                            "press “Measure again” to measure here (tests and headless renders never measure)",
                            "按“重新测量”在本机测量（测试与无窗口出图时不会测量）",
                        )
                    }
                ))
                .slant()
                .size(crate::style::fit(size)),
            )
            .wrap(),
        );
    }
    if points.is_empty() {
        return;
    }
    let on = if stored.is_some() {
        lang.t("stored", "存储")
    } else {
        sw.backend.map_or("?", |b| b.name())
    };
    let dash = |l: Line<'static>| {
        if stored.is_some() {
            l.style(egui_plot::LineStyle::dashed_loose())
        } else {
            l
        }
    };
    let (read_label, copy_label) = match points[0].device {
        Device::Gpu => (
            lang.t("read-only stream kernel (roof)", "只读流 kernel（上限）"),
            lang.t("device copy, bytes read + written", "显存拷贝，读 + 写字节"),
        ),
        Device::Host => (
            lang.t("read-only stream, same threads (roof)", "只读流，同样线程数（上限）"),
            lang.t("memcpy, bytes read + written", "memcpy，读 + 写字节"),
        ),
    };
    Chart::new(
        "bandwidth",
        ChartAxis::log2(lang.t("context per request (log2 axis)", "每个请求的上下文（log2 坐标）")),
        ChartAxis::linear("GB/s").from_zero(),
    )
    .height((ui.available_height() - 4.0 * size).max(100.0))
    .show(ui, size, |p| {
        let series = |f: fn(&crate::lessons::kv_decode::sweep::SweepPoint) -> f64| -> PlotPoints {
            points.iter().map(|q| [(q.context as f64).log2(), f(q)]).collect()
        };
        p.line(
            dash(Line::new(
                format!("{} ({on})", lang.t("decode kernel K/V read", "解码 kernel 读取 K/V")),
                series(|q| q.kernel),
            ))
            .color(style::series(0)),
        );
        p.line(dash(Line::new(read_label, series(|q| q.read))).color(style::series(1)));
        p.line(dash(Line::new(copy_label, series(|q| q.copy))).color(style::series(2)));
    });
    if let Some((gflops, gbs)) = balance {
        ui.label(
            RichText::new(format!(
                "{}: GEMM {gflops:.0} GFLOP/s ÷ {gbs:.1} GB/s = {:.0} FLOP/byte",
                if stored.is_some() {
                    lang.t("balance point, stored measurement", "平衡点，存储的实测值")
                } else {
                    lang.t("balance point of this machine", "本机平衡点")
                },
                gflops / gbs
            ))
            .size(crate::style::fit(size)),
        );
    }
    let last = points[points.len() - 1];
    ui.label(
        RichText::new(format!(
            "ctx {}: {:.1} GB/s {} {:.1} GB/s = {:.0}% {}",
            last.context,
            last.kernel,
            lang.t("vs reading the same bytes", "对比读取同样字节"),
            last.read,
            100.0 * last.kernel / last.read.max(1e-9),
            lang.t("of the read roof", "的读取上限")
        ))
        .size(crate::style::fit(size)),
    );
}
