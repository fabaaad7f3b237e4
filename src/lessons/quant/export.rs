//! Lesson 10's exports (`kvscope export quant`, its shape mode, and `kvscope export fp8-table`), written through the shared `.npy` + `manifest.json` writer
//! (`lessons::export`).

use anyhow::{Result, bail};

use crate::compute::Backend;
use crate::kv::KvEngine;
use crate::lessons::export::*;
use crate::math::Rng;
use half::f16;

/// Lesson 10's export: model `m` reads the tokens `text` (bytes for the tiny model) one by one from an
/// empty cache held in `fmt`. Per layer (`[L, T, KVH, hd]`): the f32 K and V written, the codes as
/// stored, each value's scale (and KIVI's zero point), what the cache held (dequantised), and the last
/// step's attention output through the cache (`[L, H, hd]`).
pub fn quant(
    backend: &dyn Backend,
    fmt: crate::cache::CacheFormat,
    text: &[u32],
    source: &str,
    m: &crate::model::Model,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    let run = m.quant_run(text, fmt, backend).map_err(|e| anyhow::anyhow!(e))?;
    let c = m.config;
    let (l, n, kvh, hd) = (c.n_layers, text.len(), c.n_kv_heads, c.head_dim);
    let dims = [l, n, kvh, hd];
    let flat = |v: &[Vec<f32>]| v.iter().flatten().copied().collect::<Vec<f32>>();
    let mut arrays = vec![
        NamedArray::new("tokens", &[n], ArrayData::I32(text.iter().map(|&b| b as i32).collect())),
        NamedArray::new("k", &dims, ArrayData::F32(flat(&run.k))),
        NamedArray::new("v", &dims, ArrayData::F32(flat(&run.v))),
        NamedArray::new("k_deq", &dims, ArrayData::F32(flat(&run.k_deq))),
        NamedArray::new("v_deq", &dims, ArrayData::F32(flat(&run.v_deq))),
        NamedArray::new("out", &[l, c.n_heads, hd], ArrayData::F32(flat(&run.last_out))),
        NamedArray::new("nll", &[n - 1], ArrayData::F32(run.nll.clone())),
    ];
    if !run.k_codes.iter().all(Vec::is_empty) {
        let codes = |v: &[Vec<u8>]| v.iter().flatten().copied().collect::<Vec<u8>>();
        arrays.push(NamedArray::new("k_codes", &dims, ArrayData::U8(codes(&run.k_codes))));
        arrays.push(NamedArray::new("v_codes", &dims, ArrayData::U8(codes(&run.v_codes))));
        arrays.push(NamedArray::new("k_scales", &dims, ArrayData::F32(flat(&run.k_scales))));
        arrays.push(NamedArray::new("v_scales", &dims, ArrayData::F32(flat(&run.v_scales))));
    }
    if !run.k_zeros.iter().all(Vec::is_empty) && matches!(fmt, crate::cache::CacheFormat::Kivi { .. }) {
        arrays.push(NamedArray::new("k_zeros", &dims, ArrayData::F32(flat(&run.k_zeros))));
        arrays.push(NamedArray::new("v_zeros", &dims, ArrayData::F32(flat(&run.v_zeros))));
    }
    let mut extra = model_manifest(m);
    let decode = match fmt {
        crate::cache::CacheFormat::Kivi { .. } => {
            "deq = code * scale + zero (asymmetric; code unsigned); 0 scale and zero: the value is still f16 (deq = the f16 rounding of k)"
        }
        crate::cache::CacheFormat::Int8Channel => {
            "deq = int8(code) * scale (code two's complement); 0 scale: the value is still f16 (its block is filling)"
        }
        crate::cache::CacheFormat::Pool { dtype, .. } => match dtype.format().quant {
            Some(crate::cache::dtype::quant::Quant::Int8Token) => {
                "deq = int8(code) * scale (two's complement; the scale is the row's absmax / 127 rounded up to an f16 value)"
            }
            Some(crate::cache::dtype::quant::Quant::Fp8(_)) => {
                "deq = fp8_value(code) * scale (see fp8; scale per tensor or per KV head, broadcast)"
            }
            None => "f16: no codes; deq is the f16 rounding of k",
        },
    };
    extra.insert(
        "definitions".into(),
        serde_json::json!({
            "tokens": "the tokens read (bytes for the tiny model, BPE ids for smollm2), one decode step each from an empty cache (step t reads token t at position t)",
            "k": "[layer, t, kv_head, d]: the f32 key rows written (RoPE applied), before the cache stores them; v likewise",
            "k_codes": "[layer, t, kv_head, d] uint8: each value's code as stored, one code per element, unpacked",
            "k_scales": "[layer, t, kv_head, d] f32: the scale each value was quantised with (its f16 or f32 value), broadcast to the values' shape",
            "k_zeros": "KIVI only: each value's zero point (the group's minimum, as f16), broadcast",
            "k_deq": "what the cache held for each value at the end, read back through the format's decoder",
            "decode": decode,
            "out": "[layer, head, d]: the last step's attention output, read from the cache",
            "nll": "nll[i] = -ln p(token i+1 | the step that reads token i); T-1 values",
            "bits_per_byte": "sum(nll) / ln 2 / the UTF-8 bytes of tokens 1..T-1 (for the tiny model: T-1)",
            "fp8": {"e4m3": "OCP E4M3FN: bias 7, 3 mantissa bits, no infinities, max 448 (0x7E), NaN 0x7F/0xFF", "e5m2": "OCP E5M2: bias 15, 2 mantissa bits, Inf 0x7C/0xFC, max 57344 (0x7B)", "nan_code": "0x7F (written for NaN in both formats)", "saturation": "finite values beyond max and +-Inf encode as +-max"},
        }),
    );
    extra.insert(
        "quant".into(),
        serde_json::json!({
            "format": run.format,
            "kernel": run.kernel,
            "bits_per_byte": run.bits_per_byte() * (n - 1) as f64
                / text[1..].iter().map(|&i| m.tokenizer.piece_bytes(i).len()).sum::<usize>().max(1) as f64,
            "bits_per_token": run.bits_per_byte(),
            "out_rel_rms_per_layer": run.out_rel_rms,
            "out_max_abs_err_per_layer": run.out_max_err,
            "fp8_scales_per_layer": run.scales,
            "bytes_per_token_per_layer_at_256": fmt.bytes_per_token(kvh, hd, 256),
            "text": source,
        }),
    );
    Ok((arrays, extra))
}

