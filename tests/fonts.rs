//! The bundled CJK font covers the Chinese of every lesson and the common-character set it promises,
//! and its licence sits beside it.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x303F | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xFF00..=0xFFEF)
}

/// The lesson files and the code of every source file (the app, the lessons' views, the model's labels).
fn text_files() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "toml") {
                out.push(std::fs::read_to_string(&path).unwrap());
            } else if path.extension().is_some_and(|e| e == "rs") {
                // Code only: comments are never drawn.
                let text = std::fs::read_to_string(&path).unwrap();
                let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
                out.push(code.join("\n"));
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["lessons", "src"] {
        walk(&root().join(dir), &mut out);
    }
    out
}

/// Every symbol the lessons and the UI use has a glyph in one of the app's fonts (egui's defaults
/// plus the bundled CJK font), so no text shows as boxes.
#[test]
fn every_symbol_has_a_glyph() {
    let defs = kvscope::ui::fonts::definitions();
    let blobs: Vec<Vec<u8>> = defs.font_data.values().map(|d| (*d.font).as_ref().to_vec()).collect();
    let faces: Vec<ttf_parser::Face> = blobs
        .iter()
        .filter_map(|b| ttf_parser::Face::parse(b, 0).ok())
        .collect();
    assert!(faces.len() >= 2);
    let mut missing = BTreeSet::new();
    for c in text_files().iter().flat_map(|t| t.chars()) {
        if !c.is_ascii() && !c.is_whitespace() && !faces.iter().any(|f| f.glyph_index(c).is_some()) {
            missing.insert(c);
        }
    }
    assert!(missing.is_empty(), "characters no font can draw: {missing:?}");
}

#[test]
fn cjk_font_covers_every_lesson_and_the_common_set() {
    let data = std::fs::read(root().join("assets/fonts/kvscope-sans-sc.otf")).expect("the font is committed");
    let face = ttf_parser::Face::parse(&data, 0).expect("a valid OpenType font");
    let covered = |c: char| face.glyph_index(c).is_some();

    let mut missing = BTreeSet::new();
    for c in text_files().iter().flat_map(|t| t.chars()).filter(|&c| is_cjk(c)) {
        if !covered(c) {
            missing.insert(c);
        }
    }
    assert!(
        missing.is_empty(),
        "lesson or UI characters missing from the font (re-run scripts/make-cjk-subset.sh): {missing:?}"
    );

    let promised = std::fs::read_to_string(root().join("assets/fonts/kvscope-sans-sc.chars.txt")).unwrap();
    let han = promised
        .chars()
        .filter(|&c| (0x4E00..=0x9FFF).contains(&(c as u32)))
        .count();
    assert!(
        han >= 3755,
        "the common set (GB 2312 level 1) has 3755 hanzi, the font lists {han}"
    );
    assert!(promised.chars().filter(|c| !c.is_whitespace()).all(covered));
    for c in "注意力矩阵因果掩码多头缓存分页".chars() {
        assert!(covered(c), "{c}");
    }
    let licence =
        std::fs::read_to_string(root().join("assets/fonts/OFL.txt")).expect("the licence sits beside the font");
    assert!(licence.contains("SIL OPEN FONT LICENSE Version 1.1"));
}

#[test]
fn chinese_renders_in_egui_with_the_bundled_font() {
    use eframe::egui;
    use egui_kittest::Harness;
    let mut h = Harness::builder()
        .with_size(egui::vec2(360.0, 120.0))
        .wgpu()
        .build_ui(|ui| {
            kvscope::ui::fonts::install(ui.ctx());
            ui.heading("注意力矩阵 · The attention matrix");
            ui.label("因果掩码：只能看见过去。每一行之和仍为 1。");
            ui.monospace("KV Cache 分页 block_size = 16");
        });
    h.run();
    h.snapshot("font_chinese");
}
