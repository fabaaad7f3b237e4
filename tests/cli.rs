//! The command line end to end: exports (and their round trip through the .npy reader), `check`,
//! and clear errors for bad parameters.

use std::path::Path;
use std::process::Command;

use kvscope::lessons::export::{Manifest, read_npy};
use kvscope::math::{AttnShape, AttnWeights, Mask, forward};

fn kvscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn export_attention_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("att");
    let o = kvscope(&[
        "export",
        "attention",
        "--seq",
        "7",
        "--d-model",
        "12",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--mask",
        "window:3,sinks:1",
        "--seed",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = manifest(&out);
    assert_eq!(m.kind, "attention");
    assert_eq!(m.params["mask"], "window:3,sinks:1");
    assert_eq!(m.seed, 5);
    assert!(m.backend.starts_with("cpu"));
    let expect = [
        ("x", vec![7, 12]),
        ("q", vec![4, 7, 3]),
        ("k", vec![2, 7, 3]),
        ("scores", vec![4, 7, 7]),
        ("probs", vec![4, 7, 7]),
        ("out", vec![4, 7, 3]),
        ("y", vec![7, 12]),
        ("wo", vec![12, 12]),
    ];
    for (name, shape) in &expect {
        let e = &m.arrays[*name];
        assert_eq!(&e.shape, shape, "{name}");
        assert_eq!(e.dtype, "float32");
        let (s, _) = read_npy(&out.join(&e.file)).unwrap();
        assert_eq!(&s, shape);
    }
    // The files hold what the library computes for the same seed, and masked scores are -inf.
    let f = forward(
        &AttnWeights::random(
            AttnShape {
                seq: 7,
                d_model: 12,
                n_heads: 4,
                n_kv_heads: 2,
            },
            5,
        ),
        Mask::Window { window: 3, sinks: 1 },
    );
    let (_, x) = read_npy(&out.join("x.npy")).unwrap();
    let w = AttnWeights::random(
        AttnShape {
            seq: 7,
            d_model: 12,
            n_heads: 4,
            n_kv_heads: 2,
        },
        5,
    );
    assert!(
        x.iter().zip(w.x.iter()).all(|(a, b)| *a == *b as f64),
        "x reproduces from the seed"
    );
    let (_, scores) = read_npy(&out.join("scores.npy")).unwrap();
    assert_eq!(scores[4], f64::NEG_INFINITY, "query 0 cannot see key 4");
    let (_, y) = read_npy(&out.join("y.npy")).unwrap();
    let max_err = y
        .iter()
        .zip(f.y.iter())
        .map(|(a, b)| (a - *b as f64).abs())
        .fold(0.0, f64::max);
    assert!(max_err < 1e-5, "{max_err}");
    let (_, probs) = read_npy(&out.join("probs.npy")).unwrap();
    for row in probs.chunks(7) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn export_paged_decode_writes_real_allocator_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pd");
    let o = kvscope(&[
        "export",
        "paged-decode",
        "--requests",
        "3",
        "--context-lens",
        "5,17,1",
        "--block-size",
        "4",
        "--num-blocks",
        "16",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--head-dim",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = manifest(&out);
    assert_eq!(m.arrays["k_pool"].dtype, "float16");
    assert_eq!(m.arrays["k_pool"].shape, vec![16, 2, 4, 8]);
    assert_eq!(m.arrays["block_tables"].dtype, "int32");
    assert!(m.check.iter().all(|c| c["passed"] == true));
    let (shape, tables) = read_npy(&out.join("block_tables.npy")).unwrap();
    assert_eq!(shape, vec![3, 5]);
    // request 1 holds 5 blocks; concurrent decoding interleaves them, so they are not contiguous
    let r1: Vec<f64> = tables[5..10].to_vec();
    assert!(r1.iter().all(|&b| b >= 0.0));
    assert!(r1.windows(2).any(|w| (w[1] - w[0]).abs() != 1.0), "{r1:?}");
    assert_eq!(tables[2..5], [-1.0; 3], "request 0 needs 2 blocks: {tables:?}");
    let (_, lens) = read_npy(&out.join("context_lens.npy")).unwrap();
    assert_eq!(lens, vec![5.0, 17.0, 1.0]);
    let (oshape, o) = read_npy(&out.join("out.npy")).unwrap();
    assert_eq!(oshape, vec![3, 4, 8]);
    assert!(o.iter().all(|x| x.is_finite()));
}

#[test]
fn bad_parameters_are_clear_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (
            &["export", "attention", "--seq", "0", "--out", d],
            "seq must be at least 1",
        ),
        (
            &[
                "export",
                "attention",
                "--seq",
                "16384",
                "--d-model",
                "4096",
                "--heads",
                "32",
                "--out",
                d,
            ],
            "heads × seq × seq",
        ),
        (
            &[
                "export",
                "paged-decode",
                "--context-lens",
                "5",
                "--requests",
                "1",
                "--num-blocks",
                "100000000",
                "--head-dim",
                "128",
                "--out",
                d,
            ],
            "lower --num-blocks",
        ),
        (
            &["export", "attention", "--d-model", "10", "--heads", "3", "--out", d],
            "must divide d_model",
        ),
        (
            &["export", "attention", "--heads", "4", "--kv-heads", "3", "--out", d],
            "must divide heads",
        ),
        (&["export", "attention", "--mask", "window:0", "--out", d], "bad mask"),
        (
            &[
                "export",
                "paged-decode",
                "--context-lens",
                "5,5",
                "--block-size",
                "0",
                "--out",
                d,
            ],
            "block size",
        ),
        (
            &[
                "export",
                "paged-decode",
                "--context-lens",
                "100,100",
                "--block-size",
                "16",
                "--num-blocks",
                "8",
                "--out",
                d,
            ],
            "OOM",
        ),
        (
            &[
                "export",
                "paged-decode",
                "--requests",
                "3",
                "--context-lens",
                "1,2",
                "--out",
                d,
            ],
            "--context-lens has 2 values",
        ),
    ];
    for (args, needle) in cases {
        let o = kvscope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(err.contains(needle), "{args:?}: stderr was {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
}

#[test]
fn check_passes_and_lists_unavailable_backends() {
    let o = kvscope(&["check", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = v.as_array().unwrap();
    let cpu = list.iter().find(|b| b["backend"] == "cpu").unwrap();
    assert_eq!(cpu["failed"], 0);
    for b in list {
        if b["available"] == false {
            assert!(!b["reason"].as_str().unwrap().is_empty());
        }
    }
}

fn png_colors(path: &Path) -> (u32, u32, usize) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    let mut colors = std::collections::HashSet::new();
    for px in buf[..info.buffer_size()].chunks_exact(4).step_by(7) {
        colors.insert([px[0], px[1], px[2]]);
    }
    (info.width, info.height, colors.len())
}

/// `kvscope render` writes a non-blank PNG of the full app frame for every step, in both languages.
#[test]
fn render_writes_every_step_in_both_languages() {
    let dir = tempfile::tempdir().unwrap();
    let lessons = kvscope::lessons::load_embedded().unwrap();
    let steps: usize = lessons.iter().map(|l| l.file.steps.len()).sum();
    for lang in ["en", "zh"] {
        let out = dir.path().join(lang);
        let o = kvscope(&[
            "render",
            "--lesson",
            "all",
            "--lang",
            lang,
            "--size",
            "1280x720",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let files: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), steps, "{lang}: one PNG per step");
        for f in files {
            let (w, h, colors) = png_colors(&f);
            assert_eq!((w, h), (1280, 720));
            assert!(colors > 40, "{}: only {colors} colours, looks blank", f.display());
        }
    }
    // One step at projector size in presentation mode.
    let one = dir.path().join("one.png");
    let o = kvscope(&[
        "render",
        "--lesson",
        "paged-cache",
        "--step",
        "5",
        "--present",
        "--size",
        "1920x1080",
        "--out",
        one.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(png_colors(&one).0, 1920);
    // A typed text for the trained model, through --set.
    let typed = dir.path().join("typed.png");
    let o = kvscope(&[
        "render",
        "--lesson",
        "attention-matrix",
        "--step",
        "7",
        "--set",
        "prompt=Hello, hello, hello world",
        "--set",
        "head=1",
        "--out",
        typed.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(png_colors(&typed).2 > 40);
}

#[test]
fn render_and_app_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.png");
    let out = out.to_str().unwrap();
    for (args, needle) in [
        (vec!["render", "--lesson", "nope", "--out", out], "no lesson `nope`"),
        (
            vec!["render", "--lesson", "causal-mask", "--step", "99", "--out", out],
            "has steps 1..=8",
        ),
        (
            vec!["render", "--lesson", "causal-mask", "--set", "seq=many", "--out", out],
            "`seq` takes an integer",
        ),
        (
            vec!["render", "--lesson", "causal-mask", "--set", "prompt=", "--out", out],
            "the text is empty",
        ),
        (
            vec!["render", "--lesson", "causal-mask", "--size", "12", "--out", out],
            "expected WxH",
        ),
        (
            vec!["render", "--lesson", "causal-mask", "--lang", "fr", "--out", out],
            "expected en or zh",
        ),
    ] {
        let o = kvscope(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A teacher's folder with a broken file: the error names file, line and column.
    let lessons = dir.path().join("lessons");
    std::fs::create_dir_all(&lessons).unwrap();
    std::fs::write(
        lessons.join("01.toml"),
        "format_version = 1\nid = \"x\"\nkind = \"attention\"\norder = 1\ntitel = 3\n",
    )
    .unwrap();
    let o = kvscope(&[
        "--lessons",
        lessons.to_str().unwrap(),
        "render",
        "--lesson",
        "all",
        "--out",
        dir.path().join("o").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("01.toml:5:1"), "{err}");
    // No display: the app says so and points at `kvscope render`.
    let o = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("no display") && err.contains("kvscope render"), "{err}");
}

/// `kvscope export schedule` at every block size: the pool keeps its token capacity (as many whole
/// blocks as fit), and every step follows vLLM V1's policy, checked on the exported replay alone:
/// running requests decode first in arrival order, only the newest are preempted, nothing is admitted in
/// a step that preempts, admission is first come first served, and a recomputed request prefills its
/// prompt plus every token it had generated.
#[test]
fn export_schedule_follows_the_policy_at_every_block_size() {
    use serde_json::Value;
    let dir = tempfile::tempdir().unwrap();
    let ids = |v: &Value| -> Vec<u64> { v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect() };
    let firsts = |v: &Value| -> Vec<u64> { v.as_array().unwrap().iter().map(|x| x[0].as_u64().unwrap()).collect() };
    for bs in [1, 2, 3, 4, 8, 16, 64] {
        let out = dir.path().join(format!("bs{bs}"));
        let o = kvscope(&[
            "export",
            "schedule",
            "--set",
            &format!("block_size={bs}"),
            "--set",
            "token_slots=128",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let d: Value = serde_json::from_str(&std::fs::read_to_string(out.join("schedule.json")).unwrap()).unwrap();
        let (nb, b) = (d["num_blocks"].as_u64().unwrap(), d["block_size"].as_u64().unwrap());
        assert_eq!(b, bs);
        assert_eq!(d["token_slots"], 128);
        assert!(
            nb * b <= 128 && nb * b > 128 - b,
            "bs {bs}: {nb} blocks hold {} slots",
            nb * b
        );
        let specs = d["requests"].as_array().unwrap();
        let mut generated = vec![0u64; specs.len()];
        let (mut running, mut waiting): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
        for st in d["steps"].as_array().unwrap() {
            let step = st["step"].as_u64().unwrap();
            let (decoded, preempted, admitted) =
                (firsts(&st["decoded"]), ids(&st["preempted"]), firsts(&st["admitted"]));
            let kept: Vec<u64> = running.iter().copied().filter(|r| !preempted.contains(r)).collect();
            assert_eq!(
                decoded, kept,
                "bs {bs} step {step}: running decode first, in arrival order"
            );
            let newest: Vec<u64> = running.iter().rev().take(preempted.len()).copied().collect();
            assert_eq!(preempted, newest, "bs {bs} step {step}: only the newest are preempted");
            if !preempted.is_empty() {
                assert!(
                    admitted.is_empty(),
                    "bs {bs} step {step}: admitted in a step that preempts"
                );
            }
            let mut queue: Vec<u64> = preempted.iter().rev().copied().collect();
            queue.extend(&waiting);
            queue.extend(ids(&st["arrived"]));
            assert_eq!(
                admitted[..],
                queue[..admitted.len()],
                "bs {bs} step {step}: first come, first served"
            );
            for a in st["admitted"].as_array().unwrap() {
                let (r, len) = (a[0].as_u64().unwrap() as usize, a[1].as_u64().unwrap());
                assert_eq!(
                    len,
                    specs[r]["prompt"].as_u64().unwrap() + generated[r],
                    "bs {bs} step {step}: r{r} prefill"
                );
            }
            for &r in &decoded {
                generated[r as usize] += 1;
            }
            running = ids(&st["running"]);
            waiting = ids(&st["waiting"]);
        }
        for (r, s) in specs.iter().enumerate() {
            assert_eq!(
                generated[r],
                s["generate"].as_u64().unwrap(),
                "bs {bs}: r{r} generated everything"
            );
        }
    }
    // Unknown slider names are errors that list the lesson's parameters.
    let o = kvscope(&[
        "export",
        "schedule",
        "--set",
        "nosuch=3",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("--set nosuch: no such parameter in paged-cache (parameters: block_size")
    );
    let o = kvscope(&[
        "render",
        "--lesson",
        "causal-mask",
        "--set",
        "nosuch=3",
        "--out",
        dir.path().join("x.png").to_str().unwrap(),
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--set nosuch: no such parameter in causal-mask (parameters: seq")
    );
}

/// `kvscope export prefix-schedule` writes the prefix-caching replay: hits for the shared prompt,
/// copy-on-write copies after the fork, evictions under pressure, and reference counts that equal the
/// table entries pointing at each block at every event.
#[test]
fn export_prefix_schedule_has_hits_copies_and_evictions() {
    use serde_json::Value;
    let dir = tempfile::tempdir().unwrap();
    let o = kvscope(&[
        "export",
        "prefix-schedule",
        "--set",
        "samples=3",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("prefix-schedule.json")).unwrap()).unwrap();
    let steps = d["steps"].as_array().unwrap();
    let hits: u64 = steps.iter().filter_map(|s| s["event"]["hit_blocks"].as_u64()).sum();
    let copies = steps.iter().filter(|s| s["event"]["copy_on_write"].is_object()).count();
    let evicted: usize = steps
        .iter()
        .filter_map(|s| s["event"]["evicted"].as_array())
        .map(Vec::len)
        .sum();
    assert!(
        hits >= 4 && copies == 2 && evicted > 0,
        "hits {hits}, copies {copies}, evicted {evicted}"
    );
    for s in steps {
        let mut count = vec![0u64; d["num_blocks"].as_u64().unwrap() as usize];
        for t in s["block_tables"].as_object().unwrap().values() {
            for b in t.as_array().unwrap() {
                count[b.as_u64().unwrap() as usize] += 1;
            }
        }
        let refs: Vec<u64> = s["ref_counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(count, refs, "step {}", s["step"]);
    }
    let wrong = kvscope(&[
        "export",
        "prefix-schedule",
        "--lesson",
        "paged-cache",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not a prefix-caching lesson"));
}

/// `export attention --kernel flash` writes the tiled kernel's output next to the three kernels' and the
/// traffic of both paths in `io`, equal to the closed forms (no mask: K and V read once per row block);
/// tiles that do not fit are refused with the numbers.
#[test]
fn export_attention_with_the_flash_kernel_writes_io() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fa");
    let (t, d, h, br, bc) = (13u64, 16u64, 2u64, 4u64, 3u64);
    let o = kvscope(&[
        "export",
        "attention",
        "--kernel",
        "flash",
        "--block-q",
        &br.to_string(),
        "--block-k",
        &bc.to_string(),
        "--seq",
        &t.to_string(),
        "--d-model",
        &d.to_string(),
        "--heads",
        &h.to_string(),
        "--kv-heads",
        "1",
        "--mask",
        "none",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = manifest(&out);
    let hd = d / h;
    let io = &m.extra["io"];
    assert_eq!(io["naive"]["read"], h * (3 * t * hd + 2 * t * t));
    assert_eq!(io["naive"]["write"], h * (2 * t * t + t * hd));
    assert_eq!(io["flash"]["read"], h * (t * hd + t.div_ceil(br) * 2 * t * hd));
    assert_eq!(io["flash"]["write"], h * t * hd);
    assert_eq!((io["block_q"].clone(), io["block_k"].clone()), (br.into(), bc.into()));
    assert_eq!(m.params["kernel"], "flash");
    let (s, flash) = read_npy(&out.join("flash_out.npy")).unwrap();
    let (_, full) = read_npy(&out.join("out.npy")).unwrap();
    assert_eq!(s, [h as usize, t as usize, hd as usize]);
    let err = flash.iter().zip(&full).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-5, "{err}");
    assert!(m.check.iter().any(|c| c["label"] == "flash_out" && c["passed"] == true));
    let o = kvscope(&[
        "export",
        "attention",
        "--kernel",
        "flash",
        "--block-q",
        "64",
        "--block-k",
        "64",
        "--d-model",
        "256",
        "--heads",
        "1",
        "--kv-heads",
        "1",
        "--out",
        dir.path().join("bad").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("floats") && e.contains("Choose smaller tiles"), "{e}");
}

/// `kvscope generate` prints the prompt and what follows, and the speed; `export logits` and
/// `export model-attention` write the model's arrays with its architecture constants.
#[test]
fn generate_and_the_model_exports() {
    let o = kvscope(&[
        "generate",
        "--prompt",
        "The ",
        "--tokens",
        "8",
        "--cache",
        "paged",
        "--block-size",
        "4",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("The "), "{text}");
    assert!(text.contains("tokens/s") && text.contains("Paged cache"), "{text}");
    // Within the trained context nothing is said; past it, stderr says where it was passed.
    assert!(!String::from_utf8_lossy(&o.stderr).contains("past the"));
    let o = kvscope(&["generate", "--prompt", "The ", "--tokens", "300"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("4 prompt bytes + 300 new = 304, past the 256 bytes of context tiny was trained on"),
        "{err}"
    );
    let o = kvscope(&["generate", "--prompt", "", "--tokens", "8"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("the prompt is empty"));
    let o = kvscope(&["generate", "--prompt", "x", "--tokens", "40000"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("more than the 32768 positions of the RoPE tables"));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("logits");
    let prompt = "KV cache, 缓存";
    let o = kvscope(&["export", "logits", "--prompt", prompt, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = manifest(&out);
    let t = prompt.len();
    assert_eq!(m.arrays["logits"].shape, [t, 256]);
    assert_eq!(m.arrays["tokens"].shape, [t]);
    let model = &m.extra["model"];
    assert_eq!(
        (model["n_heads"].clone(), model["n_kv_heads"].clone()),
        (4.into(), 2.into())
    );
    assert_eq!(model["rope"]["base"], 10000.0);
    assert!(model["rms_norm_eps"].as_f64().unwrap() == 1e-5);
    let (_, tokens) = read_npy(&out.join("tokens.npy")).unwrap();
    assert_eq!(tokens.iter().map(|&b| b as u8).collect::<Vec<_>>(), prompt.as_bytes());

    let out = dir.path().join("att");
    let o = kvscope(&[
        "export",
        "model-attention",
        "--prompt",
        prompt,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = manifest(&out);
    for l in 0..4 {
        assert_eq!(m.arrays[&format!("probs_layer{l}")].shape, [4, t, t]);
    }
    assert_eq!(m.extra["head_labels"].as_array().unwrap().len(), 4);
    let (_, p) = read_npy(&out.join("probs_layer0.npy")).unwrap();
    for row in p.chunks(t) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-4);
    }
}

/// A `--set` value outside its slider's range, or one the other sliders rule out, is an error that names
/// the range or the allowed set (it used to be clamped or snapped in silence: `block_size=1` became 2).
#[test]
fn set_values_outside_their_range_or_set_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = kvscope(&["export", "prefix-schedule", "--set", "block_size=1", "--out", d]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--set block_size=1: lesson `prefix-cache` takes block_size in 2..="),
        "{err}"
    );
    let png = dir.path().join("x.png");
    let o = kvscope(&[
        "render",
        "--lesson",
        "multi-head",
        "--set",
        "heads=3",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--set heads=3: with the other parameters, lesson `multi-head` allows heads in {1, 2, 4, 8"),
        "{err}"
    );
    assert!(!png.exists());
    // In range and allowed: fine.
    let o = kvscope(&["export", "prefix-schedule", "--set", "block_size=2", "--out", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A command whose reader closes the pipe early (`kvscope lessons list | head -1`) ends quietly with
/// status 0, as command-line tools do, instead of panicking on the broken pipe.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(["lessons", "list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the command has printed anything: its first write hits a closed pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}

/// `kvscope export streaming` writes the four arrays with the shapes the manifest gives, defines every
/// term, and its bits per byte is the sum of `nll` over ln 2 times its length; the window policy's pool
/// stays within its bound. A bad policy is a clear error.
#[test]
fn export_streaming_writes_the_arrays_and_defines_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stream");
    let o = kvscope(&[
        "export",
        "streaming",
        "--policy",
        "sinks",
        "--window",
        "24",
        "--sinks",
        "3",
        "--block-size",
        "8",
        "--bytes",
        "300",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let man: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let s = &man["streaming"];
    assert_eq!(s["policy"], "sinks");
    assert_eq!(s["positions"], "cache");
    assert_eq!(s["window"], 24);
    assert_eq!(s["bytes"], 300);
    assert!(man["definitions"]["nll"].as_str().unwrap().contains("token i+1"));
    let (shape, nll) = kvscope::lessons::export::read_npy(&out.join("nll.npy")).unwrap();
    assert_eq!(shape, [299]);
    let bpb = nll.iter().sum::<f64>() / (std::f64::consts::LN_2 * nll.len() as f64);
    assert!((bpb - s["bits_per_byte"].as_f64().unwrap()).abs() < 1e-6);
    let (shape, blocks) = kvscope::lessons::export::read_npy(&out.join("blocks_in_use.npy")).unwrap();
    assert_eq!(shape, [300]);
    // ⌈3/8⌉ + ⌈(24 + 7)/8⌉ = 1 + 4.
    assert!(blocks.iter().all(|&b| b <= 5.0) && blocks.contains(&5.0));
    let (shape, _) = kvscope::lessons::export::read_npy(&out.join("sink_mass.npy")).unwrap();
    assert_eq!(shape, [4, 4, 300]);
    let (shape, tokens) = kvscope::lessons::export::read_npy(&out.join("tokens.npy")).unwrap();
    assert_eq!(shape, [300]);
    assert_eq!(tokens[0] as u8, kvscope::model::HELDOUT[0]);
    let o = kvscope(&["export", "streaming", "--policy", "h2o", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a policy"));
    // A window and sinks far past the stream size the pool from the stream (64 bytes: 4 blocks of 16),
    // not from the counts (this asked for 25.6 GB and aborted).
    for policy in ["window", "sinks"] {
        let o = kvscope(&[
            "export",
            "streaming",
            "--policy",
            policy,
            "--window",
            "99999999",
            "--sinks",
            "99999999",
            "--bytes",
            "64",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{policy}: {}", String::from_utf8_lossy(&o.stderr));
        let man: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(man["streaming"]["pool_blocks"], 4, "{policy}");
    }
}

/// `kvscope export eviction` writes the keep sets, the accumulated scores and the losses, and a manifest
/// that states the budget per KV head per layer. Re-checked here from the files alone: each step's scores
/// grow by exactly the group mass of the tokens that step kept (its query group of two heads: 2 per step),
/// nothing kept is over the budget, and H2O's evicted token is the lowest-scored outside the recent R.
#[test]
fn export_eviction_writes_keep_sets_and_scores_that_recheck() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ev");
    let o = kvscope(&[
        "export",
        "eviction",
        "--policy",
        "h2o",
        "--budget",
        "24",
        "--recent",
        "8",
        "--heldout",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let man: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let e = &man["eviction"];
    assert_eq!(e["budget"], 24);
    assert_eq!(e["budget_unit"], "tokens kept per KV head per layer");
    assert_eq!(e["recent"], 8);
    assert_eq!(e["prompt_length"], 128);
    assert!(man["definitions"]["kept"].as_str().unwrap().contains("padded with -1"));
    let read = |f: &str| kvscope::lessons::export::read_npy(&out.join(f)).unwrap();
    let (ks, kept) = read("kept.npy");
    let (ss, scores) = read("scores.npy");
    let (_, nll) = read("nll.npy");
    assert_eq!(nll.len(), 255);
    let (n, rows, width) = (ks[0], ks[1] * ks[2], ks[3]);
    assert_eq!((n, width), (256, 24));
    assert_eq!(ss, [256, ks[1], ks[2], 256]);
    let set = |t: usize, row: usize| -> Vec<usize> {
        kept[(t * rows + row) * width..][..width]
            .iter()
            .filter(|&&x| x >= 0.0)
            .map(|&x| x as usize)
            .collect()
    };
    let score = |t: usize, row: usize, i: usize| scores[(t * rows + row) * n + i];
    for t in 0..n {
        for row in 0..rows {
            let s = set(t, row);
            assert!(s.len() <= 24 && s.contains(&t));
            let mut mass = 0.0;
            for i in 0..n {
                let d = score(t, row, i) - if t > 0 { score(t - 1, row, i) } else { 0.0 };
                if !s.contains(&i) {
                    assert!(d.abs() < 1e-6, "step {t} row {row}: byte {i} not kept but scored {d}");
                }
                mass += d;
            }
            assert!((mass - 2.0).abs() < 1e-3, "step {t} row {row}: mass {mass}");
            if t > 0 {
                let before = set(t - 1, row);
                if let Some(&gone) = before.iter().find(|i| !s.contains(i)) {
                    let lowest = before
                        .iter()
                        .copied()
                        .filter(|&i| i + 8 <= t)
                        .min_by(|&a, &b| score(t - 1, row, a).total_cmp(&score(t - 1, row, b)).then(a.cmp(&b)))
                        .unwrap();
                    assert_eq!(gone, lowest, "step {t} row {row}");
                }
            }
        }
    }
    let o = kvscope(&[
        "export",
        "eviction",
        "--policy",
        "lru",
        "--budget",
        "8",
        "--heldout",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a policy"));
}

/// `export quant` writes codes, scales and the dequantised values consistently (deq = int8(code) · scale
/// for INT8 per token; FP8's values times its scale); `export fp8-table` writes every f16 pattern's code.
#[test]
fn export_quant_shape_mode_writes_what_kivi_holds() {
    // Shape mode: seeded rows through the group kernels; KIVI-2 with G 4 and R 8 on requests of 13 and 5
    // tokens: K's first 8 tokens of the first request are quantised (the rest, and all of the second,
    // wait in f16); V's all but the last 8.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kivi2");
    let o = kvscope(&[
        "export",
        "quant",
        "--format",
        "kivi2",
        "--group",
        "4",
        "--residual",
        "8",
        "--context-lens",
        "13,5",
        "--head-dim",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let man: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(man["quant"]["check"]["passed"], true);
    let read = |f: &str| kvscope::lessons::export::read_npy(&out.join(f)).unwrap();
    let (shape, k) = read("k.npy");
    assert_eq!(shape, vec![18, 2, 16]);
    let (_, kd) = read("k_deq.npy");
    let (_, kc) = read("k_codes.npy");
    let (_, ks) = read("k_scales.npy");
    let (_, kz) = read("k_zeros.npy");
    let (_, vs) = read("v_scales.npy");
    let row = 32;
    for t in 0..18 {
        let (req_t, k_quant, v_quant) = if t < 13 {
            (t, t < 8, t < 5)
        } else {
            (t - 13, false, false)
        };
        for i in t * row..(t + 1) * row {
            if k_quant {
                assert!(kc[i] <= 3.0, "2-bit code");
                assert_eq!(kd[i], kc[i] * ks[i] + kz[i], "t{t}");
            } else {
                assert_eq!(ks[i], 0.0, "t{t} ({req_t} of its request) is still f16");
                assert_eq!(kd[i], f64::from(half::f16::from_f64(k[i]).to_f32()));
            }
            assert_eq!(vs[i] > 0.0, v_quant, "V t{t}");
        }
    }
}

#[test]
fn export_quant_and_the_fp8_table_are_consistent() {
    let dir = tempfile::tempdir().unwrap();
    for (format, fp8) in [
        ("int8-token", None),
        ("fp8-e4m3", Some(kvscope::cache::dtype::quant::E4M3)),
    ] {
        let out = dir.path().join(format);
        let o = kvscope(&[
            "export",
            "quant",
            "--format",
            format,
            "--prompt",
            "A cache is a place where things are kept.",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let man: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(man["quant"]["format"], format);
        assert_eq!(man["quant"]["kernel"], true);
        let read = |f: &str| kvscope::lessons::export::read_npy(&out.join(f)).unwrap();
        let (shape, codes) = read("k_codes.npy");
        let (_, scales) = read("k_scales.npy");
        let (_, deq) = read("k_deq.npy");
        let (_, k) = read("k.npy");
        assert_eq!(shape.len(), 4);
        assert_eq!(codes.len(), k.len());
        for i in 0..codes.len() {
            let c = codes[i] as u8;
            let want = match fp8 {
                None => f64::from(c as i8) * scales[i],
                Some(f) => f64::from(f.decode(c)) * scales[i],
            };
            assert!(
                (deq[i] - want).abs() <= 1e-6 * want.abs().max(1e-3),
                "{format} {i}: {} vs {want}",
                deq[i]
            );
            // The round trip of each value is within the format's step.
            let tol = match fp8 {
                None => scales[i] / 2.0 + 1e-7,
                Some(_) => k[i].abs() / 16.0 + scales[i] * 2f64.powi(-9),
            };
            assert!(
                (deq[i] - k[i]).abs() <= tol * (1.0 + 1e-6),
                "{format} {i}: {} vs {}",
                deq[i],
                k[i]
            );
        }
    }
    let out = dir.path().join("e5m2");
    let o = kvscope(&[
        "export",
        "fp8-table",
        "--format",
        "e5m2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, codes) = kvscope::lessons::export::read_npy(&out.join("codes.npy")).unwrap();
    let (_, values) = kvscope::lessons::export::read_npy(&out.join("values.npy")).unwrap();
    assert_eq!((codes.len(), values.len()), (65536, 256));
    // E5M2 is f16's top byte: every finite f16 that is a multiple of E5M2's step maps to its high byte.
    assert_eq!(codes[0x3C00], f64::from(0x3Cu8));
    assert_eq!(values[0x3C], 1.0);
    assert_eq!(values[0x7B], 57344.0);
    let bad = kvscope(&[
        "export",
        "fp8-table",
        "--format",
        "e3m4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("e4m3, e5m2"));
}

/// Lesson 12's exports: whole prompts over the budget are refused with the numbers; a chunked run writes
/// each step's schedule within the budget and each request's latencies; a speculative run writes passes
/// that replay to its output, equal to plain greedy decode; a malformed request is a clear error.
#[test]
fn export_serving_and_speculative() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("serve");
    let o = kvscope(&[
        "export",
        "serving",
        "--policy",
        "whole",
        "--budget",
        "64",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("token budget of 64") && err.contains("chunked prefill"),
        "{err}"
    );
    let o = kvscope(&["export", "serving", "--requests", "0:5", "--out", out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("arrival_step:prompt_bytes:generated_bytes"));
    let o = kvscope(&[
        "export",
        "serving",
        "--policy",
        "chunked",
        "--budget",
        "16",
        "--requests",
        "0:24:10",
        "1:40:6",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("serving.json")).unwrap()).unwrap();
    for s in j["steps"].as_array().unwrap() {
        let n = s["prefill_tokens"].as_u64().unwrap() + s["decode_tokens"].as_u64().unwrap();
        assert!(n <= 16, "{s}");
    }
    let reqs = j["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1]["emit_steps"].as_array().unwrap().len(), 6);
    assert!(
        reqs[1]["ttft_steps"].as_u64().unwrap() >= 3,
        "40 prompt bytes at 16 a step"
    );
    let spec = dir.path().join("spec");
    let o = kvscope(&[
        "export",
        "speculative",
        "--speculative",
        "draft",
        "--k",
        "3",
        "--tokens",
        "40",
        "--out",
        spec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(spec.join("speculative.json")).unwrap()).unwrap();
    assert_eq!(j["equals_plain_output"], serde_json::Value::Bool(true));
    let bytes = |v: &serde_json::Value| -> Vec<u8> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect()
    };
    let output = bytes(&j["output_bytes"]);
    // Replay: the first byte comes from the prefill, then each pass emits its accepted drafts and one byte.
    let mut replay = vec![output[0]];
    for s in j["steps"].as_array().unwrap() {
        let (proposed, emitted) = (bytes(&s["proposed"]), bytes(&s["emitted"]));
        let a = s["accepted"].as_u64().unwrap() as usize;
        assert_eq!(&emitted[..a], &proposed[..a]);
        assert_eq!(emitted.len(), a + 1);
        replay.extend(emitted);
    }
    replay.truncate(output.len());
    assert_eq!(replay, output);
}

/// `kvscope calc` takes vLLM's claim on GPU memory and a reserve the user enters: the budget for the KV
/// cache shrinks by exactly the unclaimed share and the reserve; a claim outside (0, 1] is an error.
#[test]
fn calc_takes_a_memory_claim_and_a_reserve() {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["calc", "--model", "Llama-3-8B", "--json"];
        a.extend_from_slice(args);
        let o = kvscope(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()[0].clone()
    };
    let all = json(&[]);
    let vllm = json(&["--gpu-memory-utilization", "0.9", "--reserve-gb", "2"]);
    let b = |v: &serde_json::Value| v["kv_budget_bytes"].as_f64().unwrap();
    assert_eq!(all["gpu_memory_utilization"], 1.0);
    assert!(
        (b(&all) - b(&vllm) - (0.1 * 80e9 + 2e9)).abs() < 1.0,
        "{} {}",
        b(&all),
        b(&vllm)
    );
    assert!(vllm["requests_fit"].as_u64() < all["requests_fit"].as_u64());
    let o = kvscope(&["calc", "--model", "Llama-3-8B", "--gpu-memory-utilization", "1.5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("utilization must be in (0, 1]"));
}

/// Every lesson kind's own `kvscope export` and `kvscope bench` subcommands, listed by the registry, are
/// on the command line (their help answers), and `bench sweep`, lesson 4's, runs and prints its rows.
#[test]
fn lesson_subcommands_come_from_the_registry() {
    let mut seen = 0;
    for k in kvscope::lessons::REGISTRY.iter() {
        for (group, subs) in [("export", k.exports()), ("bench", k.benches())] {
            for s in subs {
                let o = kvscope(&[group, s.name(), "--help"]);
                assert!(
                    o.status.success(),
                    "{group} {}: {}",
                    s.name(),
                    String::from_utf8_lossy(&o.stderr)
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 12, "{seen}");
    let o = kvscope(&["bench", "sweep", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        rows.as_array()
            .is_some_and(|r| !r.is_empty() && r[0]["kernel_gbs"].as_f64().is_some())
    );
}

fn png_pixels(path: &Path) -> Vec<u8> {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    buf
}

/// The views that animate a timeline step (lesson 8's ring, lesson 9's scores and keep sets, lesson
/// 10's KIVI cache, lesson 12's schedule and speculative passes) draw something between the two frames
/// halfway through (`render --transition 0.5`), and exactly the settled frame at its end, which is what
/// every other render, test and snapshot draws.
#[test]
fn timeline_steps_animate_between_their_frames_and_settle_on_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("streaming", "2", Some("383")),
        ("eviction", "2", None),
        ("eviction", "3", None),
        ("quantization", "5", None),
        ("serving", "1", None),
        ("serving", "5", None),
    ];
    for &(lesson, step, at) in cases {
        let render = |name: &str, transition: Option<&str>| {
            let path = dir.path().join(format!("{lesson}-{step}-{name}.png"));
            let mut args = vec![
                "render",
                "--lesson",
                lesson,
                "--step",
                step,
                "--size",
                "1280x720",
                "--out",
                path.to_str().unwrap(),
            ];
            if let Some(a) = at {
                args.extend(["--at", a]);
            }
            if let Some(t) = transition {
                args.extend(["--transition", t]);
            }
            let o = kvscope(&args);
            assert!(
                o.status.success(),
                "{lesson} {step}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            png_pixels(&path)
        };
        let settled = render("settled", None);
        assert!(
            render("end", Some("1")) == settled,
            "{lesson} step {step}: the end of the transition is not the settled frame"
        );
        assert!(
            render("half", Some("0.5")) != settled,
            "{lesson} step {step}: halfway through the step's transition draws the settled frame"
        );
    }
    let o = kvscope(&[
        "render",
        "--lesson",
        "serving",
        "--step",
        "1",
        "--transition",
        "2",
        "--out",
        "x.png",
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("from 0 to 1"));
}
