//! Benchmarks behind `kvscope bench`. Every figure is a ratio of two things measured in the same run
//! on the same machine, so it means something on any machine: attention GFLOP/s against the GEMM
//! crate's own GFLOP/s (P1), and paged-decode KV bytes per second against a plain memory copy of the
//! same byte count (P3). Nothing here is asserted in tests.

use std::time::{Duration, Instant};

use half::f16;
use ndarray::{Array2, Axis};
use rayon::prelude::*;
use serde::Serialize;

use crate::cache::{PagedKvCache, PagedShape};
use crate::compute::{AttnInput, Backend, DecodeTables};
use crate::math::{AttnShape, AttnWeights, Mask, Rng, matmul, project};

/// Median wall time of `reps` runs of `f` after one warm-up run.
pub fn median_time(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

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
}

/// GFLOP/s of the GEMM crate on an n×n×n f32 product, rows split over the rayon pool.
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

/// P1: causal attention forward at the size, against GEMM. `materialise` keeps the score
/// and probability matrices (what the lessons display); otherwise the fused path (what a real forward
/// pass runs) is measured. FLOPs are the useful ones of a causal mask: Q·Kᵀ and P·V over the `T(T+1)/2`
/// visible pairs, 2·hd each, per head — the convention of the FlashAttention papers.
pub fn p1(backend: &dyn Backend, seq: usize, materialise: bool) -> BenchLine {
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
    let t = median_time(5, || {
        if materialise {
            std::hint::black_box(backend.attention(&inp).expect("valid shape"));
        } else {
            std::hint::black_box(backend.attention_fused(&inp).expect("valid shape"));
        }
    });
    let pairs = (seq * (seq + 1) / 2) as f64;
    let flops = 2.0 * 2.0 * shape.n_heads as f64 * shape.head_dim() as f64 * pairs;
    let gflops = flops / t.as_secs_f64() / 1e9;
    let (gemm, _) = gemm_gflops(1024);
    let (id, kind) = if materialise {
        ("P1m", "keeping scores+probs")
    } else {
        ("P1", "fused")
    };
    BenchLine {
        id: id.into(),
        what: format!(
            "attention forward ({kind}), causal, T={seq}, d_model=1024, 16 heads ({})",
            backend.kind().name()
        ),
        value: gflops,
        unit: "GFLOP/s".into(),
        baseline: gemm,
        baseline_what: "GEMM crate, 1024³ f32, same threads".into(),
        ratio: gflops / gemm,
        goal: if materialise { 0.0 } else { 0.5 },
        ms: t.as_secs_f64() * 1e3,
    }
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
        for (i, (k, v)) in cache.k_pool.iter_mut().zip(cache.v_pool.iter_mut()).enumerate() {
            *k = table[i & 0xffff];
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
        2 * tokens * s.kv_heads * s.head_dim * 2
    }

    /// Run one decode step on `backend`.
    pub fn run(&self, backend: &dyn Backend) -> Vec<f32> {
        let tables = DecodeTables::new(&self.cache, &self.reqs);
        let inp = tables.input(&self.cache, &self.q, self.heads);
        backend.paged_decode(&inp).expect("valid problem")
    }
}

/// Bytes per second of a parallel memory copy of `bytes` bytes (both cores, like the decode).
pub fn copy_bandwidth(bytes: usize) -> (f64, Duration) {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let chunk = bytes.div_ceil(rayon::current_num_threads() * 8).max(1);
    let t = median_time(5, || {
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
        std::hint::black_box(&dst);
    });
    (bytes as f64 / t.as_secs_f64(), t)
}

