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

pub(crate) mod cpu;
#[cfg(feature = "native")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod suite;
pub(crate) mod wgpu;

use crate::cache::dtype::quant::{f16_ceil, int8_decode, int8_encode};
use crate::compute::{BackendError, Limits, MAX_HEAD_DIM, OpInput, invalid};

/// Job kinds of `group_quant` (the first of a job's four i32s).
pub mod job {
    /// G tokens of K from the ring, per channel, into a block.
    pub const K_CHANNEL: i32 = 0;
    /// G tokens of V from the ring, per channel, into a block (INT8 per channel).
    pub const V_CHANNEL: i32 = 1;
    /// One token of V from the ring, per group of G channels, into its slot (KIVI).
    pub const V_TOKEN: i32 = 2;
}

/// The rule of a group-quantised cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupFormat {
    /// Bits per code: 2, 4 or 8.
    pub bits: u32,
    /// Symmetric INT8 (two's complement codes, value = code · scale, scale = absmax/127 rounded up to
    /// f16); otherwise asymmetric as KIVI (value = code · scale + zero, zero = the group's min as f16).
    pub symmetric: bool,
    /// V per token in groups of `group` channels (KIVI); otherwise V per channel as K.
    pub v_per_token: bool,
    /// G: tokens per K group (the code pools' block size), channels per V group.
    pub group: usize,
    /// R: tokens that gather in f16 before K is quantised (a multiple of G); V keeps the last R in f16
    /// (KIVI) or, per channel, quantises with K.
    pub residual: usize,
}

impl GroupFormat {
    /// INT8 per channel: a scale per channel per block of `block` tokens; the filling block in f16.
    pub fn int8_channel(block: usize) -> Self {
        Self {
            bits: 8,
            symmetric: true,
            v_per_token: false,
            group: block,
            residual: block,
        }
    }

    /// KIVI with `bits` bits, group G and residual R.
    pub fn kivi(bits: u32, group: usize, residual: usize) -> Self {
        Self {
            bits,
            symmetric: false,
            v_per_token: true,
            group,
            residual,
        }
    }

    /// Rows of each request's f16 ring: R + 1.
    pub fn cap(&self) -> usize {
        self.residual + 1
    }

