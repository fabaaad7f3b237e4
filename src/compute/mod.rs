//! The compute interface: the [`Backend`] trait, its CPU implementation, the f64 reference and the
//! shared checker.
//!
//! Every backend takes host tensors and returns host tensors, so lessons, the CLI and tests call them
//! the same way. Inputs are validated once, in the trait's provided methods, before any backend code
//! (and so before any kernel launch) sees them. A backend that cannot run is a [`BackendStatus`] with a
//! reason, never a panic.

mod check;
mod cpu;
#[allow(unsafe_code)]
pub mod cuda;
mod ops;
pub mod reference;
pub mod suite;

use std::sync::Arc;

use half::f16;
use ndarray::Array3;

pub use check::{CheckReport, MAX_REPORTED, Mismatch, Tolerance, check};
pub use cpu::CpuBackend;
pub use ops::Op;

use crate::cache::{PagedShape, StaticShape};
use crate::math::{AttnCore, Mask};

/// Why a backend call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The inputs do not fit together.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The device or its driver failed.
    #[error("device error: {0}")]
    Device(String),
}

fn invalid(msg: impl Into<String>) -> BackendError {
    BackendError::InvalidInput(msg.into())
}

/// Inputs of an attention forward: Q `[H,T,hd]`, K and V `[KVH,T,hd]`.
#[derive(Debug, Clone, Copy)]
pub struct AttnInput<'a> {
    /// Queries.
    pub q: &'a Array3<f32>,
    /// Keys.
    pub k: &'a Array3<f32>,
    /// Values.
    pub v: &'a Array3<f32>,
    /// The mask.
    pub mask: Mask,
}

impl AttnInput<'_> {
    /// (H, KVH, T, hd).
    pub fn dims(&self) -> (usize, usize, usize, usize) {
        let (h, t, hd) = self.q.dim();
        (h, self.k.dim().0, t, hd)
    }

    fn validate(&self) -> Result<(), BackendError> {
        let (h, t, hd) = self.q.dim();
        let (kvh, tk, hdk) = self.k.dim();
        if self.v.dim() != self.k.dim() {
            return Err(invalid(format!("K is {:?} but V is {:?}", self.k.dim(), self.v.dim())));
        }
        if tk != t || hdk != hd {
            return Err(invalid(format!(
                "Q is {:?} but K is {:?}: seq and head_dim must agree",
                self.q.dim(),
                self.k.dim()
            )));
        }
        if h == 0 || kvh == 0 || t == 0 || hd == 0 || h % kvh != 0 {
            return Err(invalid(format!(
                "{h} query heads and {kvh} KV heads: both must be positive and KV heads must divide query heads"
            )));
        }
        if hd > MAX_HEAD_DIM {
            return Err(invalid(format!(
                "head_dim {hd} is larger than the kernels' limit {MAX_HEAD_DIM}"
            )));
        }
        for (name, a) in [("q", self.q), ("k", self.k), ("v", self.v)] {
            if !a.is_standard_layout() {
                return Err(invalid(format!("{name} must be contiguous")));
            }
        }
        Ok(())
    }
}

/// The largest head_dim the kernels accept (their shared-memory arrays are sized for it).
pub const MAX_HEAD_DIM: usize = 256;

/// A paged cache's block tables laid out for the decode kernels: `[R, max_blocks]` i32 padded with
/// −1, and the context lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeTables {
    /// `[R, max_blocks]` physical block ids.
    pub tables: Vec<i32>,
    /// Columns of `tables`.
    pub max_blocks: usize,
    /// Tokens of each request.
    pub context_lens: Vec<i32>,
}

impl DecodeTables {
    /// The tables of `reqs`, in that order.
    pub fn new(cache: &crate::cache::PagedKvCache, reqs: &[crate::cache::RequestId]) -> Self {
        let (tables, max_blocks, context_lens) = cache.block_table_matrix(reqs);
        Self {
            tables,
            max_blocks,
            context_lens,
        }
    }

    /// A decode problem over `cache` with queries `q` (`[R, n_heads, hd]`).
    pub fn input<'a>(
        &'a self,
        cache: &'a crate::cache::PagedKvCache,
        q: &'a [f32],
        n_heads: usize,
    ) -> PagedDecodeInput<'a> {
        PagedDecodeInput {
            q,
            n_heads,
            shape: cache.shape(),
            k_pool: &cache.k_pool,
            v_pool: &cache.v_pool,
            block_tables: &self.tables,
            max_blocks: self.max_blocks,
            context_lens: &self.context_lens,
        }
    }
}

