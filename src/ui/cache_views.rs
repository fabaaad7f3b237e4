//! The views of lessons 4 (KV append and the memory-bound decode) and 5 (the paged KV cache), and
//! their timeline control: one decode step moves every view at once.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use eframe::egui::{self, Color32, RichText, Ui};
use egui_plot::{Legend, Line, Plot, PlotPoints, Points};

use super::super::KvscopeApp;
use super::super::model::{DecodeOut, Output, PagedFrame, PagedOut};
use super::{body_size, bytes, color_of, heat_panel, vid};
use crate::cache::PagedShape;
use crate::compute::{Backend, BackendKind, CheckReport};
use crate::render::colormap::Colormap;
use crate::render::egui_glue;
use crate::render::heatmap::Highlight;
use crate::render::strip::{READ_COLOR, RESERVED_COLOR, StripData, USED_COLOR, WRITE_COLOR};

/// One measured point of the bandwidth sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPoint {
    /// Context length per request.
    pub context: usize,
    /// Achieved K/V read bandwidth of the decode kernel, GB/s.
    pub kernel: f64,
    /// Copy bandwidth of the same bytes on the same device, GB/s.
    pub copy: f64,
}

/// The live bandwidth sweep of lesson 4.
#[derive(Default)]
pub struct Sweep {
    rx: Option<Receiver<Result<SweepPoint, String>>>,
    /// Points so far.
    pub points: Vec<SweepPoint>,
    /// Which backend they were measured on.
    pub backend: Option<BackendKind>,
    /// Why it stopped, if it failed.
    pub error: Option<String>,
    /// Whether it started automatically once already.
    pub auto_started: bool,
}

/// Requests in every sweep point (H32/KV8, hd 128, block 16: the benchmark's decode problem).
pub const SWEEP_REQUESTS: usize = 4;

/// The contexts a sweep measures on `kind` (the shim runs the CUDA source on CPU threads, so it
/// gets short ones).
pub fn sweep_contexts(kind: BackendKind) -> Vec<usize> {
    match kind {
        BackendKind::CudaSim => vec![32, 64, 128, 256],
        _ => vec![256, 512, 1024, 2048, 4096, 8192],
    }
}

/// Measure one point: decode kernel bandwidth against copy bandwidth, in one run.
pub fn measure_point(kind: BackendKind, backend: &dyn Backend, context: usize) -> Result<SweepPoint, String> {
    let line = if kind == BackendKind::Cuda {
        let b = crate::compute::cuda::probe()?;
        crate::bench::p3_cuda(&b, SWEEP_REQUESTS, context).map_err(|e| e.to_string())?
    } else {
        crate::bench::p3(backend, SWEEP_REQUESTS, context)
    };
    Ok(SweepPoint {
        context,
        kernel: line.value,
        copy: line.baseline,
    })
}

impl Sweep {
    /// Start measuring on a background thread (the UI keeps drawing; points arrive one by one).
    pub fn start(&mut self, kind: BackendKind, backend: Arc<dyn Backend>, wake: Option<egui::Context>) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rx = Some(rx);
        self.points.clear();
        self.error = None;
        self.backend = Some(kind);
        std::thread::spawn(move || {
            for c in sweep_contexts(kind) {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    measure_point(kind, backend.as_ref(), c)
                }))
                .unwrap_or_else(|_| Err("the measurement panicked".into()));
                let stop = r.is_err();
                if tx.send(r).is_err() || stop {
                    break;
                }
                if let Some(ctx) = &wake {
                    ctx.request_repaint();
                }
            }
            if let Some(ctx) = &wake {
                ctx.request_repaint();
            }
        });
    }

    /// Take arrived points; whether it is still running.
    pub fn poll(&mut self) -> bool {
        let Some(rx) = &self.rx else { return false };
        loop {
            match rx.try_recv() {
                Ok(Ok(p)) => self.points.push(p),
                Ok(Err(e)) => {
                    self.error = Some(e);
                    self.rx = None;
                    return false;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => return true,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.rx = None;
                    return false;
                }
            }
        }
    }
}

fn frames_len(out: &Output) -> usize {
    match out {
        Output::Decode(d) => d.frames.len(),
        Output::Paged(p) => p.frames.len(),
        Output::Attn(_) => 1,
    }
}

