//! `kvscope check`: every op of every backend against the f64 reference.

use anyhow::Result;
use kvscope::compute::{self, BackendKind};

use super::BackendChoice;

pub fn run(choice: BackendChoice, json: bool, seed: u64) -> Result<bool> {
    let kinds: Vec<BackendKind> = match choice {
        BackendChoice::All => BackendKind::ALL.to_vec(),
        BackendChoice::One(kind) => vec![kind],
    };
    let mut ok = true;
    let mut json_out = Vec::new();
    for kind in kinds {
        let st = compute::probe(kind);
        match st.backend {
            Err(reason) => {
                // Asking for one backend by name and not getting it is a failure; `all` lists it.
                if choice != BackendChoice::All {
                    ok = false;
                }
                if json {
                    json_out.push(serde_json::json!({"backend": kind.name(), "available": false, "reason": reason}));
                } else {
                    outln!("== {}: unavailable: {reason}\n", kind.name());
                }
            }
            Ok(b) => {
                let reports = compute::suite::run(b.as_ref(), seed);
                let failed = reports.iter().filter(|r| !r.passed()).count();
                ok &= failed == 0;
                if json {
                    json_out.push(serde_json::json!({"backend": kind.name(), "available": true, "device": b.device(), "failed": failed, "reports": reports}));
                } else {
                    outln!("== {} ({})", kind.name(), b.device());
                    for r in &reports {
                        outln!("{r}");
                    }
                    outln!("== {}: {} checks, {} failed\n", kind.name(), reports.len(), failed);
                }
            }
        }
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&json_out)?);
    }
    Ok(ok)
}
