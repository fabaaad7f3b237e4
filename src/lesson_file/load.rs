//! Reading lesson files: [`parse`] one file (serde, then every check, each error with its file, line and
//! column), and the loaders of the embedded lessons, a teacher's folder or dropped files.

use std::path::{Path, PathBuf};
use toml::Spanned;

use super::*;

/// 1-based (line, column) of byte `offset` in `src` (columns count characters).
fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Checker<'a> {
    file: &'a Path,
    src: &'a str,
    errors: Vec<LessonError>,
}

impl Checker<'_> {
    fn at(&mut self, span: std::ops::Range<usize>, message: impl Into<String>, hint: impl Into<String>) {
        let (line, col) = line_col(self.src, span.start);
        self.errors.push(LessonError {
            file: self.file.to_path_buf(),
            line,
            col,
            message: message.into(),
            hint: hint.into(),
        });
    }

    fn text(&mut self, t: &Spanned<Text>, what: &str) {
        for (lang, v, name) in [("en", &t.get_ref().en, "English"), ("zh", &t.get_ref().zh, "Chinese")] {
            if v.as_deref().is_none_or(|s| s.trim().is_empty()) {
                self.at(
                    t.span(),
                    format!("{what} has no {name} text"),
                    format!("add `{lang} = \"…\"` to it: every text is shown in English and in Chinese"),
                );
            }
        }
    }
}

/// Parse one lesson file and check it against its kind, one of `kinds`. `file` names it in errors.
pub fn parse<K: ?Sized + Schema>(file: &Path, src: &str, kinds: &[&'static K]) -> Result<Lesson<K>, Vec<LessonError>> {
    let mut c = Checker {
        file,
        src,
        errors: Vec::new(),
    };
    let lf: LessonFile = match toml::from_str(src) {
        Ok(lf) => lf,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            let hint = if msg.contains("unknown field") {
                "remove or rename the field; the fields each table accepts are documented on the structs in src/lesson_file/mod.rs"
            } else if msg.contains("missing field") {
                "add the field; see lessons/01-attention-matrix.toml for a complete example"
            } else {
                "fix the TOML syntax or the value's type at this position"
            };
            c.at(span, msg, hint);
            return Err(c.errors);
        }
    };
    let mut lf = lf;
    resolve_models(&mut c, &mut lf);
    let kind = check_header(&mut c, &lf, kinds);
    // The parameters, both ways: each one the file declares, its kind reads, and each one the kind
    // reads, the file declares (a typo on either side would otherwise fall back to a default in silence).
    if let Some(k) = kind {
        check_params_of_kind(&mut c, &lf, k);
    }
    check_params(&mut c, &lf);
    check_steps(&mut c, &lf, kind);
    check_requests_and_positions(&mut c, &lf);
    match (kind, c.errors.is_empty()) {
        (Some(kind), true) => Ok(Lesson {
            source: file.to_path_buf(),
            kind,
            file: lf,
        }),
        _ => Err(c.errors),
    }
}

