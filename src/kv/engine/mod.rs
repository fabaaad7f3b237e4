//! [`KvEngine`]: the block manager of a paged cache, the K/V pools of every layer, and the kernels that
//! write, copy and read them.

use std::collections::BTreeMap;

use crate::cache::paged::write_row;
use crate::cache::prefix::{Admission, Appended};
use crate::cache::{OutOfBlocks, PagedError, PagedKvCache, PagedShape, Pool, PoolMut, PoolRef, RequestId};
use crate::compute::{
    Backend, BackendError, CheckReport, CopyBlocksInput, DecodeTables, PagedAppendInput, PagedDecodeInput,
};

use super::EvictionPolicy;

mod masks;
mod swap;

/// How a layer's cache is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolLayout {
    /// A K pool and a V pool, `[blocks, kv_heads, block_size, head_dim]` each (every lesson today).
    KeyValue,
    /// One latent pool per layer and no K/V pair (MLA's compressed `c_kv`): the shape has one "head" whose
    /// row is the latent. The engine reserves, frees and evicts its blocks and writes its rows through
    /// the dtype on the host; the kernel that reads it comes with the MLA lesson.
    Latent,
    /// The cache quantised in groups (INT8 per channel, KIVI: `cache::group`): code pools in blocks of G
    /// tokens and an f16 ring per request, every layer, written and read through `group_append` and
    /// `group_decode` (`kv/group.rs`). The block manager is the same; the f16 pools stay empty.
    Grouped,
}

/// What the engine did, in order: the events a lesson's views replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEvent {
    /// Slots reserved for the next tokens of a request (no prefix caching).
    Reserved {
        /// The request.
        req: RequestId,
        /// The slots, in token order.
        slots: Vec<i32>,
    },
    /// A request admitted with its prompt's token ids (prefix caching).
    Admitted {
        /// The request.
        req: RequestId,
        /// Its prompt length.
        prompt: usize,
        /// Cached blocks it reuses.
        hit_blocks: Vec<u32>,
        /// Blocks allocated for the rest.
        new_blocks: Vec<u32>,
        /// Tokens whose K/V it did not compute.
        cached_tokens: usize,
        /// Cached blocks evicted (reused) to make room.
        evicted: Vec<u32>,
    },
    /// An admission refused for lack of blocks (nothing changed).
    Refused {
        /// The request.
        req: RequestId,
        /// What was missing.
        oom: OutOfBlocks,
    },
    /// One token appended to a request with token ids.
    Appended {
        /// The request.
        req: RequestId,
        /// Its slot.
        slot: i32,
        /// The copy-on-write `(src, dst)` that ran first, if any.
        cow: Option<(u32, u32)>,
        /// A block allocated for it.
        new_block: Option<u32>,
    },
    /// A request forked: the child shares the parent's blocks.
    Forked {
        /// The parent.
        parent: RequestId,
        /// The child.
        child: RequestId,
        /// Blocks now shared.
        blocks: usize,
    },
    /// A request freed.
    Freed {
        /// The request.
        req: RequestId,
        /// Its table, in release order.
        table: Vec<u32>,
        /// Blocks nobody uses that stay cached (in the evictor).
        to_evictor: Vec<u32>,
        /// Blocks back on the free list.
        to_free: Vec<u32>,
    },
    /// Tokens evicted by a policy: whole blocks dropped, and tokens masked inside kept blocks.
    Evicted {
        /// The request.
        req: RequestId,
        /// The policy.
        policy: &'static str,
        /// Logical blocks dropped.
        blocks: Vec<usize>,
        /// Tokens masked in blocks that stay.
        masked: Vec<usize>,
    },
    /// A request cut back to `len` tokens (rejected draft tokens), returning `freed`.
    Truncated {
        /// The request.
        req: RequestId,
        /// Its new length.
        len: usize,
        /// Blocks it gave back.
        freed: Vec<u32>,
    },
    /// K/V rows written at slots of a layer.
    Wrote {
        /// The layer.
        layer: usize,
        /// The slots.
        slots: Vec<i32>,
    },
    /// Whole blocks copied in every layer (copy-on-write).
    Copied {
        /// `(src, dst)` pairs.
        pairs: Vec<(u32, u32)>,
    },
}

