//! The kernel snippets of each KV dtype: the functions a kernel reads (and writes) a pool of that dtype
//! with, on the GPU backends. They are files in `kernels/kv/`, found by the dtype's name (`build.rs`
//! lists them): `<name>.cuh`, included where a kernel includes `kv_dtype.cuh`, and the four WGSL pool
//! files. The storage layer (`cache::dtype`) knows no kernel files; this is where the compute layer
//! embeds them. A dtype without snippets runs on the CPU only (the 8-bit pools have their own ops,
//! `quant_append` and `quant_decode`), and a GPU backend says so with a typed error.

use crate::cache::KvDtype;

/// The files that hold a dtype's read (and write) functions on the GPU backends.
#[derive(Debug, Clone, Copy)]
pub struct KernelReads {
    /// `kernels/kv/<name>.cuh`, included where a kernel includes `kv_dtype.cuh`: `kv_t`, `kv_load8`,
    /// `kv_unpack8`, `kv_store`.
    pub cuda: (&'static str, &'static str),
    /// `kernels/kv/<name>_read*.wgsl` and `_write*.wgsl`: `k_at`/`v_at` and `store_k`/`store_v`, the
    /// packed (any adapter) and native (shader-f16) bindings.
    pub wgsl: WgslReads,
}

/// A dtype's WGSL pool snippets: (path, text) each.
#[derive(Debug, Clone, Copy)]
pub struct WgslReads {
    /// Read-only pools, words.
    pub read_packed: (&'static str, &'static str),
    /// Read-only pools, native elements (needs `enable f16;` for f16).
    pub read_native: (&'static str, &'static str),
    /// Written pools, words.
    pub write_packed: (&'static str, &'static str),
    /// Written pools, native elements.
    pub write_native: (&'static str, &'static str),
}

/// Every dtype's snippets, by the dtype's name.
const SNIPPETS: &[(&str, KernelReads)] = include!(concat!(env!("OUT_DIR"), "/kv_snippets.rs"));

/// The snippets of `dtype`, or `None` where the GPU backends have no pool access for it.
pub fn kernel_reads(dtype: KvDtype) -> Option<KernelReads> {
    SNIPPETS.iter().find(|(n, _)| *n == dtype.name()).map(|(_, k)| *k)
}

/// The names of the dtypes with snippets.
pub fn dtypes_with_snippets() -> impl Iterator<Item = &'static str> {
    SNIPPETS.iter().map(|(n, _)| *n)
}
