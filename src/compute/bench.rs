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

/// One 8-bit format's P3 line: paged decode of the same problem as P3 (H32/KV8, hd128, block 16), its
/// pools quantised from P3's f16 values, timed in the same run as f16.
#[derive(Debug, Clone, Serialize)]
pub struct QuantLine {
    /// Id: `p3-int8-token`, `p3-fp8-e4m3`, `p3-fp8-e5m2` (and `p3-f16`, the baseline).
    pub id: String,
    /// The dtype's name.
    pub format: String,
    /// Decoded tokens per second (one per request per step).
    pub tokens_per_s: f64,
    /// K and V bytes (codes and scales) one step reads.
    pub bytes_read: f64,
    /// GB/s the decode reads at.
    pub gbs: f64,
    /// GB/s of a read-only stream over the same pools, same threads (the read roof), or `None` where the
    /// backend times on a device this does not measure.
    pub read_roof: Option<f64>,
    /// FLOP per byte read (2 per query head per value of K and of V, GQA 4: 16 / bytes per value).
    pub flop_per_byte: f64,
    /// Milliseconds per step (median).
    pub ms: f64,
    /// Tokens per second over f16's in the same run.
    pub speedup: f64,
    /// The decode against the f64 reference on the same codes.
    pub max_abs_err: f64,
    /// On the host: milliseconds of the codes' exact conversion to f16 alone (`simd::codes_to_f16` over
    /// both pools' bytes), the part of the step that f16 does not do.
    pub convert_ms: Option<f64>,
}

/// P3's problem with its pools quantised into `dtype` (FP8 scales calibrated per tensor from the f16
/// values, absmax over the format's largest value), the same block tables.
pub fn quantised_problem(p: &DecodeProblem, dtype: crate::cache::KvDtype) -> PagedKvCache {
    let s = p.cache.shape();
    let qs = PagedShape { dtype, ..s };
    let mut c = PagedKvCache::new(qs);
    // The same allocation, block by block and round robin, as `DecodeProblem::new` made: the allocator
    // is deterministic, so every request gets the same physical blocks (the test compares the tables).
    let context = p.reqs.first().map_or(0, |&r| p.cache.len(r));
    for _ in 0..context.div_ceil(s.block_size) {
        for &r in &p.reqs {
            let n = s.block_size.min(context - c.len(r));
            c.append_slots(r, n).expect("pool sized exactly");
        }
    }
    debug_assert_eq!(c.tables(), p.cache.tables());
    let f = dtype.format();
    let (kf, vf) = (
        p.cache.k_pool.as_f16().unwrap_or(&[]),
        p.cache.v_pool.as_f16().unwrap_or(&[]),
    );
    if let Some(crate::cache::dtype::quant::Quant::Fp8(f8)) = f.quant {
        for (pool, src) in [(&mut c.k_pool, kf), (&mut c.v_pool, vf)] {
            let amax = src.iter().fold(0f32, |m, x| m.max(x.to_f32().abs()));
            pool.view_mut()
                .scales
                .fill(if amax > 0.0 { amax / f8.max() } else { 1.0 });
        }
    }
    let hd = s.head_dim;
    let mut row = vec![0f32; hd];
    for (pool, src) in [(&mut c.k_pool, kf), (&mut c.v_pool, vf)] {
        let v = pool.view_mut();
        for b in 0..s.num_blocks {
            for h in 0..s.kv_heads {
                for o in 0..s.block_size {
                    let at = s.index(b, h, o, 0);
                    for (d, x) in row.iter_mut().zip(&src[at..at + hd]) {
                        *d = x.to_f32();
                    }
                    let sc = qs.row_scales(b, h, o);
                    (f.write)(
                        &row,
                        &mut v.bytes[f.bytes_for(at)..f.bytes_for(at + hd)],
                        &mut v.scales[sc],
                    );
                }
            }
        }
    }
    c
}

