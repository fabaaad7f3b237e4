//! Lesson 5's numbers: occupancy against a static reservation, the scheduler's events, paged decode
//! checked against contiguous attention (with the cost of a gather-first path), and the block-size
//! trade-off.

use crate::ui::text::Slant as _;
use eframe::egui::{self, Color32, RichText, Ui};

use crate::cache::PagedShape;
use crate::lessons::paged_cache::{PAGED_HEADS, PagedFrame, PagedOut};
use crate::style;
use crate::ui::widgets::{ViewCtx, bar, bytes, check_line};

/// Lesson 5's own UI state.
#[derive(Default)]
pub struct PagedUiState {
    /// Show the gather-first path's cost next to the kernel's.
    pub gather: bool,
}

pub(super) fn occupancy(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
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
        .size(crate::style::fit(size)),
    );
    for (label, value, color) in [
        (
            lang.t("tokens stored", "已存 token"),
            s.tokens_stored,
            style::bar_fill(ui.visuals()),
        ),
        (
            lang.t("slots allocated (paged)", "已分配槽位（分页）"),
            s.slots_allocated,
            style::bar_fill(ui.visuals()),
        ),
        (
            lang.t("static reservation (max_seq_len each)", "静态预留（每个 max_seq_len）"),
            s.static_slots,
            style::bar_fill(ui.visuals()),
        ),
        (lang.t("pool capacity", "块池容量"), cap, style::WHOLE_32),
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
        .size(crate::style::fit(size * 0.9)),
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
            .color(style::state_text(ui.visuals(), style::OOM))
            .size(crate::style::fit(size * 0.9)),
        );
    }
}

pub(super) fn events(cx: &mut ViewCtx, ui: &mut Ui, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
    let e = &f.events;
    ui.label(
        RichText::new(format!(
            "{} {}",
            lang.t("what happened in step", "本步发生的事：调度步"),
            e.step
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    if e.oom() {
        oom_banner(cx, ui, f);
    }
    let line = |ui: &mut Ui, t: String, c: Color32| {
        ui.label(RichText::new(t).size(crate::style::fit(size * 0.95)).color(c));
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
            style::state_text(ui.visuals(), style::WRITTEN),
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
            fg,
        );
    }
    let ids = |v: &[u32]| v.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(" ");
    ui.label(
        RichText::new(format!("{}: {}", lang.t("running", "运行中"), ids(&f.running)))
            .size(crate::style::fit(size * 0.9)),
    );
    ui.label(
        RichText::new(format!("{}: {}", lang.t("waiting", "等待中"), ids(&f.waiting)))
            .size(crate::style::fit(size * 0.9)),
    );
    ui.label(
        RichText::new(format!(
            "{}: {}",
            lang.t("allocator invariants", "分配器不变量"),
            match &f.invariants {
                Ok(()) => "ok".to_string(),
                Err(e) => e.clone(),
            }
        ))
        .size(crate::style::fit(size * 0.85))
        .color(style::muted(ui.visuals())),
    );
}

pub(super) fn check(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
    // With the trained model serving, the decode is the model's (its heads, every layer) and the check
    // is its logits against recomputing without a cache.
    let (heads, kv_heads, what, against) = match &p.served {
        Some(s) => (
            crate::model::shared().map_or(PAGED_HEADS, |m| m.config.n_heads),
            s.shape.kv_heads,
            lang.t(
                "the trained model's batched paged decode, every layer",
                "训练好的模型的批量分页解码（每一层）",
            ),
            lang.t(
                "batched paged decode vs recomputing each text without a cache on the CPU (logits)",
                "批量分页解码与在 CPU 上不用缓存重算每段文本的对比（logits）",
            ),
        ),
        None => (
            PAGED_HEADS,
            p.shape.kv_heads,
            lang.t("paged decode through the block tables", "通过块表的分页解码"),
            lang.t(
                "paged kernel vs contiguous attention on the same tokens",
                "分页 kernel 与连续注意力（相同 token）",
            ),
        ),
    };
    ui.label(
        RichText::new(format!(
            "{what} ({} {}, {} {}, GQA {heads}→{kv_heads})",
            f.running.len(),
            lang.t("running requests", "个运行中的请求"),
            lang.t("backend", "后端"),
            cx.backend.name(),
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    check_line(cx, ui, f.check.as_ref(), against);
    let gather = &mut cx.state::<PagedUiState>().gather;
    ui.checkbox(
        gather,
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
        .size(crate::style::fit(size)),
    );
    if *gather {
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
            .size(crate::style::fit(size))
            .color(style::warn(ui.visuals())),
        );
        ui.label(
            RichText::new(lang.t(
                "Only kvscope's f64 checker gathers a contiguous copy (compute::reference::paged_decode); real engines never copy.",
                "只有 kvscope 的 f64 核对会 gather 出连续副本（compute::reference::paged_decode）；真实引擎从不复制。",
            ))
            .slant()
            .size(crate::style::fit(size * 0.85)),
        );
    }
}

pub(super) fn tradeoff(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
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
        .size(crate::style::fit(size)),
    );
    let hl = style::state_text(ui.visuals(), style::CURRENT);
    let mut t = crate::ui::widgets::Table::new([
        lang.t("block size", "块大小"),
        lang.t("slots wasted in last blocks", "末块浪费的槽位"),
        lang.t("block-table entries", "块表项数"),
        lang.t("table bytes (int32)", "块表字节（int32）"),
    ])
    .below(3.0);
    for bs in [1usize, 2, 4, 8, 16, 32, 64] {
        let shape = PagedShape {
            block_size: bs,
            ..p.shape
        };
        let blocks: usize = lens.iter().map(|&l| shape.blocks_for(l)).sum();
        let waste = blocks * bs - lens.iter().sum::<usize>();
        let cur = bs == p.shape.block_size;
        let c = |s: String| crate::ui::widgets::Cell::new(s).mono().color_if(cur, hl);
        t.row([
            c(format!("{}{bs}", if cur { "> " } else { "" })),
            c(waste.to_string()),
            c(blocks.to_string()),
            c((4 * blocks).to_string()),
        ]);
    }
    crate::ui::widgets::table(ui, lang, size * 0.9, &t);
    ui.label(RichText::new(lang.t(
        "Small blocks waste little in each request's last block but need long tables (one lookup per block); large blocks need short tables but waste up to block_size − 1 slots per request.",
        "块小：每个请求末块浪费少，但块表长（每块一次查表）；块大：块表短，但每个请求最多浪费 block_size − 1 个槽位。",
    )).size(crate::style::fit(size * 0.9)));
}

pub(super) fn oom_banner(cx: &ViewCtx, ui: &mut Ui, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
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
        .fill(style::c32(style::OOM))
        .inner_margin(6.0)
        .show(ui, |ui| {
            ui.label(
                RichText::new(format!(
                    "OOM — {}: {}",
                    lang.t("out of blocks", "块已耗尽"),
                    parts.join("; ")
                ))
                .color(style::ink_on(style::OOM))
                .strong()
                .size(crate::style::fit(size)),
            );
        });
}
