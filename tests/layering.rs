//! The layering stays true: `math`, `cache`, `compute` and `model` import no UI crate and nothing above
//! them;
//! the lessons (what each kind computes: every file of `src/lessons/`) import no egui and no UI; the
//! lesson-file loader imports no lesson code; the UI (kinds' views in `ui/views/` included) imports neither
//! `lessons::export` nor `compute::bench` (that work belongs to the lessons and the CLI); `cache`,
//! `compute`, `math` and `simd` do not import the KV engine (`kv`), and only the ops and the engine
//! write K/V. The storage layer (`cache`) names no kernel file; lesson computations (`lessons`, `drivers`)
//! import no renderer (their views' data is `figure`); the calculator imports no lesson or driver, and
//! `model` no driver. The paths are parsed (`paths`): grouped `use crate::{…}` trees, `super::`/`self::` paths
//! resolved from the file's module, and inline `crate::…` paths in code, with comments and literals
//! skipped. No import cycles: none among the top-level modules of `src/`, and none among its files
//! (re-exports followed to the file that defines the item).

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// `(file, line number, line)` of every non-comment line in `files` that mentions one of `banned`.
fn offenders(files: &[PathBuf], banned: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if banned.iter().any(|b| code.contains(b)) {
                bad.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    bad
}

fn src(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(sub)
}

/// The code of a Rust file with its comments and string, byte-string and char literals blanked (lengths
/// and newlines kept, so line numbers hold): what the path parser reads.
fn blank(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out: Vec<char> = b.clone();
    let mut i = 0;
    let wipe = |out: &mut Vec<char>, from: usize, to: usize| {
        let to = to.min(out.len());
        for c in &mut out[from..to] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied().unwrap_or('\0');
        if c == '/' && next == '/' {
            let end = b[i..].iter().position(|&x| x == '\n').map_or(b.len(), |p| i + p);
            wipe(&mut out, i, end);
            i = end;
        } else if c == '/' && next == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            wipe(&mut out, i, j);
            i = j;
        } else if c == 'r'
            && (next == '"' || next == '#')
            && !b[..i].last().is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let hashes = b[i + 1..].iter().take_while(|&&x| x == '#').count();
            if b.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let rest: String = b[i + 2 + hashes..].iter().collect();
            let end = rest
                .find(&close)
                .map_or(b.len(), |p| i + 2 + hashes + rest[..p].chars().count() + close.len());
            wipe(&mut out, i, end);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            wipe(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{..}'), not a lifetime ('a without a closing quote).
            let end = if next == '\\' {
                b[i + 2..].iter().position(|&x| x == '\'').map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    wipe(&mut out, i, e + 1);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// Tokens of a use tree: identifiers, `::`, `{`, `}`, `,`, `*`.
fn tokens(s: &str) -> Vec<String> {
    let mut t = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' || c == '$' {
            let j = b[i..]
                .iter()
                .position(|x| !(x.is_alphanumeric() || *x == '_' || *x == '$'))
                .map_or(b.len(), |p| i + p);
            t.push(b[i..j].iter().collect());
            i = j;
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            t.push("::".into());
            i += 2;
        } else {
            if "{},*".contains(c) {
                t.push(c.to_string());
            }
            i += 1;
        }
    }
    t
}

/// The paths a use tree names, groups expanded (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`).
fn expand(t: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    while *i < t.len() {
        match t[*i].as_str() {
            "{" => {
                *i += 1;
                while *i < t.len() && t[*i] != "}" {
                    expand(t, i, &path, out);
                    if *i < t.len() && t[*i] == "," {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "::" => *i += 1,
            "," | "}" => break,
            "*" => {
                *i += 1;
                break;
            }
            "as" => {
                *i += 2;
                break;
            }
            "self" if !path.is_empty() => *i += 1,
            seg => {
                path.push(seg.to_string());
                *i += 1;
            }
        }
    }
    out.push(path);
}

/// A file's module path from the crate root (`src/a/mod.rs` → `a`, `src/a/b.rs` → `a::b`).
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src("")).unwrap();
    let mut m: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = m.pop().unwrap();
    if last != "mod.rs" && last != "lib.rs" && last != "main.rs" {
        m.push(last.trim_end_matches(".rs").to_string());
    }
    m
}

/// Every path `file` names, as `(line, segments)`: its use trees (groups, `self`, renames and globs
/// included) and the inline `crate::…`, `super::…` and `self::…` paths of its code, with `crate`, `super`
/// and `self` resolved to paths from the crate root (`crate::a::b`); a path that starts elsewhere (an
/// external crate, a local item) is kept as written. Comments and literals are skipped, and `super::`
/// inside an inline `mod x { … }` resolves from that module.
fn paths(file: &Path) -> Vec<(usize, Vec<String>)> {
    paths_of(file, false)
}

/// [`paths`], leaving out the code of inline `mod tests { … }` modules when `skip_tests`.
fn paths_of(file: &Path, skip_tests: bool) -> Vec<(usize, Vec<String>)> {
    paths_with_kind(file, skip_tests)
        .into_iter()
        .map(|(l, p, _)| (l, p))
        .collect()
}

/// The paths of `file`'s `use` declarations only (what it imports or re-exports), resolved as [`paths`].
fn use_paths(file: &Path) -> Vec<Vec<String>> {
    paths_with_kind(file, true)
        .into_iter()
        .filter(|x| matches!(x.2, Naming::Use | Naming::Reexport))
        .map(|x| x.1)
        .collect()
}

/// How a file names a path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Naming {
    /// A private `use` declaration.
    Use,
    /// A `pub use` (or `pub(crate) use`…): a re-export, which importers are led through.
    Reexport,
    /// A path written in code.
    Inline,
    /// A path in the body of a `macro_rules!`: code of the files that invoke the macro (which name
    /// the macro, and so its file), not of the file that defines it.
    InMacro,
}

/// [`paths_of`], each with how the file names it.
fn paths_with_kind(file: &Path, skip_tests: bool) -> Vec<(usize, Vec<String>, Naming)> {
    let code = blank(&std::fs::read_to_string(file).unwrap());
    let base = module_of(file);
    let line_of = |pos: usize| code[..pos].matches('\n').count() + 1;
    // Inline modules: (start, end, name) byte ranges of `mod name { … }` bodies.
    let mut inline = Vec::new();
    let bytes = code.as_bytes();
    for (pos, _) in code.match_indices("mod ") {
        let rest = &code[pos + 4..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty()
            || !after.starts_with('{')
            || (pos > 0 && (bytes[pos - 1].is_ascii_alphanumeric() || bytes[pos - 1] == b'_'))
        {
            continue;
        }
        let open = pos + 4 + name.len() + (rest[name.len()..].len() - after.len());
        let mut depth = 0;
        let mut end = code.len();
        for (k, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        inline.push((open, end, name));
    }
    let in_tests = |pos: usize| inline.iter().any(|(a, b, n)| n == "tests" && (*a..*b).contains(&pos));
    // Bodies of `macro_rules!` definitions.
    let mut macros = Vec::new();
    for (pos, _) in code.match_indices("macro_rules!") {
        let Some(open) = code[pos..].find('{').map(|k| pos + k) else {
            continue;
        };
        let mut depth = 0;
        for (k, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        macros.push(open..open + k);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    let in_macro = |pos: usize| macros.iter().any(|r| r.contains(&pos));
    let module_at = |pos: usize| {
        let mut m = base.clone();
        for (a, b, n) in &inline {
            if (*a..*b).contains(&pos) {
                m.push(n.clone());
            }
        }
        m
    };
    let resolve = |pos: usize, p: Vec<String>| -> Vec<String> {
        let mut m = module_at(pos);
        match p.first().map(String::as_str) {
            Some("crate") | Some("$crate") => std::iter::once("crate".to_string())
                .chain(p[1..].iter().cloned())
                .collect(),
            Some("super") | Some("self") => {
                let mut k = 0;
                while p.get(k).map(String::as_str) == Some("super") {
                    m.pop();
                    k += 1;
                }
                if k == 0 {
                    k = 1; // self::
                }
                std::iter::once("crate".to_string())
                    .chain(m)
                    .chain(p[k..].iter().cloned())
                    .collect()
            }
            // A path from a child module of this one (`use serve::Step;` in `paged_cache/mod.rs`).
            Some(first) if file_of_module(&[m.clone(), vec![first.to_string()]].concat()).is_some() => {
                m.insert(0, "crate".to_string());
                m.extend(p);
                m
            }
            _ => p,
        }
    };
    let mut out = Vec::new();
    let mut use_spans = Vec::new();
    // Use declarations.
    for (pos, _) in code.match_indices("use ") {
        if pos > 0 && (bytes[pos - 1].is_ascii_alphanumeric() || bytes[pos - 1] == b'_') {
            continue;
        }
        let Some(end) = code[pos..].find(';') else { continue };
        use_spans.push(pos..pos + end);
        let t = tokens(&code[pos + 4..pos + end]);
        let before = code[..pos].trim_end();
        let naming = if before.ends_with("pub")
            || (before.ends_with(')') && before[before.rfind("pub(").unwrap_or(0)..].len() < 16)
        {
            Naming::Reexport
        } else {
            Naming::Use
        };
        let (mut i, mut found) = (0, Vec::new());
        expand(&t, &mut i, &[], &mut found);
        out.extend(
            found
                .into_iter()
                .filter(|p| !(p.is_empty() || skip_tests && in_tests(pos)))
                .map(|p| {
                    let naming = if in_macro(pos) { Naming::InMacro } else { naming };
                    (line_of(pos), resolve(pos, p), naming)
                }),
        );
    }
    // Inline paths in code.
    // Inline paths start at `crate::`, `super::`, `self::` or a child module of the file's module
    // (`stats::oom_banner(…)` in `paged_cache/mod.rs`).
    let children: Vec<String> = std::fs::read_dir(if base.is_empty() || file.ends_with("mod.rs") {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    })
    .into_iter()
    .flatten()
    .filter_map(|e| e.ok())
    .filter_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let m = name.strip_suffix(".rs").map(String::from).unwrap_or(name);
        (m != "mod" && m != "lib" && m != "main" && file_of_module(&[base.clone(), vec![m.clone()]].concat()).is_some())
            .then(|| format!("{m}::"))
    })
    .collect();
    let starts = ["crate::", "super::", "self::"]
        .into_iter()
        .map(String::from)
        .chain(children);
    for start in starts {
        for (pos, _) in code.match_indices(start.as_str()) {
            let prev = code[..pos].chars().next_back();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                || use_spans.iter().any(|r| r.contains(&pos))
            {
                continue;
            }
            let from = if prev == Some('$') { pos - 1 } else { pos };
            let text: String = code[from..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':' || *c == '$')
                .collect();
            let p: Vec<String> = text.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            if !(skip_tests && in_tests(pos)) {
                let naming = if in_macro(pos) { Naming::InMacro } else { Naming::Inline };
                out.push((line_of(pos), resolve(pos, p), naming));
            }
        }
    }
    out
}

/// The file of module `m` (segments from the crate root, `crate` left out): `src/a/b.rs` or
/// `src/a/b/mod.rs`; `lib.rs` for the root.
fn file_of_module(m: &[String]) -> Option<PathBuf> {
    if m.is_empty() {
        return Some(src("lib.rs"));
    }
    let rel = m.join("/");
    [src(&format!("{rel}.rs")), src(&format!("{rel}/mod.rs"))]
        .into_iter()
        .find(|f| f.is_file())
}

/// The file that defines what the crate path `p` (`crate::a::b::Item`) names: the file of the longest
/// module prefix, or, when that file only re-exports `Item` (`pub use inner::Item;`), the file the
/// re-export leads to. `None` for a path outside the crate.
fn defining_file(p: &[String], depth: usize) -> Option<PathBuf> {
    if p.first().map(String::as_str) != Some("crate") {
        return None;
    }
    let segs = &p[1..];
    let k = (0..=segs.len()).rev().find(|&k| file_of_module(&segs[..k]).is_some())?;
    let file = file_of_module(&segs[..k])?;
    if k == segs.len() || depth > 8 {
        return Some(file);
    }
    let name = &segs[k];
    let own = [&["crate".to_string()][..], &segs[..k]].concat();
    match use_paths(&file)
        .into_iter()
        .find(|u| u.last() == Some(name) && u.len() > 1 && u[..u.len() - 1] != own[..])
    {
        Some(u) => defining_file(&u, depth + 1).or(Some(file)),
        None => Some(file),
    }
}

/// The import graph among the files of `src/` (the binary's `cli/` and `main.rs` left out): an edge
/// from a file to each file that defines something it names (re-exports followed, inline test modules
/// left out), by paths relative to `src/`.
fn file_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let rel = |f: &Path| f.strip_prefix(src("")).unwrap().to_string_lossy().into_owned();
    let mut g: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for f in rust_files(&src("")) {
        let r = rel(&f);
        if r.starts_with("cli/") || r == "main.rs" {
            continue;
        }
        let deps = g.entry(r.clone()).or_default();
        for (_, p, naming) in paths_with_kind(&f, true) {
            if matches!(naming, Naming::Reexport | Naming::InMacro) {
                continue; // importers are led through a re-export; a macro's body is its invokers' code
            }
            if let Some(to) = defining_file(&p, 0).map(|t| rel(&t))
                && to != r
            {
                deps.insert(to);
            }
        }
    }
    g
}

/// `(file, line, path)` of every path in `files`, outside inline `mod tests`, that starts with one of
/// `banned` (`"crate::ui"`: the module `ui` and everything in it, but not `crate::uix`; `"egui"`: the
/// external crate). A unit test may name a type of another layer to build its input.
fn importers(files: &[PathBuf], banned: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        for (line, p) in paths_of(f, true) {
            let hit = banned.iter().any(|b| {
                let b: Vec<&str> = b.split("::").collect();
                p.len() >= b.len() && p.iter().zip(&b).all(|(x, y)| x == y)
            });
            if hit {
                bad.push(format!("{}:{line}: {}", f.display(), p.join("::")));
            }
        }
    }
    bad
}

#[test]
fn the_path_parser_sees_grouped_relative_and_inline_imports() {
    let t = tokens("crate::{ui::text::Lang, render::{self, heatmap as h}, math::*}");
    let mut found = Vec::new();
    expand(&t, &mut 0, &[], &mut found);
    let joined: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "crate::ui::text::Lang",
            "crate::render",
            "crate::render::heatmap",
            "crate::math"
        ]
    );
    let code = blank("let s = \"crate::ui\"; // crate::ui\n/* crate::ui */ let c = '{'; x");
    assert!(!code.contains("crate::ui") && !code.contains('{') && code.ends_with('x'));
    // The shipped tree: a view imports the UI's widgets through a grouped `use`; lesson 7's mod.rs
    // reaches `crate::kv` inside a group.
    let view = paths(&src("ui/views/paged_cache/mod.rs"));
    assert!(
        view.iter().any(|(_, p)| p.starts_with(&["crate".into(), "ui".into()])),
        "{view:?}"
    );
    let engine = paths(&src("kv/engine/mod.rs"));
    assert!(
        engine.iter().any(|(_, p)| p.join("::") == "crate::kv::EvictionPolicy"),
        "super:: resolves from the file's module: {engine:?}"
    );
}

