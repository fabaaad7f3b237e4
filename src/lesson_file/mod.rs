//! Lessons as data: `lessons/*.toml` files (texts in English and Chinese, parameters with their slider
//! ranges, ordered steps with the views they show) loaded into typed structs and validated.
//!
//! How it works: serde reads a file into [`LessonFile`] with `deny_unknown_fields`, and every field a
//! check may need to point at is `toml::Spanned`, so each error names the file, line and column and
//! says how to fix it: an unknown field, a missing Chinese text, a default outside its range, a view the
//! lesson's kind does not know. The computation and views of each lesson kind are Rust code (one module
//! per kind in [`crate::lessons`]); the files hold only texts, numbers and scripts. The shipped lessons are embedded in the binary;
//! `kvscope --lessons DIR` and `kvscope lessons check DIR` read a teacher's own folder instead.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

pub use crate::facts::ModelConfig;

mod load;
pub use load::{EMBEDDED, load_dir, load_embedded, load_sources, parse};

/// The lesson-file format this build reads.
pub const FORMAT_VERSION: u32 = 1;

/// A text in both languages of the app.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Text {
    /// English.
    pub en: Option<String>,
    /// Chinese (简体中文).
    pub zh: Option<String>,
}

/// One lesson file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessonFile {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: Spanned<u32>,
    /// Unique id, e.g. `attention-matrix`; the app stores it to reopen the lesson.
    pub id: Spanned<String>,
    /// Which lesson kind computes and draws it (a kind of [`crate::lessons::REGISTRY`]).
    pub kind: Spanned<String>,
    /// Position in the navigator (1, 2, …).
    pub order: u32,
    /// Title shown in the navigator.
    pub title: Spanned<Text>,
    /// The lesson's sliders.
    #[serde(default)]
    pub params: Vec<Param>,
    /// The ordered steps.
    pub steps: Vec<Step>,
    /// Reference models by name (lesson 3's KV-bytes table, lesson 4's weights against K/V), each one a
    /// `[[model]]` of the published facts (`assets/facts.toml`).
    #[serde(default, rename = "models")]
    pub model_names: Vec<Spanned<String>>,
    /// The models named, resolved from the published facts at load.
    #[serde(skip)]
    pub models: Vec<ModelConfig>,
    /// A scripted serving scenario (lesson 5): requests with arrival step, prompt and generation
    /// lengths. The `requests` parameter, when present, chooses how many of them take part.
    #[serde(default)]
    pub requests: Vec<Spanned<ScenarioRequest>>,
    /// Whether the kernel exercises of this lesson offer "Show solution" (`show_solutions = false` for
    /// an exam; default true).
    #[serde(default)]
    pub show_solutions: Option<bool>,
}

/// One request of a scripted scenario.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRequest {
    /// Scheduler step at which it arrives (0-based).
    pub arrive: u32,
    /// Prompt tokens (at least 1), prefilled in one step.
    pub prompt: u32,
    /// Tokens to generate after the prompt.
    pub generate: u32,
}

/// A lesson parameter: a slider over integers (`kind = "int"`, the default), a switch
/// (`kind = "bool"`, shown as a checkbox, stored as 0/1), a text for the trained model
/// (`kind = "text"`: a list of example texts and a field to type one, stored as an id of
/// [`crate::model::texts`]; the default is the index of a built-in text), or which model runs
/// (`kind = "model"`: [`crate::model::choice::Choice`]'s values, 0 random weights, 1 the tiny model, 2
/// SmolLM2; `min`/`max` may narrow the choices).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Id the lesson code reads (`seq`, `d_model`, `heads`, `kv_heads`, `seed`, …).
    pub id: Spanned<String>,
    /// Label next to the slider.
    pub label: Spanned<Text>,
    /// `int` (a slider), `bool` (a switch) or `text`.
    #[serde(default)]
    pub kind: ParamKind,
    /// Starting value: an integer in `min..=max` for `int`, `true` or `false` for `bool`.
    pub default: Spanned<ParamValue>,
    /// Smallest value (`int` only; required there).
    pub min: Option<i64>,
    /// Largest value (`int` only; required there).
    pub max: Option<i64>,
    /// Slider step (at least 1).
    #[serde(default = "one")]
    pub step: i64,
}