/// Why an engine operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The block manager refused it (OOM, unknown request, …).
    #[error(transparent)]
    Cache(#[from] PagedError),
    /// A kernel could not run.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The operation does not apply to this layout or layer.
    #[error("{0}")]
    Layout(String),
}

/// Where slot `o` of block `b`, KV head `h`, sits in a layer's validity mask (`[blocks, kv_heads,
/// block_size]`, the pools' row order).
fn valid_index(s: PagedShape, b: usize, h: usize, o: usize) -> usize {
    (b * s.kv_heads + h) * s.block_size + o
}

/// The pools of one layer beyond the first (the first layer's are the cache's own).
#[derive(Debug, Clone)]
struct LayerPools {
    k: Pool,
    v: Pool,
}

/// A paged KV cache with every layer's pools, driven through the backends.
#[derive(Debug, Clone)]
pub struct KvEngine {
    cache: PagedKvCache,
    layout: PoolLayout,
    more: Vec<LayerPools>,
    /// Per layer, whether each `(block, kv head, offset)` slot takes part in attention: `None` until a
    /// policy masks a token (then all written slots start valid).
    valid: Option<Vec<Vec<bool>>>,
    events: Vec<KvEvent>,
    /// The cache quantised in groups, every layer ([`PoolLayout::Grouped`] only).
    pub(super) groups: Option<super::group_store::GroupStore>,
}

impl KvEngine {
    /// An empty engine: `layers` layers of K/V pools of `shape`, one block manager for all of them (one
    /// block table per request serves every layer, as in vLLM).
    pub fn new(shape: PagedShape, layers: usize) -> Self {
        Self::with_layout(shape, layers, PoolLayout::KeyValue)
    }

    /// An empty engine of `layout`. A latent layout needs a shape with one KV head (its row is the latent).
    pub fn with_layout(shape: PagedShape, layers: usize, layout: PoolLayout) -> Self {
        let mut cache = PagedKvCache::new(shape);
        let v = |s: &PagedShape| match layout {
            PoolLayout::KeyValue => s.pool(),
            PoolLayout::Latent | PoolLayout::Grouped => Pool::new(s.dtype, 0, 0),
        };
        cache.v_pool = v(&shape);
        let more = (1..layers.max(1))
            .map(|_| LayerPools {
                k: shape.pool(),
                v: v(&shape),
            })
            .collect();
        Self {
            cache,
            layout,
            more,
            valid: None,
            events: Vec::new(),
            groups: None,
        }
    }

    /// The block manager (tables, allocator, prefix state) and layer 0's pools.
    pub fn cache(&self) -> &PagedKvCache {
        &self.cache
    }

    /// The block manager, for a scheduling policy's reservations and frees.
    pub fn cache_mut(&mut self) -> &mut PagedKvCache {
        &mut self.cache
    }

    /// The pool shape.
    pub fn shape(&self) -> PagedShape {
        self.cache.shape()
    }

    /// The layout.
    pub fn layout(&self) -> PoolLayout {
        self.layout
    }

    /// Layers.
    pub fn layers(&self) -> usize {
        match &self.groups {
            Some(g) => g.layers.len(),
            None => 1 + self.more.len(),
        }
    }

    /// Layer `l`'s K and V pools (for the latent layout, V is empty).
    pub fn pools(&self, l: usize) -> Result<(PoolRef<'_>, PoolRef<'_>), EngineError> {
        match l {
            0 => Ok((self.cache.k_pool.view(), self.cache.v_pool.view())),
            _ => {
                let p = self.more.get(l - 1).ok_or_else(|| self.no_layer(l))?;
                Ok((p.k.view(), p.v.view()))
            }
        }
    }

    fn pools_mut(&mut self, l: usize) -> Result<(PoolMut<'_>, PoolMut<'_>), EngineError> {
        match l {
            0 => Ok((self.cache.k_pool.view_mut(), self.cache.v_pool.view_mut())),
            _ => {
                let err = self.no_layer(l);
                let p = self.more.get_mut(l - 1).ok_or(err)?;
                Ok((p.k.view_mut(), p.v.view_mut()))
            }
        }
    }

