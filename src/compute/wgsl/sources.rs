//! The `.wgsl` kernels, embedded: the wgpu backend compiles exactly these, and the kernel panel shows
//! them next to their CUDA twins.

use crate::compute::{KernelSource, Op};

/// One WGSL kernel file and its entry points (named as their CUDA twins).
#[derive(Debug, Clone, Copy)]
pub struct WgslFile {
    /// File name under `kernels/`.
    pub file: &'static str,
    /// Path from the repository root.
    pub path: &'static str,
    /// Its full text.
    pub source: &'static str,
    /// Its `@compute` entry points.
    pub entries: &'static [&'static str],
}

/// Every WGSL kernel file.
pub const FILES: [WgslFile; 4] = [
    WgslFile {
        file: "attention.wgsl",
        path: "kernels/attention.wgsl",
        source: include_str!("../../../kernels/attention.wgsl"),
        entries: &[
            "attention_scores_f32",
            "softmax_rows_f32",
            "attention_pv_f32",
            "attention_fused_f32",
        ],
    },
    WgslFile {
        file: "kv_cache.wgsl",
        path: "kernels/kv_cache.wgsl",
        source: include_str!("../../../kernels/kv_cache.wgsl"),
        entries: &["static_cache_append_f16", "paged_append_f16"],
    },
    WgslFile {
        file: "paged_attention.wgsl",
        path: "kernels/paged_attention.wgsl",
        source: include_str!("../../../kernels/paged_attention.wgsl"),
        entries: &["paged_attention_decode_f16", "paged_attention_reduce_f32"],
    },
    WgslFile {
        file: "bandwidth.wgsl",
        path: "kernels/bandwidth.wgsl",
        source: include_str!("../../../kernels/bandwidth.wgsl"),
        entries: &["read_stream_u32"],
    },
];

/// The WGSL twin of `op`: its file, first entry point and line.
pub fn kernel_source(op: Op) -> Option<KernelSource> {
    let want = op.kernel_file().replace(".cu", ".wgsl");
    let file = FILES.into_iter().find(|f| f.file == want)?;
    let entry = *op.cuda_entries().first()?;
    let needle = format!("fn {entry}(");
    let line = file.source.lines().position(|l| l.contains(&needle))? + 1;
    Some(KernelSource {
        path: file.path,
        source: file.source,
        entry,
        line,
    })
}
