//! The cross-backend check suite: every op on random seeded inputs, odd shapes included, compared
//! with the f64 reference. Written once; `kvscope check`, the tests and the app run it per backend.

use half::f16;

use super::{
    AttnInput, Backend, BackendError, CheckReport, DecodeTables, PagedDecodeInput, Tolerance, check, reference,
};
use crate::cache::{PagedKvCache, PagedShape, StaticShape};
use crate::math::{AttnShape, AttnWeights, Mask, Rng, project};

/// How large the suite's shapes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteSize {
    /// Tiny shapes: for backends that simulate every GPU thread (the CUDA-on-CPU shim).
    Small,
    /// Larger shapes as well (several partitions of the decode kernel, hundreds of tokens).
    Full,
}

/// Attention cases: (T, d_model, H, KVH, mask).
fn attention_cases(size: SuiteSize) -> Vec<(usize, usize, usize, usize, Mask)> {
    let mut v = vec![
        (1, 1, 1, 1, Mask::Causal),
        (5, 9, 3, 1, Mask::None),
        (7, 16, 4, 2, Mask::Causal),
        (9, 24, 4, 4, Mask::Window { window: 3, sinks: 0 }),
        (13, 20, 5, 5, Mask::Window { window: 2, sinks: 3 }),
        (6, 6, 2, 1, Mask::Window { window: 10, sinks: 0 }),
        (33, 32, 2, 1, Mask::Causal),
    ];
    if size == SuiteSize::Full {
        v.extend([
            (64, 128, 4, 2, Mask::Causal),
            (100, 96, 6, 2, Mask::Window { window: 17, sinks: 4 }),
            (130, 256, 1, 1, Mask::None),
        ]);
    }
    v
}

/// Paged decode cases: (block_size, H, KVH, hd, context lengths).
fn decode_cases(size: SuiteSize) -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    let mut v = vec![
        (1, 1, 1, 1, vec![1]),
        (4, 4, 2, 8, vec![1, 9, 0]),
        (16, 6, 3, 3, vec![5, 17]),
        (64, 8, 1, 16, vec![3]),
        (3, 2, 2, 32, vec![40, 7, 1]),
    ];
    if size == SuiteSize::Full {
        v.extend([(16, 8, 2, 64, vec![600, 1]), (7, 4, 4, 128, vec![1100, 513, 512])]);
    }
    v
}

fn dev(label: &str, e: BackendError) -> CheckReport {
    let mut r = check::<f32, f64>(label, &[0], &[], &[], Tolerance::EXACT);
    r.error = Some(e.to_string());
    r
}

fn attention_reports(b: &dyn Backend, size: SuiteSize, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (t, d, h, kvh, mask)) in attention_cases(size).into_iter().enumerate() {
        let shape = AttnShape {
            seq: t,
            d_model: d,
            n_heads: h,
            n_kv_heads: kvh,
        };
        let qkv = project(&AttnWeights::random(shape, seed + i as u64));
        let inp = AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let want = reference::attention(&inp);
        let tag = format!("T{t} H{h}/{kvh} hd{} {mask}", d / h);
        match b.attention(&inp) {
            Ok(got) => {
                for (name, g, w) in [
                    ("scores", &got.scores, &want.scores),
                    ("probs", &got.probs, &want.probs),
                    ("out", &got.out, &want.out),
                ] {
                    out.push(check(
                        &format!("attention.{name} {tag}"),
                        g.shape(),
                        g.as_slice().unwrap_or_default(),
                        w.as_slice().unwrap_or_default(),
                        Tolerance::F32,
                    ));
                }
            }
            Err(e) => out.push(dev(&format!("attention {tag}"), e)),
        }
        match b.attention_fused(&inp) {
            Ok(g) => out.push(check(
                &format!("attention_fused.out {tag}"),
                g.shape(),
                g.as_slice().unwrap_or_default(),
                want.out.as_slice().unwrap_or_default(),
                Tolerance::F32,
            )),
            Err(e) => out.push(dev(&format!("attention_fused {tag}"), e)),
        }
    }
}