/// The shapes of `kvscope export quant`'s shape mode: random seeded K/V rows instead of the model's.
#[derive(Debug, Clone)]
pub struct QuantShapes {
    /// Tokens of each request.
    pub lens: Vec<usize>,
    /// Tokens per block of a pool format (and INT8 per channel's block).
    pub block_size: usize,
    /// Blocks of a pool format's pools.
    pub num_blocks: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Seed of the rows and queries.
    pub seed: u64,
}

/// `kvscope export quant` in shape mode: seeded random K/V rows (`[Σ lens, KVH, hd]`, request after
/// request) appended into a cache of `fmt` through its append op on `backend` (pool formats all at
/// once; group formats token by token under their rule, every request a step), then one decode step of
/// seeded queries through the format's decode op, checked against the f64 reference on the same codes.
pub fn quant_shapes(
    backend: &dyn Backend,
    fmt: crate::cache::CacheFormat,
    sp: &QuantShapes,
) -> Result<(Vec<NamedArray>, serde_json::Map<String, serde_json::Value>)> {
    use crate::cache::CacheFormat;
    use crate::cache::{GroupCache, GroupFormat, GroupShape};
    use crate::compute::ops::group_append::GroupAppendInput;
    use crate::compute::ops::group_decode::GroupDecodeInput;
    use crate::drivers::quant::{Contents, GroupReq, group_contents, pool_contents};
    let (r, h, kvh, hd) = (sp.lens.len(), sp.heads, sp.kv_heads, sp.head_dim);
    if r == 0 || sp.lens.contains(&0) {
        anyhow::bail!("every request needs at least one token");
    }
    if kvh == 0 || h == 0 || !h.is_multiple_of(kvh) {
        anyhow::bail!("--heads ({h}) must be a positive multiple of --kv-heads ({kvh})");
    }
    let row = kvh * hd;
    let total: usize = sp.lens.iter().sum();
    let mut rng = Rng::stream(sp.seed, 11);
    let k = rng.normal_vec(total * row, 1.0);
    let v = rng.normal_vec(total * row, 0.5);
    let q = rng.normal_vec(r * h * hd, 1.0);
    let starts: Vec<usize> = sp
        .lens
        .iter()
        .scan(0, |a, &l| {
            let s = *a;
            *a += l;
            Some(s)
        })
        .collect();
    let (got, want, contents, scales): (Vec<f32>, Vec<f64>, Contents, Vec<f32>) = match fmt {
        CacheFormat::Pool { dtype, calibrated } => {
            let shape = crate::cache::PagedShape {
                num_blocks: sp.num_blocks,
                block_size: sp.block_size,
                kv_heads: kvh,
                head_dim: hd,
                dtype,
            };
            if sp.block_size == 0 || sp.num_blocks == 0 || hd == 0 {
                bail!("--block-size, --num-blocks and --head-dim must be at least 1");
            }
            let mut e = KvEngine::new(shape, 1);
            let mut scales = Vec::new();
            if let Some(crate::cache::dtype::quant::Quant::Fp8(f8)) = dtype.format().quant {
                let per_head = dtype.format().scales == crate::cache::ScaleLayout::PerHead;
                let heads: Vec<Option<usize>> = if per_head {
                    (0..kvh).map(Some).collect()
                } else {
                    vec![None]
                };
                let scale_of = |x: &[f32], head: Option<usize>| -> f32 {
                    let amax = x
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| head.is_none_or(|hh| (i / hd) % kvh == hh))
                        .fold(0f32, |m, (_, x)| m.max(x.abs()));
                    if calibrated && amax > 0.0 { amax / f8.max() } else { 1.0 }
                };
                let ks: Vec<f32> = heads.iter().map(|&hh| scale_of(&k, hh)).collect();
                let vs: Vec<f32> = heads.iter().map(|&hh| scale_of(&v, hh)).collect();
                e.set_fp8_scales(0, &ks, &vs).map_err(|e| anyhow::anyhow!("{e}"))?;
                scales = ks.into_iter().chain(vs).collect();
            }
            let reqs: Vec<u32> = (0..r as u32).collect();
            for (i, &len) in sp.lens.iter().enumerate() {
                let slots = e
                    .reserve(i as u32, len)
                    .map_err(|e| anyhow::anyhow!("request {i}: {e} (raise --num-blocks)"))?;
                let rows = starts[i] * row..(starts[i] + len) * row;
                e.write(backend, 0, &slots, &k[rows.clone()], &v[rows])
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            let tables = e.tables(&reqs);
            let got = e
                .decode(backend, 0, &tables, &q, h)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let want = crate::compute::reference::paged_decode(
                &e.input(0, &tables, &q, h).map_err(|e| anyhow::anyhow!("{e}"))?,
            );
            let rows: Vec<(u32, usize)> = reqs
                .iter()
                .zip(&sp.lens)
                .flat_map(|(&q, &l)| (0..l).map(move |t| (q, t)))
                .collect();
            let contents = pool_contents(&e, 0, &rows).map_err(|e| anyhow::anyhow!(e))?;
            (got, want, contents, scales)
        }
        CacheFormat::Int8Channel | CacheFormat::Kivi { .. } => {
            let gf = match fmt {
                CacheFormat::Int8Channel => GroupFormat::int8_channel(sp.block_size),
                _ => fmt.group().expect("a group format"),
            };
            let max_len = sp.lens.iter().copied().max().unwrap_or(0);
            let mb = max_len.div_ceil(gf.group);
            let shape = GroupShape {
                num_blocks: r * mb,
                kv_heads: kvh,
                head_dim: hd,
                rings: r,
                fmt: gf,
            };
            shape
                .validate(crate::compute::MAX_HEAD_DIM)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut cache = GroupCache::new(&shape);
            let block = |ri: usize, i: usize| i * r + ri;
            for t in 0..max_len {
                let (mut rows, mut kt, mut vt, mut jobs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for (ri, _) in sp.lens.iter().enumerate().filter(|&(_, &l)| t < l) {
                    let at = (starts[ri] + t) * row;
                    rows.extend([ri as i32, t as i32]);
                    kt.extend_from_slice(&k[at..at + row]);
                    vt.extend_from_slice(&v[at..at + row]);
                    jobs.extend(gf.step_job_words(ri, t, |b| block(ri, b)));
                }
                backend
                    .group_append(GroupAppendInput {
                        shape,
                        cache: &mut cache,
                        rows: &rows,
                        k: &kt,
                        v: &vt,
                        jobs: &jobs,
                    })
                    .map_err(|e| anyhow::anyhow!("step {t}: {e}"))?;
            }
            let tables: Vec<i32> = (0..r)
                .flat_map(|ri| (0..mb).map(move |i| block(ri, i) as i32))
                .collect();
            let lens: Vec<i32> = sp.lens.iter().map(|&l| l as i32).collect();
            let quantised: Vec<(usize, usize)> = sp.lens.iter().map(|&l| gf.quantised(l)).collect();
            let kq: Vec<i32> = quantised.iter().map(|q| q.0 as i32).collect();
            let vq: Vec<i32> = quantised.iter().map(|q| q.1 as i32).collect();
            let rings: Vec<i32> = (0..r as i32).collect();
            let inp = GroupDecodeInput {
                shape,
                cache: &cache,
                q: &q,
                n_heads: h,
                block_tables: &tables,
                max_blocks: mb,
                context_lens: &lens,
                k_quantised: &kq,
                v_quantised: &vq,
                rings: &rings,
            };
            let got = backend.group_decode(&inp).map_err(|e| anyhow::anyhow!("{e}"))?;
            let want = crate::compute::ops::group_decode::reference(&inp);
            let reqs: Vec<GroupReq> = (0..r)
                .map(|ri| GroupReq {
                    table: &tables[ri * mb..(ri + 1) * mb],
                    ring: ri,
                    len: sp.lens[ri],
                    quantised: quantised[ri],
                })
                .collect();
            (got, want, group_contents(&shape, &cache, &reqs), Vec::new())
        }
    };
    let report = crate::compute::check(
        &format!("export quant {}", fmt.name()),
        &[r, h, hd],
        &got,
        &want,
        crate::compute::Tolerance::F32,
    );
    if !report.passed() {
        anyhow::bail!("the decode disagrees with the f64 reference:\n{report}");
    }
    let dims = [total, kvh, hd];
    let Contents {
        deq: [kd, vd],
        codes: [kc, vc],
        scales: [ks, vs],
        zeros: [kz, vz],
    } = contents;
    let mut arrays = vec![
        NamedArray::new("k", &dims, ArrayData::F32(k)),
        NamedArray::new("v", &dims, ArrayData::F32(v)),
        NamedArray::new("q", &[r, h, hd], ArrayData::F32(q)),
        NamedArray::new(
            "context_lens",
            &[r],
            ArrayData::I32(sp.lens.iter().map(|&l| l as i32).collect()),
        ),
        NamedArray::new("k_deq", &dims, ArrayData::F32(kd)),
        NamedArray::new("v_deq", &dims, ArrayData::F32(vd)),
        NamedArray::new("out", &[r, h, hd], ArrayData::F32(got)),
    ];
    if !kc.is_empty() {
        arrays.push(NamedArray::new("k_codes", &dims, ArrayData::U8(kc)));
        arrays.push(NamedArray::new("v_codes", &dims, ArrayData::U8(vc)));
        arrays.push(NamedArray::new("k_scales", &dims, ArrayData::F32(ks)));
        arrays.push(NamedArray::new("v_scales", &dims, ArrayData::F32(vs)));
    }
    if matches!(fmt, CacheFormat::Kivi { .. }) {
        arrays.push(NamedArray::new("k_zeros", &dims, ArrayData::F32(kz)));
        arrays.push(NamedArray::new("v_zeros", &dims, ArrayData::F32(vz)));
    }
    let mut extra = serde_json::Map::new();
    extra.insert(
        "definitions".into(),
        serde_json::json!({
            "k": "[token, kv_head, d]: the f32 key rows written, request after request (context_lens[i] rows each), seeded normal (sigma 1; v sigma 0.5)",
            "q": "[request, head, d]: the decode step's queries",
            "k_codes": "[token, kv_head, d] uint8: each value's code as stored, unpacked (INT8 as two's complement)",
            "k_scales": "[token, kv_head, d] f32: each value's scale, broadcast; 0 while the value is still f16",
            "k_zeros": "KIVI only: each value's zero point (its group's minimum as f16), broadcast",
            "k_deq": "what the cache holds for each value, read back through the format's decoder",
            "out": "[request, head, d]: one decode step through the format's dequantising decode kernel",
        }),
    );
    extra.insert(
        "quant".into(),
        serde_json::json!({
            "format": fmt.name(),
            "fp8_scales": scales,
            "check": {"max_abs_err": report.max_abs, "max_rel_err": report.max_rel, "passed": report.passed()},
        }),
    );
    Ok((arrays, extra))
}

/// `kvscope export fp8-table`: the code chosen for every f16 bit pattern (scale 1) and every code's value.
pub fn fp8_table(f: crate::cache::dtype::quant::Fp8) -> Vec<NamedArray> {
    let codes: Vec<u8> = (0..=u16::MAX).map(|b| f.encode(f16::from_bits(b).to_f32())).collect();
    let values: Vec<f32> = (0..=255u8).map(|c| f.decode(c)).collect();
    vec![
        NamedArray::new("codes", &[65536], ArrayData::U8(codes)),
        NamedArray::new("values", &[256], ArrayData::F32(values)),
    ]
}
