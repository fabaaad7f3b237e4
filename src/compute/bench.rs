//! Benchmarks behind `kvscope bench`, and lesson 4's bandwidth sweep. Every figure is a ratio of two
//! things measured in the same run on the same device, so it means something on any machine: attention
//! GFLOP/s against the fastest f32 GEMM callable from Rust on the host (P1: the `gemm` crate or matrixmultiply), and paged-decode K/V bytes per second
//! against a read-only stream over the same bytes on the same device (P3: decode only reads its K/V,
//! so a plain read of them is its roof; each backend times itself and its roofs through
//! `Backend::time_paged_decode`). A copy of the same bytes is measured too and counted as what it moves:
//! the bytes it reads plus the bytes it writes. Nothing here is asserted in tests.

use std::time::Duration;

use half::f16;
use ndarray::{Array2, Axis};
use rayon::prelude::*;
use serde::Serialize;

use crate::cache::{PagedKvCache, PagedShape};
use crate::compute::timing::median_time;
use crate::compute::{AttnInput, Backend, BackendError, BackendKind, DecodeTables, Device};
use crate::math::{AttnShape, AttnWeights, Mask, Rng, matmul, project};

/// One line of the benchmark table.
#[derive(Debug, Clone, Serialize)]
pub struct BenchLine {
    /// Short id (P1, P3).
    pub id: String,
    /// What was measured.
    pub what: String,
    /// The figure, e.g. GFLOP/s or GB/s.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The same-run baseline.
    pub baseline: f64,
    /// What the baseline is.
    pub baseline_what: String,
    /// value / baseline.
    pub ratio: f64,
    /// The goal for the ratio.
    pub goal: f64,
    /// Median time of one run of the measured op, in ms.
    pub ms: f64,
    /// P3 lines on the host: GB/s of a plain read of the same bytes in the block tables' order
    /// (`timing::host_table_order_read`), what the memory system gives for the table's shape.
    pub table_order_read: Option<f64>,
}

/// GFLOP/s of the fastest f32 GEMM this project can call from Rust on an n×n×n product, on the rayon
/// pool: the `gemm` crate and matrixmultiply (through ndarray, rows split over the pool) are both
/// measured and the faster one is the baseline. Returns (GFLOP/s, time, which).
pub fn best_gemm_gflops(n: usize) -> (f64, Duration, &'static str) {
    let (mm, t_mm) = gemm_gflops(n);
    let mut rng = Rng::new(1);
    let a = Array2::from_shape_vec((n, n), rng.normal_vec(n * n, 1.0)).expect("shape");
    let b = Array2::from_shape_vec((n, n), rng.normal_vec(n * n, 1.0)).expect("shape");
    let threads = rayon::current_num_threads();
    let t = median_time(5, || {
        std::hint::black_box(crate::simd::sgemm(a.view(), b.view(), threads));
    });
    let g = 2.0 * (n * n * n) as f64 / t.as_secs_f64() / 1e9;
    if g > mm {
        (g, t, "gemm crate")
    } else {
        (mm, t_mm, "matrixmultiply")
    }
}

/// GFLOP/s of matrixmultiply (ndarray's GEMM) on an n×n×n f32 product, rows split over the rayon pool.
pub fn gemm_gflops(n: usize) -> (f64, Duration) {
    let mut rng = Rng::new(1);
    let a = Array2::from_shape_vec((n, n), rng.normal_vec(n * n, 1.0)).expect("shape");
    let b = Array2::from_shape_vec((n, n), rng.normal_vec(n * n, 1.0)).expect("shape");
    let chunk = n.div_ceil(rayon::current_num_threads() * 4).max(1);
    let t = median_time(5, || {
        let parts: Vec<Array2<f32>> = a
            .axis_chunks_iter(Axis(0), chunk)
            .into_par_iter()
            .map(|rows| matmul(rows, b.view()))
            .collect();
        std::hint::black_box(parts);
    });
    (2.0 * (n * n * n) as f64 / t.as_secs_f64() / 1e9, t)
}

