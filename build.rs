//! Builds the CUDA-on-CPU shim: the real `kernels/*.cu` files compiled as C++20 with
//! `kernels/shim/cuda_shim.h`, linked into kvscope as the `cuda-sim` backend, and its Rust declarations
//! generated from the shim's one list of entry points (`kernels/shim/entries.def`); and lists the
//! shipped lesson files (`lessons/*.toml`) for embedding, so a new lesson file needs no code edit.

use std::path::Path;

/// Write `$OUT_DIR/embedded_lessons.rs`: `(file name, contents)` of every `lessons/*.toml`, by name.
fn embed_lessons() {
    println!("cargo:rerun-if-changed=lessons");
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("lessons");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the lessons folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("&[\n");
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("UTF-8 file name");
        out += &format!("    ({name:?}, include_str!({:?})),\n", f.display().to_string());
    }
    out += "]\n";
    let dest = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("embedded_lessons.rs");
    std::fs::write(dest, out).expect("writing embedded_lessons.rs");
}

/// The Rust type of a C argument type of `entries.def`.
fn rust_type(c: &str) -> &'static str {
    match c.split_whitespace().collect::<Vec<_>>().join(" ").as_str() {
        "int" => "i32",
        "float" => "f32",
        "long long" => "i64",
        "const float*" => "*const f32",
        "float*" => "*mut f32",
        "const int*" => "*const i32",
        "int*" => "*mut i32",
        "const uint16_t*" => "*const u16",
        "uint16_t*" => "*mut u16",
        "const uint8_t*" => "*const u8",
        "uint8_t*" => "*mut u8",
        "const uint32_t*" => "*const u32",
        "uint32_t*" => "*mut u32",
        "const uint4*" => "*const [u32; 4]",
        other => panic!("kernels/shim/entries.def: build.rs knows no Rust type for `{other}`"),
    }
}

/// Split `s` at the commas outside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Write `$OUT_DIR/sim_ffi.rs`: the `extern "C"` declaration of every `kvs_sim_<entry>` wrapper listed
/// in `kernels/shim/entries.def`, the same list the C prototypes and the wrappers are expanded from.
fn sim_ffi() {
    println!("cargo:rerun-if-changed=kernels/shim/entries.def");
    let list = std::fs::read_to_string("kernels/shim/entries.def").expect("kernels/shim/entries.def");
    let mut out = String::from(
        "/// The shim's wrappers, declared from `kernels/shim/entries.def` by build.rs: each takes the grid and\n\
         /// block dimensions, then the entry's own arguments.\n\
         pub(crate) mod ffi {\n    unsafe extern \"C\" {\n",
    );
    for (n, line) in list.lines().enumerate() {
        let Some(body) = line.trim().strip_prefix("KVS_ENTRY(") else {
            continue;
        };
        let body = body
            .strip_suffix(')')
            .unwrap_or_else(|| panic!("entries.def:{}: no closing parenthesis", n + 1));
        let parts = split_top(body);
        assert!(
            parts.len() >= 3,
            "entries.def:{}: namespace, entry and arguments",
            n + 1
        );
        let mut params = vec!["gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32".to_string()];
        for p in &parts[2..] {
            let pair = p.trim().strip_prefix('(').and_then(|p| p.strip_suffix(')'));
            let (ty, name) = pair
                .and_then(|p| p.rsplit_once(','))
                .unwrap_or_else(|| panic!("entries.def:{}: `{p}` is not (type, name)", n + 1));
            params.push(format!("r#{}: {}", name.trim(), rust_type(ty)));
        }
        out += &format!("        pub(crate) fn kvs_sim_{}({});\n", parts[1], params.join(", "));
    }
    out += "    }\n}\n";
    let dest = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("sim_ffi.rs");
    std::fs::write(dest, out).expect("writing sim_ffi.rs");
}

fn main() {
    embed_lessons();
    // The shim is C++ on OS threads: only in the native build (feature `native`), never for wasm32.
    if std::env::var_os("CARGO_FEATURE_NATIVE").is_none()
        || std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32")
    {
        return;
    }
    sim_ffi();
    println!("cargo:rerun-if-changed=kernels");
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file("kernels/shim/sim.cpp")
        .include("kernels/shim")
        .include("kernels")
        .flag_if_supported("-pthread")
        .opt_level(2)
        .warnings(false)
        .compile("kvscope_cuda_sim");
    println!("cargo:rustc-link-lib=pthread");
}