/// The models the file names, from the published facts; an unknown name is an error at its position.
fn resolve_models(c: &mut Checker, lf: &mut LessonFile) {
    for n in &lf.model_names {
        match crate::facts::model(n.get_ref()) {
            Some(m) => lf.models.push(m.clone()),
            None => c.at(
                n.span(),
                format!("no model `{}` in the published facts", n.get_ref()),
                format!(
                    "models in {}: {} (add a `[[model]]` there, with its source, to quote another)",
                    crate::facts::PATH,
                    crate::facts::models()
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        }
    }
}

/// The file's version, kind (one of `kinds`), id and title; the kind, when it is known.
fn check_header<K: ?Sized + Schema>(c: &mut Checker, lf: &LessonFile, kinds: &[&'static K]) -> Option<&'static K> {
    if *lf.format_version.get_ref() != FORMAT_VERSION {
        c.at(
            lf.format_version.span(),
            format!("format_version {} is not supported", lf.format_version.get_ref()),
            format!("this build reads format_version = {FORMAT_VERSION}"),
        );
    }
    let kind = kinds.iter().copied().find(|k| k.name() == lf.kind.get_ref());
    if kind.is_none() {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        c.at(
            lf.kind.span(),
            format!("unknown lesson kind `{}`", lf.kind.get_ref()),
            format!("use one of: {}", names.join(", ")),
        );
    }
    if lf.id.get_ref().trim().is_empty()
        || !lf
            .id
            .get_ref()
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
    {
        c.at(
            lf.id.span(),
            "the id must be non-empty and use only letters, digits and `-`",
            "for example `id = \"attention-matrix\"`",
        );
    }
    c.text(&lf.title, "the lesson title");
    kind
}

/// The parameters the file declares against those its kind reads, both ways.
fn check_params_of_kind<K: ?Sized + Schema>(c: &mut Checker, lf: &LessonFile, k: &K) {
    for p in &lf.params {
        if !k.params().contains(&p.id.get_ref().as_str()) {
            c.at(
                p.id.span(),
                format!("lesson kind `{}` has no parameter `{}`", k.name(), p.id.get_ref()),
                format!("parameters of `{}`: {}", k.name(), k.params().join(", ")),
            );
        }
    }
    for id in k.params() {
        if !lf.params.iter().any(|p| p.id.get_ref() == id) {
            c.at(
                lf.kind.span(),
                format!(
                    "lesson kind `{}` reads parameter `{id}`, which this file does not declare",
                    k.name()
                ),
                format!("add a [[params]] table with id = \"{id}\""),
            );
        }
    }
}

/// Each parameter on its own: its label, a unique id, a default of its kind and within its range.
fn check_params(c: &mut Checker, lf: &LessonFile) {
    let mut seen = std::collections::HashSet::new();
    for p in &lf.params {
        c.text(&p.label, &format!("the label of parameter `{}`", p.id.get_ref()));
        if !seen.insert(p.id.get_ref().clone()) {
            c.at(
                p.id.span(),
                format!("parameter `{}` is defined twice", p.id.get_ref()),
                "give each parameter its own id",
            );
        }
        match (p.kind, *p.default.get_ref()) {
            (ParamKind::Bool, ParamValue::Int(v)) => c.at(
                p.default.span(),
                format!("switch `{}` has default {v}", p.id.get_ref()),
                "a `kind = \"bool\"` parameter's default is true or false",
            ),
            (ParamKind::Text, ParamValue::Int(v)) if !crate::model::texts::is_builtin(v) => c.at(
                p.default.span(),
                format!("text `{}` has default {v}", p.id.get_ref()),
                format!(
                    "a `kind = \"text\"` parameter's default is the index of a built-in text, 0 to {}",
                    crate::model::PROMPTS.len() - 1
                ),
            ),
            (ParamKind::Model, ParamValue::Int(v)) if !(p.lo()..=p.hi()).contains(&v) => c.at(
                p.default.span(),
                format!("model `{}` has default {v}", p.id.get_ref()),
                format!(
                    "a `kind = \"model\"` parameter's default is {} to {} (0 random weights, 1 the tiny model, 2 SmolLM2)",
                    p.lo(),
                    p.hi()
                ),
            ),
            (ParamKind::Int | ParamKind::Text | ParamKind::Model, ParamValue::Bool(v)) => c.at(
                p.default.span(),
                format!("slider `{}` has default {v}", p.id.get_ref()),
                "write an integer default, or add `kind = \"bool\"` for a switch",
            ),
            _ => {}
        }
        match p.kind {
            ParamKind::Bool if p.min.is_some() || p.max.is_some() => c.at(
                p.id.span(),
                format!("switch `{}` has min/max", p.id.get_ref()),
                "a `kind = \"bool\"` parameter is 0 or 1: remove min and max",
            ),
            ParamKind::Text if p.min.is_some() || p.max.is_some() => c.at(
                p.id.span(),
                format!("text `{}` has min/max", p.id.get_ref()),
                "a `kind = \"text\"` parameter picks a text: remove min and max",
            ),
            ParamKind::Model
                if p.min.is_some_and(|m| !(0..=2).contains(&m)) || p.max.is_some_and(|m| !(0..=2).contains(&m)) =>
            {
                c.at(
                    p.id.span(),
                    format!("model `{}` has a min or max outside 0 to 2", p.id.get_ref()),
                    "the models are 0 (random weights), 1 (the tiny model) and 2 (SmolLM2)",
                )
            }
            ParamKind::Int if p.min.is_none() || p.max.is_none() => c.at(
                p.id.span(),
                format!("slider `{}` needs both min and max", p.id.get_ref()),
                "add min = … and max = … (or kind = \"bool\" for a switch)",
            ),
            _ => {}
        }
        if p.lo() > p.hi() || p.step < 1 {
            c.at(
                p.id.span(),
                format!(
                    "parameter `{}` has min {} > max {} or step {} < 1",
                    p.id.get_ref(),
                    p.lo(),
                    p.hi(),
                    p.step
                ),
                "use min <= max and step >= 1",
            );
        }
        let d = p.default_value();
        if p.kind == ParamKind::Int && (d < p.lo() || d > p.hi()) {
            c.at(
                p.default.span(),
                format!(
                    "default {d} of parameter `{}` is outside {}..={}",
                    p.id.get_ref(),
                    p.lo(),
                    p.hi()
                ),
                "move the default into the range, or widen min/max",
            );
        }
    }
}

/// The steps: unique ids, both texts, what they set, their views; against the kind when it is known.
fn check_steps<K: ?Sized + Schema>(c: &mut Checker, lf: &LessonFile, kind: Option<&K>) {
    if lf.steps.is_empty() {
        c.at(
            lf.id.span(),
            "the lesson has no steps",
            "add at least one [[steps]] table",
        );
    }
    let mut step_ids = std::collections::HashSet::new();
    for s in &lf.steps {
        if !step_ids.insert(s.id.get_ref().clone()) {
            c.at(
                s.id.span(),
                format!("step `{}` is defined twice", s.id.get_ref()),
                "give each step its own id",
            );
        }
        c.text(&s.title, &format!("the title of step `{}`", s.id.get_ref()));
        c.text(&s.narration, &format!("the narration of step `{}`", s.id.get_ref()));
        for (id, v) in s.set.as_ref().map(|t| t.get_ref().iter()).into_iter().flatten() {
            let span = s.set.as_ref().map(|t| t.span()).unwrap_or_default();
            let ids: Vec<&str> = lf.params.iter().map(|p| p.id.get_ref().as_str()).collect();
            match lf.params.iter().find(|p| p.id.get_ref() == id) {
                None => c.at(
                    span,
                    format!("step `{}` sets `{id}`, which is not a parameter", s.id.get_ref()),
                    format!("parameters: {}", ids.join(", ")),
                ),
                Some(p) => {
                    let ok = match (p.kind, v) {
                        (ParamKind::Bool, ParamValue::Bool(_)) => true,
                        (ParamKind::Int | ParamKind::Model, ParamValue::Int(n)) => (p.lo()..=p.hi()).contains(n),
                        (ParamKind::Text, ParamValue::Int(n)) => crate::model::texts::is_builtin(*n),
                        _ => false,
                    };
                    if !ok {
                        c.at(
                            span,
                            format!("step `{}` sets `{id}` to a value it cannot take", s.id.get_ref()),
                            "a switch takes true or false; a slider an integer within min..=max; a text the index of a built-in text; a model 0 (random), 1 (tiny) or 2 (SmolLM2)",
                        );
                    }
                }
            }
        }
        if s.views.is_empty() {
            c.at(
                s.id.span(),
                format!("step `{}` shows no views", s.id.get_ref()),
                "list at least one view, e.g. views = [\"scores\"]",
            );
        }
        if let Some(pages) = &s.present_pages {
            check_present_pages(c, s, pages);
        }
        for q in &s.questions {
            check_question(c, s, q);
        }
        if let Some(k) = kind {
            check_step_for_kind(c, s, k);
        }
    }
}

/// A question of a step, apart from its kind: both languages, and a tolerance or choices that leave a
/// wrong answer.
fn check_question(c: &mut Checker, s: &Step, q: &crate::lesson_file::Question) {
    let id = s.id.get_ref();
    c.text(&q.ask, &format!("a question of step `{id}`"));
    c.text(&q.why, &format!("the `why` of a question of step `{id}`"));
    for ch in &q.choices {
        c.text(&ch.label, &format!("a choice of a question of step `{id}`"));
    }
    if q.choices.len() == 1 {
        c.at(
            q.answer.span(),
            format!("a question of step `{id}` has one choice, so every answer is right"),
            "give it two choices or more, or none for a number",
        );
    }
    let mut values: Vec<&str> = q.choices.iter().map(|ch| ch.value.as_str()).collect();
    values.sort_unstable();
    if values.windows(2).any(|w| w[0] == w[1]) {
        c.at(
            q.answer.span(),
            format!("two choices of a question of step `{id}` have the same value"),
            "give each choice its own value",
        );
    }
    if let Some(pick) = &q.pick {
        let views: Vec<&str> = s.views.iter().map(|v| v.get_ref().as_str()).collect();
        let view = &pick.get_ref().view;
        if !views.contains(&view.as_str()) {
            c.at(
                pick.span(),
                format!("a question of step `{id}` picks on the view `{view}`, which the step does not show"),
                format!("pick on one of the step's views: {}", views.join(", ")),
            );
        }
        if !q.choices.is_empty() || q.tolerance.is_some() {
            c.at(
                pick.span(),
                format!("a pick question of step `{id}` also has choices or a tolerance"),
                "a pick is right or wrong: remove the choices and the tolerance",
            );
        }
    }
    if let Some(t) = &q.tolerance {
        let v = *t.get_ref();
        if !q.choices.is_empty() {
            c.at(
                t.span(),
                format!("a choice question of step `{id}` has a tolerance"),
                "remove it: a choice is right or wrong",
            );
        } else if !(0.0..0.5).contains(&v) {
            c.at(
                t.span(),
                format!("the tolerance {v} of a question of step `{id}` makes (nearly) every answer right"),
                "give a fraction of the answer from 0 (exact) up to below 0.5, e.g. 0.1 for within 10%",
            );
        }
    }
}

/// A step's presentation pages: none empty, each view one of the step's, and every view of the step on
/// a page.
fn check_present_pages(c: &mut Checker, s: &Step, pages: &Spanned<Vec<Vec<String>>>) {
    let views: Vec<&str> = s.views.iter().map(|v| v.get_ref().as_str()).collect();
    let id = s.id.get_ref();
    if pages.get_ref().iter().any(Vec::is_empty) || pages.get_ref().is_empty() {
        c.at(
            pages.span(),
            format!("step `{id}` has an empty presentation page"),
            "give each page at least one view, e.g. present_pages = [[\"pool\"], [\"events\"]]",
        );
    }
    for v in pages.get_ref().iter().flatten() {
        if !views.contains(&v.as_str()) {
            c.at(
                pages.span(),
                format!("the presentation pages of step `{id}` name `{v}`, which the step does not show"),
                format!("the step's views: {}", views.join(", ")),
            );
        }
    }
    for v in &views {
        if !pages.get_ref().iter().flatten().any(|p| p == v) {
            c.at(
                pages.span(),
                format!("the presentation pages of step `{id}` leave out its view `{v}`"),
                "put every view of the step on at least one page",
            );
        }
    }
}

/// One step against its kind: the placeholders its narration uses, its timeline point, its views.
fn check_step_for_kind<K: ?Sized + Schema>(c: &mut Checker, s: &Step, k: &K) {
    for t in [&s.narration.get_ref().en, &s.narration.get_ref().zh]
        .into_iter()
        .flatten()
    {
        for name in placeholders(t) {
            if let Some(fact) = crate::facts::of_placeholder(name) {
                if let Err(id) = fact {
                    c.at(
                        s.narration.span(),
                        format!(
                            "the narration of step `{}` quotes `{{{name}}}`, but there is no published fact `{id}`",
                            s.id.get_ref()
                        ),
                        format!(
                            "facts in {}: {}",
                            crate::facts::PATH,
                            crate::facts::all()
                                .iter()
                                .map(|f| f.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                continue;
            }
            if !k.placeholders().contains(&name) && !COMMON_PLACEHOLDERS.contains(&name) {
                c.at(
                    s.narration.span(),
                    format!(
                        "the narration of step `{}` uses `{{{name}}}`, which lesson kind `{}` does not fill",
                        s.id.get_ref(),
                        k.name()
                    ),
                    if k.placeholders().is_empty() {
                        format!(
                            "kind `{}` fills no placeholders of its own (every lesson may use {})",
                            k.name(),
                            COMMON_PLACEHOLDERS.join(", ")
                        )
                    } else {
                        format!(
                            "placeholders of `{}`: {} (and, in every lesson, {})",
                            k.name(),
                            k.placeholders().join(", "),
                            COMMON_PLACEHOLDERS.join(", ")
                        )
                    },
                );
            }
        }
    }
    for q in &s.questions {
        let known = |name: &str| k.placeholders().contains(&name) || COMMON_PLACEHOLDERS.contains(&name);
        let name = q.answer.get_ref();
        if !known(name) || name == "ran_on" {
            c.at(
                q.answer.span(),
                format!(
                    "a question of step `{}` is answered by `{name}`, which lesson kind `{}` does not fill",
                    s.id.get_ref(),
                    k.name()
                ),
                format!("placeholders of `{}`: {}", k.name(), k.placeholders().join(", ")),
            );
        }
        for t in [&q.ask, &q.why] {
            for text in [&t.get_ref().en, &t.get_ref().zh].into_iter().flatten() {
                for name in placeholders(text) {
                    if crate::facts::of_placeholder(name).is_none() && !known(name) {
                        c.at(
                            t.span(),
                            format!(
                                "a question of step `{}` uses `{{{name}}}`, which lesson kind `{}` does not fill",
                                s.id.get_ref(),
                                k.name()
                            ),
                            format!("placeholders of `{}`: {}", k.name(), k.placeholders().join(", ")),
                        );
                    }
                }
            }
        }
    }
    if let Some(at) = &s.at
        && let At::Point(name) = at.get_ref()
        && !k.timeline_points().contains(&name.as_str())
    {
        c.at(
            at.span(),
            format!("lesson kind `{}` has no timeline point `{name}`", k.name()),
            if k.timeline_points().is_empty() {
                "use a number (the timeline position)".to_string()
            } else {
                format!(
                    "points of `{}`: {} (or a number)",
                    k.name(),
                    k.timeline_points().join(", ")
                )
            },
        );
    }
    for v in &s.views {
        if !k.view_names().contains(&v.get_ref().as_str()) {
            c.at(
                v.span(),
                format!("lesson kind `{}` has no view `{}`", k.name(), v.get_ref()),
                format!("views of `{}`: {}", k.name(), k.view_names().join(", ")),
            );
        }
    }
}

/// The scripted requests (none empty) and each step's timeline position (within range).
fn check_requests_and_positions(c: &mut Checker, lf: &LessonFile) {
    for r in &lf.requests {
        if r.get_ref().prompt == 0 {
            c.at(
                r.span(),
                "a request has an empty prompt",
                "give every request `prompt >= 1`",
            );
        }
    }
    for s in &lf.steps {
        if let Some(at) = &s.at
            && let At::Step(v) = at.get_ref()
            && (*v < 0 || *v > 100_000)
        {
            c.at(
                at.span(),
                format!("`at = {v}` is outside 0..=100000"),
                "use the decode token (lesson 4) or scheduler step (lesson 5) the step should open at",
            );
        }
    }
}

/// The lessons shipped in the binary: every `lessons/*.toml` (listed by `build.rs`), by file name.
pub const EMBEDDED: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/embedded_lessons.rs"));

/// Every lesson, sorted by `order`, or every error found (all files are checked). Duplicate ids and
/// orders across files are errors too.
fn finish<K: ?Sized>(results: Vec<Result<Lesson<K>, Vec<LessonError>>>) -> Result<Vec<Lesson<K>>, Vec<LessonError>> {
    let mut lessons = Vec::new();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(l) => lessons.push(l),
            Err(e) => errors.extend(e),
        }
    }
    lessons.sort_by_key(|l| l.file.order);
    for w in lessons.windows(2) {
        if w[0].id() == w[1].id() || w[0].file.order == w[1].file.order {
            errors.push(LessonError {
                file: w[1].source.clone(),
                line: 1,
                col: 1,
                message: format!(
                    "lesson `{}` has the same id or order as {}",
                    w[1].id(),
                    w[0].source.display()
                ),
                hint: "give every lesson its own id and order".into(),
            });
        }
    }
    if errors.is_empty() { Ok(lessons) } else { Err(errors) }
}

/// The embedded lessons, each checked against its kind, one of `kinds`.
pub fn load_embedded<K: ?Sized + Schema>(kinds: &[&'static K]) -> Result<Vec<Lesson<K>>, Vec<LessonError>> {
    finish(
        EMBEDDED
            .iter()
            .map(|(name, src)| parse(&Path::new("lessons").join(name), src, kinds))
            .collect(),
    )
}

/// Lesson files given as (file name, contents), e.g. dropped on the web page, each checked against its
/// kind, one of `kinds`; errors name the file as given.
pub fn load_sources<K: ?Sized + Schema>(
    files: &[(String, String)],
    kinds: &[&'static K],
) -> Result<Vec<Lesson<K>>, Vec<LessonError>> {
    if files.is_empty() {
        return Err(vec![LessonError {
            file: PathBuf::from("(no files)"),
            line: 0,
            col: 0,
            message: "no *.toml lesson files were given".into(),
            hint: "drop one or more lesson files, like those in lessons/".into(),
        }]);
    }
    finish(
        files
            .iter()
            .map(|(name, src)| parse(Path::new(name), src, kinds))
            .collect(),
    )
}

/// Every `*.toml` in `dir`, each checked against its kind, one of `kinds`.
pub fn load_dir<K: ?Sized + Schema>(dir: &Path, kinds: &[&'static K]) -> Result<Vec<Lesson<K>>, Vec<LessonError>> {
    let io_err = |e: std::io::Error, p: &Path| {
        vec![LessonError {
            file: p.to_path_buf(),
            line: 0,
            col: 0,
            message: e.to_string(),
            hint: "check that the folder exists and is readable".into(),
        }]
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_err(e, dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(vec![LessonError {
            file: dir.to_path_buf(),
            line: 0,
            col: 0,
            message: "no *.toml lesson files here".into(),
            hint: "point at a folder of lesson files, like lessons/".into(),
        }]);
    }
    finish(
        paths
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .map_err(|e| io_err(e, p))
                    .and_then(|src| parse(p, &src, kinds))
            })
            .collect(),
    )
}
