//! The two tables kvscope grows by: the lesson registry and the backend table. Every shipped lesson has
//! a registered kind, every kind draws a kernel panel, every backend row is consistent, and an op a
//! backend has not implemented is a clear error that lessons pass on instead of panicking.

use kvscope::compute::{
    BACKENDS, Backend, BackendError, BackendKind, DecodeTables, Kernel, Op, kernel_source, ops, suite,
};
use kvscope::lessons::{self, REGISTRY};
use kvscope::math::Rng;

#[test]
fn every_lesson_file_has_a_registered_kind_and_every_kind_a_kernel_view() {
    let mut names: Vec<&str> = REGISTRY.iter().map(|k| k.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), REGISTRY.len(), "kind names are unique");
    for k in REGISTRY {
        assert!(k.view_names().contains(&"kernel"), "{} has a kernel view", k.name());
        assert!(!k.ops().is_empty(), "{} runs ops", k.name());
    }
    for l in kvscope::lessons::load_embedded().unwrap() {
        assert!(REGISTRY.iter().any(|k| std::ptr::addr_eq(*k, l.kind)), "{}", l.id());
    }
}

#[test]
fn the_backend_table_is_consistent() {
    assert_eq!(BACKENDS.len(), BackendKind::ALL.len());
    for (row, kind) in BACKENDS.iter().zip(BackendKind::ALL) {
        assert_eq!(row.kind, kind);
        assert_eq!(kind.info().kind, kind);
    }
    // Every kernel has a source a student can read, whatever backend is active; the paths exist. A CUDA
    // file that includes kernels/common.cuh, and every WGSL file (common.wgsl goes in front of each), is
    // shown with the common file after it, so the helpers it calls are on the page too; its own lines
    // keep their numbers.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let common = std::fs::read_to_string(root.join("kernels/common.cuh")).unwrap();
    let common_wgsl = std::fs::read_to_string(root.join("kernels/common.wgsl")).unwrap();
    let kv_f16 = std::fs::read_to_string(root.join("kernels/kv/f16.cuh")).unwrap();
    for kind in BackendKind::ALL {
        for op in Kernel::ALL {
            let src = kernel_source(kind, op).unwrap_or_else(|| panic!("{op:?} on {}", kind.name()));
            let on_disk = std::fs::read_to_string(root.join(src.path)).unwrap();
            let mut shown = src
                .source
                .strip_prefix(on_disk.as_str())
                .unwrap_or_else(|| panic!("{}", src.path));
            // A pool kernel shows the f16 pools' read and write functions first (kernels/kv/f16.cuh).
            if on_disk.contains("#include \"kv_dtype.cuh\"") {
                let file = src.path.trim_start_matches("kernels/");
                let section = format!("\n// ---- kernels/kv/f16.cuh (included at the top of {file}) ----\n{kv_f16}");
                shown = shown
                    .strip_prefix(section.as_str())
                    .unwrap_or_else(|| panic!("{}: the f16 header after the file", src.path));
            }
            if on_disk.contains("#include \"common.cuh\"") {
                assert!(
                    shown.contains("// ---- kernels/common.cuh") && shown.ends_with(&common),
                    "{}",
                    src.path
                );
            } else if src.path.ends_with(".wgsl") {
                assert!(
                    shown.contains("// ---- kernels/common.wgsl") && shown.ends_with(&common_wgsl),
                    "{}",
                    src.path
                );
            } else {
                assert!(shown.is_empty(), "{}", src.path);
            }
            assert!(src.source.lines().nth(src.line - 1).unwrap().contains(src.entry));
        }
    }
}

/// A backend that implements no op yet.
struct Bare;

impl Backend for Bare {
    fn kind(&self) -> BackendKind {
        BackendKind::CudaSim
    }
    fn device(&self) -> String {
        "nothing yet".into()
    }
}

fn is_not_implemented(r: Result<impl Sized, BackendError>, op: &str) {
    match r {
        Err(e @ BackendError::NotImplemented { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("`{op}` is not implemented on the cuda-sim backend yet")
            )
        }
        Err(e) => panic!("{op}: {e}"),
        Ok(_) => panic!("{op}: ran"),
    }
}

#[test]
fn an_unimplemented_op_is_a_clear_error_and_lessons_pass_it_on() {
    let b = Bare;
    // Every op of the table, through its probe (the op table's list: a new row is probed here too).
    for op in Op::ALL {
        is_not_implemented(ops::probe(op, &b, 0), op.name());
    }
    let p = kvscope::cache::PagedShape {
        num_blocks: 2,
        block_size: 2,
        kv_heads: 1,
        head_dim: 2,
        dtype: kvscope::cache::KvDtype::F16,
    };
    let cache = suite::scattered_cache(p, &[3], &mut Rng::new(1));
    let dt = DecodeTables::new(&cache, &[0]);
    let q = vec![0.5; 2];
    // Validation still comes first: a bad input is InvalidInput, not NotImplemented.
    assert!(matches!(
        b.paged_decode(&dt.input(&cache, &q, 3)),
        Err(BackendError::InvalidInput(_))
    ));
    // Every lesson turns it into its error message (shown in place of the views), never a panic.
    for l in kvscope::lessons::load_embedded().unwrap() {
        let mut params = lessons::Params::new();
        lessons::normalize(&l, &mut params);
        let e = lessons::compute(&l, &params, &b)
            .err()
            .unwrap_or_else(|| panic!("{} ran", l.id()));
        assert!(
            e.contains("is not implemented on the cuda-sim backend"),
            "{}: {e}",
            l.id()
        );
    }
}

