//! Lesson files: the shipped ones validate, and each kind of mistake gets an error that names the
//! file, line and column and says how to fix it.

use std::path::Path;
use std::process::Command;

use kvscope::lesson::{self, EMBEDDED, LessonError};

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
"#;

fn errors(src: &str) -> Vec<LessonError> {
    lesson::parse(Path::new("lessons/demo.toml"), src).expect_err("the file is malformed")
}

#[test]
fn shipped_lessons_validate_and_compute_the_model_table() {
    let lessons = lesson::load_embedded()
        .unwrap_or_else(|e| panic!("{}", e.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")));
    assert_eq!(lessons.len(), EMBEDDED.len());
    assert_eq!(
        lessons.iter().map(|l| l.id()).collect::<Vec<_>>(),
        [
            "attention-matrix",
            "causal-mask",
            "multi-head",
            "kv-decode",
            "paged-cache"
        ]
    );
    let l3 = &lessons[2];
    let llama = l3
        .file
        .models
        .iter()
        .find(|m| m.name == "Llama-3-8B")
        .expect("Llama-3-8B in the table");
    assert_eq!(llama.kv_bytes_per_token(), 128 * 1024);
    // The folder on disk is the same as the embedded copy.
    let dir = lesson::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap();
    assert_eq!(dir.len(), lessons.len());
    assert!(lesson::parse(Path::new("x.toml"), GOOD).is_ok());
}

#[test]
fn each_mistake_names_its_line_and_column() {
    // (edit of GOOD, expected line, expected column, words in the message, words in the hint)
    let cases: [(String, usize, usize, &str, &str); 7] = [
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
            GOOD.replace(r#"kind = "attention""#, r#"kind = "flash""#),
            3,
            8,
            "unknown lesson kind `flash`",
            "attention, causal, multihead",
        ),
        (GOOD.replace("order = 1", "order = = 1"), 4, 9, "", "syntax"),
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
    assert!(String::from_utf8_lossy(&ok.stdout).contains("5 lessons, no problems"));

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
