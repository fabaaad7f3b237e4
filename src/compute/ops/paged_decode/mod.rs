//! `Backend::paged_decode`: one query token per request, reading K/V (of the pools' dtype) through the block tables
//! (vLLM's PagedAttention). The input, the block-table layout the kernels read, validation, suite cases
//! the "paged equals contiguous" check and the probe.

pub(crate) mod cpu;
#[allow(unsafe_code)]
pub(crate) mod cuda;
pub mod launch;
pub mod reference;
#[allow(unsafe_code)]
pub(crate) mod sim;
pub(crate) mod wgpu;

use crate::cache::{PagedKvCache, PagedShape, PoolRef, RequestId, kv_bytes_per_token};
use crate::compute::{Backend, BackendError, CheckReport, Limits, MAX_HEAD_DIM, OpInput, Tolerance, check, invalid};
use crate::math::Rng;

/// A paged cache's block tables laid out for the decode kernels: `[R, max_blocks]` i32 padded with
/// −1, and the context lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeTables {
    /// `[R, max_blocks]` physical block ids.
    pub tables: Vec<i32>,
    /// Columns of `tables`.
    pub max_blocks: usize,
    /// Tokens of each request.
    pub context_lens: Vec<i32>,
}

impl DecodeTables {
    /// The tables of `reqs`, in that order.
    pub fn new(cache: &PagedKvCache, reqs: &[RequestId]) -> Self {
        let (tables, max_blocks, context_lens) = cache.block_table_matrix(reqs);
        Self {
            tables,
            max_blocks,
            context_lens,
        }
    }

    /// A decode problem over `cache` with queries `q` (`[R, n_heads, hd]`).
    pub fn input<'a>(&'a self, cache: &'a PagedKvCache, q: &'a [f32], n_heads: usize) -> PagedDecodeInput<'a> {
        PagedDecodeInput {
            q,
            n_heads,
            shape: cache.shape(),
            k_pool: cache.k_pool.view(),
            v_pool: cache.v_pool.view(),
            block_tables: &self.tables,
            max_blocks: self.max_blocks,
            context_lens: &self.context_lens,
        }
    }
}

/// Inputs of paged decode attention: one query token per request.
#[derive(Debug, Clone, Copy)]
pub struct PagedDecodeInput<'a> {
    /// Queries `[R, H, hd]`.
    pub q: &'a [f32],
    /// Query heads H.
    pub n_heads: usize,
    /// Pool shape (num_blocks, block_size, KVH, hd).
    pub shape: PagedShape,
    /// K pool `[num_blocks, KVH, block_size, hd]`.
    pub k_pool: PoolRef<'a>,
    /// V pool, same shape.
    pub v_pool: PoolRef<'a>,
    /// `[R, max_blocks]` physical block ids, −1 padded.
    pub block_tables: &'a [i32],
    /// Columns of `block_tables`.
    pub max_blocks: usize,
    /// Tokens of each request `[R]`.
    pub context_lens: &'a [i32],
}

impl PagedDecodeInput<'_> {
    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.context_lens.len()
    }

    /// The longest context (what sets the split-context kernels' partition count).
    pub fn max_context(&self) -> usize {
        self.context_lens.iter().copied().max().unwrap_or(0).max(0) as usize
    }

    /// K and V bytes one decode step reads (every token of every request, f16).
    pub fn kv_bytes(&self) -> usize {
        let tokens: usize = self.context_lens.iter().map(|&l| l.max(0) as usize).sum();
        tokens
            * kv_bytes_per_token(
                1,
                self.shape.kv_heads as u64,
                self.shape.head_dim as u64,
                self.shape.dtype,
            ) as usize
    }

    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        let s = self.shape;
        let r = self.requests();
        if s.kv_heads == 0 || self.n_heads == 0 || !self.n_heads.is_multiple_of(s.kv_heads) {
            return Err(invalid(format!(
                "kv-heads ({}) must divide heads ({})",
                s.kv_heads, self.n_heads
            )));
        }
        if s.head_dim == 0 || s.head_dim > MAX_HEAD_DIM || s.block_size == 0 || s.num_blocks == 0 {
            return Err(invalid(format!(
                "head_dim must be 1..={MAX_HEAD_DIM}; block_size and num_blocks must be positive"
            )));
        }
        if self.q.len() != r * self.n_heads * s.head_dim {
            return Err(invalid(format!(
                "q has {} values, expected R·H·hd = {}",
                self.q.len(),
                r * self.n_heads * s.head_dim
            )));
        }
        crate::compute::check_pools(s, [self.k_pool, self.v_pool])?;
        if self.block_tables.len() != r * self.max_blocks || self.max_blocks == 0 {
            return Err(invalid("block_tables must be [R, max_blocks] with max_blocks >= 1"));
        }
        for (i, &len) in self.context_lens.iter().enumerate() {
            let len = usize::try_from(len).map_err(|_| invalid(format!("context_lens[{i}] is negative")))?;
            let need = len.div_ceil(s.block_size);
            if need > self.max_blocks {
                return Err(invalid(format!(
                    "request {i}: {len} tokens need {need} blocks, the table has {}",
                    self.max_blocks
                )));
            }
            for (j, &b) in self.block_tables[i * self.max_blocks..][..need].iter().enumerate() {
                if b < 0 || b as usize >= s.num_blocks {
                    return Err(invalid(format!(
                        "block_tables[{i}][{j}] = {b} is not a block of the pool (0..{})",
                        s.num_blocks
                    )));
                }
            }
        }
        Ok(())
    }
}

