//! Kernel exercises (issue #59): a region of a shipped WGSL kernel blanked for the student to write,
//! graded against the f64 reference by the ops' own suites (`compute::ops::<op>::suite`) through the one
//! checker. The regions are marked in the `.wgsl` files by `// EXERCISE <id> BEGIN` / `// EXERCISE <id>
//! END` lines, so the solution is the kernel the app runs; `kernels/exercises.toml` gives each its
//! title, hint, stub (what the blanked file computes instead: it compiles and is wrong) and the ops that
//! grade it. No egui here: `kvscope exercise` and the app share it.
//!
//! Grading an edit compiles it with naga first (errors at the edited file's line and column), then
//! opens a wgpu device of its own with the edited file in place of the shipped one and runs the ops'
//! suites on hidden seeds. An edited kernel may loop forever (lavapipe has no watchdog), so callers
//! grade in a child process with a timeout (`kvscope exercise grade` does).

use serde::{Deserialize, Serialize};

use crate::compute::{CheckReport, Op};
use crate::lesson_file::Text;

/// `kernels/exercises.toml`, embedded.
pub const EXERCISES_TOML: &str = include_str!("../../kernels/exercises.toml");

/// The seeds an edit is graded on (not the lessons' own: a kernel cannot be fitted to what it was
/// shown).
pub const HIDDEN_SEEDS: [u64; 2] = [20_261_206, 7_919];

/// A find-and-replace edit of a kernel file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Text that occurs once in the file.
    pub from: String,
    /// What replaces it.
    pub to: String,
}

/// One exercise, as `kernels/exercises.toml` gives it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exercise {
    /// Its id (the marker's, `// EXERCISE <id> BEGIN`).
    pub id: String,
    /// The lesson whose kernel step hosts it.
    pub lesson: String,
    /// The kernel file under `kernels/` (`attention.wgsl`, `common.wgsl`).
    pub file: String,
    /// The ops whose suites grade it (their folder names under `src/compute/ops/`).
    pub ops: Vec<String>,
    /// What the student writes.
    pub title: Text,
    /// A hint.
    pub hint: Text,
    /// What the blanked file has in the region's place: code that compiles and computes something
    /// wrong (a function that must return, returns).
    pub stub: String,
    /// Wrong edits of the solution that compile (for the tests: each must fail).
    #[serde(default)]
    pub wrong: Vec<Edit>,
    /// Track 2: the kernel ships with this bug, to find and fix (no blank).
    #[serde(default)]
    pub bug: Option<Edit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    exercise: Vec<Exercise>,
}

/// A compile error of an edited kernel file, at its line and column in that file (1-based; line 0
/// when it lies in what the backend puts in front of the file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileError {
    /// Line in the edited file.
    pub line: usize,
    /// Column.
    pub column: usize,
    /// naga's message.
    pub message: String,
}

/// What grading an edit found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grade {
    /// The exercise.
    pub exercise: String,
    /// Whether every check passed (and the file compiled).
    pub passed: bool,
    /// Compile errors (none when it compiled).
    pub compile_errors: Vec<CompileError>,
    /// The suites' checks against the f64 reference, per hidden seed.
    pub checks: Vec<CheckReport>,
    /// Something that stopped the grading (no GPU adapter, a device lost, a timeout).
    pub error: Option<String>,
}

impl Grade {
    /// The largest |got − want| over the checks.
    pub fn max_abs(&self) -> f64 {
        self.checks.iter().map(|c| c.max_abs).fold(0.0, f64::max)
    }

    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CheckReport> {
        self.checks.iter().filter(|c| !c.passed())
    }

    /// Whether every check passed, and why a dispatch was rejected where WebGPU dropped a binding.
    fn finish(&mut self) {
        self.passed = !self.checks.is_empty() && self.checks.iter().all(CheckReport::passed);
        // WebGPU's automatic layout drops a binding the kernel no longer reads, and then the dispatch's
        // bind group no longer fits it: say so in words.
        if self
            .checks
            .iter()
            .any(|c| c.error.as_deref().is_some_and(|e| e.contains("create_bind_group")))
        {
            self.error = Some(
                "the edited kernel no longer reads one of the buffers it declares, so WebGPU dropped that \
                 binding and the dispatch was rejected: read every buffer the kernel declares"
                    .to_string(),
            );
        }
    }