/// Inputs of paged decode attention: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct PagedDecodeInput<'a> {
    /// Queries `[R, H, hd]`.
    pub q: &'a [f32],
    /// Query heads H.
    pub n_heads: usize,
    /// Pool shape (num_blocks, block_size, KVH, hd).
    pub shape: PagedShape,
    /// K pool `[num_blocks, KVH, block_size, hd]`.
    pub k_pool: &'a [f16],
    /// V pool, same shape.
    pub v_pool: &'a [f16],
    /// `[R, max_blocks]` physical block ids, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request `[R]`.
    pub context_lens: &'a [i32],
}

impl PagedDecodeInput<'_> {
    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }

    fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        let r = self.requests();
        if s.kv_heads == 0 || self.n_heads == 0 || !self.n_heads.is_multiple_of(s.kv_heads) {
            return Err(invalid(format!(
                "kv-heads ({}) must divide heads ({})",
                s.kv_heads, self.n_heads
            )));
        }
        if s.head_dim == 0 || s.head_dim > MAX_HEAD_DIM || s.block_size == 0 || s.num_blocks == 0 {
            return Err(invalid(format!(
                "head_dim must be 1..={MAX_HEAD_DIM}; block_size and num_blocks must be positive"
            )));
        }
        if self.q.len() != r * self.n_heads * s.head_dim {
            return Err(invalid(format!(
                "q has {} values, expected R·H·hd = {}",
                self.q.len(),
                r * self.n_heads * s.head_dim
            )));
        }
        if self.k_pool.len() != s.numel() || self.v_pool.len() != s.numel() {
            return Err(invalid(format!("pools must have {} values", s.numel())));
        }
        if self.block_tables.len() != r * self.max_blocks || self.max_blocks == 0 {
            return Err(invalid("block_tables must be [R, max_blocks] with max_blocks >= 1"));
        }
        for (i, &len) in self.context_lens.iter().enumerate() {
            let len = usize::try_from(len).map_err(|_| invalid(format!("context_lens[{i}] is negative")))?;
            let need = len.div_ceil(s.block_size);
            if need > self.max_blocks {
                return Err(invalid(format!(
                    "request {i}: {len} tokens need {need} blocks, the table has {}",
                    self.max_blocks
                )));
            }
            for (j, &b) in self.block_tables[i * self.max_blocks..][..need].iter().enumerate() {
                if b < 0 || b as usize >= s.num_blocks {
                    return Err(invalid(format!(
                        "block_tables[{i}][{j}] = {b} is not a block of the pool (0..{})",
                        s.num_blocks
                    )));
                }
            }
        }
        Ok(())
    }
}

fn validate_static_append(
    shape: StaticShape,
    k_cache: &[f16],
    v_cache: &[f16],
    layer: usize,
    pos: usize,
    k: &[f32],
    v: &[f32],
) -> Result<(), BackendError> {
    if k_cache.len() != shape.numel() || v_cache.len() != shape.numel() {
        return Err(invalid(format!("caches must have {} values", shape.numel())));
    }
    if layer >= shape.layers || pos >= shape.max_seq {
        return Err(invalid(format!(
            "(layer {layer}, pos {pos}) is outside the cache [{} layers, {} positions]",
            shape.layers, shape.max_seq
        )));
    }
    let n = shape.batch * shape.kv_heads * shape.head_dim;
    if k.len() != n || v.len() != n {
        return Err(invalid(format!(
            "k_new/v_new must be [batch, kv_heads, head_dim] = {n} values"
        )));
    }
    Ok(())
}

fn validate_paged_append(
    shape: PagedShape,
    k_pool: &[f16],
    v_pool: &[f16],
    slots: &[i32],
    k: &[f32],
    v: &[f32],
) -> Result<(), BackendError> {
    if k_pool.len() != shape.numel() || v_pool.len() != shape.numel() {
        return Err(invalid(format!("pools must have {} values", shape.numel())));
    }
    let n = slots.len() * shape.kv_heads * shape.head_dim;
    if k.len() != n || v.len() != n {
        return Err(invalid(format!(
            "k/v must be [tokens, kv_heads, head_dim] = {n} values"
        )));
    }
    let cap = shape.num_blocks * shape.block_size;
    if let Some(bad) = slots.iter().find(|&&s| s >= 0 && s as usize >= cap) {
        return Err(invalid(format!("slot {bad} is outside the pool ({cap} slots)")));
    }
    Ok(())
}

