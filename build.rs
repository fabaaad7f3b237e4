//! Builds the CUDA-on-CPU shim: the real `kernels/*.cu` files compiled as C++20 with
//! `kernels/shim/cuda_shim.h`, linked into kvscope as the `cuda-sim` backend, and its Rust declarations
//! generated from the shim's one list of entry points (`kernels/shim/entries.def`); and lists the
//! shipped lesson files (`lessons/*.toml`) for embedding, so a new lesson file needs no code edit, and
//! the KV dtypes' kernel snippets (`kernels/kv/`), so a new dtype's snippets need none either.

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

/// One entry of `kernels/shim/entries.def`: its namespace, its name and its (C type, name) arguments.
struct Entry {
    namespace: String,
    name: String,
    args: Vec<(String, String)>,
}

/// Read `kernels/shim/entries.def`, the one list of every kernel entry point's arguments.
fn entries() -> Vec<Entry> {
    println!("cargo:rerun-if-changed=kernels/shim/entries.def");
    let list = std::fs::read_to_string("kernels/shim/entries.def").expect("kernels/shim/entries.def");
    let mut out = Vec::new();
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
        let args = parts[2..]
            .iter()
            .map(|p| {
                let pair = p.trim().strip_prefix('(').and_then(|p| p.strip_suffix(')'));
                let (ty, name) = pair
                    .and_then(|p| p.rsplit_once(','))
                    .unwrap_or_else(|| panic!("entries.def:{}: `{p}` is not (type, name)", n + 1));
                let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
                rust_type(&ty); // panics on a type build.rs does not know
                (ty, name.trim().to_string())
            })
            .collect();
        out.push(Entry {
            namespace: parts[0].clone(),
            name: parts[1].clone(),
            args,
        });
    }
    out
}

/// `paged_append_f16` → `PagedAppendF16`.
fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A pointer argument's element type and whether the kernel writes through it; `None` for a scalar.
fn pointee(c: &str) -> Option<(&'static str, bool)> {
    let r = rust_type(c);
    r.strip_prefix("*const ")
        .map(|t| (elem(t), false))
        .or_else(|| r.strip_prefix("*mut ").map(|t| (elem(t), true)))
}

fn elem(t: &str) -> &'static str {
    match t {
        "f32" => "f32",
        "i32" => "i32",
        "u8" => "u8",
        "u16" => "u16",
        "u32" => "u32",
        "[u32; 4]" => "[u32; 4]",
        other => panic!("entries.def: no element type for `{other}`"),
    }
}

/// Write `$OUT_DIR/sim_ffi.rs`: the `extern "C"` declaration of every `kvs_sim_<entry>` wrapper listed
/// in `kernels/shim/entries.def`, the same list the C prototypes and the wrappers are expanded from.
fn sim_ffi(list: &[Entry]) {
    let mut out = String::from(
        "/// The shim's wrappers, declared from `kernels/shim/entries.def` by build.rs: each takes the grid and\n\
         /// block dimensions, then the entry's own arguments.\n\
         pub(crate) mod ffi {\n    unsafe extern \"C\" {\n",
    );
    for e in list {
        let mut params = vec!["gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32".to_string()];
        for (ty, name) in &e.args {
            params.push(format!("r#{name}: {}", rust_type(ty)));
        }
        out += &format!("        pub(crate) fn kvs_sim_{}({});\n", e.name, params.join(", "));
    }
    out += "    }\n}\n";
    let dest = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("sim_ffi.rs");
    std::fs::write(dest, out).expect("writing sim_ffi.rs");
}