/// What kind of control a parameter is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    /// An integer slider.
    #[default]
    Int,
    /// An on/off switch.
    Bool,
    /// A text the trained model reads: a built-in one or one the user types.
    Text,
    /// Which model runs ([`crate::model::choice::Choice`]).
    Model,
}

/// A parameter's default as written in the lesson file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
}

impl ParamValue {
    /// As a slider value (a switch's `true` is 1).
    pub fn as_i64(self) -> i64 {
        match self {
            ParamValue::Bool(b) => i64::from(b),
            ParamValue::Int(v) => v,
        }
    }
}

impl Param {
    /// The smallest value (0 for a switch).
    pub fn lo(&self) -> i64 {
        match self.kind {
            ParamKind::Bool | ParamKind::Text => 0,
            ParamKind::Int => self.min.unwrap_or(0),
            ParamKind::Model => self.min.unwrap_or(0).clamp(0, 2),
        }
    }

    /// The largest value (1 for a switch).
    pub fn hi(&self) -> i64 {
        match self.kind {
            ParamKind::Bool => 1,
            ParamKind::Text => crate::model::texts::count() as i64 - 1,
            ParamKind::Int => self.max.unwrap_or(self.lo()),
            ParamKind::Model => self.max.unwrap_or(2).clamp(self.lo(), 2),
        }
    }

    /// The default as a value (a switch's `true` is 1).
    pub fn default_value(&self) -> i64 {
        self.default.get_ref().as_i64()
    }
}

fn one() -> i64 {
    1
}

/// One step of a lesson.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Short id, unique within the lesson.
    pub id: Spanned<String>,
    /// Heading of the step.
    pub title: Spanned<Text>,
    /// Narration, Markdown.
    pub narration: Spanned<Text>,
    /// Views shown, by id; each must be one the lesson kind knows.
    pub views: Vec<Spanned<String>>,
    /// In presentation mode, the views on pages of their own (`present_pages = [["outputs"], ["pool",
    /// "events"]]`): each list one page, laid out as `views` would be, the presenter's → stepping
    /// through them. Every view of `views` is on at least one page and no page names another. For a step
    /// whose views do not all fit one slide at the presentation floor; the window shows `views` at once.
    #[serde(default)]
    pub present_pages: Option<Spanned<Vec<Vec<String>>>>,
    /// Questions the student answers before the step's views reveal what the lesson computed
    /// (`[[steps.questions]]`): predict, then see.
    #[serde(default)]
    pub questions: Vec<Question>,
    /// What the views highlight.
    #[serde(default)]
    pub highlight: Option<Highlight>,
    /// Where the step moves the lesson's timeline when it opens: a position (the decode token for
    /// lesson 4, 0 = just after prefill; the scheduler step for lesson 5), or a point the lesson finds
    /// in its own result (`at = "preempt"`), so the step stays right when a slider moves. The user can
    /// move on from there.
    #[serde(default)]
    pub at: Option<Spanned<At>>,
    /// Parameters the step sets when it opens (`set = { weights = true }`), for a step about one
    /// setting; the user can change them from there.
    #[serde(default)]
    pub set: Option<Spanned<BTreeMap<String, ParamValue>>>,
}

impl Step {
    /// The parameters the step sets when it opens, as slider values (none when it sets nothing).
    pub fn set_params(&self) -> BTreeMap<String, i64> {
        self.set
            .as_ref()
            .map(|t| t.get_ref().iter().map(|(k, v)| (k.clone(), v.as_i64())).collect())
            .unwrap_or_default()
    }
}