/// The timeline bar above lessons 4–5's views.
pub fn timeline(app: &mut KvscopeApp, ui: &mut Ui, out: &Output) {
    let lang = app.lang;
    let size = body_size(app);
    let n = frames_len(out);
    if n == 0 {
        return;
    }
    let mut c = app.cursor().min(n - 1);
    ui.horizontal(|ui| {
        if ui.button("|<").on_hover_text(lang.t("start", "开始")).clicked() {
            c = 0;
        }
        match out {
            Output::Decode(d) => {
                let layers = d.layers;
                if ui.button(lang.t("< layer", "< 上一层")).clicked() {
                    c = c.saturating_sub(1);
                }
                if ui.button(lang.t("next layer >", "下一层 >")).clicked() {
                    c = (c + 1).min(n - 1);
                }
                if ui.button(lang.t("next token >>", "下一个 token >>")).clicked() {
                    // To the last layer of the next token.
                    let next = if c == 0 {
                        layers
                    } else {
                        ((c - 1) / layers + 2) * layers
                    };
                    c = next.min(n - 1);
                }
            }
            _ => {
                if ui.button(lang.t("< step", "< 上一步")).clicked() {
                    c = c.saturating_sub(1);
                }
                if ui.button(lang.t("next step >", "下一步 >")).clicked() {
                    c = (c + 1).min(n - 1);
                }
            }
        }
        if ui.button(">|").on_hover_text(lang.t("end", "结束")).clicked() {
            c = n - 1;
        }
        let mut v = c;
        ui.add(
            egui::Slider::new(&mut v, 0..=n - 1)
                .show_value(false)
                .text(lang.t("timeline", "时间线")),
        );
        c = v;
        let label = match out {
            Output::Decode(d) => {
                let f = &d.frames[c];
                match f.layer {
                    None => format!(
                        "{} ({} {})",
                        lang.t("after prefill", "预填充完成"),
                        d.prompt,
                        lang.t("prompt tokens", "个提示 token")
                    ),
                    Some(l) => format!(
                        "{} {} / {} · pos {} · {} {} / {}",
                        lang.t("decode token", "解码 token"),
                        f.token,
                        d.generate,
                        f.pos,
                        lang.t("layer", "层"),
                        l,
                        d.layers
                    ),
                }
            }
            Output::Paged(p) => format!("{} {} / {}", lang.t("scheduler step", "调度步"), c, p.frames.len() - 1),
            Output::Attn(_) => String::new(),
        };
        ui.label(RichText::new(label).strong().size(size));
    });
    if c != app.cursor() {
        app.set_cursor(c);
    }
}

fn check_line(ui: &mut Ui, lang: super::Lang, size: f32, r: Option<&CheckReport>, what: &str) {
    match r {
        Some(r) if r.passed() => ui.label(
            RichText::new(format!(
                "OK  {what} {}: max abs err {:.1e}",
                lang.t("matches the f64 reference", "与 f64 参考结果一致"),
                r.max_abs
            ))
            .size(size * 0.9)
            .color(Color32::from_rgb(90, 200, 110)),
        ),
        Some(r) => ui.label(
            RichText::new(format!(
                "MISMATCH  {what}: {}",
                r.to_string().lines().next().unwrap_or_default()
            ))
            .size(size * 0.9)
            .color(Color32::from_rgb(240, 90, 90)),
        ),
        None => ui.label(RichText::new(format!("{what}: —")).size(size * 0.9)),
    };
}

fn legend_chip(ui: &mut Ui, c: [u8; 4], text: &str, size: f32) {
    ui.horizontal(|ui| {
        let (r, _) = ui.allocate_exact_size(egui::vec2(size, size * 0.8), egui::Sense::hover());
        ui.painter().rect_filled(r, 2.0, Color32::from_rgb(c[0], c[1], c[2]));
        ui.label(RichText::new(text).size(size * 0.85));
    });
}