/// Write `$OUT_DIR/cuda_entries.rs` from the same list: for every entry, its typed argument struct
/// (buffers by name in the backend's memory, scalars by name), the trait `Entries` with one launch per
/// entry, and that trait for both backends: the shim's launch calls `kvs_sim_<entry>` and the cudarc
/// launch pushes the arguments, both in the list's order. No op restates an argument list.
fn cuda_entries(list: &[Entry]) {
    let mut structs = String::new();
    let mut decls = String::new();
    let mut sim = String::new();
    let mut cuda = String::new();
    let mut table = String::new();
    for e in list {
        let ty = camel(&e.name);
        let sig: Vec<String> = e.args.iter().map(|(t, n)| format!("{t} {n}")).collect();
        structs += &format!(
            "/// The arguments of `{}` (namespace `{}` in the shim): `{}`.\npub(crate) struct {ty}<'a, K: Kernels + ?Sized> {{\n",
            e.name,
            e.namespace,
            sig.join(", ")
        );
        let has_buf = e.args.iter().any(|(t, _)| pointee(t).is_some());
        for (t, n) in &e.args {
            let field = match pointee(t) {
                Some((el, true)) => format!("&'a mut K::Buf<{el}>"),
                Some((el, false)) => format!("&'a K::Buf<{el}>"),
                None => rust_type(t).to_string(),
            };
            structs += &format!("    pub(crate) r#{n}: {field},\n");
        }
        if !has_buf {
            structs += "    pub(crate) _memory: std::marker::PhantomData<&'a K>,\n";
        }
        structs += "}\n\n";
        decls += &format!(
            "    /// Launch `{}` with `l`'s grid and block.\n    ///\n    /// # Safety\n    /// Every buffer holds every element the kernel reads or writes for these scalars and this launch.\n    unsafe fn {}(&self, l: &LaunchDims, a: {ty}<'_, Self>) -> Result<(), BackendError>;\n",
            e.name, e.name
        );
        let names: Vec<String> = e.args.iter().map(|(_, n)| format!("r#{n}")).collect();
        let pattern = format!(
            "super::entries::{ty} {{ {}{} }}",
            names.join(", "),
            if has_buf { "" } else { ", .." }
        );
        let ptrs: Vec<String> = e
            .args
            .iter()
            .map(|(t, n)| match pointee(t) {
                Some((_, true)) => format!("r#{n}.as_mut_ptr()"),
                Some((_, false)) => format!("r#{n}.as_ptr()"),
                None => format!("r#{n}"),
            })
            .collect();
        sim += &format!(
            "    unsafe fn {name}(&self, l: &LaunchDims, a: super::entries::{ty}<'_, Self>) -> Result<(), BackendError> {{\n        entry_is(l, \"{name}\")?;\n        let {pattern} = a;\n        let (gx, gy, gz, bx, by, bz) = dims(l);\n        // SAFETY: the caller's contract: every buffer holds what the kernel touches.\n        unsafe {{ ffi::kvs_sim_{name}(gx, gy, gz, bx, by, bz, {}) }};\n        Ok(())\n    }}\n",
            ptrs.join(", "),
            name = e.name
        );
        let pushes: Vec<String> = e
            .args
            .iter()
            .map(|(t, n)| match pointee(t) {
                Some(_) => format!("        b.arg(r#{n});\n"),
                None => format!("        b.arg(&r#{n});\n"),
            })
            .collect();
        cuda += &format!(
            "    unsafe fn {name}(&self, l: &LaunchDims, a: super::entries::{ty}<'_, Self>) -> Result<(), BackendError> {{\n        entry_is(l, \"{name}\")?;\n        let {pattern} = a;\n        let mut b = self.stream().launch_builder(self.func(\"{name}\")?);\n{}        // SAFETY: the caller's contract: every buffer holds what the kernel touches; the order is the list's.\n        unsafe {{ b.launch(cfg(l)) }}.map_err(dev)?;\n        Ok(())\n    }}\n",
            pushes.concat(),
            name = e.name
        );
        let params: Vec<String> = e.args.iter().map(|(t, n)| format!("({t:?}, {n:?})")).collect();
        table += &format!("    ({:?}, &[{}]),\n", e.name, params.join(", "));
    }
    let out_dir = std::env::var("OUT_DIR").expect("set by cargo");
    let header = "// Generated by build.rs from kernels/shim/entries.def: do not edit.\n\n";
    let write = |name: &str, text: String| {
        std::fs::write(Path::new(&out_dir).join(name), format!("{header}{text}")).expect("writing a generated file")
    };
    write(
        "cuda_entries.rs",
        format!(
            "{structs}/// One launch per kernel entry point, for both CUDA backends, from `kernels/shim/entries.def`.\n\
             pub(crate) trait Entries: Kernels {{\n{decls}}}\n\n\
             /// Every entry point's parameters in order, `(entry, [(C type, name)])`, as `entries.def` lists them.\n\
             pub const ENTRY_PARAMS: &[(&str, &[(&str, &str)])] = &[\n{table}];\n"
        ),
    );
    write(
        "cuda_entries_sim.rs",
        format!("impl Entries for SimBackend {{\n{sim}}}\n"),
    );
    write(
        "cuda_entries_gpu.rs",
        format!("impl Entries for CudaBackend {{\n{cuda}}}\n"),
    );
}

/// Write `$OUT_DIR/kv_snippets.rs`: the kernel snippets of every KV dtype that has them, found by name
/// in `kernels/kv/`: `<dtype>.cuh` and its four WGSL pool files `<dtype>_{read,write}_{packed,native}.wgsl`.
/// A dtype's snippets are its files; no Rust names them (the storage layer knows no kernel files).
fn kv_snippets() {
    println!("cargo:rerun-if-changed=kernels/kv");
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).to_path_buf();
    let dir = root.join("kernels/kv");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the kernels/kv folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cuh"))
        .filter_map(|p| p.file_stem().and_then(|n| n.to_str()).map(str::to_string))
        .collect();
    names.sort();
    let file = |rel: String| {
        let path = root.join(&rel);
        assert!(
            path.exists(),
            "{rel}: a KV dtype with a CUDA header needs its four WGSL pool files too"
        );
        format!("({rel:?}, include_str!({:?}))", path.display().to_string())
    };
    let mut out = String::from("&[\n");
    for n in &names {
        out += &format!(
            "    ({n:?}, KernelReads {{ cuda: {}, wgsl: WgslReads {{ read_packed: {}, read_native: {}, write_packed: {}, write_native: {} }} }}),\n",
            file(format!("kernels/kv/{n}.cuh")),
            file(format!("kernels/kv/{n}_read_packed.wgsl")),
            file(format!("kernels/kv/{n}_read_native.wgsl")),
            file(format!("kernels/kv/{n}_write_packed.wgsl")),
            file(format!("kernels/kv/{n}_write_native.wgsl")),
        );
    }
    out += "]\n";
    let dest = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("kv_snippets.rs");
    std::fs::write(dest, out).expect("writing kv_snippets.rs");
}

fn main() {
    embed_lessons();
    kv_snippets();
    // The shim is C++ (fibers on the calling thread): only in the native build (feature `native`), never for wasm32.
    if std::env::var_os("CARGO_FEATURE_NATIVE").is_none()
        || std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32")
    {
        return;
    }
    let list = entries();
    sim_ffi(&list);
    cuda_entries(&list);
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
