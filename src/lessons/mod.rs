//! The lessons: one module per lesson kind, each with what it computes (this side has no egui) and
//! how it draws it (`view.rs`, egui).
//!
//! How it works: a lesson file (`lessons/*.toml`, loaded by [`crate::lesson_file`]) names a *kind*. A kind
//! implements [`LessonKind`]: its view names (an enum made with [`views!`], so an unknown view in a
//! file fails to load with file:line:col and a missing view is a compile error), the ops it runs,
//! which slider values it allows, and `compute(lesson, params, backend)`, which returns an [`Output`].
//! An output knows its own check reports, reference verification, NaN check, export arrays, launch
//! geometry per op, and the length of its timeline. The UI side of a kind (`crate::ui::lesson_ui::LessonUi`)
//! draws the output's views; [`REGISTRY`] lists every kind once (the lesson loader, the app,
//! `kvscope render`, the tests and `kvscope lessons check` iterate it), and the UI's table of views is made
//! from the same list (`lesson_table!`).
//!
//! Adding a lesson is one folder here, one line in `lesson_table!` below and one lesson file (see
//! ARCHITECTURE.md, "How to add a lesson").

pub mod attention_layer;
pub mod export;
pub mod questions;
#[cfg(feature = "native")]
pub mod set_args;

/// The list of lesson kinds: each kind's module and type, one line each. Calls `$callback!` with it, so
/// the compute side's [`REGISTRY`] (here) and the UI's table (`crate::ui::lesson_ui::LESSON_UIS`) come
/// from the one list.
macro_rules! lesson_table {
    ($callback:ident) => {
        $callback! {
            attention_matrix::AttentionMatrix,
            causal_mask::CausalMask,
            multi_head::MultiHead,
            kv_decode::KvDecode,
            paged_cache::PagedCache,
            flash_attention::FlashAttention,
            prefix_cache::PrefixCache,
            streaming::Streaming,
            eviction::Eviction,
            quant::Quant,
            arch::Arch,
            serving::Serving,
        }
    };
}
pub(crate) use lesson_table;

/// The registry: it declares the kinds' modules and makes [`REGISTRY`], which the lesson loader, the app,
/// `kvscope render`, the tests and `kvscope lessons check` iterate.
macro_rules! registry {
    ($($module:ident::$kind:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every lesson kind, in registry order (the compute side: no egui).
        pub static REGISTRY: [&'static dyn LessonKind; [$(stringify!($kind)),*].len()] = [$(&$module::$kind),*];
    };
}

lesson_table!(registry);

/// The kind lesson files call `name`.
pub fn kind_named(name: &str) -> Option<&'static dyn LessonKind> {
    REGISTRY.iter().copied().find(|k| k.name() == name)
}

/// A lesson file checked against its kind, which computes it.
pub type Lesson = crate::lesson_file::Lesson<dyn LessonKind>;

/// Parse one lesson file and check it against the registry's kinds. `file` names it in errors.
pub fn parse(file: &Path, src: &str) -> Result<Lesson, Vec<LessonError>> {
    crate::lesson_file::parse(file, src, &REGISTRY)
}

/// The lessons shipped in the binary, checked against the registry.
pub fn load_embedded() -> Result<Vec<Lesson>, Vec<LessonError>> {
    crate::lesson_file::load_embedded(&REGISTRY)
}

/// Lesson files given as (file name, contents), checked against the registry.
pub fn load_sources(files: &[(String, String)]) -> Result<Vec<Lesson>, Vec<LessonError>> {
    crate::lesson_file::load_sources(files, &REGISTRY)
}

/// Every `*.toml` in `dir`, checked against the registry.
pub fn load_dir(dir: &Path) -> Result<Vec<Lesson>, Vec<LessonError>> {
    crate::lesson_file::load_dir(dir, &REGISTRY)
}

impl std::fmt::Debug for dyn LessonKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LessonKind({})", self.name())
    }
}

