//! The paged KV cache of vLLM's PagedAttention, as the source notes describe it.
//!
//! How it works: K and V live in two pools of fixed-size blocks, `[num_blocks, kv_heads, block_size,
//! head_dim]` in f16. A [`BlockAllocator`] keeps the free list. Each request owns a block table: entry
//! `i` is the physical block holding its logical block `i`, so token `pos` lives in physical block
//! `table[pos / block_size]` at offset `pos % block_size`. A request grabs a new block only when its last
//! one is full, so at most `block_size - 1` slots per request are wasted (internal fragmentation),
//! instead of `max_seq_len - len` for a static reservation. Freeing a request returns all its blocks.

use std::collections::BTreeMap;

use super::pool::Pool;
use half::f16;

/// A request's id.
pub type RequestId = u32;

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

/// The shape of a paged pool.
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
}

impl PagedShape {
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
    /// Prefix caching: hashes of full blocks, the evictor, token ids (see `prefix.rs`).
    pub(super) prefix: super::prefix::PrefixState,
}

impl PagedKvCache {
    /// An empty cache with every block free. Sizes must be positive.
    pub fn new(shape: PagedShape) -> Self {
        let n = shape.numel();
        Self {
            shape,
            k_pool: Pool::zeroed(n),
            v_pool: Pool::zeroed(n),
            allocator: BlockAllocator::new(shape.num_blocks),
            tables: BTreeMap::new(),
            lens: BTreeMap::new(),
            refs: vec![0; shape.num_blocks],
            prefix: super::prefix::PrefixState::new(shape.num_blocks),
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
        let have = self.tables.get(&req).map_or(0, Vec::len);
        self.shape.blocks_for(tokens).saturating_sub(have)
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

    /// Physical slot (`block × block_size + offset`) of token `pos` of `req`, if it has a block.
    pub fn slot(&self, req: RequestId, pos: usize) -> Option<usize> {
        let b = *self.tables.get(&req)?.get(pos / self.shape.block_size)?;
        Some(b as usize * self.shape.block_size + pos % self.shape.block_size)
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
            let dst = s.index(block, h, off, 0);
            for d in 0..s.head_dim {
                self.k_pool[dst + d] = f16::from_f32(k[h * s.head_dim + d]);
                self.v_pool[dst + d] = f16::from_f32(v[h * s.head_dim + d]);
            }
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
        let table = self.tables.get(&req).ok_or(PagedError::UnknownRequest(req))?;
        let len = self.len(req);
        let mut k = vec![0f32; s.kv_heads * len * s.head_dim];
        let mut v = vec![0f32; k.len()];
        for h in 0..s.kv_heads {
            for pos in 0..len {
                let (block, off) = (table[pos / s.block_size] as usize, pos % s.block_size);
                let src = s.index(block, h, off, 0);
                let dst = (h * len + pos) * s.head_dim;
                for d in 0..s.head_dim {
                    k[dst + d] = self.k_pool[src + d].to_f32();
                    v[dst + d] = self.v_pool[src + d].to_f32();
                }
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
        let lens = reqs.iter().map(|&r| self.len(r) as i32).collect();
        (m, max_blocks, lens)
    }

    /// Accounting, with a static reservation of `max_seq_len` per request for comparison.
    pub fn stats(&self, max_seq_len: usize) -> PagedStats {
        let blocks_used = self.refs.iter().filter(|&&r| r > 0).count();
        let tokens_stored: usize = self.lens.values().sum();
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
            let need = self.shape.blocks_for(self.len(req));
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
        self.prefix.check(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(num_blocks: usize, block_size: usize) -> PagedKvCache {
        PagedKvCache::new(PagedShape {
            num_blocks,
            block_size,
            kv_heads: 2,
            head_dim: 3,
        })
    }

    #[test]
    fn allocation_order_mapping_and_free() {
        let mut c = cache(4, 2);
        // the notes' allocator pops from the end: first block is 3.
        let slots = c.append_slots(7, 3).unwrap();
        assert_eq!(c.table(7).unwrap(), &[3, 2]);
        assert_eq!(slots, vec![6, 7, 4]);
        assert_eq!(c.slot(7, 2), Some(2 * 2));
        c.check_invariants().unwrap();
        let st = c.stats(16);
        assert_eq!(
            (
                st.blocks_used,
                st.tokens_stored,
                st.internal_fragmentation,
                st.static_slots
            ),
            (2, 3, 1, 16)
        );
        assert_eq!(c.free_request(7).unwrap(), vec![3, 2]);
        assert_eq!(c.allocator().free_list(), &[0, 1, 3, 2]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn oom_is_typed_and_all_or_nothing() {
        let mut c = cache(2, 4);
        c.append_slots(1, 5).unwrap();
        let err = c.append_slots(2, 5).unwrap_err();
        assert_eq!(
            err,
            OutOfBlocks {
                needed: 2,
                free: 0,
                total: 2
            }
        );
        assert!(c.table(2).is_none());
        c.check_invariants().unwrap();
        c.append_slots(1, 3).unwrap();
        let e = c.append(1, 8, &[0.0; 6], &[0.0; 6]).unwrap_err();
        assert!(e.to_string().contains("OOM"));
    }

    #[test]
    fn append_then_gather_round_trips_through_f16() {
        let mut c = cache(8, 3);
        for pos in 0..7 {
            let k: Vec<f32> = (0..6).map(|i| (pos * 6 + i) as f32).collect();
            c.append(5, pos, &k, &k).unwrap();
        }
        let (k, _) = c.gather(5).unwrap();
        // head 1, pos 4 -> values 24 + 3..6
        assert_eq!(&k[(7 + 4) * 3..(7 + 5) * 3], &[27.0, 28.0, 29.0]);
        assert!(matches!(
            c.append(5, 9, &[0.0; 6], &[0.0; 6]),
            Err(PagedError::Hole { .. })
        ));
        assert_eq!(c.free_request(99), Err(PagedError::UnknownRequest(99)));
    }

    #[test]
    fn block_table_matrix_pads_with_minus_one() {
        let mut c = cache(8, 2);
        c.append_slots(0, 5).unwrap();
        c.append_slots(1, 1).unwrap();
        let (m, maxb, lens) = c.block_table_matrix(&[0, 1]);
        assert_eq!(maxb, 3);
        assert_eq!(m, vec![7, 6, 5, 4, -1, -1]);
        assert_eq!(lens, vec![5, 1]);
    }
}
