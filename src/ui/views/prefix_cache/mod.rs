//! Lesson 7's views: the pool with reference counts and short hashes, one request's hash chain, the
//! hash → block map, the block tables, the free list and the evictor, hit rate and memory, the event,
//! the decode check, and the timeline of events.

mod chain;
mod common;

use eframe::egui::{self, RichText, Ui};

use crate::lessons::prefix_cache::{Event, PrefixCache, PrefixFrame, PrefixOut, View};
use crate::lessons::{LessonKind, Output};

use crate::render::egui_glue;
use crate::style;
use crate::ui::lesson_ui::LessonUi;
use crate::ui::widgets::{
    BlockBox, Cell, Table, ViewCtx, bar, block_label_size, block_rects, block_row, check_line, kernel_panel,
    legend_chip, legend_height, pool_legend, prev_next, ref_badge, table, timeline, view_id,
};
use chain::chain;
use common::*;

impl LessonUi for PrefixCache {
    fn show(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output, view: &str) {
        let (Some(p), Some(view)) = (out.downcast_ref::<PrefixOut>(), View::from_name(view)) else {
            return;
        };
        if view == View::Kernel {
            kernel_panel(cx, ui, self.ops(), out);
            return;
        }
        if let Some(e) = &p.error {
            ui.label(
                RichText::new(format!("{}: {e}", cx.t("The session stopped", "会话中止")))
                    .color(style::fail(ui.visuals()))
                    .size(crate::style::fit(cx.size)),
            );
        }
        let Some(f) = p.frames.get((*cx.cursor).min(p.frames.len().saturating_sub(1))) else {
            return;
        };
        match view {
            View::Pool => pool(cx, ui, p, f),
            View::Chain => chain(cx, ui, p, f),
            View::Map => map(cx, ui, f),
            View::Tables => tables(cx, ui, f),
            View::Lists => lists(cx, ui, f),
            View::Stats => stats(cx, ui, f),
            View::Events => events(cx, ui, f),
            View::Check => {
                check_line(
                    cx,
                    ui,
                    f.check.as_ref(),
                    cx.t("paged decode through the shared tables", "经共享块表的分页解码"),
                );
                let (ok, text) = match &f.invariants {
                    Ok(()) => (true, cx.t("cache invariants: ok", "缓存不变量：成立").to_string()),
                    Err(e) => (
                        false,
                        format!("{}: {e}", cx.t("cache invariants broken", "缓存不变量被破坏")),
                    ),
                };
                let color = if ok {
                    style::pass(ui.visuals())
                } else {
                    style::fail(ui.visuals())
                };
                ui.label(RichText::new(text).color(color).size(crate::style::fit(cx.size * 0.9)));
            }
            View::Kernel => {}
        }
    }

    fn has_timeline(&self) -> bool {
        true
    }

    fn anchor_view(&self) -> Option<&'static str> {
        Some("pool")
    }

    fn timeline(&self, cx: &mut ViewCtx, ui: &mut Ui, out: &dyn Output) {
        let Some(p) = out.downcast_ref::<PrefixOut>() else {
            return;
        };
        let lang = cx.lang;
        timeline(
            cx,
            ui,
            p.frames.len(),
            prev_next(lang.t("< event", "< 上一事件"), lang.t("next event >", "下一事件 >")),
            |c| format!("{} {} / {}", lang.t("event", "事件"), c, p.frames.len() - 1),
        );
    }
}

