//! The `quant_append` op's checks: every backend's codes and scales compared, code for code, with the
//! scalar encoder of `cache::dtype::quant`, for each 8-bit dtype, on rows that include a zero row and
//! (for FP8) values past the range, ±Inf and NaN.

use crate::cache::{KvDtype, PagedShape, Pool};
use crate::compute::{Backend, BackendError, CheckReport, Tolerance, check};
use crate::math::Rng;

use super::*;

/// The dtypes the suite writes, with the scale a calibrated pool would hold (FP8; per head: two).
pub fn dtypes() -> Vec<(KvDtype, Vec<f32>)> {
    vec![
        (KvDtype::INT8_TOKEN, vec![]),
        (KvDtype::FP8_E4M3, vec![0.01]),
        (KvDtype::FP8_E5M2, vec![1.0]),
        (KvDtype::FP8_E4M3_HEAD, vec![0.005, 0.02]),
        (KvDtype::FP8_E5M2_HEAD, vec![0.5, 0.003]),
    ]
}

/// The shape: odd head_dim, so two rows share a WGSL word.
fn shape(dtype: KvDtype) -> PagedShape {
    PagedShape {
        num_blocks: 6,
        block_size: 3,
        kv_heads: 2,
        head_dim: 5,
        dtype,
    }
}

const SLOTS: [i32; 7] = [16, 0, -1, 5, 9, 17, 3];

/// Fresh pools of `dtype` with `scales` set (FP8), the rows to write, and the rows' values.
fn inputs(dtype: KvDtype, scales: &[f32], seed: u64, i: usize) -> (Pool, Pool, Vec<f32>, Vec<f32>) {
    let s = shape(dtype);
    let (mut kp, mut vp) = (s.pool(), s.pool());
    for p in [&mut kp, &mut vp] {
        let v = p.view_mut();
        if !scales.is_empty() {
            v.scales.copy_from_slice(scales);
        }
    }
    let mut rng = Rng::stream(seed, 120 + i as u64);
    let n = SLOTS.len() * s.kv_heads * s.head_dim;
    let (mut k, mut v) = (rng.normal_vec(n, 1.5), rng.normal_vec(n, 0.3));
    // Token 1's rows: zeros (INT8's scale 0).
    k[10..20].fill(0.0);
    if dtype
        .format()
        .quant
        .is_some_and(|q| matches!(q, crate::cache::dtype::quant::Quant::Fp8(_)))
    {
        for (j, x) in [1e6f32, -1e6, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-9, -3e-7]
            .into_iter()
            .enumerate()
        {
            k[40 + j] = x;
            v[50 + j] = x;
        }
    }
    (kp, vp, k, v)
}

/// The pools (of the suite's shape) the scalar encoder writes: each row at its slot, INT8 with its row's scale, FP8 with the
/// pool's (per tensor or per head).
pub fn encode_pools(dtype: KvDtype, scales: &[f32], k: &[f32], v: &[f32], slots: &[i32]) -> [(Vec<u8>, Vec<f32>); 2] {
    let s = shape(dtype);
    let quant = dtype.format().quant.expect("a quantised dtype");
    [(k, s.pool()), (v, s.pool())].map(|(src, mut pool)| {
        let view = pool.view_mut();
        if !scales.is_empty() {
            view.scales.copy_from_slice(scales);
        }
        for (t, &slot) in slots.iter().enumerate() {
            if slot < 0 {
                continue;
            }
            let (b, o) = (slot as usize / s.block_size, slot as usize % s.block_size);
            for h in 0..s.kv_heads {
                let row = &src[(t * s.kv_heads + h) * s.head_dim..][..s.head_dim];
                let sc = s.row_scales(b, h, o).start;
                if quant == crate::cache::dtype::quant::Quant::Int8Token {
                    view.scales[sc] = crate::cache::dtype::quant::int8_scale(row);
                }
                let at = s.index(b, h, o, 0);
                for (d, &x) in row.iter().enumerate() {
                    view.bytes[at + d] = quant.encode(x, view.scales[sc]);
                }
            }
        }
        (view.bytes.to_vec(), view.scales.to_vec())
    })
}

/// `b`'s append of dtype case `i`: its pools' codes and scales, as f64 (codes as unsigned bytes).
fn append(b: &dyn Backend, seed: u64, i: usize) -> Result<(Vec<f64>, Vec<f64>), BackendError> {
    let (dtype, scales) = dtypes()[i].clone();
    let (mut kp, mut vp, k, v) = inputs(dtype, &scales, seed, i);
    b.quant_append(QuantAppendInput(PagedAppendInput {
        shape: shape(dtype),
        k_pool: kp.view_mut(),
        v_pool: vp.view_mut(),
        slot_mapping: &SLOTS,
        k: &k,
        v: &v,
    }))?;
    let codes = kp.bytes().iter().chain(vp.bytes()).map(|&c| f64::from(c)).collect();
    let sc = kp.scales().iter().chain(vp.scales()).map(|&x| f64::from(x)).collect();
    Ok((codes, sc))
}

/// Every 8-bit dtype: codes and scales equal the scalar encoder's, exactly.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (dtype, scales)) in dtypes().into_iter().enumerate() {
        let tag = format!("quant_append {dtype}");
        let (_, _, k, v) = inputs(dtype, &scales, seed, i);
        let [(kc, ks), (vc, vs)] = encode_pools(dtype, &scales, &k, &v, &SLOTS);
        match append(b, seed, i) {
            Ok((codes, sc)) => {
                let want: Vec<f64> = kc.iter().chain(&vc).map(|&c| f64::from(c)).collect();
                let want_s: Vec<f64> = ks.iter().chain(&vs).map(|&x| f64::from(x)).collect();
                out.push(check(
                    &format!("{tag} codes"),
                    &[2, want.len() / 2],
                    &codes,
                    &want,
                    Tolerance::EXACT,
                ));
                out.push(check(
                    &format!("{tag} scales"),
                    &[2, want_s.len() / 2],
                    &sc,
                    &want_s,
                    Tolerance::EXACT,
                ));
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Codes are compared exactly: every backend encodes the same f32 quotient with the same rounding.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::EXACT;

/// Every case's codes and scales.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in 0..dtypes().len() {
        let (c, s) = append(b, seed, i)?;
        out.extend(c);
        out.extend(s);
    }
    Ok(out)
}