    /// What is amiss if this grade is to be a failure for a wrong value (what a blank, a wrong edit or
    /// a planted bug must give): it compiled, ran, failed, and each failed check's map marks exactly the
    /// elements the check found wrong (its counts add up to the mismatches, and each recorded mismatch
    /// lies in a marked cell). Empty when all of that holds. The tests, native and in the browser, ask it.
    pub fn wrong_value_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.compile_errors.is_empty() {
            out.push(format!("it does not compile: {:?}", self.compile_errors));
        }
        if self.passed {
            out.push("it passes".to_string());
        }
        if let Some(e) = &self.error {
            out.push(format!("grading stopped: {e}"));
        }
        let failed: Vec<_> = self.failed().collect();
        if failed.is_empty() {
            out.push("no check failed".to_string());
        }
        let mut mapped = 0;
        for c in failed.iter().filter(|c| c.error.is_none()) {
            let Some(m) = c.wrong_map.as_ref() else {
                out.push(format!("{} has no map", c.label));
                continue;
            };
            let sum = m.counts.iter().map(|&n| n as usize).sum::<usize>();
            if sum != c.mismatch_count {
                out.push(format!(
                    "{}: the map counts {sum}, the check {}",
                    c.label, c.mismatch_count
                ));
            }
            for x in &c.mismatches {
                let n = x.index.len();
                let (r, col) = if n >= 2 {
                    (x.index[n - 2], x.index[n - 1])
                } else {
                    (0, x.index.first().copied().unwrap_or(0))
                };
                let cell = (r * m.map_rows / m.rows.max(1)) * m.map_cols + col * m.map_cols / m.cols.max(1);
                if m.counts.get(cell).is_none_or(|&k| k == 0) {
                    out.push(format!("{}: the map misses {:?}", c.label, x.index));
                }
            }
            mapped += 1;
        }
        if !failed.is_empty() && mapped == 0 {
            out.push("every failure was an error, not a wrong value".to_string());
        }
        out
    }
}

/// Every exercise, checked when first asked for (the kernel panel asks every frame): its file is a WGSL kernel the backend compiles, its ops exist, its region is
/// marked once, and its wrong edits and bug apply to the solution.
pub fn all() -> Result<&'static [Exercise], String> {
    static ALL: std::sync::OnceLock<Result<Vec<Exercise>, String>> = std::sync::OnceLock::new();
    ALL.get_or_init(load).as_ref().map(Vec::as_slice).map_err(Clone::clone)
}

/// `kernels/exercises.toml`, parsed and checked (once: [`all`] keeps it).
fn load() -> Result<Vec<Exercise>, String> {
    let f: File = toml::from_str(EXERCISES_TOML).map_err(|e| format!("kernels/exercises.toml: {e}"))?;
    for x in &f.exercise {
        let src = x
            .shipped()
            .ok_or_else(|| format!("kernels/exercises.toml: `{}`: no kernel file {}", x.id, x.file))?;
        let region = x.region(src);
        if region.is_none() && x.bug.is_none() {
            return Err(format!(
                "kernels/exercises.toml: `{}`: kernels/{} marks no region for it",
                x.id, x.file
            ));
        }
        if x.ops.is_empty() || x.grading_ops().len() != x.ops.len() {
            return Err(format!(
                "kernels/exercises.toml: `{}`: unknown op among {:?}",
                x.id, x.ops
            ));
        }
        // An edit applies where it is meant to: a wrong edit inside the region, a bug in the file.
        for (e, within) in x
            .wrong
            .iter()
            .map(|e| (e, x.region_text(src)))
            .chain(x.bug.iter().map(|e| (e, src.to_string())))
        {
            if within.matches(e.from.as_str()).count() != 1 {
                return Err(format!(
                    "kernels/exercises.toml: `{}`: {:?} does not occur exactly once in its place in kernels/{}",
                    x.id, e.from, x.file
                ));
            }
        }
    }
    Ok(f.exercise)
}

/// The exercise `id`.
pub fn find(id: &str) -> Result<Exercise, String> {
    let all = all()?;
    all.iter().find(|x| x.id == id).cloned().ok_or_else(|| {
        let ids: Vec<&str> = all.iter().map(|x| x.id.as_str()).collect();
        format!("no exercise `{id}`; the exercises: {}", ids.join(", "))
    })
}

