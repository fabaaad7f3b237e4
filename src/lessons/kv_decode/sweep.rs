//! Lesson 4's live bandwidth sweep: [`crate::compute::bench::sweep_point`] at every context length of
//! [`crate::compute::bench::sweep_contexts`], measured on a background thread so the UI keeps drawing while
//! points arrive one by one. It is the lesson's own UI state; it never runs in tests or headless renders.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};

/// Requests per sweep point (the views say how many decoded together).
pub use crate::compute::bench::SWEEP_REQUESTS;
use crate::compute::bench::{SweepPoint, best_gemm_gflops, sweep_contexts, sweep_point};
use crate::compute::{Backend, BackendKind, Device};

/// What the measuring thread sends.
enum Measured {
    /// One context length.
    Point(SweepPoint),
    /// GEMM GFLOP/s and read GB/s, for the balance point.
    Balance(f64, f64),
}

/// The sweep's state.
#[derive(Default)]
pub struct Sweep {
    rx: Option<Receiver<Result<Measured, String>>>,
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
    /// Start measuring on a background thread; `wake` is called after every point (request a repaint).
    pub fn start(&mut self, backend: Arc<dyn Backend>, wake: impl Fn() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rx = Some(rx);
        self.points.clear();
        self.error = None;
        self.balance = None;
        self.backend = Some(backend.kind());
        std::thread::spawn(move || {
            let mut last = None;
            for c in sweep_contexts(backend.kind()) {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sweep_point(backend.as_ref(), c)))
                    .unwrap_or_else(|_| Err("the measurement panicked".into()));
                last = r.as_ref().ok().copied();
                let stop = r.is_err();
                if tx.send(r.map(Measured::Point)).is_err() || stop {
                    break;
                }
                wake();
            }
            if let Some(p) = last.filter(|p| p.device == Device::Host) {
                let _ = tx.send(Ok(Measured::Balance(best_gemm_gflops(1024).0, p.read)));
            }
            wake();
        });
    }

    /// Take arrived points; whether it is still running.
    pub fn poll(&mut self) -> bool {
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
