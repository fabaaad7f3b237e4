//! Text in the app: the two languages, a small Markdown renderer for narration and a CUDA syntax
//! highlighter for the kernel panel.
//!
//! Why not a Markdown or syntax-highlighting crate: narration uses paragraphs, `- ` lists, headings,
//! **bold**, *italic* and `code` only, and the kernel panel shows C-like CUDA; a few dozen lines of
//! `LayoutJob` building cover both, keep the build small and keep the Chinese fallback font working.

use eframe::egui::{self, Color32, FontId, TextFormat, text::LayoutJob};

use crate::compute::BackendKind;
use crate::lesson_file::Text;

/// The app's languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Lang {
    /// English.
    #[default]
    En,
    /// 简体中文.
    Zh,
}

impl Lang {
    /// Pick the string of this language.
    pub fn t(self, en: &'static str, zh: &'static str) -> &'static str {
        match self {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }

    /// A lesson text in this language (the loader guarantees both exist).
    pub fn pick(self, t: &Text) -> &str {
        let (a, b) = match self {
            Lang::En => (&t.en, &t.zh),
            Lang::Zh => (&t.zh, &t.en),
        };
        a.as_deref().or(b.as_deref()).unwrap_or("")
    }

    /// Short name for the switch.
    pub fn label(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "中文",
        }
    }
}

/// The colour of quoted (published, not measured) values: narration's `^^…^^` and the views' quoted
/// figures.
pub fn quote_color(visuals: &egui::Visuals) -> Color32 {
    crate::style::quote(visuals)
}

/// Inline styles of narration.
#[derive(Clone, Copy)]
struct Colors {
    text: Color32,
    strong: Color32,
    quote: Color32,
    code_bg: Color32,
}

/// Whether `s` holds a CJK character (U+2E80 and up: the CJK radicals, kana, ideographs and
/// full-width forms).
pub fn has_cjk(s: &str) -> bool {
    s.chars().any(|c| c as u32 >= 0x2e80)
}

/// Italic that is never forced on Chinese: egui has no italic face and slants glyphs instead, and a
/// slanted ideograph reads as a mistake (issue #56). A run with CJK stays upright; its colour or weight
/// carries the emphasis.
pub trait Slant {
    /// Italic unless the text holds CJK.
    fn slant(self) -> Self;
}

impl Slant for egui::RichText {
    fn slant(self) -> Self {
        if has_cjk(self.text()) { self } else { self.italics() }
    }
}

fn push_inline(job: &mut LayoutJob, text: &str, size: f32, colors: Colors) {
    let (mut bold, mut italic, mut code, mut quoted) = (false, false, false, false);
    let mut buf = String::new();
    let flush = |job: &mut LayoutJob, buf: &mut String, bold: bool, italic: bool, code: bool, quoted: bool| {
        if buf.is_empty() {
            return;
        }
        let mut f = TextFormat {
            font_id: if code {
                FontId::monospace(crate::style::fit(size * 0.92))
            } else {
                FontId::proportional(crate::style::fit(size))
            },
            color: if quoted {
                colors.quote
            } else if bold {
                colors.strong
            } else {
                colors.text
            },
            // No synthetic slant on CJK (see [`Slant`]).
            italics: (italic || quoted) && !has_cjk(buf),
            ..Default::default()
        };
        if code {
            f.background = colors.code_bg;
        }
        job.append(buf, 0.0, f);
        buf.clear();
    };
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            flush(job, &mut buf, bold, italic, code, quoted);
            code = !code;
        } else if !code && c == '^' && chars.get(i + 1) == Some(&'^') {
            flush(job, &mut buf, bold, italic, code, quoted);
            quoted = !quoted;
            i += 1;
        } else if !code && c == '*' && chars.get(i + 1) == Some(&'*') {
            flush(job, &mut buf, bold, italic, code, quoted);
            bold = !bold;
            i += 1;
        } else if !code && c == '*' {
            flush(job, &mut buf, bold, italic, code, quoted);
            italic = !italic;
        } else {
            buf.push(c);
        }
        i += 1;
    }
    flush(job, &mut buf, bold, italic, code, quoted);
}