fn append_reports(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    let mut rng = Rng::stream(seed, 100);
    // static cache: a few (layer, pos) writes on top of earlier contents
    let s = StaticShape {
        layers: 2,
        batch: 2,
        kv_heads: 3,
        max_seq: 7,
        head_dim: 5,
    };
    let mut k_cache: Vec<f16> = rng.normal_vec(s.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    let mut v_cache: Vec<f16> = rng.normal_vec(s.numel(), 1.0).into_iter().map(f16::from_f32).collect();
    for (layer, pos) in [(0, 0), (1, 6), (0, 3)] {
        let n = s.batch * s.kv_heads * s.head_dim;
        let (kn, vn) = (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0));
        let (wk, wv) = reference::static_cache_append(s, &k_cache, &v_cache, layer, pos, &kn, &vn);
        let dims = [s.layers, s.batch, s.kv_heads, s.max_seq, s.head_dim];
        match b.static_cache_append(s, &mut k_cache, &mut v_cache, layer, pos, &kn, &vn) {
            Ok(()) => {
                let kf: Vec<f64> = k_cache.iter().map(|x| x.to_f64()).collect();
                let vf: Vec<f64> = v_cache.iter().map(|x| x.to_f64()).collect();
                out.push(check(
                    &format!("static_cache_append.k l{layer} p{pos}"),
                    &dims,
                    &kf,
                    &wk,
                    Tolerance::EXACT,
                ));
                out.push(check(
                    &format!("static_cache_append.v l{layer} p{pos}"),
                    &dims,
                    &vf,
                    &wv,
                    Tolerance::EXACT,
                ));
            }
            Err(e) => out.push(dev("static_cache_append", e)),
        }
    }
    // paged: scattered slots, with -1 (skip) entries
    let p = PagedShape {
        num_blocks: 6,
        block_size: 3,
        kv_heads: 2,
        head_dim: 5,
    };
    let mut kp = vec![f16::ZERO; p.numel()];
    let mut vp = vec![f16::ZERO; p.numel()];
    let slots = [16, 0, -1, 5, 9, 17, 3];
    let n = slots.len() * p.kv_heads * p.head_dim;
    let (kn, vn) = (rng.normal_vec(n, 1.0), rng.normal_vec(n, 1.0));
    let (wk, wv) = reference::paged_append(p, &kp, &vp, &slots, &kn, &vn);
    let dims = [p.num_blocks, p.kv_heads, p.block_size, p.head_dim];
    match b.paged_append(p, &mut kp, &mut vp, &slots, &kn, &vn) {
        Ok(()) => {
            let kf: Vec<f64> = kp.iter().map(|x| x.to_f64()).collect();
            let vf: Vec<f64> = vp.iter().map(|x| x.to_f64()).collect();
            out.push(check("paged_append.k_pool", &dims, &kf, &wk, Tolerance::EXACT));
            out.push(check("paged_append.v_pool", &dims, &vf, &wv, Tolerance::EXACT));
        }
        Err(e) => out.push(dev("paged_append", e)),
    }
}

/// A paged cache holding `lens` tokens per request, filled round-robin one token at a time, with an
/// extra request that is freed halfway, so block tables are scattered as a real allocator leaves them.
pub fn scattered_cache(shape: PagedShape, lens: &[usize], rng: &mut Rng) -> PagedKvCache {
    let mut c = PagedKvCache::new(shape);
    let row = shape.kv_heads * shape.head_dim;
    let extra = lens.len() as u32;
    let longest = lens.iter().copied().max().unwrap_or(0);
    for pos in 0..longest {
        for (r, &len) in lens.iter().enumerate() {
            if pos < len {
                let (k, v) = (rng.normal_vec(row, 1.0), rng.normal_vec(row, 1.0));
                c.append(r as u32, pos, &k, &v).expect("pool sized for the case");
            }
        }
        if pos < longest / 2 && pos % 2 == 0 && c.append(extra, c.len(extra), &vec![0.0; row], &vec![0.0; row]).is_err()
        {
            break;
        }
        if pos == longest / 2 && c.table(extra).is_some() {
            c.free_request(extra).expect("known request");
        }
    }
    c
}

fn decode_reports(b: &dyn Backend, size: SuiteSize, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens)) in decode_cases(size).into_iter().enumerate() {
        let mut rng = Rng::stream(seed, 200 + i as u64);
        let blocks: usize = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
        let shape = PagedShape {
            num_blocks: blocks,
            block_size: bs,
            kv_heads: kvh,
            head_dim: hd,
        };
        let cache = scattered_cache(shape, &lens, &mut rng);
        let reqs: Vec<u32> = (0..lens.len() as u32).collect();
        let dt = DecodeTables::new(&cache, &reqs);
        let q = rng.normal_vec(lens.len() * h * hd, 1.0);
        let inp = dt.input(&cache, &q, h);
        let tag = format!("paged_decode bs{bs} H{h}/{kvh} hd{hd} ctx{lens:?}");
        let want = reference::paged_decode(&inp);
        match b.paged_decode(&inp) {
            Ok(got) => out.push(check(&tag, &[lens.len(), h, hd], &got, &want, Tolerance::F32)),
            Err(e) => out.push(dev(&tag, e)),
        }
    }
}

/// Run every op of `b` against the reference.
pub fn run(b: &dyn Backend, size: SuiteSize, seed: u64) -> Vec<CheckReport> {
    let mut out = Vec::new();
    attention_reports(b, size, seed, &mut out);
    append_reports(b, seed, &mut out);
    decode_reports(b, size, seed, &mut out);
    out
}

/// Paged decode output compared with contiguous attention over the gathered tokens, for tests and
/// the lesson's "same result as contiguous" check.
pub fn paged_equals_contiguous(b: &dyn Backend, inp: &PagedDecodeInput) -> Result<CheckReport, BackendError> {
    let got = b.paged_decode(inp)?;
    let want = reference::paged_decode(inp);
    Ok(check(
        "paged == contiguous",
        &[inp.requests(), inp.n_heads, inp.shape.head_dim],
        &got,
        &want,
        Tolerance::F32,
    ))
}