use std::any::Any;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::{Array2, Array3, Axis};

use crate::compute::launch::Launch;
use crate::compute::{Backend, CheckReport, Kernel};
use crate::figure::HeatmapData;
pub use crate::lesson_file::{COMMON_PLACEHOLDERS, LessonError, Schema};
use crate::lessons::export::NamedArray;
use crate::math::Mask;

/// Slider values by parameter id.
pub type Params = BTreeMap<String, i64>;

/// What a lesson kind computes. Implemented once per kind; no egui here. What a lesson file may say
/// about the kind (its name, views, parameters, placeholders and timeline points) is its
/// [`Schema`], which the loader checks files against.
pub trait LessonKind: Schema + Send + Sync + 'static {
    /// The ops behind the lesson, in the order a student meets them (the kernel panel lists them).
    fn ops(&self) -> &'static [Kernel];
    /// The values parameter `id` may take given the others, when the kind restricts them (heads must
    /// divide d_model, KV heads must divide heads); `None` means every value in the slider's range.
    fn allowed_values(&self, _id: &str, _p: &Params) -> Option<Vec<i64>> {
        None
    }
    /// Compute the lesson's output for (normalised) `p` on `backend`.
    fn compute(&self, lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String>;
    /// The parameters that do not apply to what a step with `views` shows under `p` (the trained model
    /// fixes T, d, heads and layers), each with why, in English and Chinese: the app disables their
    /// sliders and says why on hover.
    fn idle_params(&self, _p: &Params, _views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        Vec::new()
    }
    /// The values of the placeholders: by default the output's ([`Output::values`]); a kind may add
    /// values computed from the lesson file (its model table) even before anything is computed.
    fn values(&self, _lesson: &Lesson, out: Option<&dyn Output>) -> Vec<(&'static str, String)> {
        out.map(|o| o.values()).unwrap_or_default()
    }
    /// The `kvscope export` subcommands this kind owns (`kvscope export` finds them here, through the
    /// registry); a kind without its own export has none.
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        Vec::new()
    }
    /// The `kvscope bench` subcommands this kind owns (its measurements, printed and stored), found
    /// through the registry as the exports are.
    #[cfg(feature = "native")]
    fn benches(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        Vec::new()
    }
    /// The lines this kind adds to `kvscope bench`'s same-run ratios (`--only ID`), if any.
    #[cfg(feature = "native")]
    fn ratio_lines(&self) -> Option<&'static dyn crate::command::RatioLines> {
        None
    }
}

/// Why lessons 1–3's random-weight sliders do not apply to the trained model.
pub const TRAINED_FIXES: [&str; 2] = [
    "The trained model fixes this: T is the text's length, d, heads and KV heads are the model's, and its weights are trained, not seeded.",
    "训练好的模型固定了它：T 是文本长度，d、头数与 KV 头数由模型决定，权重是训练所得而非随机种子。",
];