    /// The largest code.
    pub fn levels(&self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// Refuses a rule the kernels do not run.
    pub fn validate(&self) -> Result<(), BackendError> {
        if !matches!(self.bits, 2 | 4 | 8) || (self.symmetric && self.bits != 8) {
            return Err(invalid(format!(
                "group quantisation takes 2, 4 or 8 bits (symmetric: 8), not {} bits{}",
                self.bits,
                if self.symmetric { " symmetric" } else { "" }
            )));
        }
        if self.group == 0 || self.residual == 0 || !self.residual.is_multiple_of(self.group) {
            return Err(invalid(format!(
                "a group G ≥ 1 and a residual R that is a multiple of G, not G {} and R {}",
                self.group, self.residual
            )));
        }
        Ok(())
    }

    /// Quantise one group of values: their codes, and (scale, zero point), the scale and zero rounded
    /// to f16 (symmetric: scale = absmax/127 rounded **up** to f16, zero 0; asymmetric: zero = the
    /// min as f16, scale = (max − zero)/(2^bits − 1) as f16, code = round-half-even((x − zero)/scale)
    /// clamped to [0, 2^bits − 1]).
    pub fn encode(&self, x: &[f32]) -> (Vec<u8>, f32, f32) {
        if self.symmetric {
            let s = f16_ceil(x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0);
            (x.iter().map(|&v| int8_encode(v, s)).collect(), s, 0.0)
        } else {
            let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let lo = f16r(lo);
            let levels = self.levels() as f32;
            let scale = f16r((hi - lo) / levels);
            let codes = x
                .iter()
                .map(|&v| {
                    if scale > 0.0 {
                        ((v - lo) / scale).round_ties_even().clamp(0.0, levels) as u8
                    } else {
                        0
                    }
                })
                .collect();
            (codes, scale, lo)
        }
    }

    /// The value of `code` with (scale, zero).
    pub fn decode(&self, code: u8, scale: f32, zero: f32) -> f32 {
        if self.symmetric {
            int8_decode(code, scale)
        } else {
            f32::from(code) * scale + zero
        }
    }

    /// Tokens of a request of `len` tokens whose K, and whose V, are quantised: K in whole R, V all but
    /// the last R (KIVI) or in whole blocks with K (per channel).
    pub fn quantised(&self, len: usize) -> (usize, usize) {
        let r = self.residual.max(1);
        let k = len / r * r;
        let v = if self.v_per_token { len.saturating_sub(r) } else { k };
        (k, v)
    }

    /// The jobs the step that appends token `t` (0-based) of the request in ring `ring` issues, with
    /// `slot(i)` the physical slot (block · G + offset) of its token i: K (and per-channel V) when
    /// `t + 1` reaches a multiple of R, each of the R tokens' groups into its block; KIVI's V, the token
    /// `t − R` that leaves the residual.
    pub fn step_jobs(&self, ring: usize, t: usize, slot: impl Fn(usize) -> usize) -> Vec<[i32; 4]> {
        let (g, r) = (self.group, self.residual);
        let mut jobs = Vec::new();
        if (t + 1).is_multiple_of(r) {
            for s in (t + 1 - r..t + 1).step_by(g) {
                let block = (slot(s) / g) as i32;
                jobs.push([job::K_CHANNEL, ring as i32, s as i32, block]);
                if !self.v_per_token {
                    jobs.push([job::V_CHANNEL, ring as i32, s as i32, block]);
                }
            }
        }
        if self.v_per_token && t >= r {
            jobs.push([job::V_TOKEN, ring as i32, (t - r) as i32, slot(t - r) as i32]);
        }
        jobs
    }

    /// [`GroupFormat::step_jobs`] for a request whose logical block b is physical block `block(b)`
    /// (slot = `block(i / G)` · G + `i % G`), flattened into the `jobs` words the op takes.
    pub fn step_job_words(&self, ring: usize, t: usize, block: impl Fn(usize) -> usize) -> impl Iterator<Item = i32> {
        let g = self.group;
        self.step_jobs(ring, t, |i| block(i / g) * g + i % g)
            .into_iter()
            .flatten()
    }

    /// Average bytes one token's K and V take per KV head of `hd` values over a context of `ctx`
    /// tokens: codes, f16 scales and zeros (zeros only when asymmetric), and the f16 residual (K: R/2
    /// tokens on average before a flush; V: the last R).
    pub fn bytes_per_token(&self, hd: usize, ctx: usize) -> f64 {
        let (hd, ctx, g) = (hd as f64, ctx.max(1) as f64, self.group as f64);
        let params = if self.symmetric { 2.0 } else { 4.0 }; // f16 scale (and zero)
        let coded = hd * self.bits as f64 / 8.0 + hd * params / g;
        let r = self.residual as f64;
        let kf = (r / 2.0).min(ctx) / ctx;
        let vf = if self.v_per_token { r.min(ctx) / ctx } else { kf };
        let f16 = hd * 2.0;
        (1.0 - kf) * coded + kf * f16 + (1.0 - vf) * coded + vf * f16
    }
}

/// `x` rounded to nearest f16 (ties to even), as f32.
pub fn f16r(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// The shape of one layer's group-quantised cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupShape {
    /// Blocks of G tokens in the code pools.
    pub num_blocks: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Head dimension (`hd · bits` a multiple of 32, so a row is whole u32 words in WGSL).
    pub head_dim: usize,
    /// Requests with an f16 ring.
    pub rings: usize,
    /// The rule.
    pub fmt: GroupFormat,
}

impl GroupShape {
    /// Bytes of one row's codes.
    pub fn row_bytes(&self) -> usize {
        self.head_dim * self.fmt.bits as usize / 8
    }
    /// V's scale groups per row (KIVI: ⌈hd / G⌉; per channel: none).
    pub fn v_groups(&self) -> usize {
        if self.fmt.v_per_token {
            self.head_dim.div_ceil(self.fmt.group)
        } else {
            0
        }
    }
    /// Bytes of each code pool: `[blocks, KVH, G, row_bytes]`.
    pub fn codes_len(&self) -> usize {
        self.num_blocks * self.kv_heads * self.fmt.group * self.row_bytes()
    }
    /// K's scales (and zeros): `[blocks, KVH, hd]`.
    pub fn k_params_len(&self) -> usize {
        self.num_blocks * self.kv_heads * self.head_dim
    }
    /// V's scales (and zeros): `[blocks, KVH, G, v_groups]` per token, else as K's.
    pub fn v_params_len(&self) -> usize {
        if self.fmt.v_per_token {
            self.num_blocks * self.kv_heads * self.fmt.group * self.v_groups()
        } else {
            self.k_params_len()
        }
    }
    /// f16 values of each ring set: `[rings, R + 1, KVH, hd]`.
    pub fn ring_len(&self) -> usize {
        self.rings * self.fmt.cap() * self.kv_heads * self.head_dim
    }
    /// Index of token `t`'s row of KV head `h` in ring `ring`.
    pub fn ring_index(&self, ring: usize, t: usize, h: usize) -> usize {
        ((ring * self.fmt.cap() + t % self.fmt.cap()) * self.kv_heads + h) * self.head_dim
    }

