//! Fused attention (`Backend::attention_fused`: scores, softmax and P·V in one online-softmax kernel):
//! its suite cases and probe. It takes the three-kernel op's input, [`super::attention::AttnInput`].
//!
//! Its f64 reference is the attention op's (`compute::reference::attention`, `ops/attention/reference.rs`):
//! the fused kernel computes the same output.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub(crate) mod wgpu;

use super::attention::{case_qkv, cases};
use crate::compute::{AttnInput, Backend, BackendError, CheckReport, Tolerance, check, reference};

/// The fused kernel of `b` on every attention case, against the f64 reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (t, d, h, kvh, mask)) in cases().into_iter().enumerate() {
        let (qkv, _) = case_qkv(i, seed + i as u64);
        let inp = AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let want = reference::attention(&inp);
        let tag = format!("T{t} H{h}/{kvh} hd{} {mask}", d / h);
        match b.attention_fused(&inp) {
            Ok(g) => out.push(check(
                &format!("attention_fused.out {tag}"),
                g.shape(),
                g.as_slice().unwrap_or_default(),
                want.out.as_slice().unwrap_or_default(),
                Tolerance::F32,
            )),
            Err(e) => out.push(CheckReport::failed(&format!("attention_fused {tag}"), e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three small cases.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let (qkv, mask) = case_qkv(i, seed);
        let got = b.attention_fused(&AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        })?;
        out.extend(got.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