/// What an op reads from and writes to global memory, tensor by tensor, for the kernel panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpIo {
    /// Tensors read: name and shape.
    pub reads: Vec<(&'static str, Vec<usize>)>,
    /// Tensors written: name and shape.
    pub writes: Vec<(&'static str, Vec<usize>)>,
    /// Bytes per element.
    pub elem_bytes: usize,
}

impl OpIo {
    /// Bytes of a list of tensors.
    pub fn bytes(&self, tensors: &[(&'static str, Vec<usize>)]) -> usize {
        tensors.iter().map(|(_, s)| s.iter().product::<usize>()).sum::<usize>() * self.elem_bytes
    }
}

/// One computed lesson: what the views draw and what export, verification and the kernel panel need.
pub trait Output: Any + Send + Sync {
    /// The check reports made while computing (lessons whose kernels run step by step check as they go).
    fn reports(&self) -> Vec<&CheckReport> {
        Vec::new()
    }
    /// The reference check, run after the result is shown (a second phase on the worker). By default
    /// the reports made while computing.
    fn verify(&self) -> Vec<CheckReport> {
        self.reports().into_iter().cloned().collect()
    }
    /// Whether any value the views draw is NaN (masked entries are −∞, which is allowed).
    fn has_nan(&self) -> bool;
    /// The arrays of timeline position `cursor` for Ctrl+E, and the checks that go into the manifest
    /// (`verified`: the reference reports of the shown output, when they have arrived).
    fn export_arrays(&self, cursor: usize, verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>);
    /// Frames of the lesson's timeline (1 when it has none).
    fn frames(&self) -> usize {
        1
    }
    /// The values of the kind's placeholders, computed from this result (numbers in narration).
    fn values(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Where a named timeline point is in this result.
    fn point(&self, _name: &str) -> Option<usize> {
        None
    }
    /// The op the kernel panel opens on for this result, when it is not the lesson's first (a lesson
    /// whose sliders choose between kernels: lesson 10's formats).
    fn main_op(&self) -> Option<Kernel> {
        None
    }
    /// What `op` reads and writes in global memory for this result, when the lesson says.
    fn io(&self, _op: Kernel) -> Option<OpIo> {
        None
    }
    /// A check of `op`'s result made while computing (the fused kernel against the three kernels).
    fn op_check(&self, _op: Kernel) -> Option<&CheckReport> {
        None
    }
    /// Text that marks the line of `op`'s source the kernel panel highlights instead of the entry
    /// point (lesson 6 highlights the tile loop); it must occur in the CUDA source and its WGSL twin.
    fn source_focus(&self, _op: Kernel) -> Option<&'static str> {
        None
    }
    /// The shape of view `view` for a pick question, without its values (None: the view takes no
    /// picks in this result).
    fn pick_surface(&self, _view: &str) -> Option<questions::PickSurface> {
        None
    }
}

/// `template` with every `{name}` replaced by its value, and a placeholder without one by `missing`:
/// the app passes `…` while nothing is computed yet, and `—` once the result is in but did not reach
/// what the placeholder names (no request waited at these settings). Kinds fill only what they
/// computed, never a dash of their own, so the narration test can tell a missing value from a value.
///
/// A `{fact_<id>}` placeholder is filled with the published fact (`crate::facts`), between quote marks
/// that the narration renderer draws in the quoted style, with its Chinese unit when `zh` (a Chinese
/// narration).
pub fn fill(template: &str, values: &[(&'static str, String)], missing: &str, zh: bool) -> String {
    let mut out = template.to_string();
    for name in crate::lesson_file::placeholders(template) {
        let v = match crate::facts::of_placeholder(name) {
            Some(Ok(f)) => crate::facts::quoted(&f.shown_in(zh)),
            _ => values
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(missing, |(_, v)| v.as_str())
                .to_string(),
        };
        out = out.replace(&format!("{{{name}}}"), &v);
    }
    out
}

/// The published facts `template` quotes, in order of first use.
pub fn quoted_facts(template: &str) -> Vec<&'static crate::facts::Fact> {
    let mut out: Vec<&'static crate::facts::Fact> = Vec::new();
    for name in crate::lesson_file::placeholders(template) {
        if let Some(Ok(f)) = crate::facts::of_placeholder(name)
            && !out.iter().any(|g| g.id == f.id)
        {
            out.push(f);
        }
    }
    out
}

impl dyn Output {
    /// The concrete output of a kind.
    pub fn downcast_ref<T: Output>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }
}

/// Declare a kind's views: an enum whose variants carry the names lesson files use.
#[macro_export]
macro_rules! views {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every view's name, as lesson files write it.
            pub const NAMES: &'static [&'static str] = &[$($text),*];

            /// The view a lesson file names.
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// Its name in lesson files.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                }
            }
        }
    };
}

