//! Kernel exercises (`kvscope::exercises`, `kvscope exercise`): every blank compiles and fails the f64
//! reference check, every solution passes, every wrong edit fails with a map of where it is wrong; compile
//! errors come at the edited file's line and column; edits that do not compile, never end or index out of
//! range never panic or hang; and the CLI's exit codes say pass or fail.

use std::process::Command;

use kvscope::exercises::{self, Exercise, Grade};

fn kvscope() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kvscope"));
    c.env("KVSCOPE_DATA_DIR", std::env::temp_dir().join("kvscope-exercise-test"));
    c
}

/// A wrong value, not a compile error or a stopped grade, with a map that marks exactly where
/// (`Grade::wrong_value_problems`, which the browser test asks too).
fn fails_for_a_wrong_value(g: &Grade, what: &str) {
    let problems = g.wrong_value_problems();
    assert!(problems.is_empty(), "{what}: {problems:?}");
}

#[test]
fn blanks_fail_solutions_pass_and_wrong_edits_fail_where_they_are_wrong() {
    let all = exercises::all().expect("kernels/exercises.toml loads");
    let blanks = all.iter().filter(|x| x.bug.is_none()).count();
    assert!(blanks >= 12, "{blanks} exercises that blank a region");
    assert!(all.iter().any(|x| x.bug.is_some()), "a bug to find");
    let mut wrong = 0;
    for x in all {
        let solution = x.grade_here(&x.solution());
        assert!(
            solution.passed,
            "{}: the solution fails: {:?} {:?}",
            x.id,
            solution.error,
            solution.failed().map(|c| c.label.clone()).collect::<Vec<_>>()
        );
        assert!(solution.checks.len() >= 4, "{}: {} checks", x.id, solution.checks.len());
        let blank = x.blanked(false);
        assert_ne!(blank, x.solution(), "{}: the blank is the solution", x.id);
        assert_eq!(
            x.blanked(true).lines().count(),
            blank.lines().count(),
            "{}: en and zh blanks",
            x.id
        );
        fails_for_a_wrong_value(&x.grade_here(&blank), &format!("{}'s blank", x.id));
        for e in &x.wrong {
            let edited = x.with_edit(e);
            assert_ne!(edited, x.solution(), "{}: {e:?} changes nothing", x.id);
            fails_for_a_wrong_value(
                &x.grade_here(&edited),
                &format!("{} with {:?} → {:?}", x.id, e.from, e.to),
            );
            wrong += 1;
        }
    }
    assert!(wrong >= 12, "{wrong} wrong edits");
}

