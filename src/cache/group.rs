//! The cache quantised in **groups**: the second kind of KV cache, for the formats whose quantisation
//! waits until a group is complete (INT8 per channel, KIVI). A [`super::Pool`] holds one dtype for
//! every slot, each row encoded as it is written; here a row's codes depend on rows written after it,
//! so the cache is its own type: code pools in blocks of G tokens with their scales and zero points,
//! and an f16 ring of R + 1 rows per request ([`GroupCache`]), under a rule ([`GroupFormat`]) that
//! says which groups a step completes ([`GroupFormat::step_jobs`]) and how a group is encoded
//! ([`GroupFormat::encode`], the scalar encoder every backend's codes are compared with, code for
//! code). The kernels that run the rule are `compute::ops::group_append` and `group_decode`.

use super::dtype::quant::{f16_ceil, int8_decode, int8_encode};

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
    pub fn validate(&self) -> Result<(), String> {
        if !matches!(self.bits, 2 | 4 | 8) || (self.symmetric && self.bits != 8) {
            return Err(format!(
                "group quantisation takes 2, 4 or 8 bits (symmetric: 8), not {} bits{}",
                self.bits,
                if self.symmetric { " symmetric" } else { "" }
            ));
        }
        if self.group == 0 || self.residual == 0 || !self.residual.is_multiple_of(self.group) {
            return Err(format!(
                "a group G ≥ 1 and a residual R that is a multiple of G, not G {} and R {}",
                self.group, self.residual
            ));
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
    pub fn validate(&self, max_head_dim: usize) -> Result<(), String> {
        self.fmt.validate()?;
        if self.kv_heads == 0 || self.head_dim == 0 || self.head_dim > max_head_dim {
            return Err(format!(
                "a group-quantised cache takes 1 ≤ head_dim ≤ {max_head_dim} and KV heads ≥ 1, not {} and {}",
                self.head_dim, self.kv_heads
            ));
        }
        if !(self.head_dim * self.fmt.bits as usize).is_multiple_of(32) {
            return Err(format!(
                "a row of codes must be whole 32-bit words (head_dim · bits a multiple of 32): {} · {} is not",
                self.head_dim, self.fmt.bits
            ));
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
