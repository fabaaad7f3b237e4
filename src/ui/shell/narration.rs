//! Presentation mode's narration panel: the step's title, narration and sources, paged at its paragraphs
//! when it does not fit (no scroll area: a projector never scrolls).

use crate::style;
use crate::ui::KvscopeApp;
use crate::ui::text::{self};
use eframe::egui::{self, RichText, Ui};

/// What presentation mode's side panel shows: the step's title and narration, then the sources of the
/// facts it quotes, without a scroll area (a projector never scrolls). A narration that does not fit the
/// panel is paged at its paragraphs, with "1/2" at the foot that the presenter's → and ← step through
/// before the steps (`KvscopeApp::next_page_or_step`). Each block's height is measured by laying it out
/// unseen at the panel's width, so a page holds what fits.
pub(super) fn presented_narration(app: &mut KvscopeApp, ui: &mut Ui) {
    let lang = app.lang;
    let size = app.body_size();
    let Some(l) = app.lesson().cloned() else {
        return;
    };
    let (_, si) = app.position();
    let step = &l.file.steps[si];
    ui.label(
        RichText::new(lang.pick(step.title.get_ref()))
            .strong()
            .size(crate::style::fit(size * 1.25)),
    );
    ui.add_space(4.0);
    let veiled = app.veiled();
    let narration = if veiled {
        // Class mode: the narration would give the answer away.
        crate::ui::questions::veiled_note(lang).to_string()
    } else {
        app.narration().unwrap_or_default()
    };
    let quoted = if veiled {
        Vec::new()
    } else {
        crate::lessons::quoted_facts(lang.pick(step.narration.get_ref()))
    };
    // Once class mode's veil lifts, the questions first (the guess against the run's answer is what the
    // hall waits for), then the narration's paragraphs (Markdown blocks end at blank lines), then the
    // sources as one block.
    let mut blocks: Vec<Block> = Vec::new();
    if !veiled && !step.questions.is_empty() {
        blocks.push(Block::Questions);
    }
    blocks.extend(narration_paragraphs(&narration).into_iter().map(Block::Md));
    if !quoted.is_empty() {
        blocks.push(Block::Sources(0..quoted.len()));
    }
    let draw = |app: &mut KvscopeApp, ui: &mut Ui, b: &Block| match b {
        Block::Md(md) => text::markdown(ui, md, size),
        Block::Sources(r) => {
            text::quoted_sources(ui, lang, &quoted[r.clone()], r.start == 0, size, style::PRESENT_FLOOR)
        }
        Block::Questions => {
            crate::ui::questions::questions_ui(app, ui, size, true, Some(ui.ctx().content_rect().height() * 0.22))
        }
    };
    let footer = size * 1.8;
    let room = ui.available_height() - footer;
    let measure = |app: &mut KvscopeApp, ui: &mut Ui, b: &Block| {
        let rect = ui.available_rect_before_wrap();
        let mut unseen = ui.new_child(egui::UiBuilder::new().max_rect(rect).invisible());
        draw(app, &mut unseen, b);
        unseen.min_rect().height() + ui.spacing().item_spacing.y
    };
    let heights: Vec<f32> = blocks.iter().map(|b| measure(app, ui, b)).collect();
    // A block taller than a page is cut into its list items or sentences (the sources into one block
    // per source), each measured again.
    let (blocks, heights) = if heights.iter().any(|h| *h > room) {
        let mut cut: Vec<Block> = Vec::new();
        for (b, h) in blocks.into_iter().zip(&heights) {
            match b {
                Block::Md(md) if *h > room => cut.extend(narration_pieces(&md).into_iter().map(Block::Md)),
                Block::Sources(r) if *h > room => cut.extend(r.map(|i| Block::Sources(i..i + 1))),
                b => cut.push(b),
            }
        }
        let heights = cut.iter().map(|b| measure(app, ui, b)).collect();
        (cut, heights)
    } else {
        (blocks, heights)
    };
    let pages = pack_pages(&heights, room);
    app.narration_pages = pages.len();
    app.narration_page = app.narration_page.min(pages.len() - 1);
    let page = app.narration_page;
    for b in &blocks[pages[page].clone()] {
        draw(app, ui, b);
    }
    // One count for the presenter: the narration's pages, then the views' further pages (a long table,
    // a second table; `style::view_page`), as → turns them.
    let (view_page, view_pages) = app.view_page();
    let total = pages.len() + view_pages.max(1) - 1;
    let at = page + view_page;
    if total > 1 {
        let foot = egui::Rect::from_min_max(
            egui::pos2(ui.max_rect().left(), ui.max_rect().bottom() - footer),
            ui.max_rect().right_bottom(),
        );
        let more = if at + 1 < total { "  →" } else { "" };
        ui.put(
            foot,
            egui::Label::new(
                RichText::new(format!("{}/{total}{more}", at + 1))
                    .size(crate::style::fit(size))
                    .strong(),
            ),
        );
    }
}

