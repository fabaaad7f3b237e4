//! Lesson 4's plots: arithmetic intensity of decode (FLOPs against K/V bytes read), and the live
//! bandwidth sweep of the paged decode kernel against a read-only stream over the same bytes (its roof)
//! and a copy of them (counted as the bytes it reads plus the bytes it writes).

use eframe::egui::{self, RichText, Ui};
use egui_plot::{Legend, Line, Plot, PlotPoints, Points};

use crate::cache::kv_bytes_per_token;
use crate::compute::Device;
use crate::lessons::kv_decode::DecodeOut;
use crate::lessons::kv_decode::sweep::SWEEP_REQUESTS;
use crate::lessons::kv_decode::sweep::Sweep;
use crate::style;
use crate::ui::widgets::{ViewCtx, bytes};

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
            "{} (ctx = {ctx}, batch {}, H {}, KVH {}, hd {}): {:.3e} FLOP, {} K/V {} → {:.2} FLOP/byte",
            lang.t("this decode step, one layer", "本解码步，单层"),
            d.batch,
            d.heads,
            d.kv_heads,
            d.head_dim,
            fl,
            bytes(by),
            lang.t("read", "读取"),
            fl / by.max(1.0)
        ))
        .strong()
        .size(size),
    );
    let h = ((ui.available_height() - 3.0 * size) / 2.0).max(80.0);
    let xs: Vec<usize> = (0..=14).map(|k| 1usize << k).collect();
    crate::ui::widgets::plot_title_room(ui);
    Plot::new("intensity-ctx")
        .height(h)
        .legend(Legend::default())
        .allow_scroll(false)
        .x_axis_label(lang.t("context length (log2 axis)", "上下文长度（log2 坐标）"))
        .y_axis_label(lang.t("log10 of the value", "数值的 log10"))
        .x_axis_formatter(|m, _| format!("{}", 2f64.powf(m.value).round()))
        .y_axis_formatter(|m, _| format!("1e{}", m.value))
        .show(ui, |p| {
            let pts = |g: &dyn Fn(usize) -> f64| -> PlotPoints {
                xs.iter().map(|&n| [(n as f64).log2(), g(n).log10()]).collect()
            };
            p.line(Line::new(
                lang.t("FLOPs per step", "每步 FLOPs"),
                pts(&|n| flops(d.batch, d.heads, n)),
            ));
            p.line(Line::new(
                lang.t("K/V bytes read per step", "每步读取的 K/V 字节"),
                pts(&|n| kv_bytes(d.batch, d.kv_heads, n)),
            ));
            p.points(
                Points::new(
                    lang.t("this step", "本步"),
                    vec![[(ctx as f64).log2(), fl.log10()], [(ctx as f64).log2(), by.log10()]],
                )
                .radius(5.0),
            );
        });
    let kv_options: Vec<usize> = (1..=d.heads).filter(|k| d.heads.is_multiple_of(*k)).collect();
    let balance = cx.state::<Sweep>().balance;
    crate::ui::widgets::plot_title_room(ui);
    Plot::new("intensity-batch")
        .height(h)
        .legend(Legend::default())
        .allow_scroll(false)
        .x_axis_label(lang.t("batch size", "批大小"))
        .y_axis_label(lang.t("FLOP per byte of K/V", "每字节 K/V 的 FLOP"))
        .include_y(0.0)
        .show(ui, |p| {
            for &kvh in kv_options.iter().rev().take(4) {
                let name = if kvh == d.heads {
                    format!("MHA (KVH {kvh})")
                } else if kvh == 1 {
                    "MQA (KVH 1)".to_string()
                } else {
                    format!("GQA (KVH {kvh})")
                };
                let pts: PlotPoints = (1..=16)
                    .map(|b| [b as f64, flops(b, d.heads, ctx) / kv_bytes(b, kvh, ctx)])
                    .collect();
                p.line(Line::new(name, pts));
            }
            if let Some((gflops, gbs)) = balance {
                let name = format!(
                    "{} {:.0} FLOP/B",
                    lang.t("balance point of this machine (measured)", "本机平衡点（实测）"),
                    gflops / gbs
                );
                p.line(Line::new(
                    name,
                    PlotPoints::new(vec![[1.0, gflops / gbs], [16.0, gflops / gbs]]),
                ));
            }
        });
    ui.label(
        RichText::new(match balance {
            Some((gflops, gbs)) => format!(
                "{}: {gflops:.0} GFLOP/s ÷ {gbs:.1} GB/s = {:.0} FLOP/byte; {} {:.0} FLOP/byte",
                lang.t("balance point, measured on this machine", "本机实测平衡点"),
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
        .size(size * 0.9),
    );
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
            lang.t(
                "measured now on this machine: paged decode kernel vs reading the same bytes",
                "在本机实时测量：分页解码 kernel 与读取同样字节的对比"
            ),
            lang.t("requests", "个请求")
        ))
        .strong()
        .size(size),
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
    if sw.points.is_empty() {
        ui.label(RichText::new(if running {
            lang.t("measuring the first context length…", "正在测量第一个上下文长度…")
        } else {
            lang.t("Nothing measured yet: press “Measure again”. (Measurements never run during tests or headless renders.)", "尚未测量：请按“重新测量”。（测试与无窗口出图时不会测量。）")
        }).italics().size(size));
        return;
    }
    let on = sw.backend.map_or("?", |b| b.name());
    let (read_label, copy_label) = match sw.points[0].device {
        Device::Gpu => (
            lang.t("read-only stream kernel (roof)", "只读流 kernel（上限）"),
            lang.t("device copy, bytes read + written", "显存拷贝，读 + 写字节"),
        ),
        Device::Host => (
            lang.t("read-only stream, same threads (roof)", "只读流，同样线程数（上限）"),
            lang.t("memcpy, bytes read + written", "memcpy，读 + 写字节"),
        ),
    };
    crate::ui::widgets::plot_title_room(ui);
    Plot::new("bandwidth")
        .height((ui.available_height() - 3.0 * size).max(100.0))
        .legend(Legend::default())
        .allow_scroll(false)
        .include_y(0.0)
        .x_axis_label(lang.t("context per request (log2 axis)", "每个请求的上下文（log2 坐标）"))
        .y_axis_label("GB/s")
        .x_axis_formatter(|m, _| format!("{}", 2f64.powf(m.value).round()))
        .show(ui, |p| {
            let k: PlotPoints = sw
                .points
                .iter()
                .map(|q| [(q.context as f64).log2(), q.kernel])
                .collect();
            let r: PlotPoints = sw.points.iter().map(|q| [(q.context as f64).log2(), q.read]).collect();
            let c: PlotPoints = sw.points.iter().map(|q| [(q.context as f64).log2(), q.copy]).collect();
            p.line(Line::new(
                format!("{} ({on})", lang.t("decode kernel K/V read", "解码 kernel 读取 K/V")),
                k,
            ));
            p.line(Line::new(read_label, r));
            p.line(Line::new(copy_label, c));
        });
    if let Some((gflops, gbs)) = sw.balance {
        ui.label(
            RichText::new(format!(
                "{}: GEMM {gflops:.0} GFLOP/s ÷ {gbs:.1} GB/s = {:.0} FLOP/byte",
                lang.t("balance point of this machine", "本机平衡点"),
                gflops / gbs
            ))
            .size(size),
        );
    }
    let last = sw.points[sw.points.len() - 1];
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
        .size(size),
    );
}
