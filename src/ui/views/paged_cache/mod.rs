//! Lesson 5's views: the block pool, the block tables, the free list and the OOM banner, and the
//! timeline of scheduler steps (occupancy, events, the decode check and the block-size trade-off are in
//! `view_stats.rs`).

mod serve;
mod stats;

use crate::ui::text::Slant as _;
use eframe::egui::{self, RichText, Ui};

use crate::lessons::paged_cache::{PagedCache, PagedFrame, PagedOut, View};
use crate::lessons::{LessonKind, Output};
use crate::render::egui_glue;
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{
    Tables, ViewCtx, block_label_size, block_rects, block_tables, kernel_panel, legend, legend_height, pool_legend,
    prev_next, ref_badge, ref_counts, timeline, view_id,
};

impl LessonUi for PagedCache {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(p), Some(view)) = (out.downcast_ref::<PagedOut>(), View::from_name(view)) else {
            return;
        };
        match view {
            View::Kernel => kernel_panel(cx, ui, self.ops(), out),
            view => show(cx, ui, p, view),
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn anchor_view(&self) -> Option<&'static str> {
        Some("pool")
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(p) = out.downcast_ref::<PagedOut>() else {
            return;
        };
        let lang = cx.lang;
        timeline(
            cx,
            ui,
            p.frames.len(),
            prev_next(lang.t("< step", "< 上一步"), lang.t("next step >", "下一步 >")),
            |c| format!("{} {} / {}", lang.t("scheduler step", "调度步"), c, p.frames.len() - 1),
        );
    }
}