/// A question on a step: the student predicts what the step's run will show, and the lesson's own result
/// answers it. The answer is never typed into the file: it is a placeholder the lesson's kind fills from
/// the run the step shows (the same values the narration uses).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The question (Markdown), in both languages; it may use placeholders, filled as the narration's.
    pub ask: Spanned<Text>,
    /// The placeholder whose value answers it: a number (its first number is the answer), or for a
    /// choice one of the choices' `value`s.
    pub answer: Spanned<String>,
    /// For a choice: the choices, in the order shown (none: the answer is a number).
    #[serde(default)]
    pub choices: Vec<Choice>,
    /// For a number: how far from the answer a guess may be and still count, as a fraction of the answer
    /// (0.1: within 10%); 0 (the default) asks for the answer as the lesson shows it. Below 0.5, or every
    /// guess near zero would count.
    #[serde(default)]
    pub tolerance: Option<Spanned<f64>>,
    /// For a number: its unit after the answer box (`{ en = "blocks", zh = "块" }`).
    #[serde(default)]
    pub unit: Option<Text>,
    /// For a pick: the view whose cell, row or block the student clicks (`pick = { view = "probs", on =
    /// "cell" }`). The answer placeholder is then the index of the item the run picks; the app draws the
    /// view's shape without its values to pick on (the lesson's `pick_surface`), so the view cannot give
    /// the answer away.
    #[serde(default)]
    pub pick: Option<Spanned<Pick>>,
    /// What the answer shows, said when it is revealed (both languages; placeholders allowed).
    pub why: Spanned<Text>,
}

/// What a pick question picks on: a view of the step, and what one click chooses there.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pick {
    /// The view (one the step shows).
    pub view: String,
    /// What a click picks.
    pub on: PickOn,
}

/// What one click of a pick question chooses.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PickOn {
    /// One cell of a heatmap (its index is `row × cols + col`).
    Cell,
    /// One row of a heatmap (a query).
    Row,
    /// One block of a pool.
    Block,
}

/// One choice of a [`Question`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The value the answer placeholder takes when this choice is right.
    pub value: String,
    /// What the choice says, in both languages.
    pub label: Spanned<Text>,
}

/// Where a step opens a lesson's timeline.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum At {
    /// A timeline position.
    Step(i64),
    /// A named point of the lesson kind (its `timeline_points`), found in the computed result.
    Point(String),
}

/// The `{name}` placeholders in `text`: names of lowercase letters, digits and `_`.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        if let Some(j) = rest.find('}') {
            let name = &rest[..j];
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                out.push(name);
            }
        }
    }
    out
}

/// A highlight: a query row, a key column, or both.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Highlight {
    /// The query (row) to highlight.
    pub row: Option<i64>,
    /// The key (column) to highlight.
    pub col: Option<i64>,
}

/// A problem in a lesson file, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LessonError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl fmt::Display for LessonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.col,
            self.message
        )?;
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for LessonError {}

/// What a lesson file may say about its kind: the kind's name, views, parameters, placeholders and
/// timeline points. The loader checks each file against its kind's schema (both ways for the
/// parameters); the lesson kinds (`crate::lessons::LessonKind`, which computes) implement it, and the
/// loader is handed their list, so this data layer knows no lesson code.
pub trait Schema: Send + Sync {
    /// The name lesson files use (`kind = "paged"`).
    fn name(&self) -> &'static str;
    /// The views this kind draws, by the names lesson files use.
    fn view_names(&self) -> &'static [&'static str];
    /// The parameters its code reads (computing or drawing), by id: a lesson file of this kind declares
    /// exactly these (checked both ways at load, with file:line:col), so a typo on either side is an
    /// error instead of a silent default.
    fn params(&self) -> &'static [&'static str];
    /// The `{name}` placeholders its narration may use, which the kind fills.
    fn placeholders(&self) -> &'static [&'static str] {
        &[]
    }
    /// The named timeline points a step may open at (`at = "name"`).
    fn timeline_points(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Placeholders every lesson's narration may use, filled by the app rather than by a kind:
/// `ran_on` names the code that computed the shown result and where ("WGSL on llvmpipe (Vulkan)").
pub const COMMON_PLACEHOLDERS: &[&str] = &["ran_on"];

/// A validated lesson, of kind `K` (`crate::lessons::Lesson` is the one the app uses).
#[derive(Debug)]
pub struct Lesson<K: ?Sized + 'static> {
    /// Where it came from (a path, or `embedded:lessons/NAME`).
    pub source: PathBuf,
    /// Its kind.
    pub kind: &'static K,
    /// The file's contents.
    pub file: LessonFile,
}

impl<K: ?Sized> Clone for Lesson<K> {
    fn clone(&self) -> Self {
        Lesson {
            source: self.source.clone(),
            kind: self.kind,
            file: self.file.clone(),
        }
    }
}

impl<K: ?Sized> Lesson<K> {
    /// The id.
    pub fn id(&self) -> &str {
        self.file.id.get_ref()
    }
}
