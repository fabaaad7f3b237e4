//! The CUDA backend without a GPU: NVRTC compiles every kernel for sm_80 and sm_90, and a fake
//! driver library makes the backend report "unavailable" with the driver's reason instead of panicking.
//!
//! NVRTC comes from the `nvidia-cuda-nvrtc-cu12` wheel that `scripts/test.sh` installs; it sets
//! `KVSCOPE_REQUIRE_NVRTC=1`, and then a missing NVRTC fails the test instead of skipping it.

use std::path::Path;
use std::process::Command;

use kvscope::compute::Kernel;
use kvscope::compute::cuda::{ENTRY_PARAMS, compile, include_dirs, nvrtc_status, sources};

/// Every `.entry` of a PTX text with its `.param` types in order (`u64`, `u32`, `f32`…).
fn ptx_entries(ptx: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for chunk in ptx.split(".entry ").skip(1) {
        let (name, rest) = chunk.split_once('(').expect("an entry's parameter list");
        let params = rest.split_once(')').expect("the end of the parameter list").0;
        let types = params
            .split(',')
            .filter_map(|p| p.split_whitespace().skip_while(|w| *w != ".param").nth(1))
            .map(|t| t.trim_start_matches('.').to_string())
            .collect();
        out.push((name.trim().to_string(), types));
    }
    out
}

/// The PTX `.param` type NVRTC gives a C argument type of `kernels/shim/entries.def`.
fn ptx_type(c: &str) -> &'static str {
    match c {
        "int" => "u32",
        "float" => "f32",
        "long long" => "u64",
        c if c.ends_with('*') => "u64",
        other => panic!("entries.def type {other} has no PTX type here"),
    }
}

#[test]
fn nvrtc_compiles_every_kernel_for_sm80_and_sm90() {
    if let Err(reason) = nvrtc_status() {
        if std::env::var_os("KVSCOPE_REQUIRE_NVRTC").is_some() {
            panic!("KVSCOPE_REQUIRE_NVRTC is set but {reason}");
        }
        eprintln!(
            "SKIPPED nvrtc_compiles_every_kernel_for_sm80_and_sm90: {reason}. Run ./scripts/test.sh to install the NVRTC wheel."
        );
        return;
    }
    assert!(
        !include_dirs().is_empty(),
        "cuda_fp16.h not found: set KVSCOPE_CUDA_INCLUDE"
    );
    for arch in ["compute_80", "compute_90"] {
        let mut seen = Vec::new();
        for file in sources::files() {
            let ptx = compile(&file, arch).unwrap_or_else(|log| panic!("{log}"));
            let text = ptx.to_src();
            // The `.param` list NVRTC gives each entry is the one `kernels/shim/entries.def` lists, from
            // which both the shim's wrappers and the cudarc launches are generated.
            for (entry, types) in ptx_entries(&text) {
                let (_, list) = ENTRY_PARAMS
                    .iter()
                    .find(|(e, _)| *e == entry)
                    .unwrap_or_else(|| panic!("{}: entry {entry} is not in kernels/shim/entries.def", file.file));
                let want: Vec<&str> = list.iter().map(|(t, _)| ptx_type(t)).collect();
                assert_eq!(
                    types, want,
                    "{} for {arch}: {entry}'s .param list against entries.def",
                    file.file
                );
                seen.push(entry);
            }
            let target = arch.replace("compute_", "sm_");
            assert!(
                text.contains(&format!(".target {target}")),
                "{} for {arch}: wrong target",
                file.file
            );
            for op in Kernel::ALL.into_iter().filter(|op| op.kernel_file() == file.file) {
                for entry in op.cuda_entries() {
                    assert!(
                        text.contains(&format!(".entry {entry}(")),
                        "{} for {arch}: entry {entry} missing from the PTX",
                        file.file
                    );
                }
            }
        }
        for (entry, _) in ENTRY_PARAMS {
            assert!(
                seen.iter().any(|e| e == entry),
                "{entry} of entries.def is in no kernel's PTX for {arch}"
            );
        }
    }
}

/// Build a shared library from C source into `dir` under the sonames cudarc tries.
fn build_fake_libcuda(dir: &Path, c_source: &str) {
    let src = dir.join("fake_cuda.c");
    std::fs::write(&src, c_source).unwrap();
    let lib = dir.join("libcuda.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) is installed");
    assert!(st.success());
    std::fs::copy(&lib, dir.join("libcuda.so")).unwrap();
}

