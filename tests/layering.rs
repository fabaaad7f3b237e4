//! The layering stays true: `math`, `cache`, `compute` and `model` import no UI crate and nothing above
//! them;
//! a lesson's computation (every file of `src/lessons/` but `ui.rs` and `view*.rs`) imports no egui;
//! the UI imports neither `export` nor `bench` (that work belongs to the lessons and the CLI).

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

#[test]
fn math_cache_and_compute_import_nothing_above_them() {
    let mut files = Vec::new();
    for d in ["math", "cache", "compute", "model"] {
        files.extend(rust_files(&src(d)));
    }
    assert!(files.len() > 10);
    let bad = offenders(
        &files,
        &[
            "egui",
            "eframe",
            "crate::ui",
            "crate::render",
            "crate::lesson",
            "crate::export",
            "crate::bench",
        ],
    );
    assert!(bad.is_empty(), "lower layers import upper ones:\n{}", bad.join("\n"));
}

#[test]
fn lesson_computation_imports_no_egui() {
    let files: Vec<PathBuf> = rust_files(&src("lessons"))
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name != "ui.rs" && !name.starts_with("view")
        })
        .collect();
    assert!(files.len() >= 7, "{files:?}");
    let bad = offenders(&files, &["egui", "eframe", "crate::ui"]);
    assert!(bad.is_empty(), "lesson computation imports the UI:\n{}", bad.join("\n"));
}

#[test]
fn the_ui_leaves_exports_and_benchmarks_to_the_layers_below() {
    let bad = offenders(&rust_files(&src("ui")), &["crate::export", "crate::bench"]);
    assert!(
        bad.is_empty(),
        "the UI does work that belongs below it:\n{}",
        bad.join("\n")
    );
}

/// `unsafe` lives only in the CUDA code (`compute::cuda` and the CUDA side of each op, its
/// `ops/<op>/cuda.rs` and `ops/<op>/sim.rs`: FFI into the shim and cudarc launches) and `simd`
/// (intrinsics and the `gemm` crate's entry point), and every `unsafe` block there has a `// SAFETY:`
/// comment on a line just above it (clippy checks the blocks; this checks the places).
#[test]
fn unsafe_lives_only_in_the_cuda_module_and_simd() {
    let files = rust_files(&src(""));
    let rel = |p: &Path| p.strip_prefix(src("")).unwrap().to_string_lossy().replace('\\', "/");
    let cuda_side = |r: &str| {
        r.starts_with("compute/ops/")
            && (r.ends_with("/cuda.rs") || r.ends_with("/sim.rs"))
            && r.matches('/').count() == 3
    };
    let allowed = |p: &Path| {
        let r = rel(p);
        r.starts_with("compute/cuda/") || r.starts_with("simd/") || cuda_side(&r)
    };
    let outside: Vec<PathBuf> = files.iter().filter(|p| !allowed(p)).cloned().collect();
    assert!(outside.len() > 20);
    assert!(files.iter().filter(|p| cuda_side(&rel(p))).count() >= 14);
    // The grants outside them: `#[allow(unsafe_code)]` on `pub mod cuda;` in compute/mod.rs, and on the
    // `cuda` and `sim` modules of each op's mod.rs (the line after the grant declares one of them).
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
                    || (l.contains("compute/ops/")
                        && (declares("pub(crate) mod cuda;") || declares("pub(crate) mod sim;")))))
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
    let bad = offenders(&files, &["crate::kv"]);
    assert!(bad.is_empty(), "the engine's layers import it:\n{}", bad.join("\n"));
    // And every paged-append call outside the ops and the engine would be a second copy of its glue.
    let mut above = Vec::new();
    for d in ["lessons", "model", "cli", "ui"] {
        above.extend(rust_files(&src(d)));
    }
    above.push(src("export.rs"));
    let glue = offenders(
        &above,
        &["PagedAppendInput", "CopyBlocksInput", ".paged_append(", ".copy_blocks("],
    );
    assert!(glue.is_empty(), "K/V written around the engine:\n{}", glue.join("\n"));
}