/// Under the narration, the sources of the published facts it quotes, in the quoted style: what each
/// is and where it is published, so a quoted figure is never taken for a measured one.
/// `small` is their text size (smaller than the narration's `size` in the window; presentation mode
/// sets them at its floor); `heading`: the line that says they are quoted first (a page that continues
/// the list leaves it out).
pub fn quoted_sources(
    ui: &mut egui::Ui,
    lang: Lang,
    facts: &[&crate::facts::Fact],
    heading: bool,
    size: f32,
    small: f32,
) {
    if facts.is_empty() {
        return;
    }
    let quote = quote_color(ui.visuals());
    if heading {
        ui.label(
            egui::RichText::new(lang.t(
                "Quoted, not measured (in this colour):",
                "引用的公开数据，非实测（以此颜色标出）：",
            ))
            .size(crate::style::fit(small))
            .slant()
            .color(quote),
        );
    }
    for f in facts {
        let what = match lang {
            Lang::En => &f.what.en,
            Lang::Zh => &f.what.zh,
        };
        ui.label(
            egui::RichText::new(format!("{}: {what}. {}", f.shown_in(lang == Lang::Zh), f.source))
                .size(crate::style::fit(small))
                .color(quote),
        );
    }
    ui.add_space(size * 0.3);
}

/// A paragraph block's items: (kind: 0 text, 1 bullet, 2 heading, 3 numbered item; its text; its
/// marker). Lines of one item are joined.
fn block_items(block: &[&str]) -> Vec<(usize, String, String)> {
    let mut items: Vec<(usize, String)> = Vec::new();
    let mut markers: Vec<String> = Vec::new();
    for line in block {
        let t = line.trim_start();
        let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
        if let Some(rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
            items.push((1, rest.to_string()));
            markers.push("•".into());
        } else if digits > 0
            && t[digits..].starts_with(". ")
            // As in CommonMark, a numbered item starts a block, follows another item, or is item 1:
            // a number that a placeholder put at the start of a wrapped line ("not\n8192. The")
            // continues its paragraph.
            && (items.last().is_none_or(|(k, _)| *k == 1 || *k == 3) || &t[..digits] == "1")
        {
            items.push((3, t[digits + 2..].to_string()));
            markers.push(t[..digits + 1].to_string());
        } else if let Some(rest) = t.strip_prefix("#") {
            items.push((2, rest.trim_start_matches('#').trim().to_string()));
            markers.push(String::new());
        } else if let Some(last) = items.last_mut().filter(|(k, _)| *k != 2) {
            let cjk = |c: Option<char>| c.is_some_and(|c| c as u32 >= 0x2E80);
            if !(cjk(last.1.chars().last()) && cjk(t.chars().next())) {
                last.1.push(' ');
            }
            last.1.push_str(t);
        } else {
            items.push((0, t.to_string()));
            markers.push(String::new());
        }
    }
    items.into_iter().zip(markers).map(|((k, t), m)| (k, t, m)).collect()
}

/// Render narration Markdown into `ui` at body size `size`.
pub fn markdown(ui: &mut egui::Ui, md: &str, size: f32) {
    let colors = Colors {
        text: ui.visuals().text_color(),
        strong: ui.visuals().strong_text_color(),
        quote: quote_color(ui.visuals()),
        code_bg: ui.visuals().code_bg_color,
    };
    let width = ui.available_width();
    // Paragraphs are separated by blank lines; lines inside a paragraph are joined (with no space
    // between two CJK characters, as Chinese text is written).
    let mut blocks: Vec<Vec<&str>> = vec![Vec::new()];
    for line in md.lines() {
        if line.trim().is_empty() {
            blocks.push(Vec::new());
        } else if let Some(b) = blocks.last_mut() {
            b.push(line.trim_end());
        }
    }
    for block in blocks.into_iter().filter(|b| !b.is_empty()) {
        for (kind, text, marker) in block_items(&block) {
            let indent = if kind == 1 { size * 0.8 } else { 0.0 };
            let mut job = LayoutJob {
                wrap: egui::text::TextWrapping {
                    max_width: width - indent,
                    ..Default::default()
                },
                ..Default::default()
            };
            let s = if kind == 2 { size * 1.15 } else { size };
            // A list item is its own paragraph, led by its bullet or number (a bullet's paragraph indented).
            let text = if kind == 1 || kind == 3 {
                format!("{marker} {text}")
            } else {
                text
            };
            let colors = Colors {
                text: if kind == 2 { colors.strong } else { colors.text },
                ..colors
            };
            push_inline(&mut job, &glue(&text), s, colors);
            let job = keep_openers(ui.ctx(), job);
            if kind == 1 {
                ui.horizontal_top(|ui| {
                    ui.add_space(indent);
                    ui.vertical(|ui| ui.label(job));
                });
            } else {
                ui.label(job);
            }
        }
        ui.add_space(size * 0.45);
    }
}