#[test]
fn math_cache_and_compute_import_nothing_above_them() {
    let mut files = Vec::new();
    for d in ["math", "cache", "compute", "model", "figure.rs"] {
        let p = src(d);
        if p.is_file() {
            files.push(p);
        } else {
            files.extend(rust_files(&p));
        }
    }
    assert!(files.len() > 10);
    let bad = importers(
        &files,
        &[
            "egui",
            "eframe",
            "crate::ui",
            "crate::render",
            "crate::lesson_file",
            "crate::lessons",
            "crate::drivers",
        ],
    );
    assert!(bad.is_empty(), "lower layers import upper ones:\n{}", bad.join("\n"));
}

/// The storage layer knows no kernel files: a KV dtype's kernel snippets are files named after it in
/// `kernels/kv/`, which the compute layer embeds (`compute::kv_snippets`); nothing in `cache/` embeds a
/// file or names a kernel source by path in its code.
#[test]
fn storage_knows_no_kernel_files() {
    let files = rust_files(&src("cache"));
    assert!(files.len() >= 8, "{files:?}");
    let bad = offenders(
        &files,
        &["include_str!", "include_bytes!", "kernels/", ".cuh\"", ".wgsl\""],
    );
    assert!(
        bad.is_empty(),
        "the storage layer names kernel files:\n{}",
        bad.join("\n")
    );
    // The check sees a planted one.
    let planted = std::env::temp_dir().join(format!("kvscope-layering-{}.rs", std::process::id()));
    std::fs::write(
        &planted,
        "const S: &str = include_str!(\"../../kernels/kv/f16.cuh\");\n",
    )
    .unwrap();
    assert_eq!(offenders(std::slice::from_ref(&planted), &["include_str!"]).len(), 1);
    let _ = std::fs::remove_file(planted);
}

