//! The app's side of the compute worker: submitting a job when what the view depends on changes, taking
//! its results and checks, and what the status bar says while it runs.

use super::worker::{Job, Msg};

use super::*;

/// How long a frame that submitted a job waits for its result before it is painted (an extra UI pass
/// then draws the result; a job that takes longer is drawn by a later frame, as before).
#[cfg(not(target_arch = "wasm32"))]
const SAME_FRAME_MS: u64 = 40;

impl KvscopeApp {
    /// Whether a newer result is being computed.
    pub fn computing(&self) -> bool {
        !self.sync && self.done < self.generation
    }

    /// What the status bar says while [`Self::computing`]: the seconds since the job was submitted, and
    /// that SmolLM2 is being loaded when the job runs it for the first time in this process.
    pub fn computing_hint(&self) -> String {
        let lang = self.lang;
        // (No seconds in sync mode, tests and `kvscope render`: their frames must not depend on timing.)
        let secs = if self.sync {
            String::new()
        } else {
            format!(" {:.1} s", self.submitted_at.elapsed().as_secs_f64())
        };
        let runs_smollm2 = self.lesson().is_some_and(|l| {
            let params = self.params.get(l.id());
            l.file.params.iter().any(|p| {
                p.kind == crate::lesson_file::ParamKind::Model
                    && crate::model::choice::Choice::from_value(
                        params
                            .and_then(|ps| ps.get(p.id.get_ref().as_str()).copied())
                            .unwrap_or(p.default_value()),
                    ) == crate::model::choice::Choice::Smollm2
            })
        });
        if runs_smollm2 && !crate::model::smollm2::loaded() {
            format!(
                "{}{secs}",
                lang.t(
                    "loading SmolLM2-135M-Instruct (its first use: the file is hashed and its weights unpacked)…",
                    "正在加载 SmolLM2-135M-Instruct（首次使用：校验文件并解包权重）…"
                )
            )
        } else {
            format!("{}{secs}", lang.t("computing…", "计算中…"))
        }
    }

    /// The error of the current lesson's computation, if it failed.
    pub fn error(&self) -> Option<&str> {
        let l = self.lesson()?;
        self.error
            .as_ref()
            .filter(|(id, _)| id == l.id())
            .map(|(_, e)| e.as_str())
    }

    pub(super) fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Done {
                generation,
                lesson,
                result,
                ms,
                ran_on,
                launches,
            } => {
                self.jobs.arrived += 1;
                if generation < self.generation {
                    self.jobs.stale += 1;
                }
                if generation < self.done {
                    self.jobs.dropped += 1;
                    return;
                }
                self.done = generation;
                self.compute_ms = ms;
                match result {
                    Ok(out) => {
                        self.output = Some((generation, lesson, out));
                        self.launches = launches;
                        self.shown_on = Some(ran_on);
                        self.error = None;
                    }
                    Err(e) => self.error = Some((lesson, e)),
                }
            }
            Msg::Verified { generation, reports } => self.reports = Some((generation, reports)),
        }
    }

    /// Submit a job if what the view depends on changed; in sync mode compute it now.
    /// Submit a job if the lesson, its settings or the backend changed since the last one; whether it did.
    pub(super) fn refresh(&mut self) -> bool {
        let Some(l) = self.lesson().cloned() else { return false };
        // The student's kernel came or went: the same settings compute again.
        if self.widgets.kernel.exercise.take_changed() {
            self.submitted = None;
        }
        let params = self.params.get(l.id()).cloned().unwrap_or_default();
        let key = (l.id().to_string(), params.clone(), self.active);
        if self.submitted.as_ref() == Some(&key) {
            return false;
        }
        self.generation += 1;
        self.jobs.submitted += 1;
        self.submitted = Some(key);
        self.submitted_at = web_time::Instant::now();
        let job = Job {
            generation: self.generation,
            lesson: l,
            params,
            backend: self.running_backend(),
        };
        match &self.worker {
            Some(w) => w.submit(job),
            None => {
                let (done, verified) = worker::run_now(&job);
                self.take(done);
                if let Some(v) = verified {
                    self.take(v);
                }
            }
        }
        true
    }

    /// What a frame does after its UI code: a slider moved in it sends its job now, not when the next
    /// frame starts, so the worker computes while this frame is painted; and a result that arrives within
    /// [`SAME_FRAME_MS`] is drawn by this frame itself (`kvscope bench app` measures both). Synchronous
    /// apps (tests, `kvscope render`) keep computing at the start of the frame that draws the result.
    pub fn after_ui(&mut self, ctx: &egui::Context) {
        if self.sync || !self.refresh() {
            return;
        }
        #[cfg(not(target_arch = "wasm32"))]
        if self.wait_for_result() {
            ctx.request_discard("a slider's result arrived within its frame");
        }
        #[cfg(target_arch = "wasm32")]
        let _ = ctx;
    }

    /// Wait up to [`SAME_FRAME_MS`] for the result of the job just submitted, taking every message that
    /// arrives meanwhile; whether the newest job's result (or error) is in. The frame that moved a slider
    /// then draws its result again (`Context::request_discard`) instead of waiting for the next frame:
    /// a result that takes a few milliseconds to compute is shown one frame sooner.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn wait_for_result(&mut self) -> bool {
        let deadline = web_time::Instant::now() + std::time::Duration::from_millis(SAME_FRAME_MS);
        while self.computing() {
            let Some(m) = self.worker.as_ref().and_then(|w| w.wait_until(deadline)) else {
                return false;
            };
            self.take(m);
        }
        true
    }

    /// Bring everything up to date without drawing (tests call this before asserting).
    pub fn update_now(&mut self) {
        self.poll();
        let _ = self.refresh();
        self.resolve_point();
    }

    /// A step that opens at a named point moves the timeline there once the lesson's result is in.
    pub(super) fn resolve_point(&mut self) {
        let Some(out) = self.output().cloned() else { return };
        if let Some(name) = self.pending_point.take() {
            let v = out.point(&name).unwrap_or(0);
            self.set_cursor(v);
        }
    }

    pub(super) fn poll(&mut self) {
        if let Some(rx) = &self.probe_rx {
            for st in rx.try_iter() {
                for (k, s) in &mut self.backends {
                    if *k == st.kind {
                        *s = BackendSlot::Ready(st.clone());
                    }
                }
            }
        }
        // The output held now was drawn by the frame before this one.
        if let (Some(w), Some((generation, ..))) = (&self.worker, &self.output) {
            w.shown(*generation);
        }
        let msgs = self.worker.as_ref().map(|w| w.poll()).unwrap_or_default();
        for m in msgs {
            self.take(m);
        }
    }
}