/// Units a number keeps on its line ("128 KiB", "16.2 μs"), each matched whole (the character after
/// it is not a letter or digit).
const UNITS: &[&str] = &[
    "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "B", "ms", "μs", "µs", "ns", "s", "GB/s", "TB/s", "GFLOP/s",
    "TFLOP/s", "FLOPs", "bits", "%",
];

/// `text` with no-break spaces where a wrapped line must not split a short expression: around " = "
/// ("S = 4", "K = 32"), inside a layer-and-head name ("L2 H3"), between a number and its unit
/// ("128 KiB") and between a number and the Chinese word it counts ("4 层", "6 个").
pub(crate) fn glue(text: &str) -> String {
    const NBSP: char = '\u{A0}';
    let text = text.replace(" = ", "\u{A0}=\u{A0}");
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        // "L<digits> H<digit>": the space after a layer number, before a head number.
        let layer_before = || {
            let digits = chars[..i].iter().rev().take_while(|c| c.is_ascii_digit()).count();
            digits > 0
                && i > digits
                && chars[i - digits - 1] == 'L'
                && (i == digits + 1 || !chars[i - digits - 2].is_alphanumeric())
        };
        let head_after = chars.get(i + 1) == Some(&'H') && chars.get(i + 2).is_some_and(|c| c.is_ascii_digit());
        // A number before the space, and a unit or a Chinese word after it.
        let unit_after = || {
            i > 0
                && chars[i - 1].is_ascii_digit()
                && (chars
                    .get(i + 1)
                    .is_some_and(|&n| n as u32 >= 0x4e00 && n as u32 <= 0x9fff)
                    || UNITS.iter().any(|u| {
                        let n = u.chars().count();
                        chars.len() >= i + 1 + n
                            && chars[i + 1..i + 1 + n].iter().copied().eq(u.chars())
                            && !chars.get(i + 1 + n).is_some_and(|c| c.is_alphanumeric())
                    }))
        };
        out.push(if c == ' ' && ((head_after && layer_before()) || unit_after()) {
            NBSP
        } else {
            c
        });
    }
    out
}

/// Opening brackets and quotes, which Chinese typesetting never leaves at the end of a line.
const OPENERS: &str = "（“‘《【「『〈([";

/// `job` laid out as egui wraps it, with an explicit break before each opener that would end a row.
/// egui may break after any character that precedes a CJK one, so "…全量解码（上下文…" could end a
/// row on "（"; Chinese typesetting keeps an opener with what follows it. Each such row gets a
/// break before its opener and the paragraph is laid out again (a few rounds at most; English
/// paragraphs are returned as they are). So does a row that would end between a number and the Chinese
/// word [`glue`] tied it to: it breaks before the number.
pub(crate) fn keep_openers(ctx: &egui::Context, mut job: LayoutJob) -> LayoutJob {
    if !has_cjk(&job.text) {
        return job;
    }
    for _ in 0..8 {
        let galley = ctx.fonts_mut(|f| f.layout_job(job.clone()));
        // egui counts one glyph per character (its cursors rely on it), and a `\n` between rows.
        let mut start = 0;
        let mut hit = None;
        for (i, row) in galley.rows.iter().enumerate() {
            let glyphs = &row.row.glyphs;
            let last = glyphs.iter().rposition(|g| !g.chr.is_whitespace());
            if i + 1 < galley.rows.len()
                && !row.ends_with_newline
                && let Some(last) = last.filter(|&l| l > 0 && OPENERS.contains(glyphs[l].chr))
            {
                hit = Some(start + last);
                break;
            }
            // A row that ends on a no-break space (`glue`'s "4 层": egui may still break before the
            // Chinese word) breaks before the number instead.
            if i + 1 < galley.rows.len() && !row.ends_with_newline && glyphs.last().is_some_and(|g| g.chr == '\u{A0}') {
                let mut p = glyphs.len() - 1;
                while p > 0 && !glyphs[p - 1].chr.is_whitespace() && (glyphs[p - 1].chr as u32) < 0x2e80 {
                    p -= 1;
                }
                if p > 0 {
                    hit = Some(start + p);
                    break;
                }
            }
            start += glyphs.len() + usize::from(row.ends_with_newline);
        }
        let Some(at) = hit.and_then(|c| job.text.char_indices().nth(c).map(|(b, _)| b)) else {
            return job;
        };
        job.text.insert(at, '\n');
        for section in &mut job.sections {
            let r = &mut section.byte_range;
            if r.start.0 >= at {
                r.start.0 += 1;
            }
            if r.end.0 > at {
                r.end.0 += 1;
            }
        }
    }
    job
}

