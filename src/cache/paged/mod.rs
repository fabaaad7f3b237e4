//! The paged KV cache of vLLM's PagedAttention, as the source notes describe it.
//!
//! How it works: K and V live in two pools of fixed-size blocks, `[num_blocks, kv_heads, block_size,
//! head_dim]` in f16. A [`BlockAllocator`] keeps the free list. Each request owns a block table: entry
//! `i` is the physical block holding its logical block `i`, so token `pos` lives in physical block
//! `table[pos / block_size]` at offset `pos % block_size`. A request grabs a new block only when its last
//! one is full, so at most `block_size - 1` slots per request are wasted (internal fragmentation),
//! instead of `max_seq_len - len` for a static reservation. Freeing a request returns all its blocks.

use std::collections::{BTreeMap, BTreeSet};

use super::dtype::{KvDtype, PoolGeometry, ScaleLayout};
use super::pool::{Pool, PoolMut};

pub use super::request::RequestId;

/// The pool is exhausted: the typed error the lessons turn into an OOM state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("out of KV blocks (OOM): needed {needed} more block(s), {free} free of {total}")]
pub struct OutOfBlocks {
    /// Blocks the operation needed.
    pub needed: usize,
    /// Blocks free at the time.
    pub free: usize,
    /// Blocks in the pool.
    pub total: usize,
}

/// Errors of the paged cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PagedError {
    /// No free block.
    #[error(transparent)]
    Oom(#[from] OutOfBlocks),
    /// A write that would leave a hole in a request's tokens.
    #[error("request {request}: position {pos} skips ahead of its length {len} (tokens are appended in order)")]
    Hole {
        /// The request.
        request: RequestId,
        /// The position written.
        pos: usize,
        /// The request's length.
        len: usize,
    },
    /// Unknown request.
    #[error("request {0} has no block table")]
    UnknownRequest(RequestId),
    /// Wrong input length.
    #[error("expected {expected} values (kv_heads × head_dim), got {got}")]
    BadInput {
        /// Expected.
        expected: usize,
        /// Got.
        got: usize,
    },
    /// A request id that already has a block table.
    #[error("request {0} already has a block table")]
    AlreadyAdmitted(RequestId),
    /// A block freed twice or out of range.
    #[error("block {0} is not an allocated block of this pool")]
    BadFree(u32),
    /// A block that cannot be dropped from a table: the last one, one already dropped, or one of a
    /// request whose blocks are hashed for prefix caching.
    #[error("request {request}: logical block {block} cannot be dropped ({why})")]
    CannotDrop {
        /// The request.
        request: RequestId,
        /// The logical block.
        block: usize,
        /// Why.
        why: &'static str,
    },
    /// Sharing (fork, copy-on-write appends) of a request some of whose blocks were dropped.
    #[error("request {0} has dropped blocks: it cannot be forked or appended token by token")]
    Gapped(RequestId),
}

/// A free list of physical block ids. `allocate` pops from the end, as the source notes' Python list
/// does, so a fresh pool hands out the highest ids first.
#[derive(Debug, Clone)]
pub struct BlockAllocator {
    free: Vec<u32>,
    is_free: Vec<bool>,
}

impl BlockAllocator {
    /// A pool of `num_blocks`, all free.
    pub fn new(num_blocks: usize) -> Self {
        Self {
            free: (0..num_blocks as u32).collect(),
            is_free: vec![true; num_blocks],
        }
    }

    /// Total blocks.
    pub fn total(&self) -> usize {
        self.is_free.len()
    }

    /// Free blocks.
    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    /// The free list, in the order blocks will be handed out last-to-first.
    pub fn free_list(&self) -> &[u32] {
        &self.free
    }

    /// Take one block.
    pub fn allocate(&mut self) -> Result<u32, OutOfBlocks> {
        let id = self.free.pop().ok_or(OutOfBlocks {
            needed: 1,
            free: 0,
            total: self.total(),
        })?;
        self.is_free[id as usize] = false;
        Ok(id)
    }

    /// Return a block.
    pub fn free(&mut self, id: u32) -> Result<(), PagedError> {
        match self.is_free.get_mut(id as usize) {
            Some(f) if !*f => {
                *f = true;
                self.free.push(id);
                Ok(())
            }
            _ => Err(PagedError::BadFree(id)),
        }
    }
}

