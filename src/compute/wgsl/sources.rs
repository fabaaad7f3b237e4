//! The `.wgsl` kernels, embedded: the wgpu backend compiles exactly these, and the kernel panel shows
//! them next to their CUDA twins.

use crate::compute::{KernelSource, Op};

/// How a WGSL program stores f16 K/V.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F16Path {
    /// u32 pairs, unpacked with `unpack2x16float`: every adapter.
    Packed,
    /// `array<f16>`: adapters with the shader-f16 feature.
    Native,
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
    /// The f16 pool access it needs.
    pub pools: Pools,
}

impl WgslFile {
    /// The module the backend compiles for `f16`: the pool snippet (and `enable f16;` for the native
    /// path) in front of the file.
    pub fn module(&self, f16: F16Path) -> String {
        let snippet = match (self.pools, f16) {
            (Pools::None, _) => "",
            (Pools::Read, F16Path::Packed) => include_str!("../../../kernels/f16_read_packed.wgsl"),
            (Pools::Read, F16Path::Native) => include_str!("../../../kernels/f16_read_native.wgsl"),
            (Pools::Write, F16Path::Packed) => include_str!("../../../kernels/f16_write_packed.wgsl"),
            (Pools::Write, F16Path::Native) => include_str!("../../../kernels/f16_write_native.wgsl"),
        };
        let enable = if self.pools != Pools::None && f16 == F16Path::Native {
            "enable f16;\n"
        } else {
            ""
        };
        format!("{enable}{snippet}\n{}", self.source)
    }
}

/// Every WGSL kernel file.
pub const FILES: [WgslFile; 5] = [
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
        pools: Pools::None,
    },
    WgslFile {
        file: "kv_cache.wgsl",
        path: "kernels/kv_cache.wgsl",
        source: include_str!("../../../kernels/kv_cache.wgsl"),
        entries: &["static_cache_append_f16", "paged_append_f16", "copy_blocks_f16"],
        pools: Pools::Write,
    },
    WgslFile {
        file: "paged_attention.wgsl",
        path: "kernels/paged_attention.wgsl",
        source: include_str!("../../../kernels/paged_attention.wgsl"),
        entries: &["paged_attention_decode_f16", "paged_attention_reduce_f32"],
        pools: Pools::Read,
    },
    WgslFile {
        file: "flash_attention.wgsl",
        path: "kernels/flash_attention.wgsl",
        source: include_str!("../../../kernels/flash_attention.wgsl"),
        entries: &["flash_attention_f32"],
        pools: Pools::None,
    },
    WgslFile {
        file: "bandwidth.wgsl",
        path: "kernels/bandwidth.wgsl",
        source: include_str!("../../../kernels/bandwidth.wgsl"),
        entries: &["read_stream_u32"],
        pools: Pools::None,
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
