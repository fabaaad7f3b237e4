//! The `flash` op's checks against the f64 reference: the seeded cases, the suite every backend runs,
//! and the probe the twin and registry tests compare.

use crate::compute::{AttnInput, Backend, BackendError, CheckReport, Tolerance, check, reference};
use crate::math::{AttnShape, AttnWeights, Mask, flash, project};
use ndarray::Array3;

use super::*;

/// Suite cases: (T, d_model, H, KVH, mask, Br, Bc). Ragged last tiles, T = 1, Br = 1, head_dim 1 and 3,
/// every mask kind, and the largest Br; all fit the WGSL twin's 16 KiB.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<(usize, usize, usize, usize, Mask, usize, usize)> {
    vec![
        (1, 1, 1, 1, Mask::Causal, 1, 1),
        (10, 3, 1, 1, Mask::None, 4, 7),
        (9, 2, 2, 1, Mask::Window { window: 3, sinks: 0 }, 1, 2),
        (37, 16, 4, 2, Mask::Causal, 8, 5),
        (40, 64, 2, 1, Mask::Window { window: 7, sinks: 2 }, 16, 16),
        (100, 64, 4, 1, Mask::Causal, 32, 16),
        (64, 64, 1, 1, Mask::None, 16, 8),
        (130, 16, 2, 2, Mask::Causal, 64, 32),
    ]
}

/// Q, K, V of suite case `i` (seeded).
fn case_qkv(i: usize, seed: u64) -> crate::math::Qkv<f32> {
    let (t, d, h, kvh, ..) = cases()[i];
    let shape = AttnShape {
        seq: t,
        d_model: d,
        n_heads: h,
        n_kv_heads: kvh,
    };
    project(&AttnWeights::random(shape, seed + 100 + i as u64))
}

/// The input of suite case `i` over `qkv`.
fn case_input(i: usize, qkv: &crate::math::Qkv<f32>) -> FlashInput<'_> {
    let (.., mask, br, bc) = cases()[i];
    FlashInput {
        attn: AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        },
        block_q: br,
        block_k: bc,
    }
}

/// The flash kernel of `b` on every case, against the f64 reference (lesson 1's attention), and the
/// Rust tile walker's output against the kernel's.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (t, d, h, kvh, mask, br, bc)) in cases().into_iter().enumerate() {
        let qkv = case_qkv(i, seed);
        let inp = case_input(i, &qkv);
        let want = reference::attention(&inp.attn);
        let tag = format!("T{t} H{h}/{kvh} hd{} {mask} Br{br} Bc{bc}", d / h);
        match b.flash_attention(&inp) {
            Ok(g) => {
                out.push(check(
                    &format!("flash_attention.out {tag}"),
                    g.shape(),
                    g.as_slice().unwrap_or_default(),
                    want.out.as_slice().unwrap_or_default(),
                    Tolerance::F32,
                ));
                let walked: Array3<f32> = flash::forward(&qkv.q, &qkv.k, &qkv.v, mask, br, bc);
                out.push(check(
                    &format!("flash_attention.walker-vs-kernel {tag}"),
                    g.shape(),
                    walked.as_slice().unwrap_or_default(),
                    g.as_slice().unwrap_or_default(),
                    Tolerance::F32,
                ));
            }
            Err(e) => out.push(CheckReport::failed(&format!("flash_attention {tag}"), e)),
        }
    }
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three suite cases (ragged tiles, a window with sinks), all within the WGSL twin's
/// 16 KiB.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 3, 4] {
        let qkv = case_qkv(i, seed);
        out.extend(b.flash_attention(&case_input(i, &qkv))?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    #[test]
    fn tiles_that_do_not_fit_are_refused_with_the_numbers() {
        let qkv = project(&AttnWeights::random(
            AttnShape {
                seq: 8,
                d_model: 128,
                n_heads: 1,
                n_kv_heads: 1,
            },
            1,
        ));
        let attn = AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask: Mask::Causal,
        };
        let cpu = CpuBackend;
        let e = cpu
            .flash_attention(&FlashInput {
                attn,
                block_q: 64,
                block_k: 64,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("36864 floats") && e.contains("Choose smaller tiles"), "{e}");
        let e = cpu
            .flash_attention(&FlashInput {
                attn,
                block_q: 65,
                block_k: 1,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 64 rows"), "{e}");
        let e = cpu
            .flash_attention(&FlashInput {
                attn,
                block_q: 0,
                block_k: 4,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 1"), "{e}");
        assert_eq!(smem_floats(16, 16, 32), 64 * 32 + 256);
        assert_eq!(WGSL_SMEM_FLOATS * 4 + 3 * MAX_BLOCK_Q * 4, 16 * 1024);
    }
}
