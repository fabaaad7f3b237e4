//! Recomputation off the UI thread.
//!
//! How it works: the UI sends a [`Job`] (generation number, lesson, parameters, backend) whenever a
//! slider or the backend changes. One worker thread takes the newest job (older queued jobs are
//! skipped, so dragging a slider never builds a backlog), computes it, sends the [`Output`] back and
//! wakes the UI. It then runs the output's reference verification ([`Output::verify`]: lessons 1–3
//! check against the f64 reference here; lessons 4–5 checked while computing), unless a newer job is
//! already waiting. A panic inside a computation becomes an error message; the worker keeps running. Tests and
//! `kvscope render` use [`run_now`] instead, on the calling thread, so every frame is deterministic.

use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::mpsc::{Receiver, Sender, channel};
use web_time::Instant;

use crate::compute::launch::Launch;
use crate::compute::{Backend, BackendKind, CheckReport};
use crate::lessons::Lesson;
use crate::lessons::{Output, Params, compute_with_launches};

/// One recomputation request.
#[derive(Clone)]
pub struct Job {
    /// Increases with every request; results of older generations are dropped.
    pub generation: u64,
    /// The lesson.
    pub lesson: Arc<Lesson>,
    /// Its slider values.
    pub params: Params,
    /// Where to run.
    pub backend: Arc<dyn Backend>,
}

/// A message from the worker.
pub enum Msg {
    /// A computed output (or why it failed) and how long it took.
    Done {
        /// The job's generation.
        generation: u64,
        /// The lesson it was computed for.
        lesson: String,
        /// The output.
        result: Result<Arc<dyn Output>, String>,
        /// Milliseconds.
        ms: f64,
        /// The backend that computed it and its device.
        ran_on: (BackendKind, String),
        /// The launches the backend reported while computing it.
        launches: Vec<Launch>,
    },
    /// The reference check of a generation's output.
    Verified {
        /// The job's generation.
        generation: u64,
        /// The reports.
        reports: Vec<CheckReport>,
    },
}

impl Msg {
    /// The message of `job`'s computed output.
    fn done(job: &Job, result: Result<Arc<dyn Output>, String>, ms: f64, launches: Vec<Launch>) -> Msg {
        Msg::Done {
            generation: job.generation,
            lesson: job.lesson.id().to_string(),
            result,
            ms,
            ran_on: (job.backend.kind(), job.backend.device()),
            launches,
        }
    }
}

fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Compute a job's output; a panic becomes an error message. Returns it with the milliseconds taken and
/// the launches the backend reported.
fn compute_job(job: &Job) -> (Result<Arc<dyn Output>, String>, f64, Vec<Launch>) {
    let t0 = Instant::now();
    let (result, launches) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compute_with_launches(&job.lesson, &job.params, job.backend.as_ref())
    }))
    .unwrap_or_else(|e| (Err(format!("internal error: {}", panic_message(e))), Vec::new()));
    (result.map(Arc::from), t0.elapsed().as_secs_f64() * 1e3, launches)
}

/// Compute a job on this thread: the output, then its verification.
pub fn run_now(job: &Job) -> (Msg, Option<Msg>) {
    let (result, ms, launches) = compute_job(job);
    let verified = match &result {
        Ok(out) => Some(Msg::Verified {
            generation: job.generation,
            reports: verify_output(out.as_ref()),
        }),
        Err(_) => None,
    };
    (Msg::done(job, result, ms, launches), verified)
}

/// The reference check of an output. A panic inside it is a failed report that says so (the app keeps
/// running, and a test that asserts every report passed fails).
pub fn verify_output(out: &dyn Output) -> Vec<CheckReport> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out.verify())).unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("a panic without a message");
        vec![CheckReport::failed(
            "verification",
            format!("the check panicked: {why}"),
        )]
    })
}

/// The worker thread's handle.
#[cfg(not(target_arch = "wasm32"))]
pub struct Worker {
    jobs: Sender<Job>,
    msgs: Receiver<Msg>,
    latest: Arc<AtomicU64>,
}

#[cfg(not(target_arch = "wasm32"))]
impl Worker {
    /// Start the thread; `wake` is called after every message (request a repaint).
    pub fn spawn(wake: impl Fn() + Send + 'static) -> Self {
        let (jobs, job_rx) = channel::<Job>();
        let (msg_tx, msgs) = channel();
        let latest = Arc::new(AtomicU64::new(0));
        let latest2 = latest.clone();
        std::thread::Builder::new()
            .name("kvscope-compute".into())
            .spawn(move || {
                while let Ok(mut job) = job_rx.recv() {
                    while let Ok(newer) = job_rx.try_recv() {
                        job = newer;
                    }
                    let (result, ms, launches) = compute_job(&job);
                    let out = result.as_ref().ok().cloned();
                    if msg_tx.send(Msg::done(&job, result, ms, launches)).is_err() {
                        break;
                    }
                    wake();
                    if let Some(out) = out
                        && latest2.load(Ordering::Relaxed) == job.generation
                    {
                        let reports = verify_output(out.as_ref());
                        if msg_tx
                            .send(Msg::Verified {
                                generation: job.generation,
                                reports,
                            })
                            .is_err()
                        {
                            break;
                        }
                        wake();
                    }
                }
            })
            .expect("spawning the compute thread");
        Self { jobs, msgs, latest }
    }

