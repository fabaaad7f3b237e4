//! The one list of KV formats. Every format kvscope stores K and V in (f16, the 8-bit pools, INT8 per
//! channel, KIVI 2 and 4) is one [`CacheFormat`], with its name (what lesson files, `kvscope export
//! quant --format`, `kvscope calc --kv` and `kvscope bench --only p3-<name>` say) and the kind of cache
//! that holds it:
//!
//! - **a pool** ([`super::Pool`], [`super::KvDtype`]): every row is encoded as it is written, by the
//!   dtype's [`super::KvFormat`] (bits, scales, the Rust write and read);
//! - **the cache quantised in groups** ([`super::group`]): INT8 per channel and KIVI, whose codes wait
//!   for a group of tokens to complete, under a [`GroupFormat`] rule.
//!
//! A new format is an entry here and, for a pool dtype, its file in `dtype/` (a `KvFormat`) with its
//! kernel snippets in `kernels/kv/` (ARCHITECTURE.md, "How to add a KV format").

use super::dtype::quant::Quant;
use super::group::GroupFormat;
use super::{KvDtype, ScaleLayout};

/// Tokens per block of INT8 per channel (a scale per channel per block; the filling block in f16).
pub const CHANNEL_BLOCK: usize = 16;

/// One KV format: an entry of the one list ([`CacheFormat::all`]) that lessons, the CLI, the
/// benchmarks and the calculator name formats from. Its kind says which cache holds it: a [`super::Pool`]
/// of a dtype ([`CacheFormat::Pool`]), or the cache quantised in groups ([`CacheFormat::group`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CacheFormat {
    /// A pool of a built-in dtype; `calibrated` sets FP8 scales from the prefill (else 1.0).
    Pool {
        /// The pool's dtype.
        dtype: KvDtype,
        /// FP8: scales from the prefill's absolute maximum (else vLLM's uncalibrated 1.0).
        calibrated: bool,
    },
    /// INT8 per channel: a scale per (block, KV head, channel), the filling block in f16.
    Int8Channel,
    /// KIVI: K per channel and V per token, `bits` bits, groups of `group`, the last `residual` in f16.
    Kivi {
        /// 2 or 4.
        bits: u32,
        /// Values per group (tokens for K, channels for V).
        group: usize,
        /// Tokens kept in f16 (a multiple of `group`).
        residual: usize,
    },
}

impl CacheFormat {
    /// The formats of the lesson's table, in order.
    pub fn all(group: usize, residual: usize) -> Vec<CacheFormat> {
        let pool = |dtype, calibrated| CacheFormat::Pool { dtype, calibrated };
        vec![
            pool(KvDtype::F16, true),
            pool(KvDtype::INT8_TOKEN, true),
            CacheFormat::Int8Channel,
            pool(KvDtype::FP8_E4M3, true),
            pool(KvDtype::FP8_E5M2, true),
            pool(KvDtype::FP8_E4M3_HEAD, true),
            pool(KvDtype::FP8_E5M2_HEAD, true),
            pool(KvDtype::FP8_E4M3, false),
            pool(KvDtype::FP8_E5M2, false),
            CacheFormat::Kivi {
                bits: 4,
                group,
                residual,
            },
            CacheFormat::Kivi {
                bits: 2,
                group,
                residual,
            },
        ]
    }

    /// The rule of a format quantised in groups (INT8 per channel in blocks of [`CHANNEL_BLOCK`], KIVI).
    pub fn group(&self) -> Option<GroupFormat> {
        match *self {
            CacheFormat::Pool { .. } => None,
            CacheFormat::Int8Channel => Some(GroupFormat::int8_channel(CHANNEL_BLOCK)),
            CacheFormat::Kivi { bits, group, residual } => Some(GroupFormat::kivi(bits, group, residual)),
        }
    }