/// The shape of a paged pool, its dtype included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PagedShape {
    /// Physical blocks in the pool.
    pub num_blocks: usize,
    /// Tokens per block.
    pub block_size: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Values per head.
    pub head_dim: usize,
    /// What the pools store (f16 when a file does not say).
    #[serde(default)]
    pub dtype: KvDtype,
}

impl PagedShape {
    /// The geometry the dtype's scale layout sizes its scales by.
    pub fn geometry(&self) -> PoolGeometry {
        PoolGeometry {
            blocks: self.num_blocks,
            heads: self.kv_heads,
            block_size: self.block_size,
            row: self.head_dim,
        }
    }

    /// Scales in one of the K or V pools.
    pub fn num_scales(&self) -> usize {
        self.dtype.format().scales.count(self.geometry())
    }

    /// The scales of the row `(block, head, offset)`.
    pub fn row_scales(&self, block: usize, h: usize, offset: usize) -> std::ops::Range<usize> {
        self.dtype.format().scales.row(self.geometry(), block, h, offset)
    }

    /// An empty pool of this shape: `numel` values of the dtype and its scales.
    pub fn pool(&self) -> Pool {
        Pool::new(self.dtype, self.numel(), self.num_scales())
    }

    /// Elements in one of the K or V pools.
    pub fn numel(&self) -> usize {
        self.num_blocks * self.kv_heads * self.block_size * self.head_dim
    }

    /// Flat index of `(block, head, offset, d)`.
    pub fn index(&self, block: usize, h: usize, offset: usize, d: usize) -> usize {
        ((block * self.kv_heads + h) * self.block_size + offset) * self.head_dim + d
    }

    /// Blocks needed for `tokens` tokens.
    pub fn blocks_for(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.block_size)
    }
}

/// Memory accounting of the paged cache, next to what a static reservation would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PagedStats {
    /// Requests with a block table.
    pub requests: usize,
    /// Blocks in the pool.
    pub total_blocks: usize,
    /// Blocks owned by some request.
    pub blocks_used: usize,
    /// Blocks on the free list.
    pub blocks_free: usize,
    /// Tokens stored.
    pub tokens_stored: usize,
    /// Slots in allocated blocks (`blocks_used × block_size`).
    pub slots_allocated: usize,
    /// Empty slots in the last block of each request.
    pub internal_fragmentation: usize,
    /// Token slots a static cache would reserve for the same requests (`requests × max_seq_len`).
    pub static_slots: usize,
}

/// The paged KV cache: pools, allocator and block tables.
#[derive(Debug, Clone)]
pub struct PagedKvCache {
    shape: PagedShape,
    /// K pool `[num_blocks, kv_heads, block_size, head_dim]` (on 2 MiB pages when large: [`Pool`]).
    pub k_pool: Pool,
    /// V pool, same shape.
    pub v_pool: Pool,
    pub(super) allocator: BlockAllocator,
    pub(super) tables: BTreeMap<RequestId, Vec<u32>>,
    pub(super) lens: BTreeMap<RequestId, usize>,
    /// Table entries pointing at each block: 1 for a private block, more when requests share it.
    pub(super) refs: Vec<u32>,
    /// Logical blocks each request dropped (token eviction: StreamingLLM's window, H2O): full blocks,
    /// never the last, whose tokens no longer take part in attention. The table skips them.
    pub(super) gaps: BTreeMap<RequestId, BTreeSet<usize>>,
    /// Prefix caching: hashes of full blocks, the evictor, token ids (see `prefix.rs`).
    pub(super) prefix: super::prefix_state::PrefixState,
}

impl PagedKvCache {
    /// An empty cache with every block free. Sizes must be positive.
    pub fn new(shape: PagedShape) -> Self {
        Self {
            shape,
            k_pool: shape.pool(),
            v_pool: shape.pool(),
            allocator: BlockAllocator::new(shape.num_blocks),
            tables: BTreeMap::new(),
            lens: BTreeMap::new(),
            refs: vec![0; shape.num_blocks],
            gaps: BTreeMap::new(),
            prefix: super::prefix_state::PrefixState::new(shape.num_blocks),
        }
    }