const KEYWORDS: &[&str] = &[
    "extern",
    "__global__",
    "__device__",
    "__shared__",
    "__restrict__",
    "const",
    "return",
    "for",
    "if",
    "else",
    "while",
    "int",
    "float",
    "unsigned",
    "void",
    "struct",
    "static",
    "inline",
    "__syncthreads",
    "__half",
    "long",
    "auto",
    "break",
    "continue",
    "template",
    "typename",
    "bool",
    "true",
    "false",
    "define",
    "include",
];

/// The characters before a line of code: its number, right-aligned in four, and two spaces.
const CODE_GUTTER: usize = 6;

/// How much deeper than its line a continuation row starts.
const CODE_HANG: usize = 4;

/// Where the rows of a line of code `chars` begin after the first, for rows of `width` characters
/// (None: one row): after the last space in the second half of the room, else at the room's end. A
/// continuation row has `indent` + [`CODE_HANG`] characters less room.
fn code_breaks(chars: &[char], width: Option<usize>, indent: usize) -> Vec<usize> {
    let Some(width) = width else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut start, mut room) = (0, width.max(8));
    while chars.len() - start > room {
        let limit = start + room;
        let at = (start + room / 2 + 1..=limit)
            .rev()
            .find(|&k| chars[k - 1] == ' ')
            .unwrap_or(limit);
        out.push(at);
        start = at;
        room = width.saturating_sub(indent + CODE_HANG).max(8);
    }
    out
}

/// CUDA source as a highlighted layout: comments, strings, numbers, keywords. Line `highlight`
/// (1-based) gets a background. `first` is the number of the first line of `src`. With `cols` (the
/// characters a row holds, line numbers included), a line too long for a row goes on in rows of its
/// own, indented past its line number and its own indent, so a continuation never reads as a new line
/// of the file (egui's own wrap would start it at the left edge, under the line numbers).
pub fn cuda_job(
    src: &str,
    first: usize,
    highlight: Option<usize>,
    size: f32,
    dark: bool,
    cols: Option<usize>,
) -> LayoutJob {
    let crate::style::CodeColors {
        plain,
        keyword: kw,
        comment,
        number: num,
        line_number: lineno,
        highlight: hl,
    } = crate::style::code(dark);
    let mut job = LayoutJob::default();
    let font = FontId::monospace(crate::style::fit(size));
    let fmt = |c: Color32, bg: Color32| TextFormat {
        font_id: font.clone(),
        color: c,
        background: bg,
        ..Default::default()
    };
    let mut in_block_comment = false;
    for (i, line) in src.lines().enumerate() {
        let n = first + i;
        let bg = if Some(n) == highlight { hl } else { Color32::TRANSPARENT };
        job.append(&format!("{n:4}  "), 0.0, fmt(lineno, bg));
        // The line's pieces and their colours, then laid out in rows.
        let mut segs: Vec<(String, Color32)> = Vec::new();
        let chars: Vec<char> = line.chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let rest: String = chars[j..].iter().collect();
            if in_block_comment {
                let end = rest.find("*/").map(|e| e + 2).unwrap_or(rest.len());
                let piece: String = rest.chars().take(rest[..end].chars().count()).collect();
                j += piece.chars().count();
                segs.push((piece, comment));
                if rest[..end].ends_with("*/") {
                    in_block_comment = false;
                }
                continue;
            }
            if rest.starts_with("//") {
                segs.push((rest, comment));
                break;
            }
            if rest.starts_with("/*") {
                in_block_comment = true;
                continue;
            }
            let c = chars[j];
            if c.is_ascii_digit() {
                let w: String = chars[j..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '.')
                    .collect();
                j += w.chars().count();
                segs.push((w, num));
            } else if c.is_alphabetic() || c == '_' || c == '#' {
                let w: String = chars[j..]
                    .iter()
                    .enumerate()
                    .take_while(|(k, c)| c.is_alphanumeric() || **c == '_' || (*k == 0 && **c == '#'))
                    .map(|(_, c)| *c)
                    .collect();
                j += w.chars().count();
                let is_kw = KEYWORDS.contains(&w.trim_start_matches('#'));
                segs.push((w, if is_kw { kw } else { plain }));
            } else {
                segs.push((c.to_string(), plain));
                j += 1;
            }
        }
        let indent = chars.iter().take_while(|c| c.is_whitespace()).count();
        let breaks = code_breaks(&chars, cols.map(|c| c.saturating_sub(CODE_GUTTER)), indent);
        let continuation = " ".repeat(CODE_GUTTER + indent + CODE_HANG);
        let mut at = 0;
        let mut next = breaks.iter().copied().peekable();
        for (text, color) in segs {
            let mut piece = String::new();
            for ch in text.chars() {
                if next.peek() == Some(&at) {
                    next.next();
                    job.append(&piece, 0.0, fmt(color, bg));
                    piece.clear();
                    job.append(&format!("\n{continuation}"), 0.0, fmt(plain, bg));
                }
                piece.push(ch);
                at += 1;
            }
            job.append(&piece, 0.0, fmt(color, bg));
        }
        job.append("\n", 0.0, fmt(plain, bg));
    }
    job
}