    /// Refuses a shape the kernels do not run.
    pub fn validate(&self) -> Result<(), BackendError> {
        self.fmt.validate()?;
        if self.kv_heads == 0 || self.head_dim == 0 || self.head_dim > MAX_HEAD_DIM {
            return Err(invalid(format!(
                "a group-quantised cache takes 1 ≤ head_dim ≤ {MAX_HEAD_DIM} and KV heads ≥ 1, not {} and {}",
                self.head_dim, self.kv_heads
            )));
        }
        if !(self.head_dim * self.fmt.bits as usize).is_multiple_of(32) {
            return Err(invalid(format!(
                "a row of codes must be whole 32-bit words (head_dim · bits a multiple of 32): {} · {} is not",
                self.head_dim, self.fmt.bits
            )));
        }
        Ok(())
    }
}

/// One layer's group-quantised cache: the code pools with their scales and zeros, and the f16 rings.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCache {
    /// K codes `[blocks, KVH, G, row_bytes]`, packed: code d in bits `(d·bits) % 8` of byte `d·bits/8`.
    pub k_codes: Vec<u8>,
    /// V codes, as K's.
    pub v_codes: Vec<u8>,
    /// K scales `[blocks, KVH, hd]` (f16 values).
    pub k_scale: Vec<f32>,
    /// K zero points, as the scales (0 when symmetric).
    pub k_zero: Vec<f32>,
    /// V scales: `[blocks, KVH, G, v_groups]` per token, else as K's.
    pub v_scale: Vec<f32>,
    /// V zero points, as V's scales.
    pub v_zero: Vec<f32>,
    /// K rings `[rings, R + 1, KVH, hd]`, f16 bits.
    pub k_ring: Vec<u16>,
    /// V rings, as K's.
    pub v_ring: Vec<u16>,
}

impl GroupCache {
    /// An empty (zeroed) cache of `shape`.
    pub fn new(shape: &GroupShape) -> Self {
        Self {
            k_codes: vec![0; shape.codes_len()],
            v_codes: vec![0; shape.codes_len()],
            k_scale: vec![0.0; shape.k_params_len()],
            k_zero: vec![0.0; shape.k_params_len()],
            v_scale: vec![0.0; shape.v_params_len()],
            v_zero: vec![0.0; shape.v_params_len()],
            k_ring: vec![0; shape.ring_len()],
            v_ring: vec![0; shape.ring_len()],
        }
    }

    /// Whether the buffers have `shape`'s sizes.
    pub fn fits(&self, s: &GroupShape) -> bool {
        self.k_codes.len() == s.codes_len()
            && self.v_codes.len() == s.codes_len()
            && self.k_scale.len() == s.k_params_len()
            && self.k_zero.len() == s.k_params_len()
            && self.v_scale.len() == s.v_params_len()
            && self.v_zero.len() == s.v_params_len()
            && self.k_ring.len() == s.ring_len()
            && self.v_ring.len() == s.ring_len()
    }