impl OpInput for PagedDecodeInput<'_> {
    fn validate_for(&self, _limits: &Limits) -> Result<(), BackendError> {
        self.validate()
    }
    fn nothing_to_do(&self) -> bool {
        self.requests() == 0
    }
}

/// Suite cases: (block_size, H, KVH, hd, context lengths); empty requests, block size 1 and several
/// partitions of the split-context kernel included.
fn cases() -> Vec<(usize, usize, usize, usize, Vec<usize>)> {
    vec![
        (1, 1, 1, 1, vec![1]),
        (4, 4, 2, 8, vec![1, 9, 0]),
        (16, 6, 3, 3, vec![5, 17]),
        (64, 8, 1, 16, vec![3]),
        (3, 2, 2, 32, vec![40, 7, 1]),
        (16, 8, 2, 64, vec![600, 1]),
        (7, 4, 4, 128, vec![1100, 513, 512]),
        // head_dim a multiple of 8 but not 16 (the CPU tiles scores but not P·V), group 4, ragged.
        (16, 8, 2, 40, vec![33, 16, 2]),
    ]
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

/// Suite case `i` (seeded): a scattered cache, its block tables, the queries and the query heads.
fn case(i: usize, seed: u64) -> (PagedKvCache, DecodeTables, Vec<f32>, usize) {
    let (bs, h, kvh, hd, lens) = cases()[i].clone();
    let mut rng = Rng::stream(seed, 200 + i as u64);
    let blocks: usize = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() * 2 + 2;
    let shape = PagedShape {
        num_blocks: blocks,
        block_size: bs,
        kv_heads: kvh,
        head_dim: hd,
        dtype: crate::cache::KvDtype::F16,
    };
    let cache = scattered_cache(shape, &lens, &mut rng);
    let reqs: Vec<u32> = (0..lens.len() as u32).collect();
    let dt = DecodeTables::new(&cache, &reqs);
    let q = rng.normal_vec(lens.len() * h * hd, 1.0);
    (cache, dt, q, h)
}

/// Paged decode of `b` on every case, against the reference.
pub fn suite(b: &dyn Backend, seed: u64, out: &mut Vec<CheckReport>) {
    for (i, (bs, h, kvh, hd, lens)) in cases().into_iter().enumerate() {
        let (cache, dt, q, _) = case(i, seed);
        let inp = dt.input(&cache, &q, h);
        let tag = format!("paged_decode bs{bs} H{h}/{kvh} hd{hd} ctx{lens:?}");
        match paged_equals_contiguous(b, &inp) {
            Ok(mut report) => {
                report.label = tag;
                out.push(report);
            }
            Err(e) => out.push(CheckReport::failed(&tag, e)),
        }
    }
}

/// Paged decode output compared with contiguous attention over the same tokens (the f64 reference
/// gathers each request's K/V through its table, then runs plain decode attention). The suite, the
/// lessons, `kvscope export` and the benchmarks all check paged decode with this.
pub fn paged_equals_contiguous(b: &dyn Backend, inp: &PagedDecodeInput) -> Result<CheckReport, BackendError> {
    decode_and_check(b, inp).map(|(_, report)| report)
}

/// Run paged decode on `b` and check it as [`paged_equals_contiguous`] does: the output `[R, H, hd]`
/// and its report.
pub fn decode_and_check(b: &dyn Backend, inp: &PagedDecodeInput) -> Result<(Vec<f32>, CheckReport), BackendError> {
    let got = b.paged_decode(inp)?;
    let want = reference::paged_decode(inp);
    let report = check(
        "paged == contiguous",
        &[inp.requests(), inp.n_heads, inp.shape.head_dim],
        &got,
        &want,
        Tolerance::F32,
    );
    Ok((got, report))
}

/// Twins agree within the checker's f32 tolerance.
pub const TWIN_TOLERANCE: Tolerance = Tolerance::F32;

/// The output of three suite cases: block size 1, an empty request, GQA and MQA.
pub fn probe(b: &dyn Backend, seed: u64) -> Result<Vec<f64>, BackendError> {
    let mut out = Vec::new();
    for i in [1, 2, 4] {
        let (cache, dt, q, h) = case(i, seed);
        out.extend(b.paged_decode(&dt.input(&cache, &q, h))?.iter().map(|&x| f64::from(x)));
    }
    Ok(out)
}
