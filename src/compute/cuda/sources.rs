//! The `.cu` sources, embedded in the binary: NVRTC compiles exactly these at run time, and the app
//! shows them to students next to the result they produced.

use crate::cache::KvDtype;
use crate::compute::Kernel;

/// One kernel file.
#[derive(Debug, Clone, Copy)]
pub struct KernelFile {
    /// File name under `kernels/`.
    pub file: &'static str,
    /// Path from the repository root.
    pub path: &'static str,
    /// Its full text.
    pub source: &'static str,
}

/// Every kernel file, in the order the CUDA backend compiles them: each op's file (from the op table,
/// once each), then the files of the measuring entries.
pub fn files() -> Vec<KernelFile> {
    let mut out: Vec<KernelFile> = Vec::new();
    for op in crate::compute::Op::ALL {
        let (file, path, source) = op.cuda_source();
        if !out.iter().any(|f| f.file == file) {
            out.push(KernelFile { file, path, source });
        }
    }
    out.extend(MEASURING_FILES);
    out
}

/// Kernel files that hold no op: the read-only stream that measures a device's read roof, and the mask
/// predicate as a table (tested against `math::Mask`).
pub const MEASURING_FILES: [KernelFile; 2] = [
    KernelFile {
        file: "bandwidth.cu",
        path: "kernels/bandwidth.cu",
        source: include_str!("../../../kernels/bandwidth.cu"),
    },
    KernelFile {
        file: "mask_table.cu",
        path: "kernels/mask_table.cu",
        source: include_str!("../../../kernels/mask_table.cu"),
    },
];

/// `kernels/common.cuh`: what the kernels share (the masks, the block-wide reductions).
pub const COMMON: KernelFile = KernelFile {
    file: "common.cuh",
    path: "kernels/common.cuh",
    source: include_str!("../../../kernels/common.cuh"),
};

/// The line that includes [`COMMON`].
const INCLUDE_COMMON: &str = "#include \"common.cuh\"";

/// The line that includes the pools' KV dtype header (`kernels/kv/<dtype>.cuh`).
const INCLUDE_KV_DTYPE: &str = "#include \"kv_dtype.cuh\"";

/// The header a KV dtype's kernels read its pools with, if it has one: `(path, text)`.
pub fn kv_dtype_header(dtype: KvDtype) -> Option<(&'static str, &'static str)> {
    crate::compute::kv_snippets::kernel_reads(dtype).map(|k| k.cuda)
}

impl KernelFile {
    /// The text NVRTC compiles for f16 pools: [`Self::compile_source_for`] with [`KvDtype::F16`].
    pub fn compile_source(&self) -> String {
        self.compile_source_for(KvDtype::F16)
            .expect("the f16 dtype has a CUDA header")
    }

    /// The text NVRTC compiles for pools of `dtype`: the file with its `#include "common.cuh"` line
    /// replaced by that file and its `#include "kv_dtype.cuh"` line by the dtype's header (the sources
    /// are embedded, so there is no folder to search), with `#line` directives that keep the compiler's
    /// line numbers those of each file. `None` when the file reads pools and `dtype` has no CUDA header.
    pub fn compile_source_for(&self, dtype: KvDtype) -> Option<String> {
        let mut out = String::new();
        for (n, line) in self.source.lines().enumerate() {
            let included = if line.trim_start().starts_with(INCLUDE_COMMON) {
                Some((COMMON.file, COMMON.source))
            } else if line.trim_start().starts_with(INCLUDE_KV_DTYPE) {
                Some(kv_dtype_header(dtype)?)
            } else {
                None
            };
            match included {
                Some((file, text)) => {
                    out += &format!("#line 1 \"{file}\"\n{text}\n#line {} \"{}\"\n", n + 2, self.file)
                }
                None => {
                    out += line;
                    out += "\n";
                }
            }
        }
        Some(out)
    }

    /// The text the kernel panel shows: the file as it is, then each file it includes (the f16 pools'
    /// header, `common.cuh`) after a marker line, so a student reading one kernel also sees the
    /// helpers it calls. The file's own lines keep their numbers.
    pub fn display_source(&self) -> &'static str {
        let mut included = Vec::new();
        if self.source.contains(INCLUDE_KV_DTYPE)
            && let Some(h) = kv_dtype_header(KvDtype::F16)
        {
            included.push(h);
        }
        if self.source.contains(INCLUDE_COMMON) {
            included.push((COMMON.path, COMMON.source));
        }
        if included.is_empty() {
            return self.source;
        }
        crate::compute::made_once(self.file, || {
            let mut t = self.source.to_string();
            for (path, text) in included {
                t += &format!("\n// ---- {path} (included at the top of {}) ----\n{text}", self.file);
            }
            t
        })
    }
}

/// Entry points that are not ops: the read-only stream that measures a device's read roof, and the mask
/// table.
pub const MEASURING_ENTRIES: [(&str, &str); 2] =
    [("bandwidth.cu", "read_stream_u32"), ("mask_table.cu", "mask_table_i32")];

/// The file that holds `kernel`.
pub fn file_of(kernel: Kernel) -> KernelFile {
    let (file, path, source) = kernel.op().cuda_source();
    KernelFile { file, path, source }
}

/// The file, entry point and line of `kernel`'s first entry point, for the kernel panel.
pub fn kernel_source(kernel: Kernel) -> Option<crate::compute::KernelSource> {
    let file = file_of(kernel);
    let entry = *kernel.cuda_entries().first()?;
    Some(crate::compute::KernelSource {
        path: file.path,
        source: file.display_source(),
        entry,
        line: entry_line(&file, entry).unwrap_or(1),
    })
}

/// The 1-based line where `entry` is defined in its file (for highlighting), if found: the line that
/// names it with an opening parenthesis, on or just after a `__global__` line.
pub fn entry_line(file: &KernelFile, entry: &str) -> Option<usize> {
    let needle = format!("{entry}(");
    let lines: Vec<&str> = file.source.lines().collect();
    (0..lines.len())
        .find(|&i| {
            lines[i].contains(&needle)
                && (lines[i].contains("__global__") || i > 0 && lines[i - 1].contains("__global__"))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_defined_in_its_file() {
        for kernel in Kernel::ALL {
            let f = file_of(kernel);
            for entry in kernel.cuda_entries() {
                assert!(entry_line(&f, entry).is_some(), "{entry} not found in {}", f.file);
                assert!(f.source.contains("extern \"C\""), "{} has extern \"C\" entries", f.file);
            }
        }
    }
}