    /// The shape.
    pub fn shape(&self) -> PagedShape {
        self.shape
    }

    /// The allocator (read-only).
    pub fn allocator(&self) -> &BlockAllocator {
        &self.allocator
    }

    /// Every request's block table.
    pub fn tables(&self) -> &BTreeMap<RequestId, Vec<u32>> {
        &self.tables
    }

    /// One request's block table.
    pub fn table(&self, req: RequestId) -> Option<&[u32]> {
        self.tables.get(&req).map(Vec::as_slice)
    }

    /// Tokens stored for `req` (0 if unknown).
    pub fn len(&self, req: RequestId) -> usize {
        self.lens.get(&req).copied().unwrap_or(0)
    }

    /// Whether no request holds tokens.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Blocks `req` needs beyond what it has to hold `tokens` tokens.
    pub fn blocks_needed(&self, req: RequestId, tokens: usize) -> usize {
        let have = self.tables.get(&req).map_or(0, Vec::len) + self.dropped_blocks(req);
        self.shape.blocks_for(tokens).saturating_sub(have)
    }

    /// Logical blocks `req` dropped.
    pub fn dropped(&self, req: RequestId) -> impl Iterator<Item = usize> + '_ {
        self.gaps.get(&req).into_iter().flatten().copied()
    }

    /// How many logical blocks `req` dropped.
    pub fn dropped_blocks(&self, req: RequestId) -> usize {
        self.gaps.get(&req).map_or(0, BTreeSet::len)
    }

    /// Tokens of `req` still in its table (its length less the dropped blocks' tokens): what a decode
    /// attends to.
    pub fn live_len(&self, req: RequestId) -> usize {
        self.len(req) - self.dropped_blocks(req) * self.shape.block_size
    }

    /// Drop logical block `block` of `req` from its table: the block loses the request's reference (and
    /// goes back to the free list when nobody else holds it), and its tokens no longer take part in
    /// attention. Only a full block that is not the last, of a request without prefix-caching hashes
    /// (token eviction runs on private blocks here).
    pub fn drop_block(&mut self, req: RequestId, block: usize) -> Result<u32, PagedError> {
        let why = |why| PagedError::CannotDrop {
            request: req,
            block,
            why,
        };
        let len = self.len(req);
        if !self.tables.contains_key(&req) {
            return Err(PagedError::UnknownRequest(req));
        }
        if self.prefix.tokens.contains_key(&req) {
            return Err(why("its blocks are hashed for prefix caching"));
        }
        if (block + 1) * self.shape.block_size >= len {
            return Err(why("only full blocks before the last can be dropped"));
        }
        let gaps = self.gaps.entry(req).or_default();
        if !gaps.insert(block) {
            return Err(why("it was dropped already"));
        }
        let index = block - gaps.range(..block).count();
        let b = self.tables.get_mut(&req).expect("known").remove(index);
        let now = self.prefix.tick();
        self.release_block(b, now)?;
        Ok(b)
    }

    /// Make sure `req` has blocks for `tokens` tokens. All or nothing: on OOM nothing is allocated.
    pub(super) fn ensure_capacity(&mut self, req: RequestId, tokens: usize) -> Result<(), OutOfBlocks> {
        let needed = self.blocks_needed(req, tokens);
        self.check_available(needed)?;
        self.tables.entry(req).or_default();
        self.lens.entry(req).or_insert(0);
        for _ in 0..needed {
            let b = self.take_block()?;
            self.tables.get_mut(&req).expect("just made").push(b);
        }
        Ok(())
    }

    /// Blocks that can be handed out: the free list, then cached blocks nobody uses (evicted on demand).
    pub fn num_available(&self) -> usize {
        self.allocator.num_free() + self.prefix.evictable()
    }

    /// `Ok` when `needed` blocks can be handed out, the typed OOM otherwise.
    pub(super) fn check_available(&self, needed: usize) -> Result<(), OutOfBlocks> {
        if needed > self.num_available() {
            return Err(OutOfBlocks {
                needed,
                free: self.num_available(),
                total: self.allocator.total(),
            });
        }
        Ok(())
    }

    /// One block for a table (count 1): from the free list, else by evicting the least recently used
    /// cached block nobody uses (its hash is forgotten).
    pub(super) fn take_block(&mut self) -> Result<u32, OutOfBlocks> {
        let b = match self.allocator.allocate() {
            Ok(b) => b,
            Err(oom) => self.prefix.evict_lru().ok_or(oom)?,
        };
        self.refs[b as usize] = 1;
        Ok(b)
    }

    /// Drop one table entry's reference to `b` at access time `now`: at 0 a cached block goes to the
    /// evictor (it keeps its K/V and hash until reused or evicted), any other block back on the free list.
    pub(super) fn release_block(&mut self, b: u32, now: u64) -> Result<(), PagedError> {
        let r = self.refs.get_mut(b as usize).ok_or(PagedError::BadFree(b))?;
        if *r == 0 {
            return Err(PagedError::BadFree(b));
        }
        *r -= 1;
        if *r == 0 {
            if self.prefix.is_cached(b) {
                self.prefix.park(b, now);
            } else {
                self.allocator.free(b)?;
            }
        }
        Ok(())
    }

    /// Physical slot (`block × block_size + offset`) of token `pos` of `req`, if it has a block (none
    /// for a token of a dropped block).
    pub fn slot(&self, req: RequestId, pos: usize) -> Option<usize> {
        let lb = pos / self.shape.block_size;
        let index = match self.gaps.get(&req) {
            Some(g) if g.contains(&lb) => return None,
            Some(g) => lb - g.range(..lb).count(),
            None => lb,
        };
        let b = *self.tables.get(&req)?.get(index)?;
        Some(b as usize * self.shape.block_size + pos % self.shape.block_size)
    }

    /// Cut `req` back to its first `len` tokens (speculative decoding's rejected drafts): the slots past
    /// `len` are forgotten and blocks left without a token go back. Not for requests whose blocks are
    /// hashed for prefix caching.
    pub fn truncate(&mut self, req: RequestId, len: usize) -> Result<Vec<u32>, PagedError> {
        if !self.tables.contains_key(&req) {
            return Err(PagedError::UnknownRequest(req));
        }
        if self.prefix.tokens.contains_key(&req) {
            return Err(PagedError::CannotDrop {
                request: req,
                block: len / self.shape.block_size,
                why: "its blocks are hashed for prefix caching",
            });
        }
        let len = len.min(self.len(req));
        let bs = self.shape.block_size;
        if let Some(lb) = self.dropped(req).find(|&lb| (lb + 1) * bs >= len) {
            return Err(PagedError::CannotDrop {
                request: req,
                block: lb,
                why: "the cut would end inside or before a dropped block",
            });
        }
        let keep_blocks = self.shape.blocks_for(len).saturating_sub(self.dropped_blocks(req));
        let now = self.prefix.tick();
        let table = self.tables.get_mut(&req).expect("known");
        let freed: Vec<u32> = table.split_off(keep_blocks.min(table.len()));
        for &b in &freed {
            self.release_block(b, now)?;
        }
        self.lens.insert(req, len);
        Ok(freed)
    }

    /// Reserve the next `n` positions of `req` (allocating blocks as needed) and return their slot
    /// mapping, the input of the backends' `paged_append` (vLLM's `reshape_and_cache`).
    pub fn append_slots(&mut self, req: RequestId, n: usize) -> Result<Vec<i32>, OutOfBlocks> {
        let start = self.len(req);
        self.ensure_capacity(req, start + n)?;
        self.lens.insert(req, start + n);
        Ok((start..start + n)
            .map(|p| self.slot(req, p).expect("capacity ensured") as i32)
            .collect())
    }

    /// Write one token's K and V (`[kv_heads, head_dim]` each) at `pos` (≤ current length).
    pub fn append(&mut self, req: RequestId, pos: usize, k: &[f32], v: &[f32]) -> Result<(), PagedError> {
        let s = self.shape;
        let expected = s.kv_heads * s.head_dim;
        for got in [k.len(), v.len()] {
            if got != expected {
                return Err(PagedError::BadInput { expected, got });
            }
        }
        let len = self.len(req);
        if pos > len {
            return Err(PagedError::Hole { request: req, pos, len });
        }
        self.ensure_capacity(req, pos + 1)?;
        let slot = self.slot(req, pos).expect("capacity ensured");
        let (block, off) = (slot / s.block_size, slot % s.block_size);
        for h in 0..s.kv_heads {
            let src = h * s.head_dim..(h + 1) * s.head_dim;
            write_row(&mut self.k_pool, s, (block, h, off), &k[src.clone()]);
            write_row(&mut self.v_pool, s, (block, h, off), &v[src]);
        }
        self.lens.insert(req, len.max(pos + 1));
        Ok(())
    }

    /// Drop `req`'s table: each of its blocks loses one reference, and a block nobody else uses goes
    /// back on the free list (or to the evictor when it is cached). Returns the table, in the order the
    /// blocks were released.
    pub fn free_request(&mut self, req: RequestId) -> Result<Vec<u32>, PagedError> {
        let table = self.tables.remove(&req).ok_or(PagedError::UnknownRequest(req))?;
        self.lens.remove(&req);
        self.gaps.remove(&req);
        self.prefix.tokens.remove(&req);
        let now = self.prefix.tick();
        for &b in &table {
            self.release_block(b, now)?;
        }
        Ok(table)
    }

    /// How many table entries point at block `b`.
    pub fn ref_count(&self, b: u32) -> u32 {
        self.refs.get(b as usize).copied().unwrap_or(0)
    }

    /// Copy `req`'s K and V into contiguous `[kv_heads, len, head_dim]` f32 tensors: a debugging aid
    /// (the cache's round-trip test uses it). The decode kernels never gather: they read through the
    /// block table. Only the f64 reference (`compute::reference::paged_decode`) gathers, into its own
    /// f64 copy, from the raw pools.
    pub fn gather(&self, req: RequestId) -> Result<(Vec<f32>, Vec<f32>), PagedError> {
        let s = self.shape;
        if !self.tables.contains_key(&req) {
            return Err(PagedError::UnknownRequest(req));
        }
        let len = self.len(req);
        let mut k = vec![0f32; s.kv_heads * len * s.head_dim];
        let mut v = vec![0f32; k.len()];
        for h in 0..s.kv_heads {
            for pos in 0..len {
                let Some(slot) = self.slot(req, pos) else {
                    continue; // a dropped block's tokens read as 0
                };
                let (block, off) = (slot / s.block_size, slot % s.block_size);
                let dst = (h * len + pos) * s.head_dim..(h * len + pos + 1) * s.head_dim;
                read_row(&self.k_pool, s, (block, h, off), &mut k[dst.clone()]);
                read_row(&self.v_pool, s, (block, h, off), &mut v[dst]);
            }
        }
        Ok((k, v))
    }

    /// Block tables of `reqs` as a `[R, max_blocks]` i32 matrix padded with −1, plus `max_blocks`
    /// (at least 1) and the context lengths.
    pub fn block_table_matrix(&self, reqs: &[RequestId]) -> (Vec<i32>, usize, Vec<i32>) {
        let max_blocks = reqs
            .iter()
            .map(|r| self.tables.get(r).map_or(0, Vec::len))
            .max()
            .unwrap_or(0)
            .max(1);
        let mut m = vec![-1i32; reqs.len() * max_blocks];
        for (i, r) in reqs.iter().enumerate() {
            for (j, &b) in self.tables.get(r).into_iter().flatten().enumerate() {
                m[i * max_blocks + j] = b as i32;
            }
        }
        let lens = reqs.iter().map(|&r| self.live_len(r) as i32).collect();
        (m, max_blocks, lens)
    }

    /// Accounting, with a static reservation of `max_seq_len` per request for comparison.
    pub fn stats(&self, max_seq_len: usize) -> PagedStats {
        let blocks_used = self.refs.iter().filter(|&&r| r > 0).count();
        let tokens_stored: usize = self.lens.keys().map(|&r| self.live_len(r)).sum();
        let table_slots: usize = self.tables.values().map(Vec::len).sum::<usize>() * self.shape.block_size;
        PagedStats {
            requests: self.tables.len(),
            total_blocks: self.allocator.total(),
            blocks_used,
            blocks_free: self.allocator.num_free(),
            tokens_stored,
            slots_allocated: blocks_used * self.shape.block_size,
            internal_fragmentation: table_slots - tokens_stored,
            static_slots: self.tables.len() * max_seq_len,
        }
    }

    /// Check the allocator invariants: each block's count equals the table entries pointing at it; a
    /// block is in exactly one of the free list, the evictor or use; the free list has no duplicates;
    /// no table points at a free or evictable block; each table has exactly the blocks its length
    /// needs; free + evictable + used = total; and every cached block's tokens match its hash chain.
    pub fn check_invariants(&self) -> Result<(), String> {
        let total = self.allocator.total();
        let mut count = vec![0u32; total];
        for (&req, table) in &self.tables {
            for &b in table {
                *count
                    .get_mut(b as usize)
                    .ok_or(format!("request {req} holds block {b}, outside the pool"))? += 1;
            }
            let need = self.shape.blocks_for(self.len(req)) - self.dropped_blocks(req);
            if table.len() != need {
                return Err(format!(
                    "request {req} holds {} blocks for {} tokens (needs {need})",
                    table.len(),
                    self.len(req)
                ));
            }
        }
        for (b, (&c, &r)) in count.iter().zip(&self.refs).enumerate() {
            if c != r {
                return Err(format!("block {b} has count {r} but {c} table entries point at it"));
            }
        }
        let mut seen = vec![false; total];
        for &b in self.allocator.free_list() {
            let i = b as usize;
            if i >= total || seen[i] {
                return Err(format!("block {b} is on the free list twice or is out of range"));
            }
            seen[i] = true;
            if count[i] > 0 {
                return Err(format!("block {b} is free and also in a block table"));
            }
            if !self.allocator.is_free[i] {
                return Err(format!("block {b} is on the free list but marked used"));
            }
            if self.prefix.is_cached(b) {
                return Err(format!("block {b} is on the free list and still cached"));
            }
        }
        for b in self.prefix.evictor_blocks() {
            let i = b as usize;
            if i >= total || seen[i] {
                return Err(format!("block {b} is in the evictor and on the free list (or twice)"));
            }
            seen[i] = true;
            if count[i] > 0 {
                return Err(format!("block {b} is in the evictor and also in a block table"));
            }
        }
        let used = count.iter().filter(|&&c| c > 0).count();
        let (free, evictable) = (self.allocator.num_free(), self.prefix.evictable());
        if used + free + evictable != total {
            return Err(format!(
                "free ({free}) + evictable ({evictable}) + used ({used}) != total ({total})"
            ));
        }
        self.check_prefix()
    }
}