/// P3: paged decode bandwidth against memcpy of the same bytes.
pub fn p3(backend: &dyn Backend, requests: usize, context: usize) -> BenchLine {
    let prob = DecodeProblem::new(requests, context, 32, 8, 128, 16);
    let bytes = prob.kv_bytes();
    let t = median_time(5, || {
        std::hint::black_box(prob.run(backend));
    });
    let bw = bytes as f64 / t.as_secs_f64();
    let (copy, _) = copy_bandwidth(bytes);
    BenchLine {
        id: "P3".into(),
        what: format!(
            "paged decode, {requests} req × {context} ctx, H32/KV8, hd128, f16, block 16 ({})",
            backend.kind().name()
        ),
        value: bw / 1e9,
        unit: "GB/s".into(),
        baseline: copy / 1e9,
        baseline_what: format!("memcpy of the same {:.0} MB, same threads", bytes as f64 / 1e6),
        ratio: bw / copy,
        goal: 0.7,
        ms: t.as_secs_f64() * 1e3,
    }
}

/// Print the table.
pub fn print_table(lines: &[BenchLine]) {
    println!(
        "{:4} {:>10} {:>10} {:>12} {:>8} {:>6}  what / baseline",
        "id", "ms", "value", "baseline", "ratio", "goal"
    );
    for l in lines {
        println!(
            "{:4} {:>10.2} {:>10.2} {:>12.2} {:>8.3} {:>6}  {} [{}] / {}",
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
}

/// P1 on the CUDA backend: the fused attention kernel on device-resident data, timed with CUDA
/// events. There is no GEMM library on the device side of kvscope, so the baseline is left empty.
pub fn p1_cuda(b: &crate::compute::cuda::CudaBackend, seq: usize) -> Result<BenchLine, crate::compute::BackendError> {
    let shape = AttnShape {
        seq,
        d_model: 1024,
        n_heads: 16,
        n_kv_heads: 16,
    };
    let qkv = project(&AttnWeights::random(shape, 1));
    let inp = AttnInput {
        q: &qkv.q,
        k: &qkv.k,
        v: &qkv.v,
        mask: Mask::Causal,
    };
    let ms = b.time_attention_fused(&inp, 20)?;
    let flops = 2.0 * 2.0 * shape.n_heads as f64 * shape.head_dim() as f64 * (seq * (seq + 1) / 2) as f64;
    Ok(BenchLine {
        id: "P1".into(),
        what: format!(
            "attention forward (fused kernel), causal, T={seq}, d_model=1024, 16 heads (cuda: {})",
            b.device()
        ),
        value: flops / (ms / 1e3) / 1e9,
        unit: "GFLOP/s".into(),
        baseline: f64::NAN,
        baseline_what: "no device GEMM baseline".into(),
        ratio: f64::NAN,
        goal: 0.0,
        ms,
    })
}

/// P3 on the CUDA backend: the paged decode kernels on device-resident data against a device-to-device
/// copy of the same bytes, both timed with CUDA events on one stream.
pub fn p3_cuda(
    b: &crate::compute::cuda::CudaBackend,
    requests: usize,
    context: usize,
) -> Result<BenchLine, crate::compute::BackendError> {
    let prob = DecodeProblem::new(requests, context, 32, 8, 128, 16);
    let tables = DecodeTables::new(&prob.cache, &prob.reqs);
    let inp = tables.input(&prob.cache, &prob.q, prob.heads);
    // Correctness first: the same problem through the public (validated) path against the reference.
    let report = crate::compute::suite::paged_equals_contiguous(b, &inp)?;
    if !report.passed() {
        return Err(crate::compute::BackendError::Device(format!(
            "decode kernel disagrees with the reference:\n{report}"
        )));
    }
    let mut bufs = b.upload_decode(&inp)?;
    let bytes = prob.kv_bytes();
    let (decode_ms, copy_ms) = b.time_decode_and_copy(&mut bufs, bytes, 50)?;
    let (bw, copy) = (bytes as f64 / (decode_ms / 1e3), bytes as f64 / (copy_ms / 1e3));
    Ok(BenchLine {
        id: "P3".into(),
        what: format!(
            "paged decode kernels, {requests} req × {context} ctx, H32/KV8, hd128, f16, block 16 (cuda: {})",
            b.device()
        ),
        value: bw / 1e9,
        unit: "GB/s".into(),
        baseline: copy / 1e9,
        baseline_what: format!("device-to-device copy of the same {:.0} MB", bytes as f64 / 1e6),
        ratio: bw / copy,
        goal: 0.8,
        ms: decode_ms,
    })
}
