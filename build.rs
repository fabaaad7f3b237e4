//! Builds the CUDA-on-CPU shim: the real `kernels/*.cu` files compiled as C++20 with
//! `kernels/shim/cuda_shim.h`, linked into kvscope as the `cuda-sim` backend; and lists the shipped
//! lesson files (`lessons/*.toml`) for embedding, so a new lesson file needs no code edit.

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

fn main() {
    embed_lessons();
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