/// The op table and its kernels agree: every kernel belongs to the op that lists it, each op has its
/// folder (with a file per backend) and its kernel files, and every entry point is defined in both
/// twins.
#[test]
fn every_op_of_the_table_has_its_folder_kernels_and_twins() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for op in Op::ALL {
        assert!(!op.kernels().is_empty(), "{op:?} lists no kernel");
        for k in op.kernels() {
            assert_eq!(k.op(), op);
        }
        let dir = root.join("src/compute/ops").join(op.folder());
        for f in ["mod.rs", "launch.rs", "cpu.rs", "cuda.rs", "wgpu.rs"] {
            assert!(dir.join(f).exists(), "{} has no {f}", dir.display());
        }
        // Its f64 reference: its own `reference.rs`, or its `mod.rs` names the file it shares.
        if !dir.join("reference.rs").exists() {
            let m = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
            let named: Vec<&str> = m
                .lines()
                .filter(|l| l.starts_with("//!"))
                .flat_map(|l| l.split('`'))
                .filter(|w| w.ends_with(".rs"))
                .collect();
            assert!(
                m.contains("reference is") && !named.is_empty(),
                "{} has no reference.rs and its mod.rs names none it shares",
                dir.display()
            );
            for f in named {
                let shared = [root.join("src/compute").join(f), root.join(f)];
                assert!(shared.iter().any(|p| p.exists()), "{}: `{f}` is no file", dir.display());
            }
        }
        // The op's CUDA launches are written once for both CUDA backends (the GPU and the shim).
        assert!(
            !dir.join("sim.rs").exists(),
            "{}: sim.rs is cuda.rs's job",
            dir.display()
        );
        for ext in ["cu", "wgsl"] {
            let path = root.join("kernels").join(format!("{}.{ext}", op.file_stem()));
            let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for entry in op.entries() {
                let def = if ext == "cu" {
                    format!("{entry}(")
                } else {
                    format!("fn {entry}(")
                };
                assert!(src.contains(&def), "{} does not define {entry}", path.display());
            }
        }
    }
    let listed: usize = Op::ALL.iter().map(|op| op.kernels().len()).sum();
    assert_eq!(listed, Kernel::ALL.len());
}

/// No op restates a kernel's argument list: its `cuda.rs` fills the typed struct that build.rs
/// generates from `kernels/shim/entries.def` (fields by name) and calls the generated launch, which
/// pushes the arguments to cudarc, or passes them to the shim's wrapper, in the list's one order.
#[test]
fn no_op_restates_a_kernel_argument_list() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> = Op::ALL
        .iter()
        .map(|op| root.join("src/compute/ops").join(op.folder()).join("cuda.rs"))
        .collect();
    for f in ["device.rs", "backend.rs", "sim.rs"] {
        files.push(root.join("src/compute/cuda").join(f));
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for positional in [".arg(", "launch_builder", "kvs_sim_", "ffi::"] {
            assert!(
                !text.contains(positional),
                "{} restates an argument list by position ({positional}); fill the entry's struct from \
                 compute::cuda::entries instead",
                f.display()
            );
        }
    }
    for op in Op::ALL {
        let text = std::fs::read_to_string(root.join("src/compute/ops").join(op.folder()).join("cuda.rs")).unwrap();
        assert!(
            text.contains("cuda::entries::"),
            "{op:?}: cuda.rs does not launch through the generated entries"
        );
    }
}

/// Backends report the launches they made: every entry point of every op, from the op's probe, as a
/// CUDA launch that ran on the shim, and on the CPU (which runs Rust) as the CUDA launch it stands in
/// for. The kernel panel shows these, not what a lesson assumes ran.
#[test]
fn backends_report_every_launch_they_make() {
    use kvscope::compute::launch::{Api, capture};
    for kind in [BackendKind::Cpu, BackendKind::CudaSim] {
        let b = kvscope::compute::probe(kind).backend.unwrap();
        for op in Op::ALL {
            let (r, launches) = capture(|| ops::probe(op, b.as_ref(), 3));
            r.unwrap_or_else(|e| panic!("{op:?} on {}: {e}", kind.name()));
            for entry in op.entries() {
                let l = launches
                    .iter()
                    .find(|l| l.dims.entry == entry)
                    .unwrap_or_else(|| panic!("{} reported no launch of {entry}", kind.name()));
                assert_eq!(l.api, Api::Cuda);
                assert_eq!(l.ran, kind != BackendKind::Cpu, "{entry} on {}", kind.name());
                assert!(l.dims.threads() > 0);
            }
            assert!(
                launches.iter().all(|l| op.entries().contains(&l.dims.entry)),
                "{op:?}: {launches:?}"
            );
        }
    }
}