/// P1: causal attention forward at the size, against GEMM. `keep_matrices` keeps the score
/// and probability matrices (what the lessons display); otherwise the fused path (what a real forward
/// pass runs) is measured. FLOPs are the useful ones of a causal mask: Q·Kᵀ and P·V over the `T(T+1)/2`
/// visible pairs, 2·hd each, per head — the convention of the FlashAttention papers. A backend that
/// times on a device (not the host) gets no host-GEMM baseline.
pub fn p1(backend: &dyn Backend, seq: usize, keep_matrices: bool) -> Result<BenchLine, BackendError> {
    let shape = AttnShape {
        seq,
        d_model: 1024,
        n_heads: 16,
        n_kv_heads: 16,
    };
    let w = AttnWeights::random(shape, 1);
    let qkv = project(&w);
    let inp = AttnInput {
        q: &qkv.q,
        k: &qkv.k,
        v: &qkv.v,
        mask: Mask::Causal,
    };
    let (seconds, on_host) = if keep_matrices {
        backend.attention(&inp)?;
        let t = median_time(5, || {
            std::hint::black_box(backend.attention(&inp).ok());
        });
        (t.as_secs_f64(), true)
    } else {
        backend.time_attention_fused(&inp, 5)?
    };
    let pairs = (seq * (seq + 1) / 2) as f64;
    let flops = 2.0 * 2.0 * shape.n_heads as f64 * shape.head_dim() as f64 * pairs;
    let gflops = flops / seconds / 1e9;
    let (gemm, what) = if on_host {
        let (g, _, which) = best_gemm_gflops(1024);
        (g, format!("best GEMM ({which}), 1024³ f32, same threads"))
    } else {
        (f64::NAN, "no device GEMM baseline".to_string())
    };
    // The materialising path also writes the full score and probability matrices, 2·H·T² f32 (the
    // masked triangle included): that is what bounds it, so the line says how many bytes and how fast.
    let kept = 2 * shape.n_heads * seq * seq * std::mem::size_of::<f32>();
    let (id, kind) = if keep_matrices {
        (
            "P1-keep",
            format!(
                "keeping scores+probs: writes {:.0} MB of S and P, {:.1} GB/s over its whole time",
                kept as f64 / 1e6,
                kept as f64 / seconds / 1e9
            ),
        )
    } else {
        ("P1", "fused".to_string())
    };
    Ok(BenchLine {
        id: id.into(),
        what: format!(
            "attention forward ({kind}), causal, T={seq}, d_model=1024, 16 heads ({}: {}; {})",
            backend.kind().name(),
            backend.device(),
            if keep_matrices {
                "host wall clock, inputs and outputs through the host".to_string()
            } else {
                backend.clock()
            }
        ),
        value: gflops,
        unit: "GFLOP/s".into(),
        baseline: gemm,
        baseline_what: what,
        ratio: gflops / gemm,
        goal: if keep_matrices { 0.0 } else { 0.6 },
        ms: seconds * 1e3,
        table_order_read: None,
    })
}

/// The P3 problem: `requests` × `context` tokens, 8 KV heads, 32 query heads, hd 128, block 16, with
/// block tables interleaved the way concurrent decoding leaves them.
pub struct DecodeProblem {
    /// The cache (pools and tables).
    pub cache: PagedKvCache,
    /// Queries `[R, H, hd]`.
    pub q: Vec<f32>,
    /// Query heads.
    pub heads: usize,
    /// Requests in order.
    pub reqs: Vec<u32>,
}

impl DecodeProblem {
    /// Build it (pool values are random f16).
    pub fn new(
        requests: usize,
        context: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        block_size: usize,
    ) -> Self {
        let blocks_per_req = context.div_ceil(block_size);
        let shape = PagedShape {
            num_blocks: requests * blocks_per_req,
            block_size,
            kv_heads,
            head_dim,
            dtype: crate::cache::KvDtype::F16,
        };
        let mut cache = PagedKvCache::new(shape);
        // Allocate block by block, round robin, so each request's blocks are scattered.
        for _ in 0..blocks_per_req {
            for r in 0..requests as u32 {
                let n = block_size.min(context - cache.len(r));
                cache.append_slots(r, n).expect("pool sized exactly");
            }
        }
        let table: Vec<f16> = Rng::new(3)
            .normal_vec(1 << 16, 1.0)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let kp = cache.k_pool.as_f16_mut().expect("the bench's pools are f16");
        for (i, k) in kp.iter_mut().enumerate() {
            *k = table[i & 0xffff];
        }
        let vp = cache.v_pool.as_f16_mut().expect("the bench's pools are f16");
        for (i, v) in vp.iter_mut().enumerate() {
            *v = table[(i * 7 + 13) & 0xffff];
        }
        let q = Rng::new(4).normal_vec(requests * heads * head_dim, 1.0);
        Self {
            cache,
            q,
            heads,
            reqs: (0..requests as u32).collect(),
        }
    }

    /// K and V bytes one decode step reads.
    pub fn kv_bytes(&self) -> usize {
        let s = self.cache.shape();
        let tokens: usize = self.reqs.iter().map(|&r| self.cache.len(r)).sum();
        tokens * crate::cache::kv_bytes_per_token(1, s.kv_heads as u64, s.head_dim as u64, s.dtype) as usize
    }

    /// Run one decode step on `backend`.
    pub fn run(&self, backend: &dyn Backend) -> Vec<f32> {
        let tables = DecodeTables::new(&self.cache, &self.reqs);
        let inp = tables.input(&self.cache, &self.q, self.heads);
        backend.paged_decode(&inp).expect("valid problem")
    }
}

