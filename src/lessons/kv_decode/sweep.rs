//! Lesson 4's live bandwidth sweep: [`crate::bench::sweep_point`] at every context length of
//! [`crate::bench::sweep_contexts`], measured on a background thread so the UI keeps drawing while
//! points arrive one by one. It is the lesson's own UI state; it never runs in tests or headless renders.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};

use crate::bench::{SweepPoint, sweep_contexts, sweep_point};
use crate::compute::{Backend, BackendKind};

/// The sweep's state.
#[derive(Default)]
pub struct Sweep {
    rx: Option<Receiver<Result<SweepPoint, String>>>,
    /// Points so far.
    pub points: Vec<SweepPoint>,
    /// Which backend they were measured on.
    pub backend: Option<BackendKind>,
    /// Why it stopped, if it failed.
    pub error: Option<String>,
    /// Whether it started automatically once already.
    pub auto_started: bool,
}

impl Sweep {
    /// Start measuring on a background thread; `wake` is called after every point (request a repaint).
    pub fn start(&mut self, backend: Arc<dyn Backend>, wake: impl Fn() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rx = Some(rx);
        self.points.clear();
        self.error = None;
        self.backend = Some(backend.kind());
        std::thread::spawn(move || {
            for c in sweep_contexts(backend.kind()) {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sweep_point(backend.as_ref(), c)))
                    .unwrap_or_else(|_| Err("the measurement panicked".into()));
                let stop = r.is_err();
                if tx.send(r).is_err() || stop {
                    break;
                }
                wake();
            }
            wake();
        });
    }

    /// Take arrived points; whether it is still running.
    pub fn poll(&mut self) -> bool {
        let Some(rx) = &self.rx else { return false };
        loop {
            match rx.try_recv() {
                Ok(Ok(p)) => self.points.push(p),
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