/// Lesson 4's views.
pub fn decode_view(app: &mut KvscopeApp, ui: &mut Ui, d: &DecodeOut, view: &str) {
    let lang = app.lang;
    let size = body_size(app);
    let c = app.cursor().min(d.frames.len() - 1);
    let f = &d.frames[c];
    match view {
        "prefill" => {
            let p = d.prompt;
            app.vs.reserve_below = 2.0 * size;
            heat_panel(
                app,
                ui,
                vid("prefill", 0),
                &format!(
                    "{} [{p}×{p}]",
                    lang.t(
                        "prefill: causal attention of the prompt, layer 0, head 0",
                        "预填充：提示的因果注意力（第 0 层，第 0 头）"
                    )
                ),
                &d.prefill_probs,
                Colormap::Sequential,
                Some((0.0, 1.0)),
                Highlight::Row(p - 1),
                &|(i, j)| {
                    format!(
                        "p[{i},{j}] = {:.4}",
                        d.rows[0].get(i).and_then(|r| r.get(j)).copied().unwrap_or(0.0)
                    )
                },
            );
            check_line(
                ui,
                lang,
                size,
                Some(&d.prefill_check),
                lang.t("prefill attention", "预填充注意力"),
            );
        }
        "static_cache" => {
            ui.label(
                RichText::new(format!(
                    "{} [layers={}, batch={}, kv_heads={}, max_seq_len={}, head_dim={}]",
                    lang.t("static KV cache", "静态 KV 缓存"),
                    d.layers,
                    d.batch,
                    d.kv_heads,
                    d.max_seq,
                    d.head_dim
                ))
                .strong()
                .size(size),
            );
            let data = StripData {
                layers: d.layers,
                heads: d.batch * d.kv_heads,
                max_seq: d.max_seq,
                lens: f.lens.clone(),
                write: f.layer.map(|l| (l, f.pos)),
                read: f.layer.map(|l| (l, f.pos)),
            };
            let h = (ui.available_height() - 7.0 * size).clamp(60.0, 420.0);
            let w = ui.available_width();
            egui_glue::memory_strip(ui, vid("strip", 0), &data, egui::vec2(w, h));
            ui.horizontal_wrapped(|ui| {
                legend_chip(ui, USED_COLOR, lang.t("stored K/V", "已存 K/V"), size);
                legend_chip(ui, WRITE_COLOR, lang.t("written this step", "本步写入"), size);
                legend_chip(
                    ui,
                    READ_COLOR,
                    lang.t("read by this step's attention (0..=pos)", "本步注意力读取 (0..=pos)"),
                    size,
                );
                legend_chip(
                    ui,
                    RESERVED_COLOR,
                    lang.t("reserved, never used", "已预留但未使用"),
                    size,
                );
            });
            let per_slot = 2 * d.head_dim * 2; // K and V, f16
            let used: usize = f.lens.iter().sum::<usize>() * d.batch * d.kv_heads * per_slot;
            ui.label(
                RichText::new(format!(
                    "{}: {} · {}: {} ({:.0}%) · {}: {}",
                    lang.t("reserved", "预留"),
                    bytes(d.reserved_bytes as f64),
                    lang.t("used", "已用"),
                    bytes(used as f64),
                    100.0 * used as f64 / d.reserved_bytes.max(1) as f64,
                    lang.t(
                        "K+V per token (all layers, batch)",
                        "每个 token 的 K+V（所有层、整个批次）"
                    ),
                    bytes(d.bytes_per_token as f64)
                ))
                .size(size * 0.9),
            );
            if f.layer.is_some() {
                ui.label(
                    RichText::new(format!(
                        "{}: {} · {}: {}",
                        lang.t("this step writes", "本步写入"),
                        bytes((d.batch * d.kv_heads * per_slot) as f64),
                        lang.t("and its attention reads", "其注意力读取"),
                        bytes(f.bytes_read as f64)
                    ))
                    .size(size * 0.9),
                );
            }
            if d.dropped > 0 {
                ui.label(
                    RichText::new(format!(
                        "{} {} {}",
                        lang.t("The cache is full at max_seq_len: ", "缓存在 max_seq_len 处已满："),
                        d.dropped,
                        lang.t("requested tokens cannot be generated.", "个请求的 token 无法生成。")
                    ))
                    .color(Color32::from_rgb(240, 150, 80))
                    .size(size * 0.9),
                );
            }
        }
        "decode_row" => {
            let (l, pos) = (f.layer.unwrap_or(0), f.pos);
            let m = d.matrix(c);
            let rects = super::grid(ui.available_rect_before_wrap(), 2);
            super::view_in(ui, rects[0], |ui| {
                let title = format!(
                    "{} {l}{}, head 0: {} {}",
                    lang.t("layer", "第"),
                    lang.t("", " 层"),
                    lang.t("rows 0..=", "行 0..="),
                    pos
                );
                heat_panel(
                    app,
                    ui,
                    vid("dec-matrix", 0),
                    &title,
                    &m,
                    Colormap::Sequential,
                    Some((0.0, 1.0)),
                    Highlight::Row(pos),
                    &|(i, j)| {
                        let v = d
                            .rows
                            .get(l)
                            .and_then(|r| r.get(i))
                            .and_then(|r| r.get(j))
                            .copied()
                            .unwrap_or(0.0);
                        format!("p[{i},{j}] = {v:.4}{}", if i == pos { "  (new row)" } else { "" })
                    },
                );
            });
            super::view_in(ui, rects[1], |ui| {
                let title = format!(
                    "{} [{} heads × {}]",
                    lang.t("the new token's attention, every head", "新 token 在各头上的注意力"),
                    d.heads,
                    pos + 1
                );
                let row = f.row.clone();
                app.vs.reserve_below = 3.0 * size;
                heat_panel(
                    app,
                    ui,
                    vid("dec-row", 0),
                    &title,
                    &row,
                    Colormap::Sequential,
                    Some((0.0, 1.0)),
                    Highlight::None,
                    &|(h, j)| {
                        format!(
                            "head {h} (KV {}) → pos {j}: p = {:.4}",
                            h / (d.heads / d.kv_heads).max(1),
                            row.values[h * row.cols + j]
                        )
                    },
                );
                check_line(
                    ui,
                    lang,
                    size,
                    f.check.as_ref(),
                    lang.t("decode kernel output", "解码 kernel 输出"),
                );
                if f.layer.is_none() {
                    ui.label(
                        RichText::new(lang.t(
                            "Press “next layer” to decode the first token.",
                            "按“下一层”开始解码第一个 token。",
                        ))
                        .size(size),
                    );
                }
            });
        }
        "intensity" => intensity_view(app, ui, d),
        "bandwidth" => bandwidth_view(app, ui),
        other => {
            ui.label(format!("view `{other}`"));
        }
    }
}