/// Copy block `src` of `pool` over block `dst`: its bytes and, where the dtype keeps scales per block
/// (per token, per channel, per group), the block's scales (scales per head or per pool are shared).
pub fn copy_block(pool: PoolMut, s: PagedShape, src: usize, dst: usize) {
    let f = s.dtype.format();
    let per = s.kv_heads * s.block_size * s.head_dim;
    let bytes = |b: usize| f.bytes_for(b * per)..f.bytes_for((b + 1) * per);
    let (from, to) = (bytes(src), bytes(dst));
    pool.bytes.copy_within(from, to.start);
    let scales = s.num_scales();
    if matches!(f.scales, ScaleLayout::PerToken { .. }) {
        let per = scales / s.num_blocks.max(1);
        pool.scales.copy_within(src * per..(src + 1) * per, dst * per);
    }
}

/// Write the row `(block, head, offset)` of `pool` through its dtype.
pub fn write_row(pool: &mut Pool, s: PagedShape, (block, h, off): (usize, usize, usize), src: &[f32]) {
    let f = s.dtype.format();
    let start = s.index(block, h, off, 0);
    let (a, b) = (f.bytes_for(start), f.bytes_for(start + s.head_dim));
    let scales = s.row_scales(block, h, off);
    let view = pool.view_mut();
    (f.write)(src, &mut view.bytes[a..b], &mut view.scales[scales]);
}

/// Read the row `(block, head, offset)` of `pool` as f32 through its dtype.
pub fn read_row(pool: &Pool, s: PagedShape, (block, h, off): (usize, usize, usize), dst: &mut [f32]) {
    let view = pool.view();
    view.read(
        s.index(block, h, off, 0),
        s.head_dim,
        &view.scales[s.row_scales(block, h, off)],
        dst,
    );
}

#[cfg(test)]
mod tests;