/// The shipped text of kernel file `file` (an op's file, `common.wgsl` or `decode_row.wgsl`).
pub fn shipped_file(file: &str) -> Option<&'static str> {
    use crate::compute::wgpu::{COMMON, DECODE_ROW};
    match file {
        "common.wgsl" => Some(COMMON),
        "decode_row.wgsl" => Some(DECODE_ROW),
        _ => Op::ALL
            .iter()
            .map(|op| op.wgsl_source())
            .find(|(f, _, _)| *f == file)
            .map(|(_, _, s)| s),
    }
}

impl Exercise {
    /// The shipped kernel file: the solution.
    pub fn shipped(&self) -> Option<&'static str> {
        shipped_file(&self.file)
    }

    /// The solution (the shipped file).
    pub fn solution(&self) -> String {
        self.shipped().unwrap_or_default().to_string()
    }

    /// The ops that grade it.
    pub fn grading_ops(&self) -> Vec<Op> {
        self.ops
            .iter()
            .filter_map(|name| Op::ALL.iter().copied().find(|o| o.folder() == name))
            .collect()
    }

    /// The kernel files the grading ops run (their pipelines are all a grade compiles).
    pub fn grading_files(&self) -> Vec<&'static str> {
        let mut f: Vec<&'static str> = self.grading_ops().iter().map(|op| op.wgsl_source().0).collect();
        f.sort_unstable();
        f.dedup();
        f
    }

    /// The region's lines in `src` (0-based, the marker lines excluded): `BEGIN + 1 .. END`.
    pub fn region(&self, src: &str) -> Option<std::ops::Range<usize>> {
        let lines: Vec<&str> = src.lines().collect();
        let begin = format!("// EXERCISE {} BEGIN", self.id);
        let end = format!("// EXERCISE {} END", self.id);
        let b = lines.iter().position(|l| l.trim() == begin)?;
        let e = lines.iter().position(|l| l.trim() == end)?;
        (b < e && lines.iter().filter(|l| l.trim() == begin).count() == 1).then_some(b + 1..e)
    }

    /// What the student starts from: the shipped file with the region replaced by a line saying what to
    /// write and the stub (a bug exercise: the file with its bug).
    pub fn blanked(&self, zh: bool) -> String {
        let src = self.shipped().unwrap_or_default();
        if let Some(bug) = &self.bug {
            return src.replacen(&bug.from, &bug.to, 1);
        }
        let Some(r) = self.region(src) else {
            return src.to_string();
        };
        let lines: Vec<&str> = src.lines().collect();
        let indent: String = lines
            .get(r.start.saturating_sub(1))
            .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
            .unwrap_or_default();
        let hint = if zh { &self.hint.zh } else { &self.hint.en };
        let todo = match zh {
            true => "待完成",
            false => "TODO",
        };
        let mut out: Vec<String> = lines[..r.start].iter().map(|l| l.to_string()).collect();
        out.push(format!("{indent}// {todo}: {}", hint.as_deref().unwrap_or_default()));
        out.extend(self.stub.lines().map(str::to_string));
        out.extend(lines[r.end..].iter().map(|l| l.to_string()));
        out.join("\n") + "\n"
    }

    /// The region's text in `src` (its lines, joined; empty when it has none).
    fn region_text(&self, src: &str) -> String {
        let lines: Vec<&str> = src.lines().collect();
        self.region(src).map(|r| lines[r].join("\n")).unwrap_or_default()
    }

    /// The solution with wrong edit `e` applied inside the region (the whole file when it has none).
    pub fn with_edit(&self, e: &Edit) -> String {
        let src = self.solution();
        let Some(r) = self.region(&src) else {
            return src.replacen(&e.from, &e.to, 1);
        };
        let lines: Vec<&str> = src.lines().collect();
        let mut out: Vec<String> = lines[..r.start].iter().map(|l| l.to_string()).collect();
        out.push(lines[r.clone()].join("\n").replacen(&e.from, &e.to, 1));
        out.extend(lines[r.end..].iter().map(|l| l.to_string()));
        out.join("\n") + "\n"
    }

    /// Compile `source` (the edited file) as the backend would, in front of it what the backend puts
    /// there, with naga: its errors at their line and column in `source`.
    pub fn compile_errors(&self, source: &str) -> Vec<CompileError> {
        let edits = [(self.file.clone(), source.to_string())];
        let mut out = Vec::new();
        // Every kernel module the edit goes into (an op's file; common.wgsl goes into all of them).
        for file in crate::compute::wgpu::files() {
            if file.file != self.file && self.file != "common.wgsl" && self.file != "decode_row.wgsl" {
                continue;
            }
            let Some((prefix, body)) = file.prefix_and_source(
                crate::compute::wgpu::F16Path::Packed,
                crate::cache::KvDtype::F16,
                &edits,
            ) else {
                continue;
            };
            if self.file == "decode_row.wgsl" && !prefix.contains(source) {
                continue;
            }
            let module = format!("{prefix}{body}");
            // Where the edited text starts in the module, in lines.
            let offset = if self.file == file.file {
                prefix.lines().count()
            } else {
                module.find(source).map_or(0, |i| module[..i].lines().count())
            };
            let at = |line: u32, col: u32, message: String| {
                let line = line as usize;
                CompileError {
                    line: line.saturating_sub(offset),
                    column: col as usize,
                    message,
                }
            };
            let found = match naga_check(&module) {
                Ok(()) => continue,
                Err((Some((l, c)), m)) => at(l, c, m),
                Err((None, m)) => at(0, 0, m),
            };
            if !out.contains(&found) {
                out.push(found);
            }
            // One module's errors say what is wrong; the others would repeat them.
            break;
        }
        out
    }

    /// The grade's start: `source`'s compile errors (grading stops there when there are any).
    fn grade_start(&self, source: &str) -> Grade {
        Grade {
            exercise: self.id.clone(),
            passed: false,
            compile_errors: self.compile_errors(source),
            checks: Vec::new(),
            error: None,
        }
    }

    /// Grade `source` in this process: compile it, then run the grading ops' suites on the hidden
    /// seeds on a wgpu device with the edited file in place. A kernel that never ends hangs this call:
    /// grade in a child process with a timeout ([`grade_in_child`]) where that matters.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn grade_here(&self, source: &str) -> Grade {
        let mut g = self.grade_start(source);
        if !g.compile_errors.is_empty() {
            return g;
        }
        let edits = [(self.file.clone(), source.to_string())];
        let files = self.grading_files();
        let backend = match crate::compute::wgpu::WgpuBackend::open_edited(None, &edits, Some(&files)) {
            Ok(b) => b,
            Err(e) => {
                g.error = Some(e);
                return g;
            }
        };
        for seed in HIDDEN_SEEDS {
            for op in self.grading_ops() {
                crate::compute::ops::suite(op, &backend, seed, &mut g.checks);
            }
        }
        g.finish();
        g
    }

    /// Grade `source` in the browser, as [`Self::grade_here`] does natively, on `seeds`: the edited
    /// kernel on a WebGPU device of its own, each suite a replayed computation
    /// (`compute::wgpu::replay`: the page can only await a readback). The page has no child process to
    /// stop, so `timeout` (a timer the caller makes) races the grading: an edit that never ends is a
    /// failed grade that says so, and the page goes on drawing (the GPU process may still be running it:
    /// the browser's own watchdog stops that). The device is returned too, for "Run the lesson on my
    /// kernel" (it compiles the other kernels when the lesson first dispatches them).
    #[cfg(target_arch = "wasm32")]
    pub async fn grade_web(
        &self,
        source: &str,
        seeds: &[u64],
        timeout: impl std::future::Future<Output = ()>,
    ) -> (Grade, Option<std::sync::Arc<crate::compute::wgpu::WgpuBackend>>) {
        use crate::compute::wgpu::replay;
        let mut g = self.grade_start(source);
        if !g.compile_errors.is_empty() {
            return (g, None);
        }
        let edits = [(self.file.clone(), source.to_string())];
        let files = self.grading_files();
        let backend = match crate::compute::wgpu::open_web_edited(&edits, Some(&files)).await {
            Ok(b) => std::sync::Arc::new(b),
            Err(e) => {
                g.error = Some(e);
                return (g, None);
            }
        };
        // Sessions of their own, above the page's check's (one per seed and op).
        thread_local! {
            static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        let cases: Vec<(u64, Op)> = seeds
            .iter()
            .flat_map(|&s| self.grading_ops().into_iter().map(move |op| (s, op)))
            .collect();
        let first = NEXT.get();
        NEXT.set(first + cases.len() as u64);
        let session = |i: usize| replay::CHECK_SESSIONS + (1 << 40) + first + i as u64;
        let b = backend.clone();
        let work = async move {
            let mut checks = Vec::new();
            for (i, &(seed, op)) in cases.iter().enumerate() {
                let r = replay::resolve(session(i), || {
                    let mut out = Vec::new();
                    crate::compute::ops::suite(op, b.as_ref(), seed, &mut out);
                    out
                })
                .await;
                checks.extend(r);
            }
            checks
        };
        let mut work = std::pin::pin!(work);
        let mut timeout = std::pin::pin!(timeout);
        let done = std::future::poll_fn(|cx| {
            use std::task::Poll;
            if let Poll::Ready(c) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(c));
            }
            timeout.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match done {
            Some(checks) => {
                g.checks = checks;
                g.finish();
                (g, Some(backend))
            }
            None => {
                for i in 0..seeds.len() * self.grading_ops().len() {
                    replay::forget(session(i));
                }
                g.error = Some(
                    "the kernel did not finish in time (a loop that never ends?): stopped waiting for it".to_string(),
                );
                (g, None)
            }
        }
    }
}

