//! `Backend::group_append`: a KV cache quantised in **groups**, the formats whose quantisation waits
//! until a group is complete: INT8 per channel (a scale per channel per block of tokens) and KIVI
//! (K per channel in groups of G tokens once R have gathered; V per token, the last R kept in f16).
//!
//! The cache of one layer ([`GroupCache`]) has two parts:
//! - **code pools**, paged like every pool here, in blocks of G tokens (the K group): `bits`-bit codes
//!   packed along the head dimension (`hd · bits / 8` bytes a row), and their f16 scales and zero
//!   points: per (block, KV head, channel) for a per-channel tensor, per (token, KV head, group of G
//!   channels) for KIVI's V;
//! - **an f16 ring per request** of R + 1 rows, the residual: token t lives at row `t % (R + 1)` until
//!   it is quantised. (R + 1, not R: KIVI's V keeps the last R tokens, and the token that leaves is
//!   quantised in the step that appends the next one, as its reference code concatenates first.)
//!
//! The op runs two kernels (`kernels/group_kv.cu` and `.wgsl`): `group_store_f16` writes the new rows
//! into the rings (rounded to f16), then `group_quant` runs the jobs the host's rule issued for the
//! groups that completed ([`GroupFormat::step_jobs`]): a job quantises G tokens of K (or V) per
//! channel into a block, or one token of V per group of channels into its slot. The scalar encoder in
//! this file ([`GroupFormat::encode`]) is what every backend's codes are compared with, code for code.
//!
//! Its reference is the scalar encoder of the rule (`GroupFormat::encode`, `src/cache/group.rs`), compared
//! code for code, scale for scale.

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod suite;
pub(crate) mod wgpu;

use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

use crate::cache::group::{GroupCache, GroupShape, job};

/// The op's input: new rows into the rings, then the jobs.
#[derive(Debug)]
pub struct GroupAppendInput<'a> {
    /// The cache's shape.
    pub shape: GroupShape,
    /// The cache (rewritten in place).
    pub cache: &'a mut GroupCache,
    /// `[n, 2]`: each new row's (ring, token position).
    pub rows: &'a [i32],
    /// New K rows `[n, KVH, hd]` f32 (stored as f16).
    pub k: &'a [f32],
    /// New V rows, as K's.
    pub v: &'a [f32],
    /// `[jobs, 4]`: (kind, ring, first token, destination block or slot), run after the rows are stored.
    pub jobs: &'a [i32],
}

impl GroupAppendInput<'_> {
    /// New rows.
    pub fn n_rows(&self) -> usize {
        self.rows.len() / 2
    }
    /// Jobs.
    pub fn n_jobs(&self) -> usize {
        self.jobs.len() / 4
    }
}

impl OpInput for GroupAppendInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        let s = &self.shape;
        s.validate(MAX_HEAD_DIM).map_err(invalid)?;
        if !self.cache.fits(s) {
            return Err(invalid("the group cache's buffers do not have its shape's sizes"));
        }
        let row = s.kv_heads * s.head_dim;
        if !self.rows.len().is_multiple_of(2) || !self.jobs.len().is_multiple_of(4) {
            return Err(invalid("rows come in pairs (ring, token) and jobs in fours"));
        }
        if self.k.len() != self.n_rows() * row || self.v.len() != self.n_rows() * row {
            return Err(invalid(format!(
                "{} new rows take {} K and V values each, not {} and {}",
                self.n_rows(),
                self.n_rows() * row,
                self.k.len(),
                self.v.len()
            )));
        }
        for r in self.rows.chunks(2) {
            if r[0] < 0 || r[0] as usize >= s.rings || r[1] < 0 {
                return Err(invalid(format!(
                    "row (ring {}, token {}) is outside the rings",
                    r[0], r[1]
                )));
            }
        }
        for j in self.jobs.chunks(4) {
            let (kind, ring, t0, dst) = (j[0], j[1], j[2], j[3]);
            let ok_kind = match kind {
                job::K_CHANNEL => true,
                job::V_CHANNEL => !s.fmt.v_per_token,
                job::V_TOKEN => s.fmt.v_per_token,
                _ => false,
            };
            let dst_max = if kind == job::V_TOKEN {
                s.num_blocks * s.fmt.group
            } else {
                s.num_blocks
            };
            if !ok_kind || ring < 0 || ring as usize >= s.rings || t0 < 0 || dst < 0 || dst as usize >= dst_max {
                return Err(invalid(format!("job {j:?} does not fit this cache")));
            }
        }
        Ok(())
    }
    fn nothing_to_do(&self) -> bool {
        self.rows.is_empty() && self.jobs.is_empty()
    }
}