/// The lesson computations (lessons' folders and the drivers they run) build plain data for their
/// views (`crate::figure`) and import nothing from the renderers or the UI.
#[test]
fn lesson_computations_import_no_render_types() {
    let mut files = rust_files(&src("lessons"));
    files.extend(rust_files(&src("drivers")));
    assert!(files.len() >= 20, "{files:?}");
    let bad = importers(&files, &["egui", "eframe", "wgpu", "crate::ui", "crate::render"]);
    assert!(
        bad.is_empty(),
        "lesson computations import the renderers:\n{}",
        bad.join("\n")
    );
}

/// The calculator takes its formats from the one list in `cache`, not from a lesson or a driver, and
/// `model/` holds models: it imports no driver.
#[test]
fn the_calculator_and_the_models_import_no_lesson_driver() {
    let bad = importers(
        &rust_files(&src("calc")),
        &[
            "crate::drivers",
            "crate::lessons",
            "crate::model",
            "crate::ui",
            "crate::render",
        ],
    );
    assert!(
        bad.is_empty(),
        "the calculator imports a lesson's code:\n{}",
        bad.join("\n")
    );
    let bad = importers(&rust_files(&src("model")), &["crate::drivers"]);
    assert!(bad.is_empty(), "a model imports a lesson driver:\n{}", bad.join("\n"));
}

