//! Recomputation off the UI thread.
//!
//! How it works: the UI sends a [`Job`] (generation number, lesson, parameters, backend) whenever a
//! slider or the backend changes. One worker thread takes the newest job (older queued jobs are
//! skipped, so dragging a slider never builds a backlog), computes it, sends the [`Output`] back and
//! wakes the UI. Once the UI has drawn that result ([`Worker::shown`], so the check does not compete
//! with the frame that shows it for the cores), it runs the output's reference verification
//! ([`Output::verify`]: lessons 1–3 check against the f64 reference here; lessons 4–5 checked while
//! computing), unless a newer job is already waiting. A panic inside a computation becomes an error message; the worker keeps running. Tests and
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

/// What [`run_now`] keeps when results are shared: the output (or error), its milliseconds, launches and
/// reference check.
type Kept = (
    Result<Arc<dyn Output>, String>,
    f64,
    Vec<Launch>,
    Option<Vec<CheckReport>>,
);
/// (lesson file, lesson id, sliders, backend).
type KeptKey = (std::path::PathBuf, String, Params, BackendKind);

static SHARE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static KEPT: std::sync::Mutex<Option<std::collections::HashMap<KeptKey, Kept>>> = std::sync::Mutex::new(None);

/// Share computed results between the apps of this process: [`run_now`] then computes each (lesson
/// file, sliders, backend) once and hands the same output, launches and check to every app that asks.
/// The tests that walk every step in several languages, sizes and modes switch it on, so a step is
/// computed once per backend rather than once per walk; the app and `kvscope render` leave it off. A
/// lesson's output depends only on its file, its sliders and the backend (the computation is seeded);
/// `tests/app.rs` checks that recomputing a step gives the same numbers.
pub fn share_results(on: bool) {
    SHARE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Compute a job on this thread: the output, then its verification.
pub fn run_now(job: &Job) -> (Msg, Option<Msg>) {
    let key: Option<KeptKey> = SHARE.load(std::sync::atomic::Ordering::Relaxed).then(|| {
        (
            job.lesson.source.clone(),
            job.lesson.id().to_string(),
            job.params.clone(),
            job.backend.kind(),
        )
    });
    let lock = || KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let kept = key
        .as_ref()
        .and_then(|k| lock().as_ref().and_then(|m| m.get(k).cloned()));
    let (result, ms, launches, reports) = match kept {
        Some(kept) => kept,
        None => {
            let (result, ms, launches) = compute_job(job);
            let reports = result.as_ref().ok().map(|out| verify_output(out.as_ref()));
            let done = (result, ms, launches, reports);
            if let Some(k) = key {
                lock().get_or_insert_with(Default::default).insert(k, done.clone());
            }
            done
        }
    };
    let verified = reports.map(|reports| Msg::Verified {
        generation: job.generation,
        reports,
    });
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
    /// The newest generation the UI has drawn.
    shown: Arc<AtomicU64>,
}

/// How long a result's reference check waits at most for the UI to draw the result and settle.
#[cfg(not(target_arch = "wasm32"))]
const CHECK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// How long after the result is drawn the check waits for a newer job that would make it moot.
#[cfg(not(target_arch = "wasm32"))]
const CHECK_SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

#[cfg(not(target_arch = "wasm32"))]
impl Worker {
    /// Start the thread; `wake` is called after every message (request a repaint).
    pub fn spawn(wake: impl Fn() + Send + 'static) -> Self {
        let (jobs, job_rx) = channel::<Job>();
        let (msg_tx, msgs) = channel();
        let latest = Arc::new(AtomicU64::new(0));
        let shown = Arc::new(AtomicU64::new(0));
        let (latest2, shown2) = (latest.clone(), shown.clone());
        std::thread::Builder::new()
            .name("kvscope-compute".into())
            .spawn(move || {
                use std::sync::mpsc::TryRecvError;
                let mut waiting: Option<Job> = None;
                while let Some(mut job) = waiting.take().or_else(|| job_rx.recv().ok()) {
                    while let Ok(newer) = job_rx.try_recv() {
                        job = newer;
                    }
                    let (result, ms, launches) = compute_job(&job);
                    let out = result.as_ref().ok().cloned();
                    if msg_tx.send(Msg::done(&job, result, ms, launches)).is_err() {
                        break;
                    }
                    wake();
                    let Some(out) = out else { continue };
                    // The check waits until the UI has drawn the result and no newer job came for
                    // CHECK_SETTLE (or CHECK_WAIT passed): the frame that shows the result does not
                    // share the cores with it, and a slider still moving is not held up by the check
                    // of a value it has already left. A newer job skips it.
                    let deadline = Instant::now() + CHECK_WAIT;
                    let mut shown_at = None;
                    while latest2.load(Ordering::Relaxed) == job.generation && Instant::now() < deadline {
                        match job_rx.try_recv() {
                            Ok(newer) => {
                                waiting = Some(newer);
                                break;
                            }
                            // The app is gone: no one would read the check.
                            Err(TryRecvError::Disconnected) => return,
                            Err(TryRecvError::Empty) => {}
                        }
                        if shown2.load(Ordering::Relaxed) >= job.generation {
                            let at = *shown_at.get_or_insert_with(Instant::now);
                            if at.elapsed() >= CHECK_SETTLE {
                                break;
                            }
                        }
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    if waiting.is_none() && latest2.load(Ordering::Relaxed) == job.generation {
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
        Self {
            jobs,
            msgs,
            latest,
            shown,
        }
    }

    /// The UI drew the result of job `generation` (its reference check may start).
    pub fn shown(&self, generation: u64) {
        self.shown.fetch_max(generation, Ordering::Relaxed);
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

    /// The next message, waiting for it until `deadline` at the latest.
    pub fn wait_until(&self, deadline: Instant) -> Option<Msg> {
        let left = deadline.checked_duration_since(Instant::now())?;
        self.msgs.recv_timeout(left).ok()
    }
}

/// The browser's worker: the page has one thread, so work is split into pieces the event loop runs
/// between frames. A submitted job starts in the next frame's [`Worker::poll`] (older ones are skipped,
/// as the thread skips them); its reference check runs in a later frame, unless a newer job arrived. On
/// WebGPU a pass of a computation that needs a readback stops there ([`crate::compute::wgpu::replay`]):
/// an async task awaits the readback and runs the next pass as soon as it arrives, without waiting for a
/// frame, so a computation of n readbacks costs n GPU round trips rather than n frames. The task stops
/// when a newer job is submitted. A slider being dragged never builds a backlog.
#[cfg(target_arch = "wasm32")]
pub struct Worker {
    shared: Arc<Shared>,
}

/// What the frames and the replaying task share (the page has one thread; the locks never wait).
#[cfg(target_arch = "wasm32")]
struct Shared {
    /// The newest job not yet started.
    next: std::sync::Mutex<Option<Job>>,
    /// The newest generation submitted (a replaying task of an older one stops).
    latest: std::sync::Mutex<u64>,
    /// Whether a task is replaying a job.
    replaying: std::sync::Mutex<bool>,
    /// Messages the task finished, for the next poll.
    finished: std::sync::Mutex<Vec<Msg>>,
    /// The output waiting for its reference check.
    check: std::sync::Mutex<Option<(u64, Arc<dyn Output>)>>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

/// A readback to await before a computation's next pass.
#[cfg(target_arch = "wasm32")]
type Wait = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// Lock a mutex of the page's single thread.
#[cfg(target_arch = "wasm32")]
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(target_arch = "wasm32")]
thread_local! {
    /// The last replayed job: its passes, the milliseconds its passes ran on the host after the first,
    /// and its milliseconds from the first pass to the last.
    static LAST_REPLAY: std::cell::Cell<(usize, f64, f64)> = const { std::cell::Cell::new((0, 0.0, 0.0)) };
}

/// The last job that needed WebGPU readbacks: its passes, host milliseconds (passes after the first) and
/// wall milliseconds (the page reports them).
#[cfg(target_arch = "wasm32")]
pub fn last_replay() -> (usize, f64, f64) {
    LAST_REPLAY.get()
}

/// The most passes (one per WebGPU readback) a lesson's computation may take in the browser.
#[cfg(target_arch = "wasm32")]
pub const MAX_PASSES: usize = 400;

#[cfg(target_arch = "wasm32")]
impl Shared {
    /// Run one pass of `job` (its `passes`-th; the first began at `started`). `Ok`: it finished, with its
    /// message, which counts the milliseconds since `started` (the output is left for the check). `Err`:
    /// the readback to await before the next pass.
    fn pass(&self, job: &Job, passes: usize, started: Instant) -> Result<Msg, Wait> {
        use crate::compute::wgpu::replay;
        replay::begin(job.generation);
        let (mut result, _, launches) = compute_job(job);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        match replay::finish() {
            Some(wait) if passes < MAX_PASSES => return Err(Box::pin(wait)),
            Some(_) => {
                // Each pass reruns the computation's host side: past this many GPU round trips the
                // page would only get slower. Say so rather than stall (the CPU backend computes it).
                result = Err(format!(
                    "this computation needs more than {MAX_PASSES} WebGPU readbacks; in the browser each one costs a GPU round trip and a rerun of the computation (compute::wgpu::replay), so choose the cpu backend for it"
                ));
            }
            None => {}
        }
        replay::forget(job.generation);
        if let Ok(out) = &result {
            *lock(&self.check) = Some((job.generation, out.clone()));
        }
        Ok(Msg::done(job, result, ms, launches))
    }

    /// Whether `generation` is still the newest job.
    fn current(&self, generation: u64) -> bool {
        *lock(&self.latest) == generation
    }
}

#[cfg(target_arch = "wasm32")]
impl Worker {
    /// A worker for this thread; `wake` is called when a message waits (request a repaint).
    pub fn spawn(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            shared: Arc::new(Shared {
                next: std::sync::Mutex::new(None),
                latest: std::sync::Mutex::new(0),
                replaying: std::sync::Mutex::new(false),
                finished: std::sync::Mutex::new(Vec::new()),
                check: std::sync::Mutex::new(None),
                wake: Arc::new(wake),
            }),
        }
    }

    /// The UI drew the result of a job: nothing to do, the page's check already runs in a later frame.
    pub fn shown(&self, _generation: u64) {}

    /// Queue a job for the next frame.
    pub fn submit(&self, job: Job) {
        *lock(&self.shared.latest) = job.generation;
        *lock(&self.shared.next) = Some(job);
        (self.shared.wake)();
    }

    /// This frame's work: the messages the replaying task finished, the first pass of the newest job
    /// (when no task is replaying), else the waiting check.
    pub fn poll(&self) -> Vec<Msg> {
        let sh = &self.shared;
        let mut msgs: Vec<Msg> = std::mem::take(&mut *lock(&sh.finished));
        if *lock(&sh.replaying) {
            // Its readback is on the way; a newer job starts once the task sees it and stops.
            return msgs;
        }
        if let Some(job) = lock(&sh.next).take() {
            let t0 = Instant::now();
            match sh.pass(&job, 1, t0) {
                Ok(m) => {
                    msgs.push(m);
                    (sh.wake)();
                }
                Err(wait) => {
                    *lock(&sh.replaying) = true;
                    let sh = sh.clone();
                    wasm_bindgen_futures::spawn_local(async move {
                        let mut wait = wait;
                        let mut passes = 1;
                        let mut host = 0.0;
                        loop {
                            wait.await;
                            if !sh.current(job.generation) {
                                crate::compute::wgpu::replay::forget(job.generation);
                                break;
                            }
                            passes += 1;
                            let t = Instant::now();
                            let r = sh.pass(&job, passes, t0);
                            host += t.elapsed().as_secs_f64();
                            match r {
                                Ok(m) => {
                                    lock(&sh.finished).push(m);
                                    LAST_REPLAY.set((passes, host * 1e3, t0.elapsed().as_secs_f64() * 1e3));
                                    break;
                                }
                                Err(w) => wait = w,
                            }
                        }
                        *lock(&sh.replaying) = false;
                        (sh.wake)();
                    });
                }
            }
            return msgs;
        }
        if !msgs.is_empty() {
            return msgs;
        }
        let check = lock(&sh.check).take();
        if let Some((generation, out)) = check
            && sh.current(generation)
        {
            (sh.wake)();
            msgs.push(Msg::Verified {
                generation,
                reports: verify_output(out.as_ref()),
            });
        }
        msgs
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