/// naga's parse and validation of `module`: the first error's (line, column) in it and its message.
fn naga_check(module: &str) -> Result<(), (Option<(u32, u32)>, String)> {
    use wgpu::naga;
    let m = naga::front::wgsl::parse_str(module).map_err(|e| {
        let at = e.location(module).map(|l| (l.line_number, l.line_position));
        (at, e.message().to_string())
    })?;
    let mut v = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all());
    v.validate(&m).map_err(|e| {
        let at = e
            .spans()
            .next()
            .map(|(span, _)| span.location(module))
            .map(|l| (l.line_number, l.line_position));
        (at, format!("{}", e.as_inner()))
    })?;
    Ok(())
}

/// The kvscope executable that grades in a child: `KVSCOPE_GRADER` when set (tests, whose own executable
/// is not kvscope), else this process's own.
pub fn grader_exe() -> std::path::PathBuf {
    std::env::var_os("KVSCOPE_GRADER")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| std::path::PathBuf::from("kvscope"))
}

/// Grade `source` for exercise `id` in a child process (`exe exercise grade --here`), killed after
/// `timeout`: an edit that hangs the device is a failed grade that says so, and the caller goes on.
#[cfg(not(target_arch = "wasm32"))]
pub fn grade_in_child(exe: &std::path::Path, id: &str, source: &str, timeout: std::time::Duration) -> Grade {
    use std::io::Read;
    let failed = |error: String| Grade {
        exercise: id.to_string(),
        passed: false,
        compile_errors: Vec::new(),
        checks: Vec::new(),
        error: Some(error),
    };
    let dir = std::env::temp_dir().join(format!("kvscope-exercise-{}-{id}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return failed(format!("cannot make {}: {e}", dir.display()));
    }
    let file = dir.join("edit.wgsl");
    if let Err(e) = std::fs::write(&file, source) {
        return failed(format!("cannot write {}: {e}", file.display()));
    }
    let child = std::process::Command::new(exe)
        .args(["exercise", "grade", id, "--here", "--json", "--source"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start {}: {e}", exe.display())),
    };
    // Read its output as it comes (a full pipe would stop the child before it ends).
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out_reader = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err_reader = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) => return failed(format!("lost the grading process: {e}")),
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let Some(status) = status else {
        let _ = (out_reader.join(), err_reader.join());
        return failed(format!(
            "the kernel did not finish within {:.0} s (a loop that never ends?): stopped",
            timeout.as_secs_f64()
        ));
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    match serde_json::from_str::<Grade>(&out) {
        Ok(g) => g,
        Err(_) => failed(format!(
            "the grading process ended ({status}) without a grade: {}",
            err.lines().last().unwrap_or("no message")
        )),
    }
}