/// Read a parameter; `default` is only a fallback for parameters a caller built by hand (a lesson file
/// declares every parameter its kind reads: [`LessonKind::params`]). The read is recorded for the tests
/// ([`take_param_reads`]).
pub fn get(p: &Params, id: &str, default: i64) -> i64 {
    READS.with(|r| r.borrow_mut().insert(id.to_string(), p.contains_key(id)));
    p.get(id).copied().unwrap_or(default)
}

thread_local! {
    /// Every parameter id [`get`] read on this thread, and whether the parameters held it.
    static READS: std::cell::RefCell<BTreeMap<String, bool>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// The parameter ids [`get`] read on this thread since the last call, each with whether it was there
/// (`false`: the code read a parameter its lesson file lacks and got its default). The tests compare
/// them with [`LessonKind::params`].
pub fn take_param_reads() -> BTreeMap<String, bool> {
    READS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// The divisors of `n` (for sliders that must divide another).
pub fn divisors(n: i64) -> Vec<i64> {
    (1..=n.max(1)).filter(|d| n % d == 0).collect()
}

fn snap_to(v: i64, allowed: &[i64]) -> i64 {
    allowed.iter().copied().min_by_key(|a| (a - v).abs()).unwrap_or(v)
}

/// The values slider `id` of `lesson` may take now: the kind's restriction within the slider's range.
pub fn allowed_values(lesson: &Lesson, id: &str, p: &Params) -> Option<Vec<i64>> {
    let prm = lesson.file.params.iter().find(|x| x.id.get_ref() == id)?;
    lesson
        .kind
        .allowed_values(id, p)
        .map(|a| {
            a.into_iter()
                .filter(|v| (prm.lo()..=prm.hi()).contains(v))
                .collect::<Vec<_>>()
        })
        .filter(|a| !a.is_empty())
}

/// Bring dependent parameters back to valid values (in slider order), so that no slider
/// combination reaches a kernel with an impossible shape.
pub fn normalize(lesson: &Lesson, p: &mut Params) {
    for prm in &lesson.file.params {
        let id = prm.id.get_ref();
        let v = p
            .get(id)
            .copied()
            .unwrap_or(prm.default_value())
            .clamp(prm.lo(), prm.hi());
        p.insert(id.clone(), v);
    }
    for prm in &lesson.file.params {
        let id = prm.id.get_ref();
        if let Some(allowed) = allowed_values(lesson, id, p) {
            let v = snap_to(p[id], &allowed);
            p.insert(id.clone(), v);
        }
    }
}

/// Apply values given on the command line (`--set id=value`) to `p`: a value outside its slider's range,
/// or one that the lesson's other parameters rule out (heads must divide d_model, …), is an error that
/// names the range or the allowed set, instead of being clamped or snapped in silence. Ids the lesson
/// does not have are skipped (`kvscope render` applies one list to several lessons).
pub fn apply_set(lesson: &Lesson, p: &mut Params, sets: &[(String, i64)]) -> Result<(), String> {
    let ours = |id: &str| lesson.file.params.iter().find(|x| x.id.get_ref() == id);
    for (id, v) in sets {
        let Some(prm) = ours(id) else { continue };
        if !(prm.lo()..=prm.hi()).contains(v) {
            return Err(format!(
                "--set {id}={v}: lesson `{}` takes {id} in {}..={}",
                lesson.id(),
                prm.lo(),
                prm.hi()
            ));
        }
        p.insert(id.clone(), *v);
    }
    normalize(lesson, p);
    for (id, v) in sets.iter().filter(|(id, _)| ours(id).is_some()) {
        if p.get(id) != Some(v) {
            let allowed = allowed_values(lesson, id, p).unwrap_or_default();
            let list: Vec<String> = allowed.iter().map(i64::to_string).collect();
            return Err(format!(
                "--set {id}={v}: with the other parameters, lesson `{}` allows {id} in {{{}}}",
                lesson.id(),
                list.join(", ")
            ));
        }
    }
    Ok(())
}

/// Compute a lesson's output for `params` on `backend` (the parameters are normalised first).
pub fn compute(lesson: &Lesson, params: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
    let mut p = params.clone();
    normalize(lesson, &mut p);
    lesson.kind.compute(lesson, &p, backend)
}

/// [`compute`], and every launch the backend reported while computing (`compute::launch::capture`):
/// what the kernel panel shows ran.
pub fn compute_with_launches(
    lesson: &Lesson,
    params: &Params,
    backend: &dyn Backend,
) -> (Result<Box<dyn Output>, String>, Vec<Launch>) {
    crate::compute::launch::capture(|| compute(lesson, params, backend))
}

/// Ctrl+E: write timeline position `cursor` of `out` as `.npy` files plus `manifest.json` into `dir`.
pub fn export_step(
    lesson: &Lesson,
    params: &Params,
    out: &dyn Output,
    cursor: usize,
    verified: Option<&[CheckReport]>,
    backend: &dyn Backend,
    dir: &Path,
) -> Result<PathBuf, String> {
    let files = export_step_files(lesson, params, out, cursor, verified, backend)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the output folder {}: {e}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(&name);
        std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(dir.to_path_buf())
}

/// [`export_step`]'s files in memory (each `.npy`, then `manifest.json`), for the web build's download.
pub fn export_step_files(
    lesson: &Lesson,
    params: &Params,
    out: &dyn Output,
    cursor: usize,
    verified: Option<&[CheckReport]>,
    backend: &dyn Backend,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let (arrays, reports) = out.export_arrays(cursor, verified);
    let json = serde_json::to_value(params).map_err(|e| e.to_string())?;
    let seed = get(params, "seed", 0).max(0) as u64;
    crate::lessons::export::export_files(
        lesson.id(),
        json,
        seed,
        backend,
        &reports,
        &arrays,
        serde_json::Map::new(),
    )
    .map(|(_, files)| files)
    .map_err(|e| format!("{e:#}"))
}

/// [`export_step_files`] as one stored zip (the web build's Ctrl+E download).
pub fn export_step_zip(
    lesson: &Lesson,
    params: &Params,
    out: &dyn Output,
    cursor: usize,
    verified: Option<&[CheckReport]>,
    backend: &dyn Backend,
) -> Result<Vec<u8>, String> {
    export_step_files(lesson, params, out, cursor, verified, backend).map(|f| crate::lessons::export::zip_stored(&f))
}

/// The worst of several reports (largest max abs error; any failure first).
pub fn worst<'a>(reports: impl IntoIterator<Item = &'a CheckReport>) -> Option<&'a CheckReport> {
    reports.into_iter().max_by(|a, b| {
        (!a.passed(), a.max_abs)
            .partial_cmp(&(!b.passed(), b.max_abs))
            .unwrap_or(std::cmp::Ordering::Equal)
    })
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A fresh generation number for new heatmap data (the renderer re-uploads when it changes).
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Heatmap data of a `rows × cols` row-major matrix.
pub fn heat(rows: usize, cols: usize, values: Vec<f32>) -> Arc<HeatmapData> {
    let g = next_generation();
    Arc::new(
        HeatmapData::new(rows, cols, values, g)
            .unwrap_or_else(|_| HeatmapData::new(1, 1, vec![0.0], g).expect("1×1 is valid")),
    )
}

/// Heatmap data of a matrix.
pub fn heat_matrix(a: &Array2<f32>) -> Arc<HeatmapData> {
    heat(a.nrows(), a.ncols(), a.iter().copied().collect())
}

/// Heatmap data of head `h` of a `[H, rows, cols]` tensor.
pub fn heat_head(a: &Array3<f32>, h: usize) -> Arc<HeatmapData> {
    let m = a.index_axis(Axis(0), h);
    let values = match m.as_slice() {
        Some(s) => s.to_vec(),
        None => m.iter().copied().collect(),
    };
    heat(m.nrows(), m.ncols(), values)
}

/// Heatmap data of head `h` of probabilities computed under `mask`: an entry the mask hides and the
/// backend left exactly 0 becomes −∞, which the renderer hatches ("masked"), so it cannot be read as a
/// small probability. A masked entry that is not 0 (a kernel bug) keeps its value and its colour.
pub fn heat_probs(a: &Array3<f32>, h: usize, mask: Mask) -> Arc<HeatmapData> {
    let p = a.index_axis(Axis(0), h);
    let cols = p.ncols();
    let mut values = Vec::with_capacity(p.len());
    for (i, row) in p.rows().into_iter().enumerate() {
        // Copied row by row, then the mask's hidden keys that the backend left at 0.
        let start = values.len();
        values.extend(row.iter().copied());
        let row = &mut values[start..];
        for gap in mask.hidden(i, cols) {
            row[gap]
                .iter_mut()
                .filter(|v| **v == 0.0)
                .for_each(|v| *v = f32::NEG_INFINITY);
        }
    }
    heat(p.nrows(), cols, values)
}

/// Whether any value is NaN.
pub fn any_nan(v: &[f32]) -> bool {
    v.iter().any(|x| x.is_nan())
}

/// The words a step's narration uses for the model that ran, so that a step switched to SmolLM2 says
/// "tokens" where the tiny model's step says "bytes" (its tokens are bytes).
pub const MODEL_WORDS: &[&str] = &["model_name", "model_name_zh", "unit", "units", "unit_zh"];

/// The values of [`MODEL_WORDS`] for model `m`.
pub fn model_words(m: crate::model::ModelName) -> Vec<(&'static str, String)> {
    use crate::model::ModelName;
    let [name, name_zh, unit, units, unit_zh] = match m {
        ModelName::Tiny => [
            "kvscope's tiny trained model (byte-level)",
            "kvscope 的小型训练模型（按字节）",
            "byte",
            "bytes",
            "字节",
        ],
        ModelName::Smollm2 => [
            "SmolLM2-135M-Instruct",
            "SmolLM2-135M-Instruct",
            "token",
            "tokens",
            "token",
        ],
    };
    vec![
        ("model_name", name.into()),
        ("model_name_zh", name_zh.into()),
        ("unit", unit.into()),
        ("units", units.into()),
        ("unit_zh", unit_zh.into()),
    ]
}

/// Format bytes with binary units.
pub fn format_bytes(n: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

#[cfg(test)]
mod heat_tests {
    use super::*;

    /// `heat_probs` marks −∞ exactly the zeros the mask hides, for every kind of mask: it walks the
    /// mask's spans, and here each entry is compared with `Mask::visible`.
    #[test]
    fn heat_probs_hides_exactly_the_masked_zeros() {
        let (h, t) = (2, 13);
        // Zeros everywhere on head 1, and on the even columns of head 0: a visible zero stays 0.
        let a = Array3::from_shape_fn((h, t, t), |(k, _, j)| if k == 0 && j % 2 == 1 { 0.5 } else { 0.0 });
        for mask in [
            Mask::None,
            Mask::Causal,
            Mask::Window { window: 4, sinks: 2 },
            Mask::Window { window: 1, sinks: 0 },
            Mask::Window { window: 20, sinks: 3 },
            Mask::Window { window: 3, sinks: 20 },
        ] {
            for k in 0..h {
                let m = heat_probs(&a, k, mask);
                for i in 0..t {
                    for j in 0..t {
                        let v = a[[k, i, j]];
                        let want = if v == 0.0 && !mask.visible(i, j) {
                            f32::NEG_INFINITY
                        } else {
                            v
                        };
                        assert_eq!(m.values[i * t + j], want, "{mask:?} head {k} ({i}, {j})");
                    }
                }
            }
        }
    }
}
