//! `--set id=value` sliders and the lesson files for the command line, and the replay exports of
//! lessons that write one JSON file computed at given sliders (`kvscope export schedule`,
//! `prefix-schedule`). Desktop build only.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::compute::BackendKind;
use crate::lessons::Output;

/// One `--set id=value`: an integer (a slider, a switch as 0/1, or a built-in text's index), or any
/// other value, which only a text parameter takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetArg {
    /// The parameter id.
    pub id: String,
    /// The value as written.
    pub value: SetValue,
}

/// The value of a [`SetArg`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValue {
    /// An integer.
    Int(i64),
    /// A text, for a `kind = "text"` parameter.
    Text(String),
}

/// `id=value`, for `--set`.
pub fn parse_set(s: &str) -> Result<SetArg, String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected id=value"))?;
    let value = match v.trim().parse::<i64>() {
        Ok(n) => SetValue::Int(n),
        Err(_) => SetValue::Text(v.to_string()),
    };
    Ok(SetArg {
        id: k.trim().to_string(),
        value,
    })
}

/// Every `--set` name must be a parameter of at least one of `lessons` (the error lists theirs), and
/// a value that is not an integer must go to a text parameter; texts become their ids.
pub fn check_sets(lessons: &[&crate::lessons::Lesson], set: &[SetArg]) -> Result<Vec<(String, i64)>> {
    use crate::lesson_file::ParamKind;
    let mut known: Vec<String> = Vec::new();
    for l in lessons {
        for p in &l.file.params {
            if !known.contains(p.id.get_ref()) {
                known.push(p.id.get_ref().clone());
            }
        }
    }
    let mut out = Vec::new();
    for a in set {
        let k = &a.id;
        if !known.contains(k) {
            let ids: Vec<&str> = lessons.iter().map(|l| l.id()).collect();
            anyhow::bail!(
                "--set {k}: no such parameter in {} (parameters: {})",
                ids.join(", "),
                known.join(", ")
            );
        }
        let is_text = lessons
            .iter()
            .flat_map(|l| &l.file.params)
            .any(|p| p.id.get_ref() == k && p.kind == ParamKind::Text);
        let is_model = lessons
            .iter()
            .flat_map(|l| &l.file.params)
            .any(|p| p.id.get_ref() == k && p.kind == ParamKind::Model);
        let v = match &a.value {
            SetValue::Int(n) => *n,
            SetValue::Text(t) if is_model => match t.as_str() {
                "random" => 0,
                "tiny" => 1,
                "smollm2" => 2,
                _ => anyhow::bail!("--set {k}={t}: a model is random, tiny or smollm2 (or 0, 1, 2)"),
            },
            SetValue::Text(t) if is_text => crate::model::texts::intern(t)
                .ok_or_else(|| anyhow::anyhow!("--set {k}=: the text is empty (the model needs at least one byte)"))?,
            SetValue::Text(t) => anyhow::bail!("--set {k}={t}: `{k}` takes an integer"),
        };
        out.push((k.clone(), v));
    }
    Ok(out)
}

/// The lessons: a teacher's folder, or the embedded ones; errors name file, line and column.
pub fn load_lessons(dir: Option<&std::path::Path>) -> Result<Vec<crate::lessons::Lesson>> {
    let loaded = match dir {
        Some(d) => crate::lessons::load_dir(d),
        None => crate::lessons::load_embedded(),
    };
    loaded.map_err(|errors| {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("the lesson files have errors:\n{}", text.join("\n"))
    })
}

/// Compute lesson `lesson` with the `set` sliders on backend `kind` and write its replay, which
/// `replay` reads from the output (or names the kind of lesson it needs), as `out/file`.
pub fn write_replay(
    lesson: &str,
    set: Vec<SetArg>,
    kind: BackendKind,
    out: &Path,
    lessons: Option<&Path>,
    file: &str,
    replay: impl Fn(&dyn Output) -> Result<(serde_json::Value, String), &'static str>,
) -> Result<()> {
    let all = load_lessons(lessons)?;
    let Some(l) = all.iter().find(|l| l.id() == lesson) else {
        let ids: Vec<&str> = all.iter().map(|l| l.id()).collect();
        bail!("no lesson `{lesson}` (lessons: {})", ids.join(", "));
    };
    let set = check_sets(&[l], &set)?;
    let mut params = crate::lessons::Params::new();
    crate::lessons::apply_set(l, &mut params, &set).map_err(|e| anyhow::anyhow!(e))?;
    let b = crate::command::backend(kind)?;
    let computed = crate::lessons::compute(l, &params, b.as_ref()).map_err(|e| anyhow::anyhow!(e))?;
    let (json, what) = match replay(computed.as_ref()) {
        Ok(r) => r,
        Err(needed) => bail!("lesson `{lesson}` is of kind `{}`, not {needed}", l.kind.name()),
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    outln!("wrote {} ({what})", path.display());
    Ok(())
}