fn check_cuda_with_driver_dir(dir: &Path) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(["check", "--backend", "cuda", "--json"])
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_driver_without_a_device_is_reported_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // cuInit fails with CUDA_ERROR_NO_DEVICE (100), as a driver on a machine without a GPU does.
    build_fake_libcuda(
        dir.path(),
        r#"
        typedef int CUresult;
        CUresult cuInit(unsigned flags) { (void)flags; return 100; }
        CUresult cuGetErrorName(CUresult e, const char **s) { *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN"; return 0; }
        CUresult cuGetErrorString(CUresult e, const char **s) { *s = e == 100 ? "no CUDA-capable device is detected" : "unknown error"; return 0; }
        "#,
    );
    let (ok, out, err) = check_cuda_with_driver_dir(dir.path());
    assert!(!ok, "asking for an unavailable backend by name fails the check");
    assert!(!err.contains("panicked"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let reason = v[0]["reason"].as_str().unwrap();
    assert_eq!(v[0]["available"], false);
    assert!(reason.contains("CUDA_ERROR_NO_DEVICE"), "{reason}");
    assert!(reason.contains("no CUDA-capable device"), "{reason}");
}

#[test]
fn a_driver_missing_functions_is_reported_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    build_fake_libcuda(dir.path(), "int cuSomethingElse(void) { return 0; }\n");
    let (ok, out, err) = check_cuda_with_driver_dir(dir.path());
    assert!(!ok);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.contains("lacks functions"), "{out}");
}

#[test]
fn kernel_sources_name_their_entries_and_launches() {
    for op in Kernel::ALL {
        let f = sources::file_of(op);
        assert!(
            f.source.starts_with("//") || f.source.starts_with("/*"),
            "{} opens with a header comment",
            f.file
        );
        for entry in op.cuda_entries() {
            assert!(sources::entry_line(&f, entry).is_some(), "{entry}");
        }
    }
}

/// `scripts/gpu-check.sh`, the one command for an NVIDIA machine with no cargo, run here where there is
/// no GPU: it finds the binary without cargo, names the NVRTC it loaded (CUDA 12's from the wheel
/// `scripts/test.sh` installs, and CUDA 13's through `KVSCOPE_NVRTC`, loaded under the name
/// `libnvrtc.so`), compiles every kernel file for compute_90 with it, and then stops with the driver's
/// reason and exit code 2, writing its log under `$OUT`.
#[test]
fn gpu_check_runs_up_to_the_gpu_and_says_why_it_stops() {
    let required = std::env::var_os("KVSCOPE_REQUIRE_NVRTC").is_some();
    if let Err(reason) = nvrtc_status() {
        assert!(!required, "KVSCOPE_REQUIRE_NVRTC is set but {reason}");
        eprintln!("SKIPPED gpu_check_runs_up_to_the_gpu_and_says_why_it_stops: {reason}");
        return;
    }
    // (NVRTC to load, the major version it must report): the default search, then CUDA 13's.
    let mut runs: Vec<(Option<std::ffi::OsString>, &str)> = vec![(None, "12")];
    match std::env::var_os("KVSCOPE_NVRTC13") {
        Some(p) => runs.push((Some(p), "13")),
        None => assert!(!required, "KVSCOPE_REQUIRE_NVRTC is set but KVSCOPE_NVRTC13 is not"),
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (nvrtc, major) in runs {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("bash");
        cmd.arg(root.join("scripts/gpu-check.sh"))
            .current_dir(root)
            .env("KVSCOPE_BIN", env!("CARGO_BIN_EXE_kvscope"))
            .env("OUT", out.path())
            .env_remove("KVSCOPE_GPU_CHECK_LOGGED")
            .env_remove("KVSCOPE_NVRTC")
            // The script picks the headers that belong to the NVRTC it loads.
            .env_remove("KVSCOPE_CUDA_INCLUDE");
        if let Some(p) = &nvrtc {
            cmd.env("KVSCOPE_NVRTC", p);
        }
        let o = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(2),
            "NVRTC {major}: exit 2 means no GPU and nothing else failed\n{text}"
        );
        assert!(text.contains("library names tried, in order: libnvrtc.so "), "{text}");
        assert!(
            text.contains(&format!("loaded: NVRTC {major}.")),
            "NVRTC {major}\n{text}"
        );
        let files = sources::files().len();
        assert!(
            text.contains(&format!("== nvrtc sm_90: ok: {files} files")),
            "NVRTC {major}\n{text}"
        );
        let headers = if major == "13" {
            "cu13/include"
        } else {
            "cuda_runtime/include"
        };
        assert!(
            text.contains("cuda_fp16.h from: ") && text.contains(headers),
            "NVRTC {major}: {headers}\n{text}"
        );
        assert!(text.contains("no GPU here: libcuda not found"), "{text}");
        assert!(!text.contains("panicked"), "{text}");
        let log = std::fs::read_to_string(out.path().join("gpu-check.log")).unwrap();
        assert!(log.contains("no GPU here"), "the log under $OUT holds the run");
    }
}
