//! Lesson 10's decode benchmark lines (`kvscope bench --only p3-<format>`, and the bench that
//! `kvscope export quant-table` stores in `assets/measurements/quant.json`): P3's paged-decode problem
//! (`compute::bench::DecodeProblem`) with its cache held in each quantised format, every decode checked
//! against the f64 reference on the same codes and then timed against f16 in the same run.

use rayon::prelude::*;

use half::f16;
use serde::Serialize;

use crate::cache::{PagedKvCache, PagedShape};
use crate::compute::bench::DecodeProblem;
use crate::compute::timing::median_time;
use crate::compute::{Backend, BackendError, BackendKind, DecodeTables};

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
