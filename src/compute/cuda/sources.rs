//! The `.cu` sources, embedded in the binary: NVRTC compiles exactly these at run time, and the app
//! shows them to students next to the result they produced.

use crate::compute::Op;

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

/// Every kernel file, in the order the CUDA backend compiles them.
pub const FILES: [KernelFile; 5] = [
    KernelFile {
        file: "attention.cu",
        path: "kernels/attention.cu",
        source: include_str!("../../../kernels/attention.cu"),
    },
    KernelFile {
        file: "kv_cache.cu",
        path: "kernels/kv_cache.cu",
        source: include_str!("../../../kernels/kv_cache.cu"),
    },
    KernelFile {
        file: "paged_attention.cu",
        path: "kernels/paged_attention.cu",
        source: include_str!("../../../kernels/paged_attention.cu"),
    },
    KernelFile {
        file: "bandwidth.cu",
        path: "kernels/bandwidth.cu",
        source: include_str!("../../../kernels/bandwidth.cu"),
    },
    // FlashAttention's tiled forward pass: compiled with the others and run on the shim by the
    // kernel selftest; no backend op launches it yet (#13).
    KernelFile {
        file: "flash_attention.cu",
        path: "kernels/flash_attention.cu",
        source: include_str!("../../../kernels/flash_attention.cu"),
    },
];

/// Entry points that are not ops: the read-only stream that measures a device's read roof.
pub const MEASURING_ENTRIES: [(&str, &str); 1] = [("bandwidth.cu", "read_stream_u32")];

/// The file that holds `op`.
pub fn file_of(op: Op) -> KernelFile {
    let name = op.kernel_file();
    FILES
        .into_iter()
        .find(|f| f.file == name)
        .expect("every op's file is embedded")
}

/// The file, entry point and line of `op`'s first kernel, for the kernel panel.
pub fn kernel_source(op: Op) -> Option<crate::compute::KernelSource> {
    let file = FILES.into_iter().find(|f| f.file == op.kernel_file())?;
    let entry = *op.cuda_entries().first()?;
    Some(crate::compute::KernelSource {
        path: file.path,
        source: file.source,
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
        for op in Op::ALL {
            let f = file_of(op);
            for entry in op.cuda_entries() {
                assert!(entry_line(&f, entry).is_some(), "{entry} not found in {}", f.file);
                assert!(f.source.contains("extern \"C\""), "{} has extern \"C\" entries", f.file);
            }
        }
    }
}