/// The `{ran_on}` placeholder: which code computed the shown result and where, in `lang`.
pub(crate) fn ran_on(kind: BackendKind, device: &str, lang: Lang) -> String {
    match (kind, lang) {
        (BackendKind::Cpu, Lang::En) => "their Rust twins on the CPU".to_string(),
        (BackendKind::Cpu, Lang::Zh) => "CPU 上的 Rust 版本".to_string(),
        (BackendKind::CudaSim, Lang::En) => "the `.cu` source itself, on CPU threads (cuda-sim)".to_string(),
        (BackendKind::CudaSim, Lang::Zh) => "CPU 线程上的 `.cu` 源码本身（cuda-sim）".to_string(),
        (BackendKind::Cuda, Lang::En) => format!("CUDA on {device}"),
        (BackendKind::Cuda, Lang::Zh) => format!("{device} 上的 CUDA 源码"),
        (BackendKind::Wgpu, _) => {
            // The device string is "<adapter> (<API>), <f16 path>".
            let (adapter, f16) = device.rsplit_once(", ").unwrap_or((device, ""));
            match lang {
                Lang::En if f16.is_empty() => format!("their WGSL twins on {adapter}"),
                Lang::En => format!("their WGSL twins on {adapter}, with {f16}"),
                Lang::Zh => {
                    let f16 = match f16 {
                        "native f16" => "（原生 f16）",
                        "f16 as u32 pairs" => "（f16 成对存进 u32）",
                        _ => "",
                    };
                    format!("{adapter} 上的 WGSL 版本{f16}")
                }
            }
        }
    }
}

/// A backend's reason for being unavailable (or its probing state), in `lang`. The reasons come from the
/// compute layer in English; the known ones are translated here, keeping any library detail (an error
/// code, an adapter's name) as it is; an unknown one is shown as it came.
pub fn backend_reason(lang: Lang, en: &str) -> String {
    if lang != Lang::Zh {
        return en.to_string();
    }
    // Whole-message starts, in the order the probes can return them.
    const STARTS: [(&str, &str); 7] = [
        (
            "libcuda not found (no NVIDIA driver on this machine)",
            "找不到 libcuda（本机没有 NVIDIA 驱动）",
        ),
        (
            "libcuda was found but could not be loaded",
            "找到了 libcuda，但无法加载",
        ),
        (
            "NVRTC not found (install the CUDA toolkit or the nvidia-cuda-nvrtc-cu12 wheel and put its lib folder on LD_LIBRARY_PATH)",
            "找不到 NVRTC（请安装 CUDA 工具包或 nvidia-cuda-nvrtc-cu12 wheel，并把它的 lib 目录加入 LD_LIBRARY_PATH）",
        ),
        ("NVRTC was found but could not be loaded", "找到了 NVRTC，但无法加载"),
        (
            "the CUDA driver is present but has no usable device",
            "有 CUDA 驱动，但没有可用的设备",
        ),
        ("wgpu panicked while opening the device", "wgpu 打开设备时发生 panic"),
        ("probing…", "探测中…"),
    ];
    for (e, z) in STARTS {
        if let Some(rest) = en.strip_prefix(e) {
            return format!("{z}{rest}");
        }
    }
    if let Some(rest) = en.strip_prefix("no GPU adapter with compute shaders (")
        && let Some((detail, _)) = rest.rsplit_once("); install a Vulkan driver")
    {
        return format!(
            "没有支持计算着色器的 GPU 适配器（{detail}）；请安装 Vulkan 驱动（mesa-vulkan-drivers 提供 lavapipe）"
        );
    }
    if let Some(name) = en.strip_suffix(" has no shader-f16 feature") {
        return format!("{name} 不支持 shader-f16");
    }
    if let Some((file, rest)) = en.split_once(" does not compile on ")
        && let Some((name, detail)) = rest.split_once(": ")
    {
        return format!("{file} 在 {name} 上无法编译：{detail}");
    }
    en.to_string()
}