/// The op on the host, as the kernels do it: the scalar encoder's codes, scales and zeros (the CPU
/// backend's path, and what the other backends' codes are compared with).
pub fn append_scalar(inp: GroupAppendInput) {
    let s = inp.shape;
    let c = inp.cache;
    let (kvh, hd, g) = (s.kv_heads, s.head_dim, s.fmt.group);
    for (i, r) in inp.rows.chunks(2).enumerate() {
        for h in 0..kvh {
            let at = s.ring_index(r[0] as usize, r[1] as usize, h);
            let src = (i * kvh + h) * hd;
            for d in 0..hd {
                c.k_ring[at + d] = half::f16::from_f32(inp.k[src + d]).to_bits();
                c.v_ring[at + d] = half::f16::from_f32(inp.v[src + d]).to_bits();
            }
        }
    }
    let rb = s.row_bytes();
    let put = |codes: &mut [u8], row: usize, d: usize, code: u8| {
        let bits = s.fmt.bits as usize;
        let (byte, sh) = (row * rb + d * bits / 8, (d * bits) % 8);
        codes[byte] = (codes[byte] & !((s.fmt.levels() as u8) << sh)) | (code << sh);
    };
    for j in inp.jobs.chunks(4) {
        let (kind, ring, t0, dst) = (j[0], j[1] as usize, j[2] as usize, j[3] as usize);
        for h in 0..kvh {
            if kind == job::V_TOKEN {
                let (blk, off) = (dst / g, dst % g);
                let row = (blk * kvh + h) * g + off;
                let at = s.ring_index(ring, t0, h);
                for (gi, c0) in (0..hd).step_by(g).enumerate() {
                    let c1 = (c0 + g).min(hd);
                    let x: Vec<f32> = (c0..c1)
                        .map(|d| half::f16::from_bits(c.v_ring[at + d]).to_f32())
                        .collect();
                    let (codes, sc, z) = s.fmt.encode(&x);
                    c.v_scale[row * s.v_groups() + gi] = sc;
                    c.v_zero[row * s.v_groups() + gi] = z;
                    for (d, &code) in (c0..c1).zip(&codes) {
                        put(&mut c.v_codes, row, d, code);
                    }
                }
            } else {
                let v = kind == job::V_CHANNEL;
                let (ring_buf, codes, scale, zero) = if v {
                    (&c.v_ring, &mut c.v_codes, &mut c.v_scale, &mut c.v_zero)
                } else {
                    (&c.k_ring, &mut c.k_codes, &mut c.k_scale, &mut c.k_zero)
                };
                for d in 0..hd {
                    let x: Vec<f32> = (0..g)
                        .map(|i| half::f16::from_bits(ring_buf[s.ring_index(ring, t0 + i, h) + d]).to_f32())
                        .collect();
                    let (cs, sc, z) = s.fmt.encode(&x);
                    let pi = (dst * kvh + h) * hd + d;
                    scale[pi] = sc;
                    zero[pi] = z;
                    for (i, &code) in cs.iter().enumerate() {
                        put(codes, (dst * kvh + h) * g + i, d, code);
                    }
                }
            }
        }
    }
}

pub use suite::{TWIN_TOLERANCE, probe, suite};