/// The pool (the wgpu block grid) with each block's reference count (×n when shared) and the short
/// hash of cached blocks; cached blocks nobody uses (the evictor) are drawn as free with their hash.
fn pool(cx: &ViewCtx, ui: &mut Ui, p: &PrefixOut, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    let s = p.shape;
    ui.label(
        RichText::new(format!(
            "{}: {} × {} {}",
            lang.t("physical block pool", "物理块池"),
            s.num_blocks,
            s.block_size,
            lang.t("token slots", "个 token 槽位")
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    let w = ui.available_width();
    // Below the pool: the legend chips, the legend's explanation (wrapped to the view's width) and, in the
    // window, the hover line; the pool takes the rest, so nothing below it is cut off.
    let legend = lang.t(
        "×n: ref count, the tables using the block (×0: free, in the evictor, still cached) · #hash: cached full block",
        "×n：引用计数，即使用该块的块表数（×0：空闲，在驱逐器中，仍被缓存）· #hash：已缓存的满块",
    );
    let legend_font = egui::FontId::proportional(crate::style::fit(size * 0.8));
    let legend_h = ui
        .painter()
        .layout(legend.to_string(), legend_font.clone(), ui.visuals().text_color(), w)
        .size()
        .y;
    let spacing = ui.spacing().item_spacing.y;
    let hint_h = if cx.presentation {
        0.0
    } else {
        size * 0.85 * 1.4 + spacing
    };
    let entries = pool_legend(
        f.tables.keys().copied(),
        lang.t("free or evictable", "空闲或可驱逐"),
        lang,
    );
    let chips_h = legend_height(ui, &entries, size, w);
    let h = (ui.available_height() - size * 1.2 - chips_h - legend_h - hint_h - 3.0 * spacing).max(60.0);
    let font = cx.inner_label_sizes();
    let (resp, hovered) = egui_glue::block_grid(ui, view_id("prefix-pool", 0), &f.grid, egui::vec2(w, h), font);
    let rect = resp.rect;
    let blocks = block_rects(ui, rect, s.num_blocks, s.block_size);
    let painter = ui.painter_at(rect);
    // More requests than the colour grammar tells apart by colour alone beside the pool's two states:
    // each block in use also carries its owner's name ("r9"), where it fits on every one of them.
    let requests = f.tables.len();
    let name_owners = entries.len() > crate::style::LEGEND_MAX_COLOURS;
    let mut owners_named = name_owners;
    for (b, &r) in blocks.iter().enumerate() {
        let owner = f.grid.owners.get(b).copied().unwrap_or(-1);
        let Some(fs) = block_label_size(r, font) else {
            owners_named &= owner < 0;
            continue;
        };
        if name_owners && owner >= 0 {
            let ink = style::ink_on(style::owner_fill(owner));
            let mono = egui::FontId::monospace(crate::style::fit(fs));
            // In the middle row, between the id and ref count above and the hash below.
            let name = painter.layout_no_wrap(format!("r{owner}"), mono, ink);
            if name.size().x + 4.0 <= r.width() && 3.0 * name.size().y <= r.height() {
                painter.galley(egui::pos2(r.min.x + 2.0, r.center().y - name.size().y / 2.0), name, ink);
            } else {
                owners_named = false;
            }
        }
        // Every block that holds K/V carries its ref count: ×1 and more for blocks in use, ×0 for a
        // freed block that is still cached (it waits in the evictor, and a hit revives it).
        if f.refs[b] > 0 || f.cached[b].is_some() {
            ref_badge(&painter, r, fs, f.refs[b]);
        }
        if let Some((hash, _, _)) = &f.cached[b] {
            let ink = style::ink_on(style::owner_fill(f.grid.owners.get(b).copied().unwrap_or(-1)));
            painter.text(
                egui::pos2(r.min.x + 2.0, r.max.y - 1.0),
                egui::Align2::LEFT_BOTTOM,
                short(*hash),
                egui::FontId::monospace(crate::style::fit(fs)),
                ink,
            );
        }
    }
    // The copy-on-write of this event: an arrow from the shared block to its copy, with the bytes moved.
    if let Event::Append {
        cow: Some((src, dst, _)),
        ..
    } = f.event
    {
        let center = |b: u32| blocks.get(b as usize).map_or(rect.center(), |r| r.center());
        let (a, b) = (center(src), center(dst));
        let stroke = egui::Stroke::new(3.0, style::CURRENT_32);
        painter.arrow(a, b - a, stroke);
        let bytes = 2 * s.kv_heads * s.block_size * s.head_dim * 2;
        let label = format!("copy_blocks {src} → {dst}: {bytes} B");
        // The label sits at the pool's bottom-left (below the blocks in use), tied to the arrow's colour.
        let ink = style::ink_on(style::CURRENT);
        let galley = painter.layout_no_wrap(label, egui::FontId::proportional(crate::style::fit(size * 0.85)), ink);
        let bg = egui::Rect::from_min_size(
            rect.left_bottom() + egui::vec2(4.0, -galley.size().y - 10.0),
            galley.size() + egui::vec2(8.0, 4.0),
        );
        painter.rect_filled(bg, 3.0, style::CURRENT_32);
        painter.galley(bg.min + egui::vec2(4.0, 2.0), galley, ink);
    }
    crate::ui::widgets::legend_cued(ui, &entries, size, if owners_named { requests } else { 0 });
    ui.label(RichText::new(legend).font(legend_font));
    if cx.presentation {
        return;
    }
    let text = match hovered {
        Some(b) => {
            let state = if f.refs[b] > 0 {
                format!("{} {}", lang.t("ref count", "引用计数"), f.refs[b])
            } else if f.cached[b].is_some() {
                lang.t("ref count 0, cached: in the evictor", "引用计数 0，已缓存：在驱逐器中")
                    .to_string()
            } else {
                lang.t("free", "空闲").to_string()
            };
            let hash = f.cached[b]
                .as_ref()
                .map_or(String::new(), |(h, _, t)| format!("  {} {t:?}", short(*h)));
            format!("{} {b}: {state}{hash}", lang.t("block", "块"))
        }
        None => lang.t("hover a block", "鼠标悬停查看块").to_string(),
    };
    ui.label(RichText::new(text).monospace().size(crate::style::fit(size * 0.85)));
}

/// The hash → blocks map; a duplicate (a second block caching the same prefix) is listed under the first,
/// which is the one a lookup returns.
fn map(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    let n = f.cached.iter().filter(|m| m.is_some()).count();
    ui.label(
        RichText::new(format!("{}: {n}", lang.t("hash → block map", "哈希 → 块映射")))
            .strong()
            .size(crate::style::fit(size)),
    );
    // The ref count, or where a block nobody holds waits.
    let state = |b: usize| {
        if f.refs[b] > 0 {
            f.refs[b].to_string()
        } else {
            lang.t("evictor", "驱逐器").to_string()
        }
    };
    // A table, a row per cached block: a token list that wraps stays in its own column, so its second
    // line cannot be read as another hash.
    let mut t = Table::new([
        lang.t("hash", "哈希"),
        lang.t("block", "块"),
        lang.t("ref count", "引用计数"),
        lang.t("parent", "父"),
        lang.t("tokens", "token"),
    ]);
    for (h, blocks) in &f.map {
        for (i, &b) in blocks.iter().enumerate() {
            let b = b as usize;
            let Some((_, parent, toks)) = &f.cached[b] else {
                continue;
            };
            t.rows.push(if i == 0 {
                vec![
                    Cell::new(short(*h)).mono(),
                    Cell::new(b.to_string()).mono(),
                    Cell::new(state(b)).mono(),
                    Cell::new(short(*parent)).mono(),
                    Cell::new(format!("{toks:?}")).mono(),
                ]
            } else {
                vec![
                    Cell::new("+"),
                    Cell::new(b.to_string()).mono(),
                    Cell::new(state(b)).mono(),
                    Cell::new(""),
                    Cell::new(lang.t("duplicate: lookups return the first", "重复：查找只返回第一个")),
                ]
            });
        }
    }
    crate::ui::layout::scroll(ui, egui::ScrollArea::vertical().id_salt("prefix-map"), |ui| {
        table(ui, lang, size * 0.85, &t);
    });
}

/// The block tables, shared entries marked.
fn tables(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    ui.label(
        RichText::new(lang.t("block tables (× = shared)", "块表（× = 共享）"))
            .strong()
            .size(crate::style::fit(size)),
    );
    if f.tables.is_empty() {
        ui.label(
            RichText::new(lang.t("(no request holds blocks)", "（没有请求持有块）")).size(crate::style::fit(size)),
        );
    }
    for (r, t) in &f.tables {
        let entries: Vec<String> = t
            .iter()
            .map(|&b| {
                if f.refs[b as usize] > 1 {
                    format!("{b}×{}", f.refs[b as usize])
                } else {
                    b.to_string()
                }
            })
            .collect();
        let len = f.tokens.get(r).map_or(0, Vec::len);
        // The table wraps at the view's edge (a long table on a narrow view, in presentation mode).
        ui.horizontal(|ui| {
            legend_chip(ui, style::request(*r as usize), &format!("r{r}"), size);
            ui.add(
                egui::Label::new(
                    RichText::new(format!(
                        "[{}]  {len} {}",
                        entries.join(", "),
                        plural(lang, len, "token", "tokens", "个 token")
                    ))
                    .monospace()
                    .size(crate::style::fit(size * 0.9)),
                )
                .wrap(),
            );
        });
    }
}

/// The free list and the evictor, kept apart.
fn lists(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame) {
    // Set smaller rather than cut when the rows of blocks run past the view.
    let evicted = match &f.event {
        Event::Admit { evicted, .. } => Some(evicted),
        _ => None,
    };
    let key = crate::ui::widgets::fit_key((&f.free, &f.evictor, cx.lang == crate::ui::text::Lang::Zh, evicted));
    crate::ui::widgets::fitted_height(ui, "prefix-lists", key, cx.size, |ui, size| lists_at(cx, ui, f, size));
}

fn lists_at(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame, size: f32) {
    let lang = cx.lang;
    ui.label(
        RichText::new(format!("{} ({})", lang.t("free list", "空闲列表"), f.free.len()))
            .strong()
            .size(crate::style::fit(size)),
    );
    // The next block allocate() hands out on the left, as the evictor's row below puts its next first
    // (the free list pops from its end).
    let free: Vec<BlockBox> = f
        .free
        .iter()
        .rev()
        .map(|&id| BlockBox {
            id,
            sub: None,
            fill: style::FREE,
            struck: false,
        })
        .collect();
    block_row(ui, &free, size);
    ui.label(
        RichText::new(lang.t("left: the next block allocate() takes", "左边：allocate() 下一个取的块"))
            .size(crate::style::fit(size * 0.85))
            .color(style::muted(ui.visuals())),
    );
    ui.add_space(size * 0.5);
    ui.label(
        RichText::new(format!(
            "{} ({})",
            lang.t(
                "evictor: cached, ref count 0, used after the free list",
                "驱逐器：已缓存、引用计数为 0，空闲列表用完后才用"
            ),
            f.evictor.len()
        ))
        .strong()
        .size(crate::style::fit(size)),
    );
    // The blocks this event evicted (struck out, their hashes forgotten), then the evictor in LRU
    // order: the next to go first.
    let evicted: &[u32] = match &f.event {
        Event::Admit { evicted, .. } => evicted,
        _ => &[],
    };
    let mut boxes: Vec<BlockBox> = evicted
        .iter()
        .map(|&id| BlockBox {
            id,
            sub: None,
            fill: style::EVICTED,
            struck: true,
        })
        .collect();
    boxes.extend(f.evictor.iter().map(|&id| BlockBox {
        id,
        sub: f.cached[id as usize].as_ref().map(|(h, _, _)| short(*h)),
        fill: style::FREE,
        struck: false,
    }));
    block_row(ui, &boxes, size);
    let mut note = lang
        .t(
            "left: least recently freed, evicted first",
            "左边：最早释放，最先被驱逐",
        )
        .to_string();
    if !evicted.is_empty() {
        note.push_str(lang.t(
            " · struck out: evicted by this event, their hashes forgotten",
            " · 划掉的：本事件驱逐的块，其哈希已被遗忘",
        ));
    }
    ui.add(
        egui::Label::new(
            RichText::new(note)
                .size(crate::style::fit(size * 0.85))
                .color(style::muted(ui.visuals())),
        )
        .wrap(),
    );
    if !evicted.is_empty() {
        ui.horizontal_wrapped(|ui| {
            legend_chip(
                ui,
                style::EVICTED,
                lang.t("evicted (struck out)", "已驱逐（划掉）"),
                size,
            );
            legend_chip(
                ui,
                style::FREE,
                lang.t("free, or cached in the evictor", "空闲，或在驱逐器中仍被缓存"),
                size,
            );
        });
    }
}

/// Hit rate, prefill saved and memory against no sharing, as bars.
fn stats(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    // The whole in the neutral grey, the part against it in the bar colour (the grammar keeps the
    // request colours for requests).
    let (whole, part) = (style::WHOLE_32, style::bar_fill(ui.visuals()));
    ui.label(
        RichText::new(lang.t("so far", "累计"))
            .strong()
            .size(crate::style::fit(size)),
    );
    let most = f.lookups.max(1) as usize;
    bar(
        ui,
        lang.t("full blocks looked up", "查找的满块"),
        f.lookups as usize,
        most,
        whole,
        size,
    );
    bar(
        ui,
        lang.t("… found in the cache (hits)", "…命中缓存"),
        f.hits as usize,
        most,
        part,
        size,
    );
    let toks = (f.computed + f.saved).max(1);
    bar(
        ui,
        lang.t("prompt tokens prefilled", "实际预填充的 token"),
        f.computed,
        toks,
        part,
        size,
    );
    bar(
        ui,
        lang.t("prompt tokens from the cache", "直接取自缓存的 token"),
        f.saved,
        toks,
        part,
        size,
    );
    let blocks = f.blocks_unshared.max(f.blocks_used).max(1);
    bar(
        ui,
        lang.t("blocks without sharing", "不共享时需要的块"),
        f.blocks_unshared,
        blocks,
        whole,
        size,
    );
    bar(
        ui,
        lang.t("blocks in use (shared)", "实际占用的块（共享）"),
        f.blocks_used,
        blocks,
        part,
        size,
    );
}

/// What happened at this event, in words.
fn events(cx: &ViewCtx, ui: &mut Ui, f: &PrefixFrame) {
    let (lang, size) = (cx.lang, cx.size);
    let list = |v: &[u32]| format!("{v:?}");
    let text = match &f.event {
        Event::Admit {
            req,
            prompt,
            hits,
            saved,
            computed,
            evicted,
        } => {
            let mut t = format!(
                "r{req} {} {prompt} {}: {hits} {} ({saved} {}), {computed} {}",
                lang.t("arrives with", "到达，提示"),
                plural(lang, *prompt, "token", "tokens", "个 token"),
                plural(lang, *hits, "full block hit", "full blocks hit", "个满块命中"),
                plural(
                    lang,
                    *saved,
                    "token not prefilled",
                    "tokens not prefilled",
                    "个 token 免于预填充"
                ),
                plural(
                    lang,
                    *computed,
                    "token prefilled",
                    "tokens prefilled",
                    "个 token 需要预填充"
                ),
            );
            if !evicted.is_empty() {
                t += &format!(
                    "; {} {}",
                    lang.t("evicted to make room:", "为腾出空间驱逐："),
                    list(evicted)
                );
            }
            t
        }
        Event::Oom { req } => format!(
            "r{req}: {}",
            lang.t(
                "refused: not enough free or evictable blocks (OOM)",
                "被拒绝：空闲与可驱逐块合计不足（OOM）"
            )
        ),
        Event::Finish {
            req,
            to_evictor,
            to_free,
        } => format!(
            "r{req} {}; {} {}; {} {}",
            lang.t(
                "finishes: each of its blocks loses one reference",
                "结束：它的每个块引用计数减 1"
            ),
            lang.t("to the evictor (still cached):", "进入驱逐器（仍在缓存中）："),
            list(to_evictor),
            lang.t("to the free list:", "回到空闲列表："),
            list(to_free),
        ),
        Event::Fork { parent, child, blocks } => format!(
            "r{parent} {} r{child}: {blocks} {}",
            lang.t("forks", "分叉出"),
            plural(
                lang,
                *blocks,
                "block shared, its ref count + 1, nothing copied",
                "blocks shared, every ref count + 1, nothing copied",
                "个块被共享，引用计数各加 1，不复制任何数据"
            )
        ),
        Event::Append { req, cow, new_block } => match (cow, new_block) {
            (Some((s, d, slots)), _) => format!(
                "r{req} {} {s} → {d} ({} {slots}); {}",
                lang.t(
                    "appends into a shared partial block: copy-on-write",
                    "向共享的未满块追加：写时复制"
                ),
                lang.t(
                    "copy_blocks copies the whole block; filled slots:",
                    "copy_blocks 复制整个块；已用槽位："
                ),
                lang.t(
                    "its table now points at the copy and the old block's ref count drops by 1",
                    "块表改指向副本，原块引用计数减 1"
                )
            ),
            (None, Some(b)) => format!(
                "r{req} {} {b}",
                lang.t(
                    "appends: its last block was full, new block",
                    "追加：最后一块已满，新块"
                )
            ),
            (None, None) => format!(
                "r{req} {}",
                lang.t(
                    "appends into its own last block: no copy",
                    "向自己独占的最后一块追加：无需复制"
                )
            ),
        },
    };
    ui.label(RichText::new(text).size(crate::style::fit(size)));
}