    /// Bytes the buffers hold as a device would store them (codes, f16 scales and zeros, f16 rings).
    pub fn bytes(&self, s: &GroupShape) -> usize {
        let zeros = if s.fmt.symmetric { 0 } else { 1 };
        2 * s.codes_len() + 2 * (1 + zeros) * (s.k_params_len() + s.v_params_len()) + 4 * s.ring_len()
    }

    /// The code of value `d` in code row `row` of `codes`.
    pub fn code(s: &GroupShape, codes: &[u8], row: usize, d: usize) -> u8 {
        let bits = s.fmt.bits as usize;
        let byte = codes[row * s.row_bytes() + d * bits / 8];
        (byte >> ((d * bits) % 8)) & s.fmt.levels() as u8
    }

    /// What the cache holds for token `t` (KV head `h`, channel `d`) of K (`v` false) or V, for a
    /// request with block table `table`, ring `ring` and `kq`/`vq` tokens quantised: (value, code,
    /// scale, zero); code, scale and zero are 0 while the token is still f16.
    #[allow(clippy::too_many_arguments)]
    pub fn at(
        &self,
        s: &GroupShape,
        v: bool,
        table: &[i32],
        ring: usize,
        quantised: usize,
        t: usize,
        h: usize,
        d: usize,
    ) -> (f32, u8, f32, f32) {
        let g = s.fmt.group;
        if t < quantised {
            let blk = table[t / g] as usize;
            let row = (blk * s.kv_heads + h) * g + t % g;
            let (codes, scale, zero) = if v {
                (&self.v_codes, &self.v_scale, &self.v_zero)
            } else {
                (&self.k_codes, &self.k_scale, &self.k_zero)
            };
            let pi = if v && s.fmt.v_per_token {
                row * s.v_groups() + d / g
            } else {
                (blk * s.kv_heads + h) * s.head_dim + d
            };
            let c = Self::code(s, codes, row, d);
            (s.fmt.decode(c, scale[pi], zero[pi]), c, scale[pi], zero[pi])
        } else {
            let ring_buf = if v { &self.v_ring } else { &self.k_ring };
            let x = half::f16::from_bits(ring_buf[s.ring_index(ring, t, h) + d]).to_f32();
            (x, 0, 0.0, 0.0)
        }
    }
}

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
        s.validate()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kivi_round_trip_is_within_half_a_step_plus_f16() {
        let f = GroupFormat::kivi(2, 4, 8);
        let x = [0.3f32, -1.25, 2.0, 0.9];
        let (codes, s, z) = f.encode(&x);
        for (&c, &v) in codes.iter().zip(&x) {
            assert!(c <= 3);
            let err = (f.decode(c, s, z) - v).abs();
            // zero is the min rounded to f16 (at most half an f16 ulp off), so the bound is half a step
            // plus that rounding and the scale's.
            assert!(
                err <= s / 2.0 + 2.0 * 2f32.powi(-10) * 2.0 + 1e-6,
                "{v} -> {c}: {err} vs step {s}"
            );
        }
        // The min codes to 0 and the max to the top code.
        assert_eq!(codes[1], 0);
        assert_eq!(codes[2], 3);
    }

    #[test]
    fn jobs_follow_the_rules() {
        let kivi = GroupFormat::kivi(4, 2, 4);
        // Tokens 0..=2: nothing; token 3 completes R = 4: two K groups.
        assert!(kivi.step_jobs(0, 2, |i| i).is_empty());
        assert_eq!(
            kivi.step_jobs(0, 3, |i| i),
            vec![[job::K_CHANNEL, 0, 0, 0], [job::K_CHANNEL, 0, 2, 1]]
        );
        // Token 4: V's token 0 leaves the residual.
        assert_eq!(kivi.step_jobs(1, 4, |i| 10 + i), vec![[job::V_TOKEN, 1, 0, 10]]);
        assert_eq!(kivi.quantised(7), (4, 3));
        let ch = GroupFormat::int8_channel(4);
        assert_eq!(
            ch.step_jobs(0, 7, |i| i),
            vec![[job::K_CHANNEL, 0, 4, 1], [job::V_CHANNEL, 0, 4, 1]]
        );
        assert_eq!(ch.quantised(7), (4, 4));
    }
}