    /// Queue a job.
    pub fn submit(&self, job: Job) {
        self.latest.store(job.generation, Ordering::Relaxed);
        let _ = self.jobs.send(job);
    }

    /// Messages that arrived since the last call.
    pub fn poll(&self) -> Vec<Msg> {
        self.msgs.try_iter().collect()
    }
}

/// The browser's worker: the page has one thread, so work is split across frames instead. A submitted
/// job waits for the next frame's [`Worker::poll`], which computes the newest one (older ones are
/// skipped, as the thread skips them); its reference check runs in the frame after that, unless a newer
/// job arrived. A frame holds one pass of a computation or one check, and a slider being dragged never
/// builds a backlog. On WebGPU a pass that needs a readback stops there: the readback is awaited as an
/// async task between frames, and the next frame runs the job again with it
/// ([`crate::compute::wgpu::replay`]).
#[cfg(target_arch = "wasm32")]
pub struct Worker {
    next: std::sync::Mutex<Option<Job>>,
    /// (generation, passes so far) of the job being replayed.
    passes: std::sync::Mutex<(u64, usize)>,
    check: std::sync::Mutex<Option<(u64, Arc<dyn Output>)>>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

/// The most passes (one per WebGPU readback) a lesson's computation may take in the browser.
#[cfg(target_arch = "wasm32")]
pub const MAX_PASSES: usize = 400;

#[cfg(target_arch = "wasm32")]
impl Worker {
    /// A worker for this thread; `wake` is called when work waits (request a repaint).
    pub fn spawn(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            next: std::sync::Mutex::new(None),
            passes: std::sync::Mutex::new((0, 0)),
            check: std::sync::Mutex::new(None),
            wake: Arc::new(wake),
        }
    }

    /// Queue a job for the next frame.
    pub fn submit(&self, job: Job) {
        *self.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        (self.wake)();
    }

    /// This frame's work: a pass of the newest job, else the waiting check.
    pub fn poll(&self) -> Vec<Msg> {
        use crate::compute::wgpu::replay;
        let job = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            if next.as_ref().is_some_and(|j| replay::busy(j.generation)) {
                return Vec::new();
            }
            next.take()
        };
        if let Some(job) = job {
            let passes = {
                let mut p = self.passes.lock().unwrap_or_else(|e| e.into_inner());
                *p = if p.0 == job.generation {
                    (p.0, p.1 + 1)
                } else {
                    (job.generation, 1)
                };
                p.1
            };
            replay::begin(job.generation);
            let (mut result, ms, launches) = compute_job(&job);
            let wait = replay::finish();
            if wait.is_some() && passes >= MAX_PASSES {
                // Each pass reruns the computation's host side: past this many GPU round trips the
                // page would only get slower. Say so rather than stall (the CPU backend computes it).
                result = Err(format!(
                    "this computation needs more than {MAX_PASSES} WebGPU readbacks; in the browser each one costs a frame and a rerun of the computation (compute::wgpu::replay), so choose the cpu backend for it"
                ));
            } else if let Some(wait) = wait {
                let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
                if next.is_none() {
                    *next = Some(job);
                }
                let wake = self.wake.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    wait.await;
                    wake();
                });
                return Vec::new();
            }
            crate::compute::wgpu::replay::forget(job.generation);
            if let Ok(out) = &result {
                *self.check.lock().unwrap_or_else(|e| e.into_inner()) = Some((job.generation, out.clone()));
            }
            (self.wake)();
            return vec![Msg::done(&job, result, ms, launches)];
        }
        let check = self.check.lock().unwrap_or_else(|e| e.into_inner()).take();
        match check {
            Some((generation, out)) => {
                (self.wake)();
                vec![Msg::Verified {
                    generation,
                    reports: verify_output(out.as_ref()),
                }]
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lessons::export::NamedArray;

    /// An output whose reference check panics.
    struct Panics;

    impl Output for Panics {
        fn verify(&self) -> Vec<CheckReport> {
            panic!("index out of bounds in the reference")
        }
        fn has_nan(&self) -> bool {
            false
        }
        fn export_arrays(&self, _: usize, _: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
            (Vec::new(), Vec::new())
        }
    }

    /// A check that panics is a failed report that says why, never an empty list (which the badge and
    /// the slider-extremes test would read as nothing to fail).
    #[test]
    fn a_panicking_check_is_a_failed_report() {
        let reports = verify_output(&Panics);
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(!reports[0].passed(), "{reports:?}");
        assert!(
            reports[0].to_string().contains("index out of bounds in the reference"),
            "{}",
            reports[0]
        );
    }
}