/// The P3 lines of `dtypes` against f16, in one run on `backend`: each decode checked against the f64
/// reference first, then timed (median of `reps`), with the read roof of its own pools where the backend
/// decodes on the host.
pub fn p3_quant(
    backend: &dyn Backend,
    requests: usize,
    context: usize,
    dtypes: &[crate::cache::KvDtype],
    groups: &[(&str, crate::cache::GroupFormat)],
    reps: usize,
) -> Result<Vec<QuantLine>, BackendError> {
    use crate::compute::ops::quant_decode::QuantDecodeInput;
    let prob = DecodeProblem::new(requests, context, 32, 8, 128, 16);
    let tables = DecodeTables::new(&prob.cache, &prob.reqs);
    let host = backend.kind() == BackendKind::Cpu;
    let mut lines = Vec::new();
    let mut caches = vec![(crate::cache::KvDtype::F16, None)];
    for &d in dtypes {
        caches.push((d, Some(quantised_problem(&prob, d))));
    }
    for (dtype, cache) in &caches {
        let c = cache.as_ref().unwrap_or(&prob.cache);
        let inp = tables.input(c, &prob.q, prob.heads);
        let run = || -> Result<Vec<f32>, BackendError> {
            match cache {
                Some(_) => backend.quant_decode(&QuantDecodeInput(inp)),
                None => backend.paged_decode(&inp),
            }
        };
        let got = run()?;
        let want = crate::compute::reference::paged_decode(&inp);
        let report = crate::compute::check(
            &format!("p3 {dtype}"),
            &[requests, prob.heads, 128],
            &got,
            &want,
            crate::compute::Tolerance::F32,
        );
        if !report.passed() {
            return Err(BackendError::Device(format!(
                "{dtype} decode disagrees with the reference:\n{report}"
            )));
        }
        let mut failed = None;
        let t = median_time(reps, || {
            if let Err(e) = run() {
                failed = Some(e);
            }
        })
        .as_secs_f64();
        if let Some(e) = failed {
            return Err(e);
        }
        let (kb, vb) = (c.k_pool.bytes(), c.v_pool.bytes());
        let read_roof = host.then(|| {
            let words = |b: &[u8]| -> u64 {
                b.par_chunks(1 << 16)
                    .map(|ch| {
                        ch.chunks_exact(8).fold(0u64, |a, w| {
                            a.wrapping_add(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                        })
                    })
                    .reduce(|| 0, u64::wrapping_add)
            };
            let tr = median_time(reps, || {
                std::hint::black_box(words(kb).wrapping_add(words(vb)));
            })
            .as_secs_f64();
            (kb.len() + vb.len()) as f64 / tr / 1e9
        });
        let s = c.shape();
        let tokens: usize = prob.reqs.iter().map(|&r| prob.cache.len(r)).sum();
        let bytes = tokens as f64
            * crate::cache::kv_bytes_per_token(1, s.kv_heads as u64, s.head_dim as u64, s.dtype) as f64
            + (c.k_pool.scales().len() + c.v_pool.scales().len()) as f64 * 4.0;
        let bpv = dtype.bytes_per_value();
        let convert_ms = match (host, dtype.format().quant) {
            (true, Some(q)) => {
                let codes = match q {
                    crate::cache::dtype::quant::Quant::Int8Token => crate::simd::Codes::Int8,
                    crate::cache::dtype::quant::Quant::Fp8(f) if f.ieee => crate::simd::Codes::E5m2,
                    crate::cache::dtype::quant::Quant::Fp8(_) => crate::simd::Codes::E4m3,
                };
                let chunk = 1 << 16;
                Some(
                    median_time(reps, || {
                        for b in [kb, vb] {
                            b.par_chunks(chunk).for_each_init(
                                || vec![f16::ZERO; chunk],
                                |buf, c| {
                                    crate::simd::codes_to_f16(codes, c, buf);
                                    std::hint::black_box(&buf);
                                },
                            );
                        }
                    })
                    .as_secs_f64()
                        * 1e3,
                )
            }
            _ => None,
        };
        lines.push(QuantLine {
            convert_ms,
            id: format!("p3-{dtype}"),
            format: dtype.name().to_string(),
            tokens_per_s: requests as f64 / t,
            bytes_read: bytes,
            gbs: bytes / t / 1e9,
            read_roof,
            flop_per_byte: 2.0 * 2.0 * (prob.heads / s.kv_heads) as f64 / (2.0 * bpv),
            ms: t * 1e3,
            speedup: 0.0,
            max_abs_err: report.max_abs,
        });
    }
    for &(name, fmt) in groups {
        lines.push(p3_group(backend, &prob, name, fmt, reps, host)?);
    }
    let base = lines[0].tokens_per_s;
    for l in &mut lines {
        l.speedup = l.tokens_per_s / base;
    }
    Ok(lines)
}

/// P3's problem held in a group-quantised cache ([`group_problem`]).
pub struct GroupProblem {
    /// The cache's shape.
    pub shape: crate::cache::GroupShape,
    /// The cache.
    pub cache: crate::cache::GroupCache,
    /// Block tables `[R, max_blocks]`.
    pub tables: Vec<i32>,
    /// Columns of `tables`.
    pub max_blocks: usize,
    /// Tokens of each request whose K, and whose V, are quantised.
    pub quantised: (usize, usize),
}

/// P3's problem held in a group-quantised cache of `fmt` (its own blocks of G tokens, interleaved across
/// requests), built the way a decode would have built it: every step appends each request's token
/// through the scalar encoder (`group_append`'s rule), so the last R tokens (K: those past the last whole
/// R; KIVI's V: the last R) are still in the f16 rings.
pub fn group_problem(p: &DecodeProblem, fmt: crate::cache::GroupFormat) -> Result<GroupProblem, BackendError> {
    use crate::cache::{GroupCache, GroupShape};
    use crate::compute::ops::group_append::{GroupAppendInput, append_scalar};
    let s = p.cache.shape();
    let n = p.reqs.len();
    let context = p.reqs.first().map_or(0, |&r| p.cache.len(r));
    let mb = context.div_ceil(fmt.group);
    let shape = GroupShape {
        num_blocks: n * mb,
        kv_heads: s.kv_heads,
        head_dim: s.head_dim,
        rings: n,
        fmt,
    };
    shape
        .validate(crate::compute::MAX_HEAD_DIM)
        .map_err(crate::compute::invalid)?;
    let mut cache = GroupCache::new(&shape);
    let block = |r: usize, i: usize| i * n + r;
    let tables: Vec<i32> = (0..n).flat_map(|r| (0..mb).map(move |i| block(r, i) as i32)).collect();
    let (kf, vf) = (
        p.cache.k_pool.as_f16().unwrap_or(&[]),
        p.cache.v_pool.as_f16().unwrap_or(&[]),
    );
    let (hd, kvh) = (s.head_dim, s.kv_heads);
    let mut k = vec![0f32; n * kvh * hd];
    let mut v = vec![0f32; n * kvh * hd];
    for t in 0..context {
        let mut rows = Vec::with_capacity(2 * n);
        let mut jobs = Vec::new();
        for (ri, &r) in p.reqs.iter().enumerate() {
            let slot = p
                .cache
                .slot(r, t)
                .ok_or_else(|| BackendError::InvalidInput("a token lost its slot".into()))?;
            let (b, o) = (slot / s.block_size, slot % s.block_size);
            for h in 0..kvh {
                let at = s.index(b, h, o, 0);
                let dst = (ri * kvh + h) * hd;
                for d in 0..hd {
                    k[dst + d] = kf[at + d].to_f32();
                    v[dst + d] = vf[at + d].to_f32();
                }
            }
            rows.extend([ri as i32, t as i32]);
            jobs.extend(fmt.step_job_words(ri, t, |b| block(ri, b)));
        }
        append_scalar(GroupAppendInput {
            shape,
            cache: &mut cache,
            rows: &rows,
            k: &k,
            v: &v,
            jobs: &jobs,
        });
    }
    Ok(GroupProblem {
        shape,
        cache,
        tables,
        max_blocks: mb,
        quantised: fmt.quantised(context),
    })
}

/// One P3 line over a group-quantised cache (`p3-int8-channel`, `p3-kivi2`, `p3-kivi4`): checked against
/// the f64 reference on the same codes, then timed.
fn p3_group(
    backend: &dyn Backend,
    prob: &DecodeProblem,
    name: &str,
    fmt: crate::cache::GroupFormat,
    reps: usize,
    host: bool,
) -> Result<QuantLine, BackendError> {
    use crate::compute::ops::group_decode::{GroupDecodeInput, reference};
    let GroupProblem {
        shape,
        cache,
        tables,
        max_blocks: mb,
        quantised: (kq, vq),
    } = group_problem(prob, fmt)?;
    let n = prob.reqs.len();
    let context = prob.reqs.first().map_or(0, |&r| prob.cache.len(r));
    let (lens, kqs, vqs) = (vec![context as i32; n], vec![kq as i32; n], vec![vq as i32; n]);
    let rings: Vec<i32> = (0..n as i32).collect();
    let inp = GroupDecodeInput {
        shape,
        cache: &cache,
        q: &prob.q,
        n_heads: prob.heads,
        block_tables: &tables,
        max_blocks: mb,
        context_lens: &lens,
        k_quantised: &kqs,
        v_quantised: &vqs,
        rings: &rings,
    };
    let got = backend.group_decode(&inp)?;
    let report = crate::compute::check(
        &format!("p3 {name}"),
        &[n, prob.heads, shape.head_dim],
        &got,
        &reference(&inp),
        crate::compute::Tolerance::F32,
    );
    if !report.passed() {
        return Err(BackendError::Device(format!(
            "{name} decode disagrees with the reference:\n{report}"
        )));
    }
    let mut failed = None;
    let t = median_time(reps, || {
        if let Err(e) = backend.group_decode(&inp) {
            failed = Some(e);
        }
    })
    .as_secs_f64();
    if let Some(e) = failed {
        return Err(e);
    }
    let read_roof = host.then(|| {
        let words = |b: &[u8]| -> u64 {
            b.par_chunks(1 << 16)
                .map(|ch| {
                    ch.chunks_exact(8).fold(0u64, |a, w| {
                        a.wrapping_add(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                    })
                })
                .reduce(|| 0, u64::wrapping_add)
        };
        let tr = median_time(reps, || {
            std::hint::black_box(words(&cache.k_codes).wrapping_add(words(&cache.v_codes)));
        })
        .as_secs_f64();
        (cache.k_codes.len() + cache.v_codes.len()) as f64 / tr / 1e9
    });
    let bytes = (n * context * shape.kv_heads) as f64 * fmt.bytes_per_token(shape.head_dim, context);
    let bpv = fmt.bits as f64 / 8.0;
    Ok(QuantLine {
        convert_ms: None,
        id: format!("p3-{name}"),
        format: name.to_string(),
        tokens_per_s: n as f64 / t,
        bytes_read: bytes,
        gbs: bytes / t / 1e9,
        read_roof,
        flop_per_byte: 2.0 * 2.0 * (prob.heads / shape.kv_heads) as f64 / (2.0 * bpv),
        ms: t * 1e3,
        speedup: 0.0,
        max_abs_err: report.max_abs,
    })
}