    fn no_layer(&self, l: usize) -> EngineError {
        EngineError::Layout(format!("layer {l} does not exist ({} layers)", self.layers()))
    }

    fn key_value(&self, what: &str) -> Result<(), EngineError> {
        match self.layout {
            PoolLayout::KeyValue => Ok(()),
            PoolLayout::Latent => Err(EngineError::Layout(format!(
                "{what} needs K and V pools; this engine holds one latent pool per layer"
            ))),
            PoolLayout::Grouped => Err(EngineError::Layout(format!(
                "{what} needs K and V pools; this engine holds a cache quantised in groups (write_tokens, decode_groups)"
            ))),
        }
    }

    /// The events since the last [`Self::take_events`].
    pub fn events(&self) -> &[KvEvent] {
        &self.events
    }

    /// Record `e` (the grouped cache's writes, `kv/group.rs`).
    pub(super) fn record(&mut self, e: KvEvent) {
        self.events.push(e);
    }

    /// Take the events recorded so far.
    pub fn take_events(&mut self) -> Vec<KvEvent> {
        std::mem::take(&mut self.events)
    }

    /// Whether slot `slot` of KV head `head` in layer `l` takes part in attention.
    pub fn is_valid(&self, l: usize, head: usize, slot: usize) -> bool {
        let s = self.shape();
        let (b, o) = (slot / s.block_size, slot % s.block_size);
        self.valid
            .as_ref()
            .and_then(|v| v.get(l)?.get(valid_index(s, b, head, o)).copied())
            .unwrap_or(true)
    }

    /// Reserve the next `n` positions of `req` (allocating blocks as needed): their slots.
    pub fn reserve(&mut self, req: RequestId, n: usize) -> Result<Vec<i32>, OutOfBlocks> {
        let slots = self.cache.append_slots(req, n)?;
        self.events.push(KvEvent::Reserved {
            req,
            slots: slots.clone(),
        });
        Ok(slots)
    }

    /// Write rows `k`, `v` (`[slots, kv_heads, head_dim]`, f32) of layer `l` at `slots` through the
    /// backend's `paged_append` (`quant_append` for 8-bit pools; negative slots are skipped): the one
    /// place K/V enter the pools.
    pub fn write(
        &mut self,
        backend: &dyn Backend,
        l: usize,
        slots: &[i32],
        k: &[f32],
        v: &[f32],
    ) -> Result<(), EngineError> {
        self.key_value("paged_append")?;
        let shape = self.shape();
        let (k_pool, v_pool) = self.pools_mut(l)?;
        let inp = PagedAppendInput {
            shape,
            k_pool,
            v_pool,
            slot_mapping: slots,
            k,
            v,
        };
        // 8-bit pools take the quantising append (codes and scales); every other dtype the paged one.
        if shape.dtype.format().quant.is_some() {
            backend.quant_append(crate::compute::ops::quant_append::QuantAppendInput(inp))?;
        } else {
            backend.paged_append(inp)?;
        }
        self.mark_valid(l, slots);
        self.events.push(KvEvent::Wrote {
            layer: l,
            slots: slots.to_vec(),
        });
        Ok(())
    }