fn intensity_view(app: &mut KvscopeApp, ui: &mut Ui, d: &DecodeOut) {
    let lang = app.lang;
    let size = body_size(app);
    let c = app.cursor().min(d.frames.len() - 1);
    let f = &d.frames[c];
    let ctx = f.pos + 1;
    // Per layer and decode step: Q·K and P·V are 2 FLOPs per multiply-add, each over H·hd·ctx;
    // K and V are read once per KV head: 2 · KVH · hd · ctx values of 2 bytes.
    let flops = |b: usize, h: usize, n: usize| (4 * b * h * d.head_dim * n) as f64;
    let kv_bytes = |b: usize, kvh: usize, n: usize| (4 * b * kvh * d.head_dim * n) as f64;
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
    Plot::new("intensity-ctx")
        .height(h)
        .legend(Legend::default())
        .allow_scroll(false)
        .x_axis_label(lang.t("context length (log2 axis)", "上下文长度（log2 坐标）"))
        .y_axis_label("log10")
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
        });
}

fn bandwidth_view(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = body_size(app);
    let kind = app.active_backend();
    let running = app.vs.sweep.poll();
    if running {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(200));
    }
    if !running && !app.vs.sweep.auto_started && !app.is_sync() {
        app.vs.sweep.auto_started = true;
        let b = app.backend_arc();
        app.vs.sweep.start(kind, b, Some(ui.ctx().clone()));
    }
    ui.label(
        RichText::new(format!(
            "{} ({SWEEP_REQUESTS} {}, H32/KV8, hd128, block 16, f16)",
            lang.t(
                "measured now on this machine: paged decode kernel vs copy",
                "在本机实时测量：分页解码 kernel 与内存拷贝"
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
        let b = app.backend_arc();
        app.vs.sweep.start(kind, b, Some(ui.ctx().clone()));
    }
    let sw = &app.vs.sweep;
    if let Some(e) = &sw.error {
        ui.label(
            RichText::new(format!("{}: {e}", lang.t("measurement failed", "测量失败")))
                .color(Color32::from_rgb(240, 120, 120)),
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
    let copy_label = if sw.backend == Some(BackendKind::Cuda) {
        lang.t("device-to-device copy (roof)", "显存到显存拷贝（上限）")
    } else {
        lang.t("memcpy, same threads (roof)", "memcpy，同样线程数（上限）")
    };
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
            let c: PlotPoints = sw.points.iter().map(|q| [(q.context as f64).log2(), q.copy]).collect();
            p.line(Line::new(
                format!("{} ({on})", lang.t("decode kernel K/V read", "解码 kernel 读取 K/V")),
                k,
            ));
            p.line(Line::new(copy_label, c));
        });
    let last = sw.points[sw.points.len() - 1];
    ui.label(
        RichText::new(format!(
            "ctx {}: {:.1} GB/s {} {:.1} GB/s = {:.0}% {}",
            last.context,
            last.kernel,
            lang.t("vs copy", "对比拷贝"),
            last.copy,
            100.0 * last.kernel / last.copy.max(1e-9),
            lang.t("of the copy roof", "的拷贝上限")
        ))
        .size(size),
    );
}

/// Lesson 5's views.
pub fn paged_view(app: &mut KvscopeApp, ui: &mut Ui, p: &PagedOut, view: &str) {
    let lang = app.lang;
    let size = body_size(app);
    if let Some(e) = &p.error {
        ui.label(
            RichText::new(format!("{}: {e}", lang.t("This scenario cannot run", "该场景无法运行")))
                .color(Color32::from_rgb(240, 120, 120))
                .size(size),
        );
        ui.label(
            RichText::new(lang.t(
                "Raise the number of blocks or the block size, or use fewer requests.",
                "请增加块数或块大小，或减少请求数。",
            ))
            .size(size),
        );
        if p.frames.is_empty() {
            return;
        }
    }
    let Some(f) = p.frames.get(app.cursor().min(p.frames.len().saturating_sub(1))) else {
        return;
    };
    let bs = p.shape.block_size;
    match view {
        "pool" => {
            ui.label(
                RichText::new(format!(
                    "{}: {} × {} {} = {} {}",
                    lang.t("physical block pool", "物理块池"),
                    p.shape.num_blocks,
                    bs,
                    lang.t("slots", "个槽位"),
                    p.shape.num_blocks * bs,
                    lang.t("token slots", "个 token 槽位")
                ))
                .strong()
                .size(size),
            );
            if f.events.oom() {
                oom_banner(app, ui, f);
            }
            let w = ui.available_width();
            let h = (ui.available_height() - 2.5 * size).max(60.0);
            let (_, hovered) = egui_glue::block_grid(ui, vid("pool", 0), &f.grid, egui::vec2(w, h));
            ui.horizontal_wrapped(|ui| {
                for r in f.tables.keys() {
                    legend_chip(ui, crate::render::colormap::owner_color(*r), &format!("r{r}"), size);
                }
                legend_chip(ui, [40, 40, 48, 255], lang.t("free", "空闲"), size);
            });
            let text = match hovered {
                Some(b) => match f.grid.owners.get(b).copied().filter(|&o| o >= 0) {
                    Some(o) => {
                        let idx = f
                            .tables
                            .get(&(o as u32))
                            .and_then(|t| t.iter().position(|&x| x as usize == b))
                            .unwrap_or(0);
                        format!(
                            "block {b}: r{o}, {} {idx}, {}/{bs} {}",
                            lang.t("logical block", "逻辑块"),
                            f.grid.filled[b],
                            lang.t("slots filled", "槽位已用")
                        )
                    }
                    None => format!("block {b}: {}", lang.t("free", "空闲")),
                },
                None => lang.t("hover a block", "鼠标悬停查看块").to_string(),
            };
            ui.label(RichText::new(text).monospace().size(size * 0.85));
        }
        "tables" => tables_view(app, ui, p, f),
        "free_list" => {
            ui.label(
                RichText::new(format!(
                    "{} ({} {})",
                    lang.t("free list", "空闲列表"),
                    f.free.len(),
                    lang.t("blocks", "块")
                ))
                .strong()
                .size(size),
            );
            ui.horizontal_wrapped(|ui| {
                for (i, b) in f.free.iter().enumerate() {
                    let last = i + 1 == f.free.len();
                    let t = RichText::new(format!("{b}")).monospace().size(size);
                    let t = if last {
                        t.strong().color(Color32::from_rgb(255, 200, 80))
                    } else {
                        t
                    };
                    ui.label(t);
                }
                if f.free.is_empty() {
                    ui.label(
                        RichText::new(lang.t("(empty: the pool is exhausted)", "（空：块池已耗尽）"))
                            .color(Color32::from_rgb(240, 120, 120))
                            .size(size),
                    );
                } else {
                    ui.label(
                        RichText::new(lang.t("← allocate() pops from this end", "← allocate() 从这一端弹出"))
                            .italics()
                            .size(size * 0.85),
                    );
                }
            });
            let returned: Vec<String> = f
                .events
                .finished
                .iter()
                .chain(&f.events.preempted)
                .map(|(r, b)| format!("r{r} → {:?}", b))
                .collect();
            if !returned.is_empty() {
                ui.label(
                    RichText::new(format!(
                        "{}: {}",
                        lang.t("returned this step", "本步归还"),
                        returned.join(", ")
                    ))
                    .size(size * 0.9)
                    .color(Color32::from_rgb(120, 200, 255)),
                );
            }
        }
        "occupancy" => occupancy_view(app, ui, p, f),
        "events" => events_view(app, ui, f),
        "check" => check_view(app, ui, p, f),
        "tradeoff" => tradeoff_view(app, ui, p, f),
        other => {
            ui.label(format!("view `{other}`"));
        }
    }
}

fn oom_banner(app: &KvscopeApp, ui: &mut Ui, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    let mut parts = Vec::new();
    for (r, b) in &f.events.preempted {
        parts.push(format!(
            "r{r} {} {:?} {}",
            lang.t("preempted: blocks", "被抢占：块"),
            b,
            lang.t("freed, it will be recomputed", "已释放，稍后重新计算")
        ));
    }
    for r in &f.events.waiting {
        parts.push(format!(
            "r{r} {}",
            lang.t(
                "waits: not enough free blocks for its prompt",
                "等待：空闲块不足以容纳其提示"
            )
        ));
    }
    egui::Frame::new()
        .fill(Color32::from_rgb(120, 30, 30))
        .inner_margin(6.0)
        .show(ui, |ui| {
            ui.label(
                RichText::new(format!(
                    "OOM — {}: {}",
                    lang.t("out of blocks", "块已耗尽"),
                    parts.join("; ")
                ))
                .color(Color32::WHITE)
                .strong()
                .size(size),
            );
        });
}

fn tables_view(app: &mut KvscopeApp, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    let bs = p.shape.block_size;
    ui.label(
        RichText::new(lang.t("block tables: logical block → physical block", "块表：逻辑块 → 物理块"))
            .strong()
            .size(size),
    );
    if let Some((r, pos)) = f.write
        && let Some(t) = f.tables.get(&r)
    {
        let (lb, off) = (pos / bs, pos % bs);
        if let Some(&b) = t.get(lb) {
            ui.label(
                RichText::new(format!(
                    "r{r} pos {pos}: {pos} // {bs} = {lb}, {pos} % {bs} = {off} → {} {b}, slot {b}·{bs}+{off} = {}",
                    lang.t("physical block", "物理块"),
                    b as usize * bs + off
                ))
                .monospace()
                .size(size * 0.95)
                .color(Color32::from_rgb(255, 200, 80)),
            );
        }
    }
    egui::ScrollArea::vertical().id_salt("tables").show(ui, |ui| {
        egui::Grid::new("block-tables").spacing([6.0, 4.0]).show(ui, |ui| {
            for (r, t) in &f.tables {
                let len = f.lens.get(r).copied().unwrap_or(0);
                ui.label(
                    RichText::new(format!("r{r} ({len} tok)"))
                        .color(color_of(*r as usize))
                        .strong()
                        .size(size),
                );
                ui.horizontal(|ui| {
                    for (i, b) in t.iter().enumerate() {
                        let is_hl = f.write.is_some_and(|(wr, pos)| wr == *r && pos / bs == i);
                        let txt = RichText::new(format!("{i}→{b}")).monospace().size(size * 0.9);
                        let txt = if is_hl {
                            txt.strong().background_color(Color32::from_rgb(120, 90, 20))
                        } else {
                            txt
                        };
                        ui.label(txt);
                    }
                });
                ui.end_row();
            }
        });
        if f.tables.is_empty() {
            ui.label(RichText::new(lang.t("(no request holds blocks)", "（没有请求持有块）")).size(size));
        }
    });
}

fn bar(ui: &mut Ui, label: &str, value: usize, max: usize, color: Color32, size: f32) {
    ui.horizontal(|ui| {
        let avail = ui.available_width();
        let lw = (avail * 0.4).min(260.0);
        let vw = size * 3.0;
        let w = (avail - lw - vw - 3.0 * ui.spacing().item_spacing.x).max(10.0);
        ui.add_sized(
            [lw, size + 4.0],
            egui::Label::new(RichText::new(label).size(size * 0.9)).truncate(),
        );
        let (r, _) = ui.allocate_exact_size(egui::vec2(w, size), egui::Sense::hover());
        ui.painter().rect_filled(r, 2.0, Color32::from_gray(45));
        let frac = value as f32 / max.max(1) as f32;
        let fill = egui::Rect::from_min_size(r.min, egui::vec2(r.width() * frac.min(1.0), r.height()));
        ui.painter().rect_filled(fill, 2.0, color);
        ui.label(RichText::new(value.to_string()).monospace().size(size * 0.9));
    });
}

fn occupancy_view(app: &mut KvscopeApp, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    let s = &f.stats;
    let cap = p.shape.num_blocks * p.shape.block_size;
    let max = s.static_slots.max(cap).max(1);
    ui.label(
        RichText::new(format!(
            "{} ({} {})",
            lang.t("occupancy, in token slots", "占用（以 token 槽位计）"),
            s.requests,
            lang.t("requests holding blocks", "个请求持有块")
        ))
        .strong()
        .size(size),
    );
    for (label, value, color) in [
        (
            lang.t("tokens stored", "已存 token"),
            s.tokens_stored,
            Color32::from_rgb(90, 170, 110),
        ),
        (
            lang.t("slots allocated (paged)", "已分配槽位（分页）"),
            s.slots_allocated,
            Color32::from_rgb(70, 130, 200),
        ),
        (
            lang.t("static reservation (max_seq_len each)", "静态预留（每个 max_seq_len）"),
            s.static_slots,
            Color32::from_rgb(200, 110, 70),
        ),
        (lang.t("pool capacity", "块池容量"), cap, Color32::from_gray(120)),
    ] {
        bar(ui, label, value, max, color, size);
    }
    let frag = s.internal_fragmentation;
    ui.label(
        RichText::new(format!(
            "{}: {frag} {} ({:.1}% {}) · {}: {} {}",
            lang.t("internal fragmentation", "内部碎片"),
            lang.t("slots", "个槽位"),
            100.0 * frag as f64 / s.slots_allocated.max(1) as f64,
            lang.t("of allocated", "占已分配"),
            lang.t("static would waste", "静态方案会浪费"),
            s.static_slots.saturating_sub(s.tokens_stored),
            lang.t("slots", "个槽位")
        ))
        .size(size * 0.9),
    );
    if s.static_slots > cap {
        ui.label(
            RichText::new(format!(
                "{} ({} > {})",
                lang.t(
                    "A static cache could not even hold these requests in this pool",
                    "静态缓存在这个块池中根本放不下这些请求"
                ),
                s.static_slots,
                cap
            ))
            .color(Color32::from_rgb(240, 150, 80))
            .size(size * 0.9),
        );
    }
}

fn events_view(app: &mut KvscopeApp, ui: &mut Ui, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    let e = &f.events;
    ui.label(
        RichText::new(format!(
            "{} {}",
            lang.t("what happened in step", "本步发生的事：调度步"),
            e.step
        ))
        .strong()
        .size(size),
    );
    if e.oom() {
        oom_banner(app, ui, f);
    }
    let line = |ui: &mut Ui, t: String, c: Color32| {
        ui.label(RichText::new(t).size(size * 0.95).color(c));
    };
    let fg = ui.visuals().text_color();
    for r in &e.arrived {
        line(ui, format!("→ r{r} {}", lang.t("arrives", "到达")), fg);
    }
    for (r, n) in &e.admitted {
        line(
            ui,
            format!(
                "+ r{r} {} {n} {}",
                lang.t("admitted: prefill writes", "被接纳：预填充写入"),
                lang.t("tokens", "个 token")
            ),
            Color32::from_rgb(120, 200, 255),
        );
    }
    if !e.decoded.is_empty() {
        let d: Vec<String> = e.decoded.iter().map(|(r, p)| format!("r{r}@{p}")).collect();
        line(
            ui,
            format!(
                "+ {}: {}",
                lang.t("decoded one token each", "各解码一个 token"),
                d.join(", ")
            ),
            fg,
        );
    }
    for (r, b) in &e.finished {
        line(
            ui,
            format!("r{r} {} {:?}", lang.t("finished, returned blocks", "完成，归还块"), b),
            Color32::from_rgb(90, 200, 110),
        );
    }
    let ids = |v: &[u32]| v.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(" ");
    ui.label(RichText::new(format!("{}: {}", lang.t("running", "运行中"), ids(&f.running))).size(size * 0.9));
    ui.label(RichText::new(format!("{}: {}", lang.t("waiting", "等待中"), ids(&f.waiting))).size(size * 0.9));
    ui.label(
        RichText::new(format!(
            "{}: {}",
            lang.t("allocator invariants", "分配器不变量"),
            match &f.invariants {
                Ok(()) => "ok".to_string(),
                Err(e) => e.clone(),
            }
        ))
        .size(size * 0.85)
        .color(Color32::GRAY),
    );
}

fn check_view(app: &mut KvscopeApp, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    ui.label(
        RichText::new(format!(
            "{} ({} {}, {} {}, GQA {}→{})",
            lang.t("paged decode through the block tables", "通过块表的分页解码"),
            f.running.len(),
            lang.t("running requests", "个运行中的请求"),
            lang.t("backend", "后端"),
            app.active_backend().name(),
            super::super::model::PAGED_HEADS,
            p.shape.kv_heads
        ))
        .strong()
        .size(size),
    );
    check_line(
        ui,
        lang,
        size,
        f.check.as_ref(),
        lang.t(
            "paged kernel vs contiguous attention on the same tokens",
            "分页 kernel 与连续注意力（相同 token）",
        ),
    );
    ui.checkbox(
        &mut app.vs.gather,
        lang.t("show the gather-based debug path", "显示基于 gather 的调试路径"),
    );
    let direct = f.decode_bytes as f64;
    ui.label(
        RichText::new(format!(
            "{}: {}",
            lang.t(
                "kernel reads K/V in place through the table",
                "kernel 通过块表原地读取 K/V"
            ),
            bytes(direct)
        ))
        .size(size),
    );
    if app.vs.gather {
        ui.label(
            RichText::new(format!(
                "{}: {} + {} + {} = {} (3×), {} {}",
                lang.t(
                    "gather first: read the blocks, write a contiguous copy, attention reads the copy",
                    "先 gather：读取各块、写入连续副本、注意力再读副本"
                ),
                bytes(direct),
                bytes(direct),
                bytes(direct),
                bytes(3.0 * direct),
                lang.t("plus a temporary buffer of", "外加临时缓冲区"),
                bytes(direct)
            ))
            .size(size)
            .color(Color32::from_rgb(240, 170, 90)),
        );
        ui.label(
            RichText::new(lang.t(
                "The gathered path is kvscope's checker (PagedKvCache::gather); real engines never copy.",
                "gather 路径只用于 kvscope 的核对（PagedKvCache::gather）；真实引擎从不复制。",
            ))
            .italics()
            .size(size * 0.85),
        );
    }
}

fn tradeoff_view(app: &mut KvscopeApp, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = app.lang;
    let size = body_size(app);
    let lens: Vec<usize> = f.lens.values().copied().collect();
    ui.label(
        RichText::new(format!(
            "{} ({} {})",
            lang.t(
                "block size trade-off for the requests of this step",
                "本步请求的块大小取舍"
            ),
            lens.len(),
            lang.t("requests", "个请求")
        ))
        .strong()
        .size(size),
    );
    egui::Grid::new("tradeoff").striped(true).show(ui, |ui| {
        for h in [
            lang.t("block size", "块大小"),
            lang.t("slots wasted in last blocks", "末块浪费的槽位"),
            lang.t("block-table entries", "块表项数"),
            lang.t("table bytes (int32)", "块表字节（int32）"),
        ] {
            ui.label(RichText::new(h).strong().size(size * 0.9));
        }
        ui.end_row();
        for bs in [1usize, 2, 4, 8, 16, 32, 64] {
            let shape = PagedShape {
                block_size: bs,
                ..p.shape
            };
            let blocks: usize = lens.iter().map(|&l| shape.blocks_for(l)).sum();
            let waste = blocks * bs - lens.iter().sum::<usize>();
            let cur = bs == p.shape.block_size;
            let t = |s: String| {
                let r = RichText::new(s).size(size * 0.9).monospace();
                if cur {
                    r.strong().color(Color32::from_rgb(255, 200, 80))
                } else {
                    r
                }
            };
            ui.label(t(format!("{}{bs}", if cur { "> " } else { "" })));
            ui.label(t(waste.to_string()));
            ui.label(t(blocks.to_string()));
            ui.label(t((4 * blocks).to_string()));
            ui.end_row();
        }
    });
    ui.label(RichText::new(lang.t(
        "Small blocks waste little in each request's last block but need long tables (one lookup per block); large blocks need short tables but waste up to block_size − 1 slots per request.",
        "块小：每个请求末块浪费少，但块表长（每块一次查表）；块大：块表短，但每个请求最多浪费 block_size − 1 个槽位。",
    )).size(size * 0.9));
}
