//! Lesson 10's model runs (every format through its kernels): KIVI's residual and INT8 per channel's filling block stay f16 until their
//! group is full, FP8 scales are calibrated from the prompt (or 1.0), every 8-bit decode checks against
//! the reference, and the byte counts match the pools.

use kvscope::cache::CacheFormat;
use kvscope::cache::KvDtype;
use kvscope::compute::CpuBackend;

fn f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

#[test]
fn kivi_residual_stays_f16_until_its_group_is_full() {
    let m = kvscope::model::shared().unwrap();
    let c = m.config;
    let text = &kvscope::model::HELDOUT[..40];
    let (g, r) = (8, 16);
    let run = m
        .quant_run(
            text,
            CacheFormat::Kivi {
                bits: 2,
                group: g,
                residual: r,
            },
            &CpuBackend,
        )
        .unwrap();
    let row = c.n_kv_heads * c.head_dim;
    // The group kernels ran, and their last step agrees with the f64 reference on the same codes.
    assert!(run.kernel);
    let check = run.check.as_ref().expect("the group decode checks its last step");
    assert!(check.passed(), "{check}");
    for l in 0..c.n_layers {
        for t in 0..40 {
            // K: whole residuals of R quantised (32 of 40); V: all but the last R (24 of 40).
            let (kq, vq) = (t < 40 / r * r, t < 40 - r);
            for i in t * row..(t + 1) * row {
                if kq {
                    let (cd, s, z) = (run.k_codes[l][i], run.k_scales[l][i], run.k_zeros[l][i]);
                    assert!(cd < 4);
                    assert_eq!(run.k_deq[l][i], f32::from(cd) * s + z, "K l{l} t{t}");
                } else {
                    assert_eq!(run.k_deq[l][i], f16(run.k[l][i]), "K l{l} t{t} is f16");
                    assert_eq!(run.k_scales[l][i], 0.0);
                }
                if !vq {
                    assert_eq!(run.v_deq[l][i], f16(run.v[l][i]), "V l{l} t{t} is f16");
                    assert_eq!(run.v_scales[l][i], 0.0);
                } else {
                    // Dequantised: code · scale + zero, with a 2-bit code.
                    let (cd, s, z) = (run.v_codes[l][i], run.v_scales[l][i], run.v_zeros[l][i]);
                    assert!(cd < 4);
                    assert_eq!(run.v_deq[l][i], f32::from(cd) * s + z);
                }
            }
        }
        // One K group: G tokens of one channel share a scale and a zero point.
        for ch in 0..row {
            let s: Vec<f32> = (0..g).map(|t| run.k_scales[l][t * row + ch]).collect();
            assert!(s.iter().all(|&x| x == s[0]), "K channel {ch}: one scale per group");
        }
    }
    // A residual that is not a multiple of the group is refused with the reason.
    let e = m
        .quant_run(
            text,
            CacheFormat::Kivi {
                bits: 2,
                group: 8,
                residual: 12,
            },
            &CpuBackend,
        )
        .unwrap_err();
    assert!(e.contains("multiple of G"), "{e}");
}

#[test]
fn int8_per_channel_quantises_a_block_when_it_fills() {
    let m = kvscope::model::shared().unwrap();
    let c = m.config;
    let run = m
        .quant_run(&kvscope::model::HELDOUT[..40], CacheFormat::Int8Channel, &CpuBackend)
        .unwrap();
    let row = c.n_kv_heads * c.head_dim;
    let b = kvscope::drivers::quant::BLOCK;
    let check = run.check.as_ref().expect("the group decode checks its last step");
    assert!(check.passed(), "{check}");
    for l in 0..c.n_layers {
        for t in 0..40 {
            for i in t * row..(t + 1) * row {
                if t < 40 / b * b {
                    // The block's f16 values are quantised: within half a step of them.
                    let s = run.k_scales[l][i];
                    assert!(
                        (run.k_deq[l][i] - f16(run.k[l][i])).abs() <= s / 2.0 * 1.0001,
                        "l{l} t{t}"
                    );
                } else {
                    assert_eq!(run.k_deq[l][i], f16(run.k[l][i]), "the filling block is f16");
                }
            }
        }
    }
}

#[test]
fn eight_bit_pools_run_their_kernels_and_check_against_the_reference() {
    let m = kvscope::model::shared().unwrap();
    let text = &kvscope::model::HELDOUT[..48];
    let f16_run = m
        .quant_run(
            text,
            CacheFormat::Pool {
                dtype: KvDtype::F16,
                calibrated: true,
            },
            &CpuBackend,
        )
        .unwrap();
    for dtype in [KvDtype::INT8_TOKEN, KvDtype::FP8_E4M3, KvDtype::FP8_E5M2_HEAD] {
        for calibrated in [true, false] {
            let r = m
                .quant_run(text, CacheFormat::Pool { dtype, calibrated }, &CpuBackend)
                .unwrap();
            let check = r.check.as_ref().expect("a kernel run checks its last step");
            assert!(check.passed(), "{dtype}: {check}");
            // Quality stays close to f16 on this model (measured: within a few hundredths of a bit).
            assert!((r.bits_per_byte() - f16_run.bits_per_byte()).abs() < 0.2, "{dtype}");
            let fp8 = dtype != KvDtype::INT8_TOKEN;
            if fp8 {
                let max = if dtype == KvDtype::FP8_E4M3 { 448.0 } else { 57344.0 };
                for (l, s) in r.scales.iter().enumerate() {
                    if calibrated {
                        // Per tensor: K's absmax over the format's max (the prompt is the text).
                        let amax = m.prefill(text, &CpuBackend, false).unwrap().kv[l]
                            .0
                            .iter()
                            .fold(0f32, |a, x| a.max(x.abs()));
                        if dtype == KvDtype::FP8_E4M3 {
                            assert_eq!(s[0], amax / max, "layer {l}");
                        }
                    } else {
                        assert!(s.iter().all(|&x| x == 1.0), "uncalibrated scales are 1.0");
                    }
                }
            }
        }
    }
}

#[test]
fn bytes_per_token_count_codes_scales_and_residuals() {
    let (kvh, hd) = (2, 32);
    let pool = |dtype| CacheFormat::Pool {
        dtype,
        calibrated: true,
    };
    assert_eq!(pool(KvDtype::F16).bytes_per_token(kvh, hd, 256), 256.0);
    // INT8 per token: a byte a value and one f16 scale per token per KV head, K and V.
    assert_eq!(pool(KvDtype::INT8_TOKEN).bytes_per_token(kvh, hd, 256), 128.0 + 8.0);
    // KIVI 2-bit at G = 32: 3 bits a value once quantised (5.33× against f16), before the residual.
    let kivi = CacheFormat::Kivi {
        bits: 2,
        group: 32,
        residual: 32,
    };
    let row = (kvh * hd) as f64;
    let no_residual = 2.0 * row * 3.0 / 8.0;
    let at = |ctx| kivi.bytes_per_token(kvh, hd, ctx);
    assert!(at(8192) > no_residual && at(8192) < no_residual * 1.05);
    assert!(at(256) > at(8192));
    assert!((256.0 / no_residual - 16.0 / 3.0).abs() < 1e-9);
}