    /// Write the K/V of `positions` (`(request, position)`) of layer `l`, each pair's rows from `kv`;
    /// positions without a slot (a request freed or a block dropped) are left out.
    pub fn write_positions(
        &mut self,
        backend: &dyn Backend,
        l: usize,
        positions: &[(RequestId, usize)],
        mut kv: impl FnMut(RequestId, usize) -> (Vec<f32>, Vec<f32>),
    ) -> Result<(), EngineError> {
        let (mut slots, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for &(r, pos) in positions {
            if let Some(s) = self.cache.slot(r, pos) {
                let (kk, vv) = kv(r, pos);
                slots.push(s as i32);
                k.extend(kk);
                v.extend(vv);
            }
        }
        if slots.is_empty() {
            return Ok(());
        }
        self.write(backend, l, &slots, &k, &v)
    }

    /// Write latent rows `c` (`[slots, head_dim]`) of layer `l` at `slots` through the pool's dtype on
    /// the host (the latent layout; its kernel comes with the MLA lesson).
    pub fn write_latent(&mut self, l: usize, slots: &[i32], c: &[f32]) -> Result<(), EngineError> {
        if self.layout != PoolLayout::Latent {
            return Err(EngineError::Layout("write_latent is for the latent layout".into()));
        }
        let s = self.shape();
        if c.len() != slots.len() * s.head_dim {
            return Err(EngineError::Layout(format!(
                "latent rows must be [slots, {}] = {} values, got {}",
                s.head_dim,
                slots.len() * s.head_dim,
                c.len()
            )));
        }
        let pool = match l {
            0 => &mut self.cache.k_pool,
            _ => {
                let err = self.no_layer(l);
                &mut self.more.get_mut(l - 1).ok_or(err)?.k
            }
        };
        for (row, &slot) in c.chunks_exact(s.head_dim).zip(slots) {
            if slot < 0 || slot as usize >= s.num_blocks * s.block_size {
                continue;
            }
            let (b, o) = (slot as usize / s.block_size, slot as usize % s.block_size);
            write_row(pool, s, (b, 0, o), row);
        }
        self.mark_valid(l, slots);
        self.events.push(KvEvent::Wrote {
            layer: l,
            slots: slots.to_vec(),
        });
        Ok(())
    }

    fn mark_valid(&mut self, l: usize, slots: &[i32]) {
        let s = self.shape();
        if let Some(v) = self.valid.as_mut().and_then(|v| v.get_mut(l)) {
            for &slot in slots.iter().filter(|&&x| x >= 0) {
                let (b, o) = (slot as usize / s.block_size, slot as usize % s.block_size);
                for h in 0..s.kv_heads {
                    v[valid_index(s, b, h, o)] = true;
                }
            }
        }
    }

    /// Admit `req` with its prompt's token ids: reuse the cached blocks of its longest cached prefix, take
    /// the rest (evicting unused cached blocks, least recently used first, when the free list is empty).
    /// On OOM nothing changes and a [`KvEvent::Refused`] is recorded. The caller writes the returned
    /// slots' K/V ([`Self::write`]).
    pub fn admit(&mut self, req: RequestId, prompt: &[u32]) -> Result<Admission, PagedError> {
        // Evictor blocks and what they cache: one that afterwards caches something else (or nothing)
        // was evicted (an evicted block is reused at once, and may cache the new prompt's block).
        let hash_of = |c: &PagedKvCache, b: u32| c.prefix().cached(b).map(|m| m.hash);
        let before: Vec<(u32, Option<u64>)> = self
            .cache
            .prefix()
            .evictor_blocks()
            .map(|b| (b, hash_of(&self.cache, b)))
            .collect();
        match self.cache.admit(req, prompt) {
            Ok(a) => {
                let evicted = before
                    .into_iter()
                    .filter(|&(b, h)| hash_of(&self.cache, b) != h)
                    .map(|(b, _)| b)
                    .collect();
                self.events.push(KvEvent::Admitted {
                    req,
                    prompt: prompt.len(),
                    hit_blocks: a.hit_blocks.clone(),
                    new_blocks: a.new_blocks.clone(),
                    cached_tokens: a.cached_tokens,
                    evicted,
                });
                Ok(a)
            }
            Err(e) => {
                if let PagedError::Oom(oom) = e {
                    self.events.push(KvEvent::Refused { req, oom });
                }
                Err(e)
            }
        }
    }

    /// Append one token to `req` (admitted with token ids): a new block when the last is full, and when
    /// the last block is partly filled and shared, a copy-on-write through the backend's `copy_blocks`
    /// in every layer before the token's slot is returned. The caller writes its K/V.
    pub fn append_token(&mut self, backend: &dyn Backend, req: RequestId, token: u32) -> Result<Appended, EngineError> {
        let a = self.cache.append_token(req, token)?;
        if let Some((src, dst)) = a.cow {
            self.copy_blocks(backend, &[(src, dst)])?;
        }
        self.events.push(KvEvent::Appended {
            req,
            slot: a.slot,
            cow: a.cow,
            new_block: a.new_block,
        });
        Ok(a)
    }

    /// Copy whole blocks `(src, dst)` in every layer's pools through the backend's `copy_blocks`.
    pub fn copy_blocks(&mut self, backend: &dyn Backend, pairs: &[(u32, u32)]) -> Result<(), EngineError> {
        self.key_value("copy_blocks")?;
        let shape = self.shape();
        let mapping: Vec<i32> = pairs.iter().flat_map(|&(s, d)| [s as i32, d as i32]).collect();
        for l in 0..self.layers() {
            let (k_pool, v_pool) = self.pools_mut(l)?;
            backend.copy_blocks(CopyBlocksInput {
                shape,
                k_pool,
                v_pool,
                block_mapping: &mapping,
            })?;
        }
        self.events.push(KvEvent::Copied { pairs: pairs.to_vec() });
        Ok(())
    }

    /// Fork `parent` into `child`: the child shares every block (counts + 1); nothing is copied.
    pub fn fork(&mut self, parent: RequestId, child: RequestId) -> Result<(), PagedError> {
        self.cache.fork(parent, child)?;
        let blocks = self.cache.table(child).map_or(0, <[u32]>::len);
        self.events.push(KvEvent::Forked { parent, child, blocks });
        Ok(())
    }

    /// Free `req`: each block loses its reference; a block nobody uses goes to the evictor when it is
    /// cached, else back on the free list. Returns its table.
    pub fn free(&mut self, req: RequestId) -> Result<Vec<u32>, PagedError> {
        let table = self.cache.free_request(req)?;
        self.release_ring(req);
        let (mut to_evictor, mut to_free) = (Vec::new(), Vec::new());
        for &b in &table {
            if self.cache.ref_count(b) == 0 {
                if self.cache.prefix().is_cached(b) {
                    to_evictor.push(b);
                } else {
                    to_free.push(b);
                }
            }
        }
        self.events.push(KvEvent::Freed {
            req,
            table: table.clone(),
            to_evictor,
            to_free,
        });
        Ok(table)
    }

    /// Cut `req` back to `len` tokens (speculative decoding's rejected draft tokens).
    pub fn truncate(&mut self, req: RequestId, len: usize) -> Result<Vec<u32>, PagedError> {
        self.group_truncate_check(req, len)?;
        let freed = self.cache.truncate(req, len)?;
        self.events.push(KvEvent::Truncated {
            req,
            len,
            freed: freed.clone(),
        });
        Ok(freed)
    }

    /// The block tables of `reqs` (their live blocks, in order), for a decode.
    pub fn tables(&self, reqs: &[RequestId]) -> DecodeTables {
        DecodeTables::new(&self.cache, reqs)
    }

    /// Layer `l`'s decode problem over `tables` with queries `q` (`[R, n_heads, head_dim]`).
    pub fn input<'a>(
        &'a self,
        l: usize,
        tables: &'a DecodeTables,
        q: &'a [f32],
        n_heads: usize,
    ) -> Result<PagedDecodeInput<'a>, EngineError> {
        self.key_value("paged_decode")?;
        if self.masks_any(tables) {
            return Err(EngineError::Layout(
                "these tables read masked tokens: a decode that skips them comes with the H2O lesson".into(),
            ));
        }
        self.masked_input(l, tables, q, n_heads)
    }

    /// Decode attention of layer `l` through `tables` on the backend (`[R, n_heads, head_dim]`).
    pub fn decode(
        &self,
        backend: &dyn Backend,
        l: usize,
        tables: &DecodeTables,
        q: &[f32],
        n_heads: usize,
    ) -> Result<Vec<f32>, EngineError> {
        let inp = self.input(l, tables, q, n_heads)?;
        // 8-bit pools take the dequantising decode; every other dtype the paged one.
        if inp.shape.dtype.format().quant.is_some() {
            return Ok(backend.quant_decode(&crate::compute::ops::quant_decode::QuantDecodeInput(inp))?);
        }
        Ok(backend.paged_decode(&inp)?)
    }

    /// Prefill attention of layer `l`: each request of `tables` attends its cache with a chunk of
    /// `query_lens[r]` new tokens (its last ones, already written), causally within the chunk, through
    /// `paged_prefill` (`[Q, n_heads, head_dim]`, Q = Σ query_lens). f16 pools only.
    pub fn prefill(
        &self,
        backend: &dyn Backend,
        l: usize,
        tables: &DecodeTables,
        query_lens: &[i32],
        q: &[f32],
        n_heads: usize,
    ) -> Result<Vec<f32>, EngineError> {
        Ok(backend.paged_prefill(&self.prefill_input(l, tables, query_lens, q, n_heads)?)?)
    }

    /// The `paged_prefill` input of layer `l`.
    fn prefill_input<'a>(
        &'a self,
        l: usize,
        tables: &'a DecodeTables,
        query_lens: &'a [i32],
        q: &'a [f32],
        n_heads: usize,
    ) -> Result<crate::compute::ops::paged_prefill::PagedPrefillInput<'a>, EngineError> {
        let inp = self.input(l, tables, q, n_heads)?;
        Ok(crate::compute::ops::paged_prefill::PagedPrefillInput {
            q,
            n_heads,
            shape: inp.shape,
            k_pool: inp.k_pool,
            v_pool: inp.v_pool,
            block_tables: &tables.tables,
            max_blocks: tables.max_blocks,
            context_lens: &tables.context_lens,
            query_lens,
        })
    }

    /// [`Self::prefill`], checked against the f64 reference (each row's causal attention over its
    /// request's K/V, gathered through its table).
    pub fn prefill_checked(
        &self,
        backend: &dyn Backend,
        l: usize,
        tables: &DecodeTables,
        query_lens: &[i32],
        q: &[f32],
        n_heads: usize,
    ) -> Result<(Vec<f32>, CheckReport), EngineError> {
        let pre = self.prefill_input(l, tables, query_lens, q, n_heads)?;
        let got = backend.paged_prefill(&pre)?;
        let shape = [pre.rows(), n_heads, pre.shape.head_dim];
        let tag = format!(
            "paged_prefill · layer {l} · rows {} · {}",
            pre.rows(),
            backend.kind().name()
        );
        let r = crate::compute::check(
            &tag,
            &shape,
            &got,
            &crate::compute::ops::paged_prefill::reference(&pre),
            crate::compute::Tolerance::F32,
        );
        Ok((got, r))
    }

    /// Set every FP8 scale of layer `l`'s pools: `k_scale` and `v_scale`, one per tensor or one per KV
    /// head (the prompt's absolute maximum over the format's largest value, or 1.0 uncalibrated, as vLLM).
    /// Pools of other dtypes keep their scales (INT8 per token computes its own at each write).
    pub fn set_fp8_scales(&mut self, l: usize, k_scales: &[f32], v_scales: &[f32]) -> Result<(), EngineError> {
        let f = self.shape().dtype.format();
        if !matches!(f.quant, Some(crate::cache::dtype::quant::Quant::Fp8(_))) {
            return Ok(());
        }
        let (k, v) = self.pools_mut(l)?;
        for (dst, src) in [(k.scales, k_scales), (v.scales, v_scales)] {
            if dst.len() != src.len() {
                return Err(EngineError::Layout(format!(
                    "{} holds {} scales per pool, {} given",
                    f.name,
                    dst.len(),
                    src.len()
                )));
            }
            dst.copy_from_slice(src);
        }
        Ok(())
    }

    /// [`Self::decode`], checked against the f64 reference (contiguous attention over each request's own
    /// K/V, gathered through its table).
    pub fn decode_checked(
        &self,
        backend: &dyn Backend,
        l: usize,
        tables: &DecodeTables,
        q: &[f32],
        n_heads: usize,
    ) -> Result<(Vec<f32>, CheckReport), EngineError> {
        let inp = self.input(l, tables, q, n_heads)?;
        Ok(crate::compute::suite::decode_and_check(backend, &inp)?)
    }

    /// Per layer, the K/V bytes a decode through `tables` reads.
    pub fn decode_bytes(&self, tables: &DecodeTables) -> usize {
        let tokens: usize = tables.context_lens.iter().map(|&l| l.max(0) as usize).sum();
        let s = self.shape();
        tokens * crate::cache::kv_bytes_per_token(1, s.kv_heads as u64, s.head_dim as u64, s.dtype) as usize
    }

    /// The requests holding tokens, with their lengths.
    pub fn lens(&self) -> BTreeMap<RequestId, usize> {
        self.cache.tables().keys().map(|&r| (r, self.cache.len(r))).collect()
    }
}