/// P3: paged decode bandwidth against a read-only stream over the same bytes on the same device, after
/// checking the kernel's result against the f64 reference on the same problem.
/// `block_size` 16 is the goal's problem (id P3); other sizes (id P3-b<size>) show what the block
/// table's shape costs.
pub fn p3(
    backend: &dyn Backend,
    requests: usize,
    context: usize,
    block_size: usize,
) -> Result<BenchLine, BackendError> {
    let prob = DecodeProblem::new(requests, context, 32, 8, 128, block_size);
    let tables = DecodeTables::new(&prob.cache, &prob.reqs);
    let inp = tables.input(&prob.cache, &prob.q, prob.heads);
    let report = crate::compute::suite::paged_equals_contiguous(backend, &inp)?;
    if !report.passed() {
        return Err(BackendError::Device(format!(
            "decode kernel disagrees with the reference:\n{report}"
        )));
    }
    let timing = backend.time_paged_decode(&inp, 15)?;
    let pages = match crate::cache::pool::process_huge_page_bytes() {
        Some(h) if prob.cache.k_pool.is_mapped() => format!(
            "pools mapped and advised onto 2 MiB pages: {} MiB of the process on huge pages, pools {} MiB",
            h >> 20,
            (prob.cache.k_pool.bytes().len() + prob.cache.v_pool.bytes().len()) >> 20
        ),
        _ if prob.cache.k_pool.is_mapped() => "pools mapped and advised onto 2 MiB pages".into(),
        _ => "pools on the heap (4 KiB pages)".into(),
    };
    let bytes = prob.kv_bytes();
    let table_order_read = (timing.device == Device::Host)
        .then(|| bytes as f64 / crate::compute::timing::host_table_order_read(&inp, 15) / 1e9);
    let (bw, read, copy) = timing.gbs(bytes);
    let mb = bytes as f64 / 1e6;
    let roof = match timing.device {
        Device::Host => format!(
            "read-only stream (a sum) of the same {mb:.0} MB, same threads; a copy of them moves {copy:.1} GB/s read+written"
        ),
        Device::Gpu => format!(
            "read-only stream kernel over the same {mb:.0} MB; a device-to-device copy moves {copy:.1} GB/s read+written"
        ),
    };
    Ok(BenchLine {
        id: if block_size == 16 {
            "P3".into()
        } else {
            format!("P3-b{block_size}")
        },
        what: format!(
            "paged decode, {requests} req × {context} ctx, H32/KV8, hd128, f16, block {block_size} ({}: {}; {}; {pages})",
            backend.kind().name(),
            backend.device(),
            backend.clock()
        ),
        value: bw,
        unit: "GB/s".into(),
        baseline: read,
        baseline_what: roof,
        ratio: bw / read,
        goal: if block_size == 16 { 0.7 } else { 0.0 },
        ms: timing.decode_s * 1e3,
        table_order_read,
    })
}

/// One measured point of lesson 4's bandwidth sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPoint {
    /// Context length per request.
    pub context: usize,
    /// Achieved K/V read bandwidth of the decode kernel, GB/s.
    pub kernel: f64,
    /// Read-only stream bandwidth over the same bytes on the same device, GB/s: the roof.
    pub read: f64,
    /// Copy bandwidth of the same bytes, counting the bytes read and the bytes written, GB/s.
    pub copy: f64,
    /// Where it ran.
    pub device: Device,
}

/// Requests in every sweep point (H32/KV8, hd 128, block 16: the benchmark's decode problem).
pub const SWEEP_REQUESTS: usize = 4;

/// The contexts a sweep measures on `kind` (a backend that simulates every GPU thread gets short ones).
pub fn sweep_contexts(kind: BackendKind) -> Vec<usize> {
    if kind.info().simulated {
        vec![32, 64, 128, 256]
    } else {
        vec![256, 512, 1024, 2048, 4096, 8192]
    }
}

/// Measure one sweep point: decode kernel bandwidth against the read-only roof and a copy, in one run.
pub fn sweep_point(backend: &dyn Backend, context: usize) -> Result<SweepPoint, String> {
    let prob = DecodeProblem::new(SWEEP_REQUESTS, context, 32, 8, 128, 16);
    let tables = DecodeTables::new(&prob.cache, &prob.reqs);
    let inp = tables.input(&prob.cache, &prob.q, prob.heads);
    // The median of 15 runs, as P3 (5 where every GPU thread is simulated: each run takes seconds).
    let reps = if backend.kind().info().simulated { 5 } else { 15 };
    let timing = backend.time_paged_decode(&inp, reps).map_err(|e| e.to_string())?;
    let (kernel, read, copy) = timing.gbs(prob.kv_bytes());
    Ok(SweepPoint {
        context,
        kernel,
        read,
        copy,
        device: timing.device,
    })
}

/// The table `kvscope bench` prints.
pub fn table(lines: &[BenchLine]) -> String {
    let mut out = format!(
        "{:7} {:>10} {:>10} {:>12} {:>8} {:>6}  what / baseline\n",
        "id", "ms", "value", "baseline", "ratio", "goal"
    );
    for l in lines {
        out += &format!(
            "{:7} {:>10.2} {:>10.2} {:>12.2} {:>8.3} {:>6}  {} [{}] / {}\n",
            l.id,
            l.ms,
            l.value,
            l.baseline,
            l.ratio,
            if l.goal > 0.0 {
                format!("≥{}", l.goal)
            } else {
                "-".into()
            },
            l.what,
            l.unit,
            l.baseline_what
        );
    }
    out
}