    /// Its name: the dtype's (`fp8-e4m3`, with `-scale1` when uncalibrated), `int8-channel`, `kivi2`.
    pub fn name(&self) -> String {
        match *self {
            CacheFormat::Pool { dtype, calibrated } => {
                let fp8 = matches!(dtype.format().quant, Some(Quant::Fp8(_)));
                if fp8 && !calibrated {
                    format!("{dtype}-scale1")
                } else {
                    dtype.to_string()
                }
            }
            CacheFormat::Int8Channel => "int8-channel".into(),
            CacheFormat::Kivi { bits, .. } => format!("kivi{bits}"),
        }
    }

    /// An FP8 pool left at vLLM's uncalibrated scale of 1.0 (`fp8-e4m3-scale1`): the same bytes as its
    /// calibrated twin, so the calculator does not list it.
    pub fn uncalibrated(&self) -> bool {
        matches!(*self, CacheFormat::Pool { dtype, calibrated: false } if matches!(dtype.format().quant, Some(Quant::Fp8(_))))
    }

    /// The format called `name` (the export's `--format`), with KIVI's group and residual.
    pub fn parse(name: &str, group: usize, residual: usize) -> Option<CacheFormat> {
        Self::all(group, residual).into_iter().find(|f| f.name() == name)
    }

    /// Bytes one token's K and V take in one layer with `kv_heads` heads of `hd`, scales, zero points
    /// and (averaged over a context of `ctx` tokens) the f16 residual included.
    pub fn bytes_per_token(&self, kv_heads: usize, hd: usize, ctx: usize) -> f64 {
        let row = (kv_heads * hd) as f64; // values per token per tensor
        let ctx = ctx.max(1) as f64;
        match *self {
            CacheFormat::Pool { dtype, .. } => {
                let f = dtype.format();
                let codes = 2.0 * row * f.bits as f64 / 8.0;
                let scales = match f.scales {
                    ScaleLayout::PerToken { per } => 2.0 * (kv_heads * per) as f64 * 2.0, // f16
                    ScaleLayout::PerHead => 2.0 * kv_heads as f64 * 4.0 / ctx,
                    ScaleLayout::PerTensor => 2.0 * 4.0 / ctx,
                    _ => 0.0,
                };
                codes + scales
            }
            CacheFormat::Int8Channel | CacheFormat::Kivi { .. } => {
                let g = self.group().expect("a group format");
                kv_heads as f64 * g.bytes_per_token(hd, ctx as usize)
            }
        }
    }
}

impl CacheFormat {
    /// The names of [`CacheFormat::all`], in order (KIVI's group and residual do not change them).
    pub fn names() -> Vec<String> {
        Self::all(32, 32).iter().map(CacheFormat::name).collect()
    }
}

impl CacheFormat {
    /// The formats whose decode `kvscope bench` times against f16 (its `p3-<name>` lines, and the bench
    /// lesson 10's stored table keeps): every quantised one of the list but the per-head FP8 scales
    /// (their reads are the per-tensor ones' bytes) and the uncalibrated twins (the same bytes), as the
    /// pool dtypes and the group formats (with their names) the two decode kernels take. Groups come
    /// symmetric first, then by bits, fewest first (int8-channel, kivi2, kivi4): the bench's line order.
    pub fn decode_bench(group: usize, residual: usize) -> (Vec<KvDtype>, Vec<(String, GroupFormat)>) {
        let (mut pools, mut groups) = (Vec::new(), Vec::new());
        for f in Self::all(group, residual) {
            match f {
                CacheFormat::Pool {
                    dtype,
                    calibrated: true,
                } if dtype.format().quant.is_some() && dtype.format().scales != ScaleLayout::PerHead => {
                    pools.push(dtype)
                }
                CacheFormat::Pool { .. } => {}
                _ => groups.extend(f.group().map(|g| (f.name(), g))),
            }
        }
        groups.sort_by_key(|(_, g): &(String, GroupFormat)| (!g.symmetric, g.bits));
        (pools, groups)
    }
}