/// A compile error is reported at its line and column in the edited file, not in the module the backend
/// builds around it.
#[test]
fn compile_errors_point_at_the_edited_line() {
    for x in exercises::all().unwrap().iter().filter(|x| x.bug.is_none()) {
        let blank = x.blanked(false);
        let stub_line = blank
            .lines()
            .position(|l| l.contains(x.stub.lines().next().unwrap().trim()))
            .unwrap_or_else(|| panic!("{}: the stub is in the blank", x.id))
            + 1;
        let broken: String = blank
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i + 1 == stub_line {
                    format!("{l} let = ;")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let errors = x.compile_errors(&broken);
        assert!(!errors.is_empty(), "{}: a syntax error compiles", x.id);
        assert_eq!(errors[0].line, stub_line, "{}: {:?}", x.id, errors[0]);
        assert!(errors[0].column > 1, "{}: {:?}", x.id, errors[0]);
    }
}

/// Edits a student may make: garbage, deleted lines and characters, out-of-range reads and writes, and
/// loops that never end. None panics; none hangs the caller (the child is stopped at its timeout).
#[test]
fn a_fuzz_of_edits_never_panics_or_hangs() {
    let all = exercises::all().unwrap();
    // Cheap mutations, compiled only: delete each line in turn, and characters at seeded places.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut rejected = 0;
    for x in all {
        let src = x.blanked(false);
        let lines: Vec<&str> = src.lines().collect();
        for k in (0..lines.len()).step_by(7) {
            let mut l = lines.clone();
            l.remove(k);
            rejected += usize::from(!x.compile_errors(&l.join("\n")).is_empty());
        }
        for _ in 0..20 {
            let mut chars: Vec<char> = src.chars().collect();
            let at = (next() as usize) % chars.len();
            chars.remove(at);
            let _ = x.compile_errors(&chars.into_iter().collect::<String>());
        }
        assert!(
            !x.compile_errors("fn broken( {").is_empty(),
            "{}: garbage compiles",
            x.id
        );
    }
    assert!(rejected > 0, "no deleted line was caught");
    // Out of range: reads and writes far past the buffers (WebGPU clamps them) run and fail the check.
    let find = |id: &str| -> Exercise { exercises::find(id).unwrap() };
    let x = find("scaled-scores");
    let g = x.grade_here(&x.solution().replace("k[kj + d]", "k[kj + d + 100000000u]"));
    assert!(
        !g.passed && g.compile_errors.is_empty(),
        "an out-of-range read passes or does not compile"
    );
    let x = find("static-append-slot");
    let g = x.grade_here(
        &x.solution()
            .replace("P.pos) * hd + d;", "P.pos) * hd + d + 4000000000u;"),
    );
    assert!(
        !g.passed && g.compile_errors.is_empty(),
        "an out-of-range write passes or does not compile"
    );
    // A loop that never ends (its counter never moves): graded in a child, stopped at the timeout, and
    // said so.
    let x = find("scaled-scores");
    let endless = x
        .solution()
        .replace("for (var d = 0u; d < hd; d++) {", "for (var d = 0u; d < hd; d += 0u) {");
    assert!(
        x.compile_errors(&endless).is_empty(),
        "{:?}",
        x.compile_errors(&endless)
    );
    let start = std::time::Instant::now();
    let g = exercises::grade_in_child(
        std::path::Path::new(env!("CARGO_BIN_EXE_kvscope")),
        "scaled-scores",
        &endless,
        std::time::Duration::from_secs(5),
    );
    assert!(start.elapsed().as_secs() < 30, "the child was not stopped");
    assert!(!g.passed);
    assert!(
        g.error.as_deref().is_some_and(|e| e.contains("did not finish")),
        "the timeout is said: {:?}",
        g.error
    );
}

#[test]
fn the_cli_lists_shows_and_grades_with_exit_codes() {
    let dir = std::env::temp_dir().join(format!("kvscope-exercise-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = kvscope().args(["exercise", "list"]).output().unwrap();
    assert!(list.status.success());
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.lines().count() >= 13, "{text}");
    assert!(text.contains("causal-mask"));
    let show = |args: &[&str]| {
        let o = kvscope().args(["exercise", "show"]).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let blank = dir.join("blank.wgsl");
    let solution = dir.join("solution.wgsl");
    let broken = dir.join("broken.wgsl");
    std::fs::write(&blank, show(&["causal-mask"])).unwrap();
    std::fs::write(&solution, show(&["causal-mask", "--solution"])).unwrap();
    assert!(show(&["causal-mask", "--zh"]).contains("待完成"));
    std::fs::write(&broken, show(&["causal-mask"]).replace("return true;", "return true")).unwrap();
    let grade = |file: &std::path::Path, json: bool| {
        let mut c = kvscope();
        c.args(["exercise", "grade", "causal-mask", "--source"]).arg(file);
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let pass = grade(&solution, false);
    assert_eq!(pass.status.code(), Some(0), "{}", String::from_utf8_lossy(&pass.stdout));
    assert!(String::from_utf8_lossy(&pass.stdout).contains("PASS causal-mask"));
    let fail = grade(&blank, false);
    assert_eq!(fail.status.code(), Some(1));
    let out = String::from_utf8_lossy(&fail.stdout);
    assert!(
        out.contains("FAIL causal-mask") && out.contains("where it is wrong"),
        "{out}"
    );
    let json = grade(&blank, true);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("the grade is JSON");
    assert_eq!(v["passed"], serde_json::Value::Bool(false));
    assert!(v["checks"].as_array().is_some_and(|c| !c.is_empty()));
    let bad = grade(&broken, false);
    assert_eq!(bad.status.code(), Some(1));
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(
        out.contains(&format!("{}:", broken.display())) && out.contains("error:"),
        "{out}"
    );
    let unknown = kvscope()
        .args(["exercise", "grade", "no-such", "--source"])
        .arg(&solution)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no exercise `no-such`"));
    let _ = std::fs::remove_dir_all(&dir);
}