/// A compute backend. Implement the `run_*` methods; callers use the provided methods, which
/// validate inputs first so that no backend (and no kernel) ever sees inconsistent sizes.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// The device, in words ("CPU, 2 threads", "NVIDIA H200 (sm_90)").
    fn device(&self) -> String;

    /// Attention forward returning scores, probabilities and per-head output (three kernels).
    fn run_attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError>;
    /// Fused attention forward: only the output `[H,T,hd]`.
    fn run_attention_fused(&self, inp: &AttnInput) -> Result<Array3<f32>, BackendError>;
    /// Write one token of `layer` at `pos` into a static cache.
    #[allow(clippy::too_many_arguments)]
    fn run_static_cache_append(
        &self,
        shape: StaticShape,
        k_cache: &mut [f16],
        v_cache: &mut [f16],
        layer: usize,
        pos: usize,
        k_new: &[f32],
        v_new: &[f32],
    ) -> Result<(), BackendError>;
    /// Write tokens into the paged pools through `slot_mapping` (negative slots are skipped).
    fn run_paged_append(
        &self,
        shape: PagedShape,
        k_pool: &mut [f16],
        v_pool: &mut [f16],
        slot_mapping: &[i32],
        k: &[f32],
        v: &[f32],
    ) -> Result<(), BackendError>;
    /// Paged decode attention, reading through the block tables. Returns `[R, H, hd]`.
    fn run_paged_decode(&self, inp: &PagedDecodeInput) -> Result<Vec<f32>, BackendError>;

    /// Validated [`Backend::run_attention`].
    fn attention(&self, inp: &AttnInput) -> Result<AttnCore<f32>, BackendError> {
        inp.validate()?;
        self.run_attention(inp)
    }
    /// Validated [`Backend::run_attention_fused`].
    fn attention_fused(&self, inp: &AttnInput) -> Result<Array3<f32>, BackendError> {
        inp.validate()?;
        self.run_attention_fused(inp)
    }
    /// Validated [`Backend::run_static_cache_append`].
    #[allow(clippy::too_many_arguments)]
    fn static_cache_append(
        &self,
        shape: StaticShape,
        k_cache: &mut [f16],
        v_cache: &mut [f16],
        layer: usize,
        pos: usize,
        k_new: &[f32],
        v_new: &[f32],
    ) -> Result<(), BackendError> {
        validate_static_append(shape, k_cache, v_cache, layer, pos, k_new, v_new)?;
        self.run_static_cache_append(shape, k_cache, v_cache, layer, pos, k_new, v_new)
    }
    /// Validated [`Backend::run_paged_append`].
    fn paged_append(
        &self,
        shape: PagedShape,
        k_pool: &mut [f16],
        v_pool: &mut [f16],
        slot_mapping: &[i32],
        k: &[f32],
        v: &[f32],
    ) -> Result<(), BackendError> {
        validate_paged_append(shape, k_pool, v_pool, slot_mapping, k, v)?;
        self.run_paged_append(shape, k_pool, v_pool, slot_mapping, k, v)
    }
    /// Validated [`Backend::run_paged_decode`].
    fn paged_decode(&self, inp: &PagedDecodeInput) -> Result<Vec<f32>, BackendError> {
        inp.validate()?;
        self.run_paged_decode(inp)
    }
}

/// The backends kvscope knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Rust on the CPU (f32, rayon); the reference path.
    Cpu,
    /// NVIDIA GPU through cudarc + NVRTC.
    Cuda,
    /// The same `.cu` sources run on CPU threads by the C++ shim (small shapes only).
    CudaSim,
}

impl BackendKind {
    /// Every kind, in the order the UI lists them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Cpu, BackendKind::Cuda, BackendKind::CudaSim];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::CudaSim => "cuda-sim",
        }
    }
}

/// A backend, or the reason it cannot run here.
#[derive(Clone)]
pub struct BackendStatus {
    /// Which backend.
    pub kind: BackendKind,
    /// The ready backend, or a reason a user can act on.
    pub backend: Result<Arc<dyn Backend>, String>,
}

/// Probe one backend. Never panics.
pub fn probe(kind: BackendKind) -> BackendStatus {
    let backend: Result<Arc<dyn Backend>, String> = match kind {
        BackendKind::Cpu => Ok(Arc::new(CpuBackend::new())),
        BackendKind::Cuda => cuda::probe().map(|b| b as Arc<dyn Backend>),
        BackendKind::CudaSim => Ok(Arc::new(cuda::SimBackend)),
    };
    BackendStatus { kind, backend }
}

/// Probe every backend.
pub fn probe_all() -> Vec<BackendStatus> {
    BackendKind::ALL.iter().map(|&k| probe(k)).collect()
}