/// A backend's device line (`Backend::device`) in `lang`: the words translated, the names (adapter, GPU,
/// file patterns) kept.
pub fn device_text(lang: Lang, en: &str) -> String {
    if lang != Lang::Zh {
        return en.to_string();
    }
    if let Some(n) = en.strip_prefix("CPU, ").and_then(|r| r.strip_suffix(" threads")) {
        return format!("CPU，{n} 个线程");
    }
    if en == "kernels/*.cu on CPU threads (C++ shim)" {
        return "kernels/*.cu 在 CPU 线程上运行（C++ shim）".to_string();
    }
    if let Some(a) = en.strip_suffix(", native f16") {
        return format!("{a}，原生 f16");
    }
    if let Some(a) = en.strip_suffix(", f16 as u32 pairs") {
        return format!("{a}，f16 以 u32 成对存放");
    }
    en.to_string()
}

#[cfg(test)]
mod tests {
    use eframe::egui;

    #[test]
    fn short_expressions_are_glued() {
        assert_eq!(
            super::glue("S = 4 at (L2 H3), L10 H0; XL2 H3, L2 Hx"),
            "S\u{A0}=\u{A0}4 at (L2\u{A0}H3), L10\u{A0}H0; XL2 H3, L2 Hx"
        );
        assert_eq!(
            super::glue("128 KiB, 16.2 μs, 4 层, 6 个; 5 seconds, 2 Bytes, v2 KiB, 3 s."),
            "128\u{A0}KiB, 16.2\u{A0}μs, 4\u{A0}层, 6\u{A0}个; 5 seconds, 2 Bytes, v2\u{A0}KiB, 3\u{A0}s."
        );
    }

    #[test]
    fn no_row_of_a_chinese_paragraph_ends_on_an_opening_bracket() {
        let ctx = egui::Context::default();
        super::super::fonts::install(&ctx);
        let _ = ctx.run_ui(Default::default(), |_| {});
        let para = "这里按层、按头测量：任一头在全量解码（上下文之内、去掉最初几步）放在前 S = 4 个字节上的质量最大为 2.0%（L2 H2）；sink + 窗口每字节 1.858 比特。";
        let ends = |job: &super::LayoutJob| {
            let g = ctx.fonts_mut(|f| f.layout_job(job.clone()));
            g.rows
                .iter()
                .map(|r| {
                    r.row
                        .glyphs
                        .iter()
                        .rev()
                        .find(|g| !g.chr.is_whitespace())
                        .map_or(' ', |g| g.chr)
                })
                .collect::<Vec<_>>()
        };
        let mut found = 0;
        // Widths at which egui alone ends a row on "（", and others: after the fix none does, and
        // the text is the same but for the breaks put in.
        for width in (200..700).step_by(7) {
            let mut job = super::LayoutJob {
                wrap: egui::text::TextWrapping {
                    max_width: width as f32,
                    ..Default::default()
                },
                ..Default::default()
            };
            job.append(
                para,
                0.0,
                egui::TextFormat::simple(egui::FontId::proportional(22.0), egui::Color32::WHITE),
            );
            let before = ends(&job);
            found += usize::from(before[..before.len() - 1].contains(&'（'));
            let fixed = super::keep_openers(&ctx, job);
            let after = ends(&fixed);
            assert!(
                !after[..after.len() - 1].contains(&'（'),
                "width {width}: rows end {after:?}"
            );
            assert_eq!(fixed.text.replace('\n', ""), para);
            assert_eq!(
                fixed.sections.last().map(|s| s.byte_range.end.0),
                Some(fixed.text.len())
            );
        }
        assert!(
            found > 0,
            "no width made egui end a row on an opener: the test proves nothing"
        );
    }