/// One block of presentation mode's narration panel, as it is paged: a paragraph (or a piece of one), the
/// sources of some of the quoted facts (the heading with the first), or the questions.
pub(super) enum Block {
    Md(String),
    Sources(std::ops::Range<usize>),
    /// The step's questions with their answers (after class mode's reveal).
    Questions,
}

/// A narration's paragraphs: its Markdown blocks, split at blank lines (`text::markdown` lays each block
/// out on its own, so a block drawn alone looks as it does in the whole).
pub(super) fn narration_paragraphs(md: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![String::new()];
    for line in md.lines() {
        if line.trim().is_empty() {
            if out.last().is_some_and(|p| !p.is_empty()) {
                out.push(String::new());
            }
        } else if let Some(p) = out.last_mut() {
            if !p.is_empty() {
                p.push('\n');
            }
            p.push_str(line);
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A paragraph cut for paging: its lines when it is a list, else its sentences (after ". ", "? ", "! ",
/// "。", "？" or "！"), never inside brackets or a Markdown span (`**`, `*`, `` ` ``, `^^`), so each piece
/// renders as it did in the whole. Each piece is drawn as its own paragraph.
pub(super) fn narration_pieces(md: &str) -> Vec<String> {
    let lines: Vec<&str> = md.lines().collect();
    let list = |l: &str| {
        let t = l.trim_start();
        t.starts_with("- ") || t.starts_with("* ") || t.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok())
    };
    if lines.len() > 1 && lines.iter().skip(1).all(|l| list(l)) {
        return lines.iter().map(|l| l.to_string()).collect();
    }
    // Lines joined as `text::markdown` joins them: no space between two CJK characters.
    let mut text = String::new();
    for l in lines.iter().map(|l| l.trim()) {
        let cjk = |c: Option<char>| c.is_some_and(|c| c as u32 >= 0x2E80);
        let between_cjk = cjk(text.chars().last()) && cjk(l.chars().next());
        if !(text.is_empty() || between_cjk) {
            text.push(' ');
        }
        text.push_str(l);
    }
    let chars: Vec<char> = text.chars().collect();
    let (mut out, mut cur) = (Vec::new(), String::new());
    let (mut bold, mut italic, mut code, mut quoted) = (false, false, false, false);
    let mut parens = 0i32;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        cur.push(c);
        let next = chars.get(i + 1).copied();
        match c {
            '`' => code = !code,
            '^' if !code && next == Some('^') => {
                quoted = !quoted;
                cur.push('^');
                i += 1;
            }
            '*' if !code && next == Some('*') => {
                bold = !bold;
                cur.push('*');
                i += 1;
            }
            '*' if !code => italic = !italic,
            '(' | '（' => parens += 1,
            ')' | '）' => parens -= 1,
            _ => {}
        }
        let open = bold || italic || code || quoted || parens > 0;
        let end = match c {
            '.' | '?' | '!' => next == Some(' '),
            '。' | '？' | '！' => true,
            _ => false,
        };
        if end && !open {
            out.push(cur.trim().to_string());
            cur.clear();
        }
        i += 1;
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Pages of blocks of these heights, each page as many whole blocks as fit in `room` (at least one, so a
/// block taller than the page still shows: the presentation check then reports it).
pub(super) fn pack_pages(heights: &[f32], room: f32) -> Vec<std::ops::Range<usize>> {
    let mut pages = Vec::new();
    let (mut start, mut used) = (0, 0.0);
    for (i, h) in heights.iter().enumerate() {
        if i > start && used + h > room {
            pages.push(start..i);
            (start, used) = (i, 0.0);
        }
        used += h;
    }
    pages.push(start..heights.len());
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narration_pages_hold_whole_paragraphs_that_fit() {
        assert_eq!(pack_pages(&[10.0, 10.0, 10.0], 25.0), vec![0..2, 2..3]);
        assert_eq!(pack_pages(&[10.0, 10.0], 25.0), vec![0..2]);
        assert_eq!(pack_pages(&[40.0, 10.0], 25.0), vec![0..1, 1..2]);
        assert_eq!(pack_pages(&[], 25.0), vec![0..0]);
        assert_eq!(
            narration_paragraphs("a\nb\n\n\n- c\n- d\n\ne"),
            vec!["a\nb", "- c\n- d", "e"]
        );
        assert_eq!(
            narration_pieces("One **bold. Still** one. Two? `a. b` three (c. d).\nFour。五！"),
            vec![
                "One **bold. Still** one.",
                "Two?",
                "`a. b` three (c. d).",
                "Four。",
                "五！"
            ]
        );
        assert_eq!(narration_pieces("- a\n- b"), vec!["- a", "- b"]);
        assert_eq!(narration_pieces("开头，\n每个。\nA\nb."), vec!["开头，每个。", "A b."]);
    }
}
