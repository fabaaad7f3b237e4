//! Lesson files: the shipped ones validate, and each kind of mistake gets an error that names the
//! file, line and column and says how to fix it.

use std::path::Path;
use std::process::Command;

use kvscope::lesson_file::{EMBEDDED, LessonError};
use kvscope::lessons as lesson;

const GOOD: &str = r#"format_version = 1
id = "demo"
kind = "attention"
order = 1
title = { en = "Demo", zh = "演示" }

[[params]]
id = "seq"
label = { en = "Tokens", zh = "token 数" }
default = 8
min = 1
max = 64

[[steps]]
id = "a"
title = { en = "A", zh = "甲" }
narration = { en = "Some text.", zh = "一些文字。" }
views = ["scores"]

# The other parameters kind "attention" reads (a file declares exactly its kind's).
[[params]]
id = "d_model"
label = { en = "Width", zh = "宽度" }
default = 16
min = 1
max = 128

[[params]]
id = "scale_on"
kind = "bool"
label = { en = "Scale", zh = "缩放" }
default = true

[[params]]
id = "seed"
label = { en = "Seed", zh = "种子" }
default = 0
min = 0
max = 9999

[[params]]
id = "model"
kind = "model"
label = { en = "Model", zh = "模型" }
default = 0

[[params]]
id = "prompt"
kind = "text"
label = { en = "Text", zh = "文本" }
default = 0

[[params]]
id = "layer"
label = { en = "Layer", zh = "层" }
default = 0
min = 0
max = 3

[[params]]
id = "head"
label = { en = "Head", zh = "头" }
default = 0
min = 0
max = 3
"#;

fn errors(src: &str) -> Vec<LessonError> {
    lesson::parse(Path::new("lessons/demo.toml"), src).expect_err("the file is malformed")
}

