//! The `.wgsl` kernels, embedded: the wgpu backend compiles exactly these, and the kernel panel shows
//! them next to their CUDA twins.

use crate::cache::KvDtype;
use crate::compute::{Kernel, KernelSource, Op};

/// How a WGSL program stores f16 K/V.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F16Path {
    /// u32 pairs, unpacked with `unpack2x16float`: every adapter.
    Packed,
    /// `array<f16>`: adapters with the shader-f16 feature.
    Native,
}

/// `kernels/common.wgsl`: what the WGSL kernels share (the mask predicate, the workgroup reductions),
/// put in front of every kernel file (WGSL has no `#include`).
pub const COMMON: &str = include_str!("../../../kernels/common.wgsl");

/// `kernels/decode_row.wgsl`: the decode body of the kernels that materialise a score row (softmax over
/// the row, then P·V), put in front of every kernel file that calls `decode_row`; each such file defines
/// the `score_at` and `pv_term` it reads through.
pub const DECODE_ROW: &str = include_str!("../../../kernels/decode_row.wgsl");

/// Whether `source` calls the shared decode body.
fn uses_decode_row(source: &str) -> bool {
    source.contains("decode_row(")
}

/// Which f16 pool snippet a file needs in front of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pools {
    /// None.
    None,
    /// Read-only pools (`k_at`, `v_at`).
    Read,
    /// Written pools (`store_k`, `store_v`).
    Write,
}

/// One WGSL kernel file and its entry points (named as their CUDA twins).
#[derive(Debug, Clone)]
pub struct WgslFile {
    /// File name under `kernels/`.
    pub file: &'static str,
    /// Path from the repository root.
    pub path: &'static str,
    /// Its full text.
    pub source: &'static str,
    /// Its `@compute` entry points.
    pub entries: Vec<&'static str>,
    /// The f16 pool access it needs.
    pub pools: Pools,
}

impl WgslFile {
    /// The module the backend compiles for f16 pools: [`Self::module_for`] with [`KvDtype::F16`].
    pub fn module(&self, f16: F16Path) -> String {
        self.module_for(f16, KvDtype::F16)
            .expect("the f16 dtype has WGSL pool snippets")
    }

    /// The module the backend compiles for pools of `dtype`: the dtype's pool snippet (its `k_at`/`v_at`
    /// or `store_k`/`store_v`; with `enable f16;` for the native f16 path) and [`COMMON`] in front of the
    /// file. `None` when the file touches pools and `dtype` has no WGSL snippets.
    pub fn module_for(&self, f16: F16Path, dtype: KvDtype) -> Option<String> {
        self.module_with(f16, dtype, &[])
    }

    /// [`Self::module_for`] with some kernel files replaced (`(file name, text)`: an exercise's edit
    /// of this file, of `common.wgsl` or of `decode_row.wgsl`).
    pub fn module_with(&self, f16: F16Path, dtype: KvDtype, edits: &[(String, String)]) -> Option<String> {
        let (prefix, source) = self.prefix_and_source(f16, dtype, edits)?;
        Some(format!("{prefix}{source}"))
    }

    /// What the backend puts in front of this file for pools of `dtype` (the pool snippet, `enable
    /// f16;` on the native path, [`COMMON`] and, for a file that calls it, [`DECODE_ROW`]), and the
    /// file's own text, with `edits` applied (`(file name, text)`). The file's line n is the module's
    /// line n + the prefix's line count.
    pub fn prefix_and_source(
        &self,
        f16: F16Path,
        dtype: KvDtype,
        edits: &[(String, String)],
    ) -> Option<(String, String)> {
        let text = |name: &str, shipped: &'static str| -> String {
            edits
                .iter()
                .find(|(f, _)| f == name)
                .map_or(shipped.to_string(), |(_, t)| t.clone())
        };
        let snippet = match self.pools {
            Pools::None => "",
            pools => {
                let w = crate::compute::kv_snippets::kernel_reads(dtype)?.wgsl;
                match (pools, f16) {
                    (Pools::Read, F16Path::Packed) => w.read_packed.1,
                    (Pools::Read, F16Path::Native) => w.read_native.1,
                    (_, F16Path::Packed) => w.write_packed.1,
                    (_, F16Path::Native) => w.write_native.1,
                }
            }
        };
        let enable = if self.pools != Pools::None && f16 == F16Path::Native {
            "enable f16;\n"
        } else {
            ""
        };
        let source = text(self.file, self.source);
        let decode = if uses_decode_row(&source) {
            text("decode_row.wgsl", DECODE_ROW)
        } else {
            String::new()
        };
        let common = text("common.wgsl", COMMON);
        Some((format!("{enable}{snippet}\n{common}\n{decode}\n"), source))
    }
}

/// Every WGSL kernel file: each op's file (from the op table, once each, with the entry points of every
/// op in it), then the read-only stream that measures the read roof and the mask table.
pub fn files() -> Vec<WgslFile> {
    let mut out: Vec<WgslFile> = Vec::new();
    for op in Op::ALL {
        let (file, path, source) = op.wgsl_source();
        match out.iter_mut().find(|f| f.file == file) {
            Some(f) => f.entries.extend(op.entries()),
            None => out.push(WgslFile {
                file,
                path,
                source,
                entries: op.entries(),
                pools: op.wgsl_pools(),
            }),
        }
    }
    out.push(WgslFile {
        file: "bandwidth.wgsl",
        path: "kernels/bandwidth.wgsl",
        source: include_str!("../../../kernels/bandwidth.wgsl"),
        entries: vec!["read_stream_u32"],
        pools: Pools::None,
    });
    out.push(WgslFile {
        file: "mask_table.wgsl",
        path: "kernels/mask_table.wgsl",
        source: include_str!("../../../kernels/mask_table.wgsl"),
        entries: vec!["mask_table_i32"],
        pools: Pools::None,
    });
    out
}

/// The WGSL twin of `kernel`: its file, first entry point and line.
pub fn kernel_source(kernel: Kernel) -> Option<KernelSource> {
    let (file, path, source) = kernel.op().wgsl_source();
    let entry = *kernel.cuda_entries().first()?;
    let needle = format!("fn {entry}(");
    let line = source.lines().position(|l| l.contains(&needle))? + 1;
    Some(KernelSource {
        path,
        source: display_source(file, source),
        entry,
        line,
    })
}

/// The text the kernel panel shows for a WGSL file: the file as it is, then [`COMMON`] (which the
/// backend puts in front of it) after a marker line, so a student sees the helpers it calls; the file's
/// own lines keep their numbers. Made once per file.
fn display_source(file: &'static str, source: &'static str) -> &'static str {
    crate::compute::made_once(file, || {
        let decode = if uses_decode_row(source) {
            format!("\n// ---- kernels/decode_row.wgsl (put in front of {file} when it is compiled) ----\n{DECODE_ROW}")
        } else {
            String::new()
        };
        format!(
            "{source}{decode}\n// ---- kernels/common.wgsl (put in front of {file} when it is compiled) ----\n{COMMON}"
        )
    })
}
