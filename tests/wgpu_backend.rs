//! The wgpu backend (the WGSL twins of the CUDA kernels) on the adapter found here: lavapipe (Vulkan)
//! in CI. `scripts/test.sh` sets `KVSCOPE_REQUIRE_BACKENDS=vulkan,gl`, and then a missing adapter is a
//! failure, not a skip.
//!
//! - The full cross-backend suite against the f64 reference (odd shapes, every mask, block size 1 and
//!   larger than the context, empty contexts, several partitions, GQA and MQA), on both f16 paths.
//! - Each WGSL kernel against its CUDA twin on identical inputs (the CUDA source on the CPU shim), directly.
//! - Every lesson computed on it, with every check passing.

use kvscope::compute::{self, Backend, BackendKind, Tolerance, check, suite};
use kvscope::math::{AttnShape, AttnWeights, Mask, Rng, project};

mod common;
use common::wgpu;

/// Both f16 paths: u32 pairs (every adapter) and native `array<f16>` (adapters with shader-f16; lavapipe
/// has it).
#[test]
fn wgpu_backend_passes_the_full_suite_on_both_f16_paths() {
    use kvscope::compute::wgpu::{F16Path, WgpuBackend};
    let Some(default) = wgpu() else { return };
    eprintln!("wgpu backend on {}", default.device());
    for path in [F16Path::Packed, F16Path::Native] {
        let b = match WgpuBackend::open(Some(path)) {
            Ok(b) => b,
            Err(e) if path == F16Path::Native => {
                eprintln!("skipped the native f16 path: {e}");
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(b.f16_path(), path);
        let mut created = Vec::new();
        for seed in [3, 11] {
            let reports = suite::run(&b, seed);
            let failed: Vec<String> = reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()).collect();
            assert!(failed.is_empty(), "{path:?}: {}", failed.join("\n"));
            assert!(reports.len() > 40);
            let st = b.pool_stats();
            eprintln!(
                "{path:?} seed {seed}: {} buffers created, {} reused",
                st.created, st.reused
            );
            created.push(st.created);
        }
        // The second pass has the same shapes: every buffer it needs is already in the pool (and the
        // results above still pass, so reused buffers hold no stale data).
        assert_eq!(
            created[0], created[1],
            "{path:?}: the second suite pass created buffers"
        );
    }
}

/// WGSL and CUDA (on the shim) on identical inputs, compared directly with each other.
#[test]
fn wgsl_kernels_agree_with_their_cuda_twins() {
    let Some(w) = wgpu() else { return };
    let sim = compute::probe(BackendKind::CudaSim).backend.unwrap();
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    for (t, d, h, kvh, mask) in [
        (1, 4, 1, 1, Mask::Causal),
        (17, 24, 4, 2, Mask::Window { window: 5, sinks: 2 }),
        (40, 48, 6, 1, Mask::None),
    ] {
        let shape = AttnShape {
            seq: t,
            d_model: d,
            n_heads: h,
            n_kv_heads: kvh,
        };
        let qkv = project(&AttnWeights::random(shape, 9));
        let inp = compute::AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let (a, b) = (w.attention(&inp).unwrap(), sim.attention(&inp).unwrap());
        for (name, x, y) in [("probs", &a.probs, &b.probs), ("out", &a.out, &b.out)] {
            let r = check(
                name,
                x.shape(),
                x.as_slice().unwrap(),
                &f64s(y.as_slice().unwrap()),
                Tolerance::F32,
            );
            assert!(r.passed(), "WGSL vs CUDA {mask}: {r}");
        }
        let (a, b) = (w.attention_fused(&inp).unwrap(), sim.attention_fused(&inp).unwrap());
        let r = check(
            "fused",
            a.shape(),
            a.as_slice().unwrap(),
            &f64s(b.as_slice().unwrap()),
            Tolerance::F32,
        );
        assert!(r.passed(), "WGSL vs CUDA fused {mask}: {r}");
    }
    for (bs, heads, kvh, hd, lens) in [
        (1, 4, 4, 3, vec![7, 0]),
        (16, 8, 2, 64, vec![300, 5]),
        (64, 6, 1, 8, vec![20]),
    ] {
        let mut rng = Rng::new(5);
        let blocks: usize = lens.iter().map(|l: &usize| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
        let shape = kvscope::cache::PagedShape {
            num_blocks: blocks,
            block_size: bs,
            kv_heads: kvh,
            head_dim: hd,
            dtype: kvscope::cache::KvDtype::F16,
        };
        let cache = suite::scattered_cache(shape, &lens, &mut rng);
        let reqs: Vec<u32> = (0..lens.len() as u32).collect();
        let dt = compute::DecodeTables::new(&cache, &reqs);
        let q = rng.normal_vec(lens.len() * heads * hd, 1.0);
        let inp = dt.input(&cache, &q, heads);
        let (a, b) = (w.paged_decode(&inp).unwrap(), sim.paged_decode(&inp).unwrap());
        let r = check("paged_decode", &[a.len()], &a, &f64s(&b), Tolerance::F32);
        assert!(r.passed(), "WGSL vs CUDA paged decode bs{bs}: {r}");
    }
}

/// Every op of the op table on every pair of backends that can run it here (cpu, cuda-sim, wgpu, and
/// cuda where a GPU is present), on identical inputs (the op's probe), compared with each other: appends
/// and copies bit for bit, arithmetic within the checker's f32 tolerance. The list of ops is the table's,
/// so a new op is compared without editing this test.
#[test]
fn every_op_agrees_on_every_pair_of_backends() {
    let Some(w) = wgpu() else { return };
    let mut backends: Vec<std::sync::Arc<dyn Backend>> = vec![
        compute::probe(BackendKind::Cpu).backend.unwrap(),
        compute::probe(BackendKind::CudaSim).backend.unwrap(),
        w,
    ];
    if let Ok(cuda) = compute::probe(BackendKind::Cuda).backend {
        backends.push(cuda);
    }
    let mut compared = 0;
    for op in compute::Op::ALL {
        let outs: Vec<Vec<f64>> = backends
            .iter()
            .map(|b| {
                let (out, launches) = compute::launch::capture(|| compute::ops::probe(op, b.as_ref(), 7));
                // Each backend reports what it launched: the wgpu backend its WGSL dispatches.
                if b.kind() == BackendKind::Wgpu {
                    for entry in op.entries() {
                        assert!(
                            launches
                                .iter()
                                .any(|l| l.dims.entry == entry && l.api == compute::launch::Api::Wgsl && l.ran),
                            "wgpu reported no dispatch of {entry}"
                        );
                    }
                }
                out.unwrap_or_else(|e| panic!("{op:?} on {}: {e}", b.device()))
            })
            .collect();
        for i in 0..backends.len() {
            for j in i + 1..backends.len() {
                let r = check(
                    op.name(),
                    &[outs[i].len()],
                    &outs[i],
                    &outs[j],
                    compute::ops::twin_tolerance(op),
                );
                let pair = format!("{} vs {}", backends[i].kind().name(), backends[j].kind().name());
                assert!(r.passed(), "{pair}: {r}");
                assert!(r.count > 0, "{pair}: {} compared nothing", op.name());
                compared += 1;
            }
        }
    }
    assert!(compared >= 3 * compute::Op::ALL.len());
}

/// The mask predicate every WGSL attention kernel shares (`kvs_visible` in kernels/common.wgsl), run as a
/// table, equals `math::Mask::visible` for every mask kind.
#[test]
fn the_wgsl_mask_predicate_is_math_mask() {
    use kvscope::compute::wgpu::WgpuBackend;
    if wgpu().is_none() {
        return;
    }
    let b = WgpuBackend::open(None).unwrap();
    let (rows, cols) = (37, 41);
    let mut masks = vec![Mask::None, Mask::Causal];
    for window in [1, 2, 3, 7, 40, 100] {
        for sinks in [0, 1, 4, 50] {
            masks.push(Mask::Window { window, sinks });
        }
    }
    for mask in masks {
        let got = b.mask_table(mask, rows, cols).unwrap();
        for i in 0..rows {
            for j in 0..cols {
                assert_eq!(
                    got[i * cols + j],
                    i32::from(mask.visible(i, j)),
                    "{mask} at query {i}, key {j}"
                );
            }
        }
    }
}

/// Every lesson at its defaults on the wgpu backend: every kernel result agrees with the reference.
#[test]
fn every_lesson_runs_on_the_wgpu_backend() {
    let Some(b) = wgpu() else { return };
    for l in &kvscope::lessons::load_embedded().unwrap() {
        let mut params = kvscope::lessons::Params::new();
        kvscope::lessons::normalize(l, &mut params);
        let out = kvscope::lessons::compute(l, &params, b.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", l.id()));
        let reports = kvscope::ui::worker::verify_output(out.as_ref());
        assert!(!reports.is_empty(), "{}", l.id());
        for r in reports {
            assert!(r.passed(), "{}: {r}", l.id());
        }
    }
}

/// `bench --backend wgpu` on a small problem: P1 and P3 give finite positive figures, timed with
/// timestamp queries where the adapter has them (lavapipe does), and the output says which clock.
#[test]
fn wgpu_benchmarks_measure_on_the_device() {
    let Some(b) = wgpu() else { return };
    let clock = b.clock();
    if b.device().contains("llvmpipe") && std::env::var("KVSCOPE_WGPU_CLOCK").as_deref() != Ok("wall") {
        assert!(clock.starts_with("timestamp queries"), "{clock}");
    }
    let p1 = kvscope::compute::bench::p1(b.as_ref(), 32, false).unwrap();
    let p3 = kvscope::compute::bench::p3(b.as_ref(), 1, 64, 16).unwrap();
    for l in [&p1, &p3] {
        eprintln!(
            "{} {:.3} ms {:.3} {} (baseline {:.3}): {}",
            l.id, l.ms, l.value, l.unit, l.baseline, l.what
        );
        assert!(l.ms > 0.0 && l.ms.is_finite(), "{}: {} ms", l.id, l.ms);
        assert!(l.value > 0.0 && l.value.is_finite(), "{}", l.id);
        assert!(l.what.contains(&clock), "{}", l.what);
    }
    assert!(
        p3.baseline > 0.0 && p3.baseline.is_finite(),
        "the read-only WGSL stream was timed"
    );
}