#[test]
fn lesson_computation_imports_no_egui() {
    let files = rust_files(&src("lessons"));
    assert!(files.len() >= 7, "{files:?}");
    let bad = importers(&files, &["egui", "eframe", "crate::ui"]);
    assert!(bad.is_empty(), "lesson computation imports the UI:\n{}", bad.join("\n"));
}

#[test]
fn the_ui_leaves_exports_and_benchmarks_to_the_layers_below() {
    let ui = rust_files(&src("ui"));
    let mut bad = importers(&ui, &["crate::lessons::export", "crate::compute::bench"]);
    // A lesson's own exports and bench lines (`lessons::<kind>::export`, `::bench`) are the CLI's too.
    for f in &ui {
        for (line, p) in paths_of(f, true) {
            if p.len() >= 4 && p[0] == "crate" && p[1] == "lessons" && (p[3] == "export" || p[3] == "bench") {
                bad.push(format!("{}:{line}: {}", f.display(), p.join("::")));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the UI does work that belongs below it:\n{}",
        bad.join("\n")
    );
}

/// `unsafe` lives only in the CUDA code (`compute::cuda` and the CUDA side of each op, its
/// `ops/<op>/cuda.rs`, written once for the GPU and the shim: the generated launches are unsafe) and `simd`
/// (intrinsics and the `gemm` crate's entry point), and every `unsafe` block there has a `// SAFETY:`
/// comment on a line just above it (clippy checks the blocks; this checks the places).
#[test]
fn unsafe_lives_only_in_the_cuda_module_and_simd() {
    let files = rust_files(&src(""));
    let rel = |p: &Path| p.strip_prefix(src("")).unwrap().to_string_lossy().replace('\\', "/");
    let cuda_side = |r: &str| r.starts_with("compute/ops/") && r.ends_with("/cuda.rs") && r.matches('/').count() == 3;
    let allowed = |p: &Path| {
        let r = rel(p);
        r.starts_with("compute/cuda/") || r.starts_with("simd/") || cuda_side(&r)
    };
    let outside: Vec<PathBuf> = files.iter().filter(|p| !allowed(p)).cloned().collect();
    assert!(outside.len() > 20);
    assert!(files.iter().filter(|p| cuda_side(&rel(p))).count() >= 14);
    // The grants outside them: `#[allow(unsafe_code)]` on `pub mod cuda;` in compute/mod.rs, and on the
    // `cuda` module of each op's mod.rs (the line after the grant declares it).
    let bad: Vec<String> = offenders(&outside, &["unsafe"])
        .into_iter()
        .filter(|l| {
            let grant = l.ends_with("#[allow(unsafe_code)]");
            let next = l.split(": ").next().and_then(|loc| {
                let (file, line) = loc.rsplit_once(':')?;
                let text = std::fs::read_to_string(file).ok()?;
                text.lines()
                    .nth(line.parse::<usize>().ok()?)
                    .map(str::trim)
                    .map(String::from)
            });
            let declares = |m: &str| next.as_deref() == Some(m);
            !(grant
                && ((l.contains("compute/mod.rs") && declares("pub mod cuda;"))
                    || (l.contains("compute/ops/") && declares("pub(crate) mod cuda;"))))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "unsafe outside compute::cuda and simd:\n{}",
        bad.join("\n")
    );
    // The simd folder's grant is one inner attribute on its mod.rs (it covers the folder's files).
    let simd = std::fs::read_to_string(src("simd/mod.rs")).unwrap();
    assert!(simd.contains("#![allow(unsafe_code)]"));
    assert!(
        rust_files(&src("simd"))
            .iter()
            .any(|p| std::fs::read_to_string(p).unwrap().contains("// SAFETY:"))
    );
}

#[test]
fn cache_and_compute_do_not_import_the_kv_engine_above_them() {
    let mut files = Vec::new();
    for d in ["cache", "compute", "math", "simd"] {
        files.extend(rust_files(&src(d)));
    }
    let bad = importers(&files, &["crate::kv"]);
    assert!(bad.is_empty(), "the engine's layers import it:\n{}", bad.join("\n"));
    // And every paged-append call outside the ops and the engine would be a second copy of its glue.
    let mut above = Vec::new();
    for d in ["lessons", "model", "drivers", "cli", "ui"] {
        above.extend(rust_files(&src(d)));
    }
    let glue = offenders(
        &above,
        &["PagedAppendInput", "CopyBlocksInput", ".paged_append(", ".copy_blocks("],
    );
    assert!(glue.is_empty(), "K/V written around the engine:\n{}", glue.join("\n"));
    // The lesson drivers store and read K/V of both kinds of cache (pools and the cache quantised in
    // groups) through the engine only.
    let drivers = offenders(
        &rust_files(&src("drivers")),
        &[
            "GroupAppendInput",
            "GroupDecodeInput",
            ".group_append(",
            ".group_decode(",
            ".quant_append(",
            ".quant_decode(",
            ".paged_decode(",
        ],
    );
    assert!(
        drivers.is_empty(),
        "a driver runs cache kernels itself:\n{}",
        drivers.join("\n")
    );
}

/// The library's top-level modules (`src/x.rs` or `src/x/`), each with the others it imports outside
/// test code.
fn top_level_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut g: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for f in rust_files(&src("")) {
        let m = module_of(&f);
        let Some(top) = m.first().cloned() else { continue }; // lib.rs, main.rs
        if top == "cli" {
            continue; // the binary
        }
        let deps = g.entry(top.clone()).or_default();
        for (_, p) in paths_of(&f, true) {
            if p.first().map(String::as_str) == Some("crate")
                && let Some(to) = p.get(1)
                && *to != top
                && (src(&format!("{to}.rs")).exists() || src(to).is_dir())
            {
                deps.insert(to.clone());
            }
        }
    }
    g
}

/// The strongly connected groups of more than one module (import cycles), each sorted.
fn cycles(g: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(x) = stack.pop() {
            for y in g.get(&x).into_iter().flatten() {
                if seen.insert(y.clone()) {
                    stack.push(y.clone());
                }
            }
        }
        seen
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for a in g.keys() {
        let ra = reach(a);
        let group: Vec<String> = g
            .keys()
            .filter(|b| *b == a || (ra.contains(*b) && reach(b).contains(a)))
            .cloned()
            .collect();
        if group.len() > 1 && !out.contains(&group) {
            out.push(group);
        }
    }
    out
}

/// No import cycles among the top-level modules of `src/` (the binary's `cli/` aside, which nothing
/// imports). The lesson-file loader knows no lesson code (the kinds hand it their schemas), the lessons
/// know no UI (their views live in `ui/views/`), and `cache/paged/mod.rs` does not import `cache/prefix.rs`,
/// which imports it.
#[test]
fn no_import_cycles_among_top_level_modules() {
    let g = top_level_graph();
    assert!(g.len() >= 10, "{g:?}");
    assert!(
        g["ui"].contains("lessons") && g["lessons"].contains("compute") && g["lessons"].contains("lesson_file"),
        "the graph sees imports: {g:?}"
    );
    assert_eq!(cycles(&g), Vec::<Vec<String>>::new(), "{g:?}");
    let loader = importers(
        &rust_files(&src("lesson_file")),
        &["egui", "eframe", "crate::ui", "crate::lessons"],
    );
    assert!(
        loader.is_empty(),
        "the loader imports the lessons or the UI:\n{}",
        loader.join("\n")
    );
    let imports = |from: &str, to: &str| {
        paths_of(&src(from), true).iter().any(|(_, p)| {
            let (p, to) = (p.join("::"), format!("crate::{to}"));
            p == to || p.starts_with(&format!("{to}::"))
        })
    };
    assert!(imports("cache/prefix.rs", "cache::paged"));
    assert!(
        !imports("cache/paged/mod.rs", "cache::prefix"),
        "paged.rs imports prefix.rs, which imports it"
    );
}

/// No import cycles among the files of `src/`: an edge goes from a file to each file that defines
/// what it names, through `use` trees, `super::`/`self::`/child-module paths and inline `crate::`
/// paths, with re-exports followed to the defining file (a `pub use` is not itself an edge, and a
/// `macro_rules!` body counts for the files that invoke the macro). Each cycle is printed with the
/// lines that make it.
#[test]
fn no_import_cycles_among_files() {
    let g = file_graph();
    assert!(g.len() > 60, "{}", g.len());
    let has = |from: &str, to: &str| g.get(from).is_some_and(|d| d.contains(to));
    // The graph sees a grouped `use`, a child module, a `super::` path and a re-export followed.
    assert!(
        has("ui/views/paged_cache/mod.rs", "ui/widgets/mod.rs"),
        "{:?}",
        g["ui/views/paged_cache/mod.rs"]
    );
    assert!(has("ui/views/paged_cache/mod.rs", "ui/views/paged_cache/stats.rs"));
    assert!(has("kv/engine/mod.rs", "kv/evict.rs"), "{:?}", g["kv/engine/mod.rs"]);
    assert!(
        has("lessons/paged_cache/mod.rs", "compute/check.rs"),
        "`crate::compute::CheckReport` leads to check.rs: {:?}",
        g["lessons/paged_cache/mod.rs"]
    );
    let mut report = String::new();
    for c in cycles(&g) {
        report += &format!("a cycle of {} files:\n", c.len());
        for f in &c {
            for (line, p, naming) in paths_with_kind(&src(f), true) {
                if matches!(naming, Naming::Reexport | Naming::InMacro) {
                    continue;
                }
                if let Some(to) =
                    defining_file(&p, 0).map(|t| t.strip_prefix(src("")).unwrap().to_string_lossy().into_owned())
                    && to != *f
                    && c.contains(&to)
                {
                    report += &format!("  src/{f}:{line}: {} -> src/{to}\n", p.join("::"));
                }
            }
        }
    }
    assert!(report.is_empty(), "import cycles among files:\n{report}");
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
}

/// `(file:line: text)` of every colour literal outside `#[cfg(test)]` modules of `files`: egui's
/// `Color32::from_rgb(…)`, `from_gray`, `from_rgba_*`, `from_black_alpha`, `from_white_alpha`, named
/// colours (`Color32::RED`, … but not `TRANSPARENT` or `PLACEHOLDER`), and `[r, g, b, 255]` arrays.
fn colour_literals(files: &[PathBuf]) -> Vec<String> {
    let constructors = [
        "Color32::from_rgb(",
        "Color32::from_gray(",
        "Color32::from_rgba",
        "Color32::from_black_alpha(",
        "Color32::from_white_alpha(",
    ];
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            let named = code.match_indices("Color32::").any(|(at, _)| {
                let rest = &code[at + "Color32::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                name.len() > 1 && name != "TRANSPARENT" && name != "PLACEHOLDER"
            });
            let array = code.match_indices('[').any(|(at, _)| {
                let inner = code[at + 1..].split(']').next().unwrap_or("");
                let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
                parts.len() == 4 && parts.iter().all(|p| p.parse::<u8>().is_ok()) && parts[3] == "255"
            });
            if named || array || constructors.iter().any(|c| code.contains(c)) {
                bad.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    bad
}

#[test]
fn views_take_their_colours_from_the_grammar() {
    let mut files = rust_files(&src("ui"));
    files.extend(rust_files(&src("render")));
    assert!(files.len() > 20, "{files:?}");
    let bad = colour_literals(&files);
    assert!(
        bad.is_empty(),
        "colour literals outside src/style.rs (name the grammar's colour instead):\n{}",
        bad.join("\n")
    );
    // The scan finds each kind of literal (so that it cannot pass by finding nothing).
    let dir = std::env::temp_dir().join(format!("kvscope-colours-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, line) in [
        "let c = Color32::from_rgb(1, 2, 3);",
        "let c = egui::Color32::GRAY;",
        "legend_chip(ui, [40, 40, 48, 255], \"free\", size);",
        "let c = Color32::from_black_alpha(9);",
    ]
    .iter()
    .enumerate()
    {
        let f = dir.join(format!("v{i}.rs"));
        std::fs::write(&f, format!("fn f() {{\n    {line}\n}}\n")).unwrap();
        assert_eq!(colour_literals(&[f]).len(), 1, "{line}");
    }
    let ok = dir.join("ok.rs");
    std::fs::write(
        &ok,
        "let c = Color32::TRANSPARENT; let v = [1, 2, 3, 4];\n#[cfg(test)]\nmod t { const W: Color32 = Color32::WHITE; }\n",
    )
    .unwrap();
    assert!(colour_literals(&[ok]).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
