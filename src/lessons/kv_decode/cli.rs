//! Lesson 4's `kvscope bench sweep` (found through the registry: `LessonKind::benches`). Desktop
//! build only.

use std::path::Path;

use anyhow::{Context, Result};

use crate::command::{Sub, backend, machine_name, utc_date};
use crate::compute::BackendKind;
use crate::compute::bench::{self, SWEEP_REQUESTS, sweep_contexts, sweep_point};
use crate::lessons::kv_decode::sweep::{StoredPoint, StoredSweep};

/// Lesson 4's live sweep (decode kernel GB/s against the read-only roof and a copy, over context lengths), printed.
#[derive(clap::Args)]
pub struct SweepArgs {
    /// Backend to measure.
    #[arg(long, default_value = "cpu")]
    backend: BackendKind,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the sweep, with this machine's GEMM GFLOP/s, the date and the machine, as the
    /// stored measurement lesson 4 draws until a live one arrives (assets/measurements/decode-sweep.json).
    #[arg(long, value_name = "FILE")]
    store: Option<std::path::PathBuf>,
}

/// Exactly what lesson 4's live bandwidth plot measures, printed.
fn run_sweep(a: SweepArgs, _lessons: Option<&Path>) -> Result<()> {
    let SweepArgs {
        backend: kind,
        json,
        store,
    } = a;
    let b = backend(kind)?;
    let mut rows = Vec::new();
    let mut stored = Vec::new();
    let mut host = true;
    for c in sweep_contexts(kind) {
        let p = sweep_point(b.as_ref(), c).map_err(|e| anyhow::anyhow!(e))?;
        host = p.device == crate::compute::Device::Host;
        stored.push(StoredPoint {
            context: p.context,
            kernel: p.kernel,
            read: p.read,
            copy: p.copy,
        });
        if !json {
            outln!(
                "{} req × ctx {:5}: decode kernel {:7.2} GB/s   read-only stream {:7.2} GB/s   copy (read+written) {:7.2} GB/s   decode/read {:.2}  ({})",
                SWEEP_REQUESTS,
                p.context,
                p.kernel,
                p.read,
                p.copy,
                p.kernel / p.read,
                kind.name()
            );
        }
        rows.push(
            serde_json::json!({"context": p.context, "kernel_gbs": p.kernel, "read_gbs": p.read, "copy_gbs": p.copy}),
        );
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    }
    if let Some(path) = store {
        let s = StoredSweep {
            machine: machine_name(b.as_ref(), host),
            date: utc_date(),
            backend: kind.name().to_string(),
            command: format!(
                "kvscope bench sweep --backend {} --store {}",
                kind.name(),
                path.display()
            ),
            gemm_gflops: host.then(|| bench::best_gemm_gflops(1024).0),
            points: stored,
        };
        std::fs::write(&path, serde_json::to_string_pretty(&s)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("stored in {}", path.display());
    }
    Ok(())
}

/// `kvscope bench sweep`.
pub static BENCH_SWEEP: Sub<SweepArgs> = Sub {
    name: "sweep",
    about: "Lesson 4's live sweep (decode kernel GB/s against the read-only roof and a copy, over context lengths), printed.",
    run: run_sweep,
};
