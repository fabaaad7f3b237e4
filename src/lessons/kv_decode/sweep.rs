//! Lesson 4's live bandwidth sweep: [`crate::compute::bench::sweep_point`] at every context length of
//! [`crate::compute::bench::sweep_contexts`], measured on a background thread so the UI keeps drawing while
//! points arrive one by one. It is the lesson's own UI state; it never runs in tests or headless renders.

use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

/// Requests per sweep point (the views say how many decoded together).
pub use crate::compute::bench::SWEEP_REQUESTS;
/// One measured point (the view draws them).
pub use crate::compute::bench::SweepPoint;
use crate::compute::bench::{best_gemm_gflops, sweep_contexts, sweep_point};
use crate::compute::{Backend, BackendKind, Device};

/// What the measuring thread sends.
enum Measured {
    /// One context length.
    Point(SweepPoint),
    /// GEMM GFLOP/s and read GB/s, for the balance point.
    Balance(f64, f64),
}

/// A sweep being measured: the points one at a time, then the balance point.
struct Run {
    backend: Arc<dyn Backend>,
    contexts: Vec<usize>,
    next: usize,
    last: Option<SweepPoint>,
    tx: Sender<Result<Measured, String>>,
}

impl Run {
    /// Measure the next point (after the last one, the balance point); whether there is more to do.
    fn step(&mut self) -> bool {
        if let Some(&c) = self.contexts.get(self.next) {
            self.next += 1;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sweep_point(self.backend.as_ref(), c)))
                .unwrap_or_else(|_| Err("the measurement panicked".into()));
            self.last = r.as_ref().ok().copied();
            let stop = r.is_err();
            return self.tx.send(r.map(Measured::Point)).is_ok() && !stop;
        }
        if let Some(p) = self.last.take().filter(|p| p.device == Device::Host) {
            let _ = self.tx.send(Ok(Measured::Balance(best_gemm_gflops(1024).0, p.read)));
        }
        false
    }
}

/// The sweep's state.
#[derive(Default)]
pub struct Sweep {
    rx: Option<Receiver<Result<Measured, String>>>,
    /// The measurement the frames advance (the web build).
    #[cfg(target_arch = "wasm32")]
    web_run: Option<Run>,
    /// Points so far.
    pub points: Vec<SweepPoint>,
    /// Which backend they were measured on.
    pub backend: Option<BackendKind>,
    /// Why it stopped, if it failed.
    pub error: Option<String>,
    /// Whether it started automatically once already.
    pub auto_started: bool,
    /// The machine's balance point, measured after the points on a host backend: GEMM GFLOP/s on the
    /// same threads and the read-only GB/s of the longest context (FLOP/byte = their ratio).
    pub balance: Option<(f64, f64)>,
}

impl Sweep {
    /// Start measuring on a background thread (in the browser, which has no threads: one point per
    /// frame, in [`Sweep::poll`]); `wake` is called after every point (request a repaint).
    pub fn start(&mut self, backend: Arc<dyn Backend>, wake: impl Fn() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rx = Some(rx);
        self.points.clear();
        self.error = None;
        self.balance = None;
        self.backend = Some(backend.kind());
        let mut run = Run {
            contexts: sweep_contexts(backend.kind()),
            backend,
            next: 0,
            last: None,
            tx,
        };
        #[cfg(not(target_arch = "wasm32"))]
        std::thread::spawn(move || {
            while run.step() {
                wake();
            }
            wake();
        });
        #[cfg(target_arch = "wasm32")]
        {
            let _ = run.step();
            wake();
            self.web_run = Some(run);
        }
    }

    /// Take arrived points; whether it is still running.
    pub fn poll(&mut self) -> bool {
        #[cfg(target_arch = "wasm32")]
        if let Some(run) = &mut self.web_run
            && !run.step()
        {
            self.web_run = None;
        }
        let Some(rx) = &self.rx else { return false };
        loop {
            match rx.try_recv() {
                Ok(Ok(Measured::Point(p))) => self.points.push(p),
                Ok(Ok(Measured::Balance(flops, read))) => self.balance = Some((flops, read)),
                Ok(Err(e)) => {
                    self.error = Some(e);
                    self.rx = None;
                    return false;
                }
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => {
                    self.rx = None;
                    return false;
                }
            }
        }
    }
}

/// A sweep measured earlier with `kvscope bench sweep --store`, shipped with the app
/// ([`STORED_PATH`], embedded) and drawn, labelled as stored, until a live measurement arrives: in tests
/// and headless renders, which never measure, and while the first live point is still running.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoredSweep {
    /// The machine it ran on (CPU model and threads, or the GPU's name).
    pub machine: String,
    /// When (UTC date, `YYYY-MM-DD`).
    pub date: String,
    /// The backend's name (`cpu`, `cuda`, …).
    pub backend: String,
    /// The command that produced the file.
    pub command: String,
    /// Best GEMM GFLOP/s on the same threads (host backends only), for the balance point.
    pub gemm_gflops: Option<f64>,
    /// The points, by context length.
    pub points: Vec<StoredPoint>,
}

/// One stored point: [`SweepPoint`] without the device (the backend says it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoredPoint {
    /// Context length per request.
    pub context: usize,
    /// Decode kernel K/V read bandwidth, GB/s.
    pub kernel: f64,
    /// Read-only stream over the same bytes, GB/s.
    pub read: f64,
    /// Copy of the same bytes, read + written, GB/s.
    pub copy: f64,
}

/// Where the stored sweep lives in the repository.
pub const STORED_PATH: &str = "assets/measurements/decode-sweep.json";

const STORED_FILE: &str = include_str!("../../../assets/measurements/decode-sweep.json");

impl StoredSweep {
    /// The embedded stored sweep (checked by this module's tests, so `None` is a build defect that the
    /// view survives by drawing empty axes).
    pub fn embedded() -> Option<&'static StoredSweep> {
        static S: OnceLock<Option<StoredSweep>> = OnceLock::new();
        S.get_or_init(|| serde_json::from_str(STORED_FILE).ok()).as_ref()
    }

    /// Its points as [`SweepPoint`]s (host or GPU by the backend's name).
    pub fn sweep_points(&self) -> Vec<SweepPoint> {
        let device = match self.backend.as_str() {
            "cuda" | "wgpu" => crate::compute::Device::Gpu,
            _ => crate::compute::Device::Host,
        };
        self.points
            .iter()
            .map(|p| SweepPoint {
                context: p.context,
                kernel: p.kernel,
                read: p.read,
                copy: p.copy,
                device,
            })
            .collect()
    }

    /// The balance point it stored: (GEMM GFLOP/s, read-only GB/s of the longest context).
    pub fn balance(&self) -> Option<(f64, f64)> {
        Some((self.gemm_gflops?, self.points.last()?.read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_sweep_parses_and_is_a_real_sweep() {
        let s: StoredSweep = serde_json::from_str(STORED_FILE).unwrap_or_else(|e| panic!("{STORED_PATH}: {e}"));
        assert!(s.points.len() >= 2, "{STORED_PATH}: {} points", s.points.len());
        assert!(
            s.points.windows(2).all(|w| w[0].context < w[1].context),
            "{STORED_PATH}: contexts not increasing"
        );
        for p in &s.points {
            assert!(
                [p.kernel, p.read, p.copy].iter().all(|x| x.is_finite() && *x > 0.0),
                "{STORED_PATH}: {p:?}"
            );
        }
        assert_eq!(StoredSweep::embedded(), Some(&s));
        assert!(s.command.starts_with("kvscope bench sweep"), "{}", s.command);
    }
}
