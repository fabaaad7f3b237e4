//! Every CUDA kernel is covered where it can be checked without a GPU: each `extern "C" __global__`
//! entry point of `kernels/*.cu` is listed in the shim's entry list (`kernels/shim/entries.def`, from
//! which the wrappers of `kernels/shim/sim.cpp` are expanded), its file is included by `sim.cpp` in the
//! list's namespace, and it is run by the kernel selftest (`kernels/shim/selftest.cpp`), which `scripts/sanitize.sh` runs under ThreadSanitizer and
//! AddressSanitizer + UBSan in CI; every file is compiled by NVRTC (`compute::cuda::sources::files()`). A new
//! entry point that the selftest does not run fails here instead of leaving a silent gap.

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// `(file, entry)` of every `extern "C" __global__ void entry(` in `kernels/*.cu`.
fn entries() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        let src = std::fs::read_to_string(&f).unwrap();
        let flat = src.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in flat.split("extern \"C\" __global__ void ").skip(1) {
            // Skip a `__launch_bounds__(…)` qualifier before the name.
            let part = match part.strip_prefix("__launch_bounds__") {
                Some(rest) => rest.split_once(") ").map_or(rest, |(_, after)| after),
                None => part,
            };
            let entry = part.split('(').next().unwrap().trim().to_string();
            out.push((name.clone(), entry));
        }
    }
    out
}

#[test]
fn every_kernel_entry_runs_on_the_shim_under_the_sanitizers() {
    let (sim, selftest) = (read("kernels/shim/sim.cpp"), read("kernels/shim/selftest.cpp"));
    let list = read("kernels/shim/entries.def");
    let all = entries();
    assert!(all.len() >= 9, "{all:?}");
    let mut missing = Vec::new();
    for (file, entry) in &all {
        let wrapper = format!("kvs_sim_{entry}(");
        // `KVS_ENTRY(<namespace>, <entry>, …)`: the namespace sim.cpp includes the file in.
        let listed = list.lines().find_map(|l| {
            let rest = l.trim().strip_prefix("KVS_ENTRY(")?;
            let mut parts = rest.splitn(3, ',').map(str::trim);
            let ns = parts.next()?;
            (parts.next()? == entry).then(|| ns.to_string())
        });
        match listed {
            None => missing.push(format!("kernels/shim/entries.def does not list {entry} ({file})")),
            Some(ns) => {
                let flat = sim.split_whitespace().collect::<Vec<_>>().join(" ");
                if !flat.contains(&format!("namespace {ns} {{ #include \"../{file}\" }}")) {
                    missing.push(format!(
                        "kernels/shim/sim.cpp does not include {file} in namespace {ns}"
                    ));
                }
            }
        }
        if !selftest.contains(&wrapper) {
            missing.push(format!("kernels/shim/selftest.cpp never runs {entry} ({file})"));
        }
    }
    // The selftest also fails by itself when a listed entry point never ran: main checks every line of
    // entries.def against the wrappers' call counts (so a test case that main forgets to call fails).
    if !selftest.contains("kvs_sim_launches(#entry) == 0") || !selftest.contains("#include \"entries.def\"") {
        missing.push("kernels/shim/selftest.cpp no longer checks that every entry of entries.def ran".into());
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // NVRTC compiles every file (tests/cuda_backend.rs compiles them for sm_80 and sm_90).
    let files: Vec<&str> = kvscope::compute::cuda::sources::files()
        .iter()
        .map(|f| f.file)
        .collect();
    for (file, _) in &all {
        assert!(
            files.contains(&file.as_str()),
            "{file} is not in compute::cuda::sources::files()"
        );
    }
}

/// The mask predicate every CUDA attention kernel shares (`attn_visible` in kernels/common.cuh), run as
/// a table on the shim, equals `math::Mask::visible` for every mask kind (windows of 1, wider than
/// the sequence, with and without sinks, more sinks than keys).
#[test]
fn the_kernels_mask_predicate_is_math_mask() {
    use kvscope::compute::cuda::SimBackend;
    use kvscope::math::Mask;
    let (rows, cols) = (37, 41);
    let mut masks = vec![Mask::None, Mask::Causal];
    for window in [1, 2, 3, 7, 40, 100] {
        for sinks in [0, 1, 4, 50] {
            masks.push(Mask::Window { window, sinks });
        }
    }
    for mask in masks {
        let got = SimBackend.mask_table(mask, rows, cols).unwrap();
        for i in 0..rows {
            for j in 0..cols {
                let want = i32::from(mask.visible(i, j));
                assert_eq!(got[i * cols + j], want, "{mask} at query {i}, key {j}");
            }
        }
    }
}