/// Lesson 5's views of `p` (the kernel panel is drawn by the caller).
fn show(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, view: View) {
    let lang = cx.lang;
    let size = cx.size;
    if let Some(e) = &p.error {
        ui.label(
            RichText::new(format!("{}: {e}", lang.t("This scenario cannot run", "该场景无法运行")))
                .color(style::fail(ui.visuals()))
                .size(crate::style::fit(size)),
        );
        ui.label(
            RichText::new(lang.t(
                "Raise the number of blocks or the block size, or use fewer requests.",
                "请增加块数或块大小，或减少请求数。",
            ))
            .size(crate::style::fit(size)),
        );
        if p.frames.is_empty() {
            return;
        }
    }
    let Some(f) = p.frames.get((*cx.cursor).min(p.frames.len().saturating_sub(1))) else {
        return;
    };
    let bs = p.shape.block_size;
    match view {
        View::Pool => {
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
                .size(crate::style::fit(size)),
            );
            // The events view, when the step shows it, carries the banner: show it once.
            if f.events.oom() && !cx.step_shows("events") {
                stats::oom_banner(cx, ui, f);
            }
            let w = ui.available_width();
            // Below the pool: the legend (every step has the same entries, so the pool keeps its place
            // and size from step to step) and, in the window, the hover line.
            let entries = pool_legend(f.tables.keys().copied(), lang.t("free", "空闲"), lang);
            let spacing = ui.spacing().item_spacing.y;
            let hint_h = if cx.presentation {
                0.0
            } else {
                size * 0.85 * 1.4 + spacing
            };
            let legend_h = legend_height(ui, &entries, size, w);
            let h = (ui.available_height() - legend_h - hint_h - 2.0 * spacing).max(60.0);
            let font = cx.inner_label_sizes();
            let (resp, hovered) = egui_glue::block_grid(ui, view_id("pool", 0), &f.grid, egui::vec2(w, h), font);
            // Every block in use carries its reference count (the tables that hold it: one here, as
            // nothing is shared before lesson 7).
            let refs = ref_counts(&f.tables, f.grid.owners.len());
            let painter = ui.painter_at(resp.rect);
            for (b, r) in block_rects(ui, resp.rect, f.grid.owners.len(), bs)
                .into_iter()
                .enumerate()
            {
                if let Some(fs) = block_label_size(r, font).filter(|_| refs[b] > 0) {
                    ref_badge(&painter, r, fs, refs[b]);
                }
            }
            legend(ui, &entries, size);
            let text = match hovered {
                Some(b) => match f.grid.owners.get(b).copied().filter(|&o| o >= 0) {
                    Some(o) => {
                        let idx = f
                            .tables
                            .get(&(o as u32))
                            .and_then(|t| t.iter().position(|&x| x as usize == b))
                            .unwrap_or(0);
                        format!(
                            "{} {b}: r{o}, {} {idx}, {}/{bs} {}",
                            lang.t("block", "块"),
                            lang.t("logical block", "逻辑块"),
                            f.grid.filled[b],
                            lang.t("slots filled", "槽位已用")
                        )
                    }
                    None => format!("{} {b}: {}", lang.t("block", "块"), lang.t("free", "空闲")),
                },
                None => lang.t("hover a block", "鼠标悬停查看块").to_string(),
            };
            // Presentation mode: no interaction hints on the projector.
            if !cx.presentation {
                ui.label(RichText::new(text).monospace().size(crate::style::fit(size * 0.85)));
            }
        }
        View::Tables => tables_view(cx, ui, p, f),
        View::FreeList => {
            ui.label(
                RichText::new(format!(
                    "{} ({} {})",
                    lang.t("free list", "空闲列表"),
                    f.free.len(),
                    lang.t("blocks", "块")
                ))
                .strong()
                .size(crate::style::fit(size)),
            );
            ui.horizontal_wrapped(|ui| {
                for (i, b) in f.free.iter().enumerate() {
                    let last = i + 1 == f.free.len();
                    let t = RichText::new(format!("{b}")).monospace().size(crate::style::fit(size));
                    let t = if last {
                        t.strong().color(style::state_text(ui.visuals(), style::CURRENT))
                    } else {
                        t
                    };
                    ui.label(t);
                }
                if f.free.is_empty() {
                    ui.label(
                        RichText::new(lang.t("(empty: the pool is exhausted)", "（空：块池已耗尽）"))
                            .color(style::fail(ui.visuals()))
                            .size(crate::style::fit(size)),
                    );
                } else {
                    ui.label(
                        RichText::new(lang.t("← allocate() pops from this end", "← allocate() 从这一端弹出"))
                            .slant()
                            .size(crate::style::fit(size * 0.85)),
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
                    .size(crate::style::fit(size * 0.9))
                    .color(ui.visuals().text_color()),
                );
            }
        }
        View::Occupancy => stats::occupancy(cx, ui, p, f),
        View::Events => stats::events(cx, ui, f),
        View::Check => stats::check(cx, ui, p, f),
        View::Tradeoff => stats::tradeoff(cx, ui, p, f),
        View::Outputs => serve::outputs(cx, ui, p, (*cx.cursor).min(p.frames.len().saturating_sub(1))),
        View::Kernel => {}
    }
}

fn tables_view(cx: &mut ViewCtx, ui: &mut Ui, p: &PagedOut, f: &PagedFrame) {
    let lang = cx.lang;
    let size = cx.size;
    let bs = p.shape.block_size;
    ui.label(
        RichText::new(lang.t("block tables: logical block → physical block", "块表：逻辑块 → 物理块"))
            .strong()
            .size(crate::style::fit(size)),
    );
    if let Some((r, pos)) = f.write
        && let Some(t) = f.tables.get(&r)
    {
        let (lb, off) = (pos / bs, pos % bs);
        if let Some(&b) = t.get(lb) {
            ui.label(
                RichText::new(format!(
                    "r{r} {} {pos}: {pos} // {bs} = {lb}, {pos} % {bs} = {off} → {} {b}, {} {b}·{bs}+{off} = {}",
                    lang.t("pos", "位置"),
                    lang.t("physical block", "物理块"),
                    lang.t("slot", "槽位"),
                    b as usize * bs + off
                ))
                .monospace()
                .size(crate::style::fit(size * 0.95))
                .color(style::state_text(ui.visuals(), style::WRITTEN)),
            );
        }
    }
    if f.tables.is_empty() {
        ui.label(
            RichText::new(lang.t("(no request holds blocks)", "（没有请求持有块）")).size(crate::style::fit(size)),
        );
        return;
    }
    let written = f.write.map(|(r, pos)| (r, pos / bs));
    block_tables(
        ui,
        &Tables {
            tables: &f.tables,
            lens: &f.lens,
            owners: &f.grid.owners,
            written,
        },
        size,
        lang,
    );
}