#[test]
fn shipped_lessons_validate_and_compute_the_model_table() {
    let lessons = lesson::load_embedded()
        .unwrap_or_else(|e| panic!("{}", e.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")));
    assert_eq!(lessons.len(), EMBEDDED.len());
    // Every shipped file is one lesson, in file order, with the id its file gives and no id twice:
    // read from the files themselves, so a new lesson needs no edit here.
    let ids: Vec<&str> = lessons.iter().map(|l| l.id()).collect();
    let from_files: Vec<String> = EMBEDDED
        .iter()
        .map(|(name, text)| {
            let v: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            v["id"].as_str().unwrap_or_else(|| panic!("{name}: no id")).to_string()
        })
        .collect();
    assert_eq!(ids, from_files);
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an id twice: {ids:?}");
    let llama = lessons
        .iter()
        .flat_map(|l| l.file.models.iter())
        .find(|m| m.name == "Llama-3-8B")
        .expect("Llama-3-8B in a lesson's model table");
    assert_eq!(llama.kv_bytes_per_token(), 128 * 1024);
    // The folder on disk is the same as the embedded copy.
    let dir = lesson::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap();
    assert_eq!(dir.len(), lessons.len());
    assert!(lesson::parse(Path::new("x.toml"), GOOD).is_ok());
}

#[test]
fn each_mistake_names_its_line_and_column() {
    // (edit of GOOD, expected line, expected column, words in the message, words in the hint)
    let cases: [(String, usize, usize, &str, &str); 20] = [
        (
            GOOD.replace("default = 8\nmin = 1\nmax = 64", "kind = \"bool\"\ndefault = 1"),
            11,
            11,
            "switch `seq` has default 1",
            "true or false",
        ),
        (
            GOOD.replace("default = 8", "default = true"),
            10,
            11,
            "slider `seq` has default true",
            "kind = \"bool\"",
        ),
        (
            GOOD.replace("default = 8", "kind = \"bool\"\ndefault = true"),
            8,
            6,
            "switch `seq` has min/max",
            "remove min and max",
        ),
        (
            GOOD.replace("Some text.", "The pool fills at step {oom_step}."),
            17,
            13,
            "uses `{oom_step}`, which lesson kind `attention` does not fill",
            "placeholders of `attention`: seq, cells, row_sum",
        ),
        (
            GOOD.replace(r#"views = ["scores"]"#, "views = [\"scores\"]\nat = \"preempt\""),
            19,
            6,
            "has no timeline point `preempt`",
            "use a number",
        ),
        (
            GOOD.replace("max = 64\n", "max = 64\ncolour = 3\n"),
            13,
            1,
            "unknown field `colour`",
            "remove or rename",
        ),
        (
            GOOD.replace(
                r#"narration = { en = "Some text.", zh = "一些文字。" }"#,
                r#"narration = { en = "Some text." }"#,
            ),
            17,
            13,
            "no Chinese text",
            "zh = ",
        ),
        (
            GOOD.replace("default = 8", "default = 99"),
            10,
            11,
            "default 99 of parameter `seq` is outside 1..=64",
            "move the default",
        ),
        (
            GOOD.replace(r#"views = ["scores"]"#, r#"views = ["scores", "histogram"]"#),
            18,
            20,
            "has no view `histogram`",
            "views of `attention`",
        ),
        (
            GOOD.replace(
                r#"views = ["scores"]"#,
                "views = [\"scores\"]\npresent_pages = [[\"scores\"], [\"histogram\"]]",
            ),
            19,
            17,
            "the presentation pages of step `a` name `histogram`, which the step does not show",
            "the step's views: scores",
        ),
        (
            GOOD.replace(r#"views = ["scores"]"#, "views = [\"scores\"]\npresent_pages = [[]]"),
            19,
            17,
            "step `a` has an empty presentation page",
            "give each page at least one view",
        ),
        (
            GOOD.replace(
                r#"views = ["scores"]"#,
                "views = [\"scores\"]\n[[steps.questions]]\nask = { en = \"How many?\", zh = \"多少？\" }\nanswer = \"oom_step\"\nwhy = { en = \"So.\", zh = \"如此。\" }",
            ),
            21,
            10,
            "a question of step `a` is answered by `oom_step`, which lesson kind `attention` does not fill",
            "placeholders of `attention`: seq",
        ),
        (
            GOOD.replace(
                r#"views = ["scores"]"#,
                "views = [\"scores\"]\n[[steps.questions]]\nask = { en = \"How many?\", zh = \"多少？\" }\nanswer = \"cells\"\ntolerance = 1.0\nwhy = { en = \"So.\", zh = \"如此。\" }",
            ),
            22,
            13,
            "the tolerance 1 of a question of step `a` makes (nearly) every answer right",
            "from 0 (exact) up to below 0.5",
        ),
        (
            GOOD.replace(
                r#"views = ["scores"]"#,
                "views = [\"scores\"]\n[[steps.questions]]\nask = { en = \"Which?\", zh = \"哪个？\" }\nanswer = \"cells\"\npick = { view = \"probs\", on = \"cell\" }\nwhy = { en = \"So.\", zh = \"如此。\" }",
            ),
            22,
            8,
            "a question of step `a` picks on the view `probs`, which the step does not show",
            "pick on one of the step's views: scores",
        ),
        (
            GOOD.replace(r#"kind = "attention""#, r#"kind = "sliding""#),
            3,
            8,
            "unknown lesson kind `sliding`",
            "attention, causal, multihead",
        ),
        (
            GOOD.replace(r#"views = ["scores"]"#, "views = [\"scores\"]\nset = { colour = 1 }"),
            19,
            7,
            "sets `colour`, which is not a parameter",
            "parameters: seq",
        ),
        (
            GOOD.replace("default = 8\nmin = 1\nmax = 64", "kind = \"text\"\ndefault = 7"),
            11,
            11,
            "text `seq` has default 7",
            "index of a built-in text",
        ),
        (GOOD.replace("order = 1", "order = = 1"), 4, 9, "", "syntax"),
        (
            GOOD.replace(
                "kind = \"model\"\nlabel = { en = \"Model\", zh = \"模型\" }\ndefault = 0",
                "kind = \"model\"\nlabel = { en = \"Model\", zh = \"模型\" }\ndefault = 3",
            ),
            GOOD.lines().position(|l| l == "kind = \"model\"").unwrap() + 3,
            11,
            "model `model` has default 3",
            "0 random weights, 1 the tiny model, 2 SmolLM2",
        ),
        (
            GOOD.replace("format_version = 1", "format_version = 2"),
            1,
            18,
            "format_version 2",
            "format_version = 1",
        ),
    ];
    for (src, line, col, msg, hint) in cases {
        let errs = errors(&src);
        let e = &errs[0];
        assert_eq!((e.line, e.col), (line, col), "{e}");
        assert!(e.message.contains(msg), "{e}");
        assert!(e.hint.contains(hint), "{e}");
        assert!(
            e.to_string().starts_with(&format!("lessons/demo.toml:{line}:{col}: ")),
            "{e}"
        );
    }
}

#[test]
fn lessons_check_command_reports_bad_files_and_exits_non_zero() {
    let ok = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(["lessons", "check"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("12 lessons, no problems"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("01-good.toml"), GOOD).unwrap();
    std::fs::write(
        dir.path().join("02-bad.toml"),
        GOOD.replace("id = \"demo\"", "id = \"demo2\"")
            .replace("order = 1", "order = 2")
            .replace("default = 8", "default = 0"),
    )
    .unwrap();
    let bad = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(["lessons", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        err.contains("02-bad.toml:10:11: default 0 of parameter `seq` is outside 1..=64"),
        "{err}"
    );
    assert!(!err.contains("panicked"));
}

/// The template of a narration with everything that may hold a digit legitimately taken out:
/// `{placeholders}`, `code spans`, list markers, references to other lessons, and a few facts that no
/// slider changes (a data type's width, vLLM's default block size).
fn untyped(template: &str) -> String {
    const FACTS: [&str; 4] = ["16-bit", "16 位", "16 tokens per block", "每块 16 个 token"];
    let mut t = template.to_string();
    for f in FACTS {
        t = t.replace(f, "");
    }
    let mut out = String::new();
    let (mut in_code, mut in_ph) = (false, false);
    for ch in t.chars() {
        match ch {
            '`' => in_code = !in_code,
            '{' if !in_code => in_ph = true,
            '}' if in_ph => in_ph = false,
            _ if in_code || in_ph => {}
            _ => out.push(ch),
        }
    }
    let lines: Vec<String> = out
        .lines()
        .map(|l| {
            let trimmed = l.trim_start();
            let digits = trimmed.chars().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && trimmed[digits..].starts_with(". ") {
                trimmed[digits + 2..].to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    let mut s = lines.join("\n");
    for n in 1..=9 {
        for r in [format!("lesson {n}"), format!("Lesson {n}"), format!("第 {n} 课")] {
            s = s.replace(&r, "");
        }
    }
    s
}

/// Standalone numbers in `text` (digit runs not part of a word such as `f16` or `Llama-3`).
fn numbers(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() && (i == 0 || !word(chars[i - 1])) {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if i == chars.len() || !(chars[i].is_ascii_alphabetic() || chars[i] == '_') {
                out.push(chars[start..i].iter().collect());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// No narration types a number a slider could change: the only numbers left in the templates are 0, 1
/// and 2 (as in "every row sums to 1"); everything else is a `{placeholder}` filled from the lesson's
/// own computation. Filled with the default sliders and with every slider at its maximum and its
/// minimum, no placeholder is left unfilled. Every step's questions are answered by the same results
/// (`lessons::questions`), and every lesson asks at least two.
#[test]
fn narration_numbers_come_from_the_computation() {
    let backend = kvscope::compute::CpuBackend::new();
    let lessons = lesson::load_embedded().unwrap();
    let mut questions = 0;
    for l in &lessons {
        for s in &l.file.steps {
            for t in [&s.narration.get_ref().en, &s.narration.get_ref().zh]
                .into_iter()
                .flatten()
            {
                let typed: Vec<String> = numbers(&untyped(t))
                    .into_iter()
                    .filter(|n| n.parse::<u64>().is_ok_and(|v| v > 2))
                    .collect();
                assert!(
                    typed.is_empty(),
                    "{} step `{}` types {typed:?}: use a placeholder",
                    l.id(),
                    s.id.get_ref()
                );
            }
        }
        let defaults: kvscope::lessons::Params = Default::default();
        let maxed: kvscope::lessons::Params = l.file.params.iter().map(|p| (p.id.get_ref().clone(), p.hi())).collect();
        let mined: kvscope::lessons::Params = l.file.params.iter().map(|p| (p.id.get_ref().clone(), p.lo())).collect();
        for (base, at_defaults) in [(defaults, true), (maxed, false), (mined, false)] {
            // Each step's narration is filled from the result at the step's own settings (`set`), as the
            // app computes it when the step opens; results are shared between steps with the same ones.
            let mut computed: Vec<(kvscope::lessons::Params, Option<Box<dyn kvscope::lessons::Output>>)> = Vec::new();
            for s in &l.file.steps {
                let mut params = base.clone();
                params.extend(s.set_params());
                if !computed.iter().any(|(p, _)| *p == params) {
                    let out = kvscope::lessons::compute(l, &params, &backend).ok();
                    computed.push((params.clone(), out));
                }
                let out = &computed.iter().find(|(p, _)| *p == params).unwrap().1;
                // The line the kernel panel highlights (`Output::source_focus`) is in the CUDA source and
                // in its WGSL twin, as the panel shows either.
                for &op in out.as_deref().map_or(&[][..], |_| l.kind.ops()) {
                    let Some(needle) = out.as_deref().and_then(|o| o.source_focus(op)) else {
                        continue;
                    };
                    for kind in [kvscope::compute::BackendKind::Cuda, kvscope::compute::BackendKind::Wgpu] {
                        let src = kvscope::compute::kernel_source(kind, op).expect("a kernel source");
                        assert!(
                            src.source.contains(needle),
                            "{}: `{needle}` is not in {}",
                            l.id(),
                            src.path
                        );
                    }
                }
                let mut values = l.kind.values(l, out.as_deref());
                // The app fills these for every lesson (`kernel_steps_name_the_code_that_ran` checks it).
                values.extend(
                    kvscope::lessons::COMMON_PLACEHOLDERS
                        .iter()
                        .map(|n| (*n, "(the app)".to_string())),
                );
                for t in [&s.narration.get_ref().en, &s.narration.get_ref().zh]
                    .into_iter()
                    .flatten()
                {
                    let filled = kvscope::lessons::fill(t, &values, "…", false);
                    // The narration is written for the file's settings: there every value is computed. At
                    // the sliders' extremes an event may not happen (no request waits); the app shows `—`.
                    if out.is_some() && at_defaults {
                        assert!(
                            !filled.contains('…') || t.contains('…'),
                            "{} step `{}` {params:?}: a placeholder has no value:\n{filled}",
                            l.id(),
                            s.id.get_ref()
                        );
                    }
                    assert!(
                        kvscope::lesson_file::placeholders(&filled).is_empty(),
                        "{} step `{}`: {filled}",
                        l.id(),
                        s.id.get_ref()
                    );
                }
                // Every question is answered by this run: at the file's settings always, at the sliders'
                // extremes whenever the lesson filled the placeholder (an event may not happen there); and
                // a wrong guess is marked wrong, so no question takes every answer.
                for q in &s.questions {
                    use kvscope::lessons::questions::{a_wrong_guess, answer, is_right};
                    // ("—" or "-": the lesson says the event did not happen at these settings.)
                    let filled = values
                        .iter()
                        .any(|(n, v)| n == q.answer.get_ref() && !["—", "-"].contains(&v.trim()));
                    if out.is_none() || !(at_defaults || filled) {
                        continue;
                    }
                    let a = answer(q, &values).unwrap_or_else(|e| {
                        panic!(
                            "{} step `{}` {params:?}: a question has no answer: {e}",
                            l.id(),
                            s.id.get_ref()
                        )
                    });
                    assert!(
                        !is_right(&a, &a_wrong_guess(&a)),
                        "{} step `{}`: every guess is right for {a:?}",
                        l.id(),
                        s.id.get_ref()
                    );
                    // A pick's answer is an item of the view's surface, one the student can pick (not a
                    // masked cell).
                    if let (Some(p), kvscope::lessons::questions::Answer::Pick(k)) = (&q.pick, &a) {
                        let view = &p.get_ref().view;
                        let sf = out.as_deref().and_then(|o| o.pick_surface(view)).unwrap_or_else(|| {
                            panic!(
                                "{} step `{}` {params:?}: `{view}` takes no picks",
                                l.id(),
                                s.id.get_ref()
                            )
                        });
                        let off =
                            sf.on == kvscope::lesson_file::PickOn::Cell && sf.off.get(*k).copied().unwrap_or(true);
                        assert!(
                            *k < sf.choices() && !off,
                            "{} step `{}` {params:?}: the pick {k} is no item of `{view}` ({} items)",
                            l.id(),
                            s.id.get_ref(),
                            sf.choices()
                        );
                    }
                    questions += usize::from(at_defaults);
                }
            }
        }
        assert!(
            l.file.steps.iter().map(|s| s.questions.len()).sum::<usize>() >= 2,
            "{}: a lesson asks at least two questions",
            l.id()
        );
    }
    assert!(questions >= 26, "{questions} questions answered at the files' settings");
    // The scanner itself: a typed number is caught, placeholders and code are not.
    assert_eq!(numbers(&untyped("the pool fills at step 5")), ["5"]);
    assert!(
        numbers(&untyped(
            "step {oom_step}, `[0, :, :, pos, :]`, f16, Llama-3-8B, lesson 4"
        ))
        .is_empty()
    );
}

/// A lesson file declares exactly the parameters its kind reads: one the kind does not read, and one the
/// kind reads that the file lacks, are errors at load that name file, line and column.
#[test]
fn parameters_are_checked_both_ways_at_load() {
    let extra = GOOD.replace("id = \"seq\"", "id = \"seqq\"");
    let errs = errors(&extra);
    let unknown = errs
        .iter()
        .find(|e| e.message.contains("has no parameter `seqq`"))
        .unwrap_or_else(|| panic!("{errs:?}"));
    assert_eq!((unknown.line, unknown.col), (8, 6), "{unknown}");
    assert!(
        unknown.hint.contains("parameters of `attention`: seq, d_model"),
        "{unknown}"
    );
    let missing = errs
        .iter()
        .find(|e| {
            e.message
                .contains("reads parameter `seq`, which this file does not declare")
        })
        .unwrap_or_else(|| panic!("{errs:?}"));
    assert_eq!((missing.line, missing.col), (3, 8), "{missing}");
    assert!(missing.to_string().starts_with("lessons/demo.toml:3:8: "), "{missing}");
}

/// Every parameter the lessons' code reads while computing (at the defaults, and with every slider at its
/// maximum and at its minimum) is one its file declares (none falls back to a code default) and one its
/// kind lists.
#[test]
fn lessons_read_only_the_parameters_their_files_declare() {
    let backend = kvscope::compute::CpuBackend::new();
    for l in &lesson::load_embedded().unwrap() {
        let maxed: kvscope::lessons::Params = l.file.params.iter().map(|p| (p.id.get_ref().clone(), p.hi())).collect();
        let mined: kvscope::lessons::Params = l.file.params.iter().map(|p| (p.id.get_ref().clone(), p.lo())).collect();
        let mut read = std::collections::BTreeSet::new();
        for params in [Default::default(), maxed, mined] {
            kvscope::lessons::take_param_reads();
            let out = kvscope::lessons::compute(l, &params, &backend).ok();
            let _ = l.kind.values(l, out.as_deref());
            for (id, declared) in kvscope::lessons::take_param_reads() {
                assert!(
                    declared,
                    "{}: the code read `{id}`, which the file does not declare",
                    l.id()
                );
                assert!(
                    l.kind.params().contains(&id.as_str()),
                    "{}: `{id}` is read but not listed",
                    l.id()
                );
                read.insert(id);
            }
        }
        // Every lesson with random inputs reads its seed; lessons 8, 10 and 12 read the held-out text
        // through the trained model greedily and draw no random number.
        assert!(
            read.contains("seed") || ["streaming", "quant", "serving"].contains(&l.kind.name()),
            "{}: {read:?}",
            l.id()
        );
    }
}

/// Placeholders both ways, on the shipped lessons: every placeholder a kind declares is filled by its
/// code (at the file's defaults or at a step's own settings) and used by the narration of some shipped
/// lesson of that kind (a value computed for no one is dead code, and a declared one never filled would
/// show as a dash). A file that uses a placeholder its kind does not fill is an error at load
/// (`each_mistake_names_its_line_and_column` above); a teacher's own file may leave placeholders
/// unused, so this direction is checked on the shipped lessons, not at load.
#[test]
fn every_placeholder_a_kind_declares_is_filled_and_used() {
    let backend = kvscope::compute::CpuBackend::new();
    let lessons = lesson::load_embedded().unwrap();
    let mut bad: Vec<String> = Vec::new();
    for kind in kvscope::lessons::REGISTRY {
        let of_kind: Vec<_> = lessons.iter().filter(|l| l.kind.name() == kind.name()).collect();
        assert!(!of_kind.is_empty(), "no shipped lesson of kind `{}`", kind.name());
        let mut used = std::collections::BTreeSet::new();
        let mut filled = std::collections::BTreeSet::new();
        for l in &of_kind {
            for s in &l.file.steps {
                for t in [&s.narration.get_ref().en, &s.narration.get_ref().zh]
                    .into_iter()
                    .flatten()
                {
                    used.extend(kvscope::lesson_file::placeholders(t).into_iter().map(String::from));
                }
                // A question uses the placeholder that answers it and those its texts quote.
                for q in &s.questions {
                    used.insert(q.answer.get_ref().clone());
                    for t in [q.ask.get_ref(), q.why.get_ref()] {
                        for t in [&t.en, &t.zh].into_iter().flatten() {
                            used.extend(kvscope::lesson_file::placeholders(t).into_iter().map(String::from));
                        }
                    }
                }
            }
            // At the file's defaults and at each step's own settings (`set`), as the app computes them.
            let mut settings = vec![kvscope::lessons::Params::new()];
            settings.extend(l.file.steps.iter().filter(|s| s.set.is_some()).map(|s| s.set_params()));
            for params in settings {
                let out = kvscope::lessons::compute(l, &params, &backend).unwrap();
                filled.extend(
                    kind.values(l, Some(out.as_ref()))
                        .into_iter()
                        .map(|(n, _)| n.to_string()),
                );
            }
        }
        for p in kind.placeholders() {
            if !filled.contains(*p) {
                bad.push(format!(
                    "kind `{}` declares `{{{p}}}` but does not fill it",
                    kind.name()
                ));
            }
            if !used.contains(*p) {
                bad.push(format!(
                    "kind `{}` fills `{{{p}}}`, which no shipped lesson of the kind uses",
                    kind.name()
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A narration that quotes a fact the facts file lacks, or a lesson that names a model it lacks, is an
/// error at load naming file, line and column; a known fact is filled in quote marks, and its source is
/// listed for the step.
#[test]
fn quoted_facts_and_models_come_from_the_facts_file() {
    let quoting = GOOD.replace("en = \"Some text.\"", "en = \"Up to {fact_hopper_smem_per_sm}.\"");
    let l = lesson::parse(Path::new("x.toml"), &quoting).unwrap();
    let t = l.file.steps[0].narration.get_ref().en.clone().unwrap();
    assert_eq!(kvscope::lessons::fill(&t, &[], "…", false), "Up to ^^228 KiB^^.");
    let cited = kvscope::lessons::quoted_facts(&t);
    assert_eq!(cited.len(), 1);
    assert!(cited[0].source.contains("Hopper Tuning Guide"), "{:?}", cited[0]);

    let unknown = GOOD.replace("en = \"Some text.\"", "en = \"Up to {fact_h900_smem}.\"");
    let errs = errors(&unknown);
    let e = errs
        .iter()
        .find(|e| e.message.contains("no published fact `h900_smem`"))
        .unwrap_or_else(|| panic!("{errs:?}"));
    assert_eq!((e.line, e.col), (17, 13), "{e}");
    assert!(e.hint.contains("hopper_smem_per_sm"), "{e}");

    let model = GOOD.replace("order = 1\n", "order = 1\nmodels = [\"Llama-3-8B\", \"Llama-9-9B\"]\n");
    let errs = errors(&model);
    let e = errs
        .iter()
        .find(|e| e.message.contains("no model `Llama-9-9B`"))
        .unwrap_or_else(|| panic!("{errs:?}"));
    assert_eq!((e.line, e.col), (5, 25), "{e}");
    assert!(e.hint.contains("Llama-3-8B"), "{e}");
}

/// A quoted fact prints its unit in the narration's language: a unit that is an English word ("tokens",
/// "initial tokens", "SMs") has a Chinese one, and no Chinese narration of a shipped lesson, filled as
/// the app fills it, prints a fact's English word unit. Symbols (KiB, TB/s, TFLOP/s) stay as they are.
#[test]
fn chinese_narration_quotes_facts_with_chinese_units() {
    const SYMBOLS: [&str; 9] = ["", "%", "KiB", "KB", "MB", "GB/s", "TB/s", "TFLOP/s", "PFLOP/s"];
    for f in kvscope::facts::all() {
        assert!(
            SYMBOLS.contains(&f.unit.as_str()) || f.unit_zh.is_some(),
            "fact `{}`: its unit `{}` is English words; give it a `unit_zh`",
            f.id,
            f.unit
        );
        // A value with an English word in it ("2 trillion") needs its Chinese; names (SHA-256) do not.
        let worded = f
            .value
            .split(|c: char| !c.is_ascii_alphabetic())
            .any(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_lowercase()));
        assert!(
            !worded || f.value_zh.is_some(),
            "fact `{}`: its value `{}` has English words; give it a `value_zh`",
            f.id,
            f.value
        );
    }
    assert_eq!(
        kvscope::facts::fact("smollm2_training_tokens").shown_in(true),
        "2 万亿 个 token"
    );
    assert_eq!(
        kvscope::facts::fact("streamingllm_sinks").shown_in(true),
        "4 个初始 token"
    );
    let mut quoted = 0;
    for l in lesson::load_embedded().unwrap() {
        for s in &l.file.steps {
            let Some(zh) = s.narration.get_ref().zh.as_deref() else {
                continue;
            };
            let filled = lesson::fill(zh, &[], "…", true);
            for f in lesson::quoted_facts(zh) {
                let Some(unit_zh) = &f.unit_zh else { continue };
                quoted += 1;
                assert!(
                    !filled.contains(&f.shown_in(false)) && filled.contains(&f.shown_in(true)),
                    "{} step `{}`: fact `{}` prints `{}`, not `{unit_zh}`:\n{filled}",
                    l.id(),
                    s.id.get_ref(),
                    f.id,
                    f.unit
                );
            }
        }
    }
    assert!(
        quoted >= 10,
        "only {quoted} quotes of word-unit facts in Chinese narration"
    );
}

/// Every published fact and model in `assets/facts.toml` is quoted by some lesson or view: the file
/// holds what the app shows, nothing stale.
#[test]
fn every_published_fact_is_quoted() {
    let lessons = lesson::load_embedded().unwrap();
    let mut text = String::new();
    for l in &lessons {
        for s in &l.file.steps {
            let n = s.narration.get_ref();
            text.push_str(n.en.as_deref().unwrap_or(""));
            text.push_str(n.zh.as_deref().unwrap_or(""));
        }
    }
    fn rust_sources(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut code = String::new();
    rust_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut code);
    for f in kvscope::facts::all() {
        assert!(
            text.contains(&format!("{{fact_{}}}", f.id)) || code.contains(&format!("fact(\"{}\")", f.id)),
            "fact `{}` is quoted nowhere: remove it from assets/facts.toml or quote it",
            f.id
        );
    }
    for m in kvscope::facts::models() {
        assert!(
            lessons.iter().any(|l| l.file.models.iter().any(|x| x.name == m.name)),
            "model `{}` is named by no lesson",
            m.name
        );
    }
}

/// `lessons/README.md` stays true of the tree: it names every kind of the registry, and every shipped
/// lesson by its number.
#[test]
fn the_lessons_readme_names_every_kind_and_lesson() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons/README.md")).unwrap();
    for k in kvscope::lessons::REGISTRY.iter() {
        assert!(
            readme.contains(&format!("`{}`", k.name())),
            "lessons/README.md does not name the kind `{}`",
            k.name()
        );
    }
    for (name, _) in EMBEDDED {
        let number = name.split('-').next().unwrap();
        assert!(
            readme.contains(&format!(" {number} ")),
            "lessons/README.md's list of shipped lessons lacks {name}"
        );
    }
}