    #[test]
    fn a_number_at_the_start_of_a_wrapped_line_continues_its_paragraph() {
        let items = |md: &str| super::block_items(&md.lines().collect::<Vec<_>>());
        // A placeholder put 8192 at a line start: one paragraph, not a list item "8192.".
        assert_eq!(
            items("GPT-3's d_model is 12288, not\n8192. The rule holds."),
            vec![(
                0,
                "GPT-3's d_model is 12288, not 8192. The rule holds.".to_string(),
                String::new()
            )]
        );
        // Lists still start a block, follow an item, or begin at 1 (even under a line of text).
        let list = items("1. one\n2. two\n- three\n3. four");
        assert_eq!(
            list.iter().map(|i| (i.0, i.2.as_str())).collect::<Vec<_>>(),
            [(3, "1."), (3, "2."), (1, "•"), (3, "3.")]
        );
        let under = items("Reasons:\n1. one\n2. two");
        assert_eq!(under.iter().map(|i| i.0).collect::<Vec<_>>(), [0, 3, 3]);
        assert_eq!(items("7. seven\nwraps on").len(), 1);
    }

    #[test]
    fn backend_reasons_are_translated_with_their_details_kept() {
        let cases = [
            (
                "libcuda not found (no NVIDIA driver on this machine)",
                "找不到 libcuda（本机没有 NVIDIA 驱动）",
            ),
            (
                "the CUDA driver is present but has no usable device (CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)",
                "有 CUDA 驱动，但没有可用的设备 (CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)",
            ),
            ("llvmpipe has no shader-f16 feature", "llvmpipe 不支持 shader-f16"),
            (
                "kernels/a.wgsl does not compile on X: bad",
                "kernels/a.wgsl 在 X 上无法编译：bad",
            ),
            ("something new", "something new"),
        ];
        for (en, zh) in cases {
            assert_eq!(backend_reason(Lang::Zh, en), zh);
            assert_eq!(backend_reason(Lang::En, en), en);
        }
        assert_eq!(device_text(Lang::Zh, "CPU, 2 threads"), "CPU，2 个线程");
        assert_eq!(
            device_text(Lang::Zh, "llvmpipe (Vulkan), native f16"),
            "llvmpipe (Vulkan)，原生 f16"
        );
        assert_eq!(device_text(Lang::Zh, "NVIDIA H200 (sm_90)"), "NVIDIA H200 (sm_90)");
        assert_eq!(device_text(Lang::En, "CPU, 2 threads"), "CPU, 2 threads");
    }

    use super::*;

    #[test]
    fn highlighter_keeps_every_character() {
        let src = "/* a\n b */ extern \"C\" __global__ void k(int n) { // hi\n  float x = 1.5f; }";
        let job = cuda_job(src, 1, Some(2), 12.0, true, None);
        let text: String = job.text.lines().map(|l| &l[6..]).collect::<Vec<_>>().join("\n");
        assert_eq!(text, src);
    }

    #[test]
    fn long_code_lines_go_on_indented_past_their_number() {
        let src = "    for (int g = 0; g < G; ++g) acc += probs[((size_t)r * n_heads + kvh * G + g) * T + t];\n}";
        let job = cuda_job(src, 105, None, 12.0, true, Some(40));
        let rows: Vec<&str> = job.text.lines().collect();
        assert!(rows.len() > 3, "{rows:?}");
        assert!(rows.iter().all(|r| r.chars().count() <= 40), "{rows:?}");
        // The first row carries the number; continuations are blank under it and start past the
        // line's own indent; the characters are all there, in order.
        assert!(rows[0].starts_with(" 105  "));
        let (conts, last) = (&rows[1..rows.len() - 1], rows[rows.len() - 1]);
        assert!(conts.iter().all(|r| r.starts_with(&" ".repeat(6 + 4 + 4))), "{rows:?}");
        assert_eq!(last, " 106  }");
        let joined: String = std::iter::once(&rows[0][6..])
            .chain(conts.iter().map(|r| &r[14..]))
            .collect();
        assert_eq!(joined, src.lines().next().unwrap());
    }
}
