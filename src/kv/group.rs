//! The engine's second kind of cache: the one quantised in groups (INT8 per channel, KIVI;
//! `cache::group`), so that [`KvEngine`] owns both kinds. The block manager is the engine's own (one
//! block table per request for every layer; a block holds G tokens, the K group); each layer holds a
//! [`GroupCache`] (code pools, scales and zero points, and an f16 ring of R + 1 rows per request), and
//! every write and read goes through the backend's `group_append` and `group_decode`:
//!
//! - [`KvEngine::grouped`] makes an empty engine of a [`GroupFormat`];
//! - [`KvEngine::write_tokens`] appends tokens' K/V (their slots reserved with [`KvEngine::reserve`]):
//!   into the request's ring, and the groups the rule completes are quantised into their blocks;
//! - [`KvEngine::group_tables`] and [`KvEngine::decode_groups`] run a decode step; [`KvEngine::group_input`]
//!   is the same problem for the f64 reference;
//! - [`KvEngine::truncate`] refuses to cut into tokens already quantised (their codes belong to a group
//!   that would have to be re-encoded), and [`KvEngine::swap_out`]/[`KvEngine::swap_in`] move a
//!   request's blocks, with their scales, zero points and ring, to an engine of the same format.

use crate::cache::{GroupCache, GroupFormat, GroupShape, KvDtype, PagedError, PagedShape, RequestId};
use crate::compute::ops::group_append::GroupAppendInput;
use crate::compute::ops::group_decode::GroupDecodeInput;
use crate::compute::{Backend, MAX_HEAD_DIM};

use super::engine::{EngineError, KvEngine, KvEvent, PoolLayout};
use super::group_store::GroupStore;

/// The per-request arrays of a decode over a cache quantised in groups: block tables (`[R, max_blocks]`,
/// padded with 0), lengths, the tokens whose K and whose V are quantised, and the rings.
#[derive(Debug, Clone, Default)]
pub struct GroupTables {
    /// `[R, max_blocks]`.
    pub tables: Vec<i32>,
    /// Blocks per table row.
    pub max_blocks: usize,
    /// Tokens per request.
    pub context_lens: Vec<i32>,
    /// Tokens whose K is quantised.
    pub k_quantised: Vec<i32>,
    /// Tokens whose V is quantised.
    pub v_quantised: Vec<i32>,
    /// Each request's ring.
    pub rings: Vec<i32>,
}

impl KvEngine {
    /// An empty engine of the cache quantised in groups under `fmt`: `num_blocks` blocks of G tokens,
    /// `rings` requests at a time (each holds an f16 ring while it lives), `layers` layers.
    pub fn grouped(
        fmt: GroupFormat,
        num_blocks: usize,
        kv_heads: usize,
        head_dim: usize,
        rings: usize,
        layers: usize,
    ) -> Result<Self, EngineError> {
        let shape = GroupShape {
            num_blocks,
            kv_heads,
            head_dim,
            rings,
            fmt,
        };
        shape.validate(MAX_HEAD_DIM).map_err(EngineError::Layout)?;
        let paged = PagedShape {
            num_blocks,
            block_size: fmt.group,
            kv_heads,
            head_dim,
            dtype: KvDtype::F16,
        };
        let mut e = Self::with_layout(paged, 1, PoolLayout::Grouped);
        e.cache_mut().k_pool = crate::cache::Pool::new(KvDtype::F16, 0, 0);
        e.groups = Some(GroupStore {
            shape,
            layers: vec![GroupCache::new(&shape); layers.max(1)],
            rings: Default::default(),
        });
        Ok(e)
    }

    fn store(&self) -> Result<&GroupStore, EngineError> {
        self.groups
            .as_ref()
            .ok_or_else(|| EngineError::Layout("this engine holds pools, not a cache quantised in groups".into()))
    }

    /// The shape of the cache quantised in groups.
    pub fn group_shape(&self) -> Result<GroupShape, EngineError> {
        Ok(self.store()?.shape)
    }

    /// Layer `l`'s cache quantised in groups, to read back.
    pub fn group_cache(&self, l: usize) -> Result<&GroupCache, EngineError> {
        let g = self.store()?;
        g.layers
            .get(l)
            .ok_or_else(|| EngineError::Layout(format!("layer {l} does not exist ({} layers)", g.layers.len())))
    }

    /// The ring `req` writes into (given on its first write), if it has one.
    pub fn ring_of(&self, req: RequestId) -> Option<usize> {
        self.groups.as_ref()?.rings.get(&req).copied()
    }

    /// Append the K/V of `positions` (`(request, position)`, each reserved, in order per request) to
    /// layer `l`: `k`, `v` are `[positions, kv_heads, head_dim]` f32. One `group_append`: the rows go
    /// into the requests' rings (rounded to f16), then the groups their positions complete are quantised.
    pub fn write_tokens(
        &mut self,
        backend: &dyn Backend,
        l: usize,
        positions: &[(RequestId, usize)],
        k: &[f32],
        v: &[f32],
    ) -> Result<(), EngineError> {
        let mut rows = Vec::with_capacity(2 * positions.len());
        let mut jobs = Vec::new();
        let mut slots = Vec::with_capacity(positions.len());
        for &(req, t) in positions {
            let ring = self.take_ring(req)?;
            let table = self.cache().table(req).ok_or(PagedError::UnknownRequest(req))?;
            if t >= self.cache().len(req) {
                return Err(EngineError::Layout(format!(
                    "request {req}: position {t} has no reserved slot (length {})",
                    self.cache().len(req)
                )));
            }
            let g = self.store()?.shape.fmt;
            jobs.extend(g.step_job_words(ring, t, |b| table[b] as usize));
            rows.extend([ring as i32, t as i32]);
            slots.push(self.cache().slot(req, t).map_or(-1, |s| s as i32));
        }
        let store = self
            .groups
            .as_mut()
            .ok_or_else(|| EngineError::Layout("no group cache".into()))?;
        let shape = store.shape;
        let layers = store.layers.len();
        let cache = store
            .layers
            .get_mut(l)
            .ok_or_else(|| EngineError::Layout(format!("layer {l} does not exist ({layers} layers)")))?;
        backend.group_append(GroupAppendInput {
            shape,
            cache,
            rows: &rows,
            k,
            v,
            jobs: &jobs,
        })?;
        self.record(KvEvent::Wrote { layer: l, slots });
        Ok(())
    }

    /// The ring of `req`: its own, or the lowest free one.
    fn take_ring(&mut self, req: RequestId) -> Result<usize, EngineError> {
        let store = self
            .groups
            .as_mut()
            .ok_or_else(|| EngineError::Layout("no group cache".into()))?;
        if let Some(&r) = store.rings.get(&req) {
            return Ok(r);
        }
        let free = (0..store.shape.rings).find(|r| !store.rings.values().any(|x| x == r));
        let r = free.ok_or_else(|| {
            EngineError::Layout(format!(
                "every one of the {} f16 rings is held: request {req} cannot write",
                store.shape.rings
            ))
        })?;
        store.rings.insert(req, r);
        Ok(r)
    }

    /// The decode arrays of `reqs` (each must have written).
    pub fn group_tables(&self, reqs: &[RequestId]) -> Result<GroupTables, EngineError> {
        let fmt = self.store()?.shape.fmt;
        let max_blocks = reqs
            .iter()
            .map(|&r| self.cache().table(r).map_or(0, <[u32]>::len))
            .max()
            .unwrap_or(0)
            .max(1);
        let mut t = GroupTables {
            max_blocks,
            ..GroupTables::default()
        };
        for &r in reqs {
            let table = self.cache().table(r).ok_or(PagedError::UnknownRequest(r))?;
            let ring = self
                .ring_of(r)
                .ok_or_else(|| EngineError::Layout(format!("request {r} has written nothing")))?;
            let len = self.cache().len(r);
            let (kq, vq) = fmt.quantised(len);
            t.tables.extend(table.iter().map(|&b| b as i32));
            t.tables.extend(std::iter::repeat_n(0, max_blocks - table.len()));
            t.context_lens.push(len as i32);
            t.k_quantised.push(kq as i32);
            t.v_quantised.push(vq as i32);
            t.rings.push(ring as i32);
        }
        Ok(t)
    }

    /// Layer `l`'s decode problem over `tables` with queries `q` (`[R, n_heads, head_dim]`): what
    /// [`Self::decode_groups`] runs and the f64 reference (`compute::ops::group_decode::reference`) reads.
    pub fn group_input<'a>(
        &'a self,
        l: usize,
        tables: &'a GroupTables,
        q: &'a [f32],
        n_heads: usize,
    ) -> Result<GroupDecodeInput<'a>, EngineError> {
        Ok(GroupDecodeInput {
            shape: self.store()?.shape,
            cache: self.group_cache(l)?,
            q,
            n_heads,
            block_tables: &tables.tables,
            max_blocks: tables.max_blocks,
            context_lens: &tables.context_lens,
            k_quantised: &tables.k_quantised,
            v_quantised: &tables.v_quantised,
            rings: &tables.rings,
        })
    }

    /// Decode attention of layer `l` through `group_decode` on the backend (`[R, n_heads, head_dim]`).
    pub fn decode_groups(
        &self,
        backend: &dyn Backend,
        l: usize,
        tables: &GroupTables,
        q: &[f32],
        n_heads: usize,
    ) -> Result<Vec<f32>, EngineError> {
        Ok(backend.group_decode(&self.group_input(l, tables, q, n_heads)?)?)
    }

    /// A grouped cache cannot cut into quantised tokens: their group's codes, scales and zero points
    /// were computed with the tokens a truncation would remove.
    pub(super) fn group_truncate_check(&self, req: RequestId, len: usize) -> Result<(), PagedError> {
        let Some(g) = &self.groups else { return Ok(()) };
        let (kq, vq) = g.shape.fmt.quantised(self.cache().len(req));
        if len < kq.max(vq) {
            return Err(PagedError::CannotDrop {
                request: req,
                block: len / g.shape.fmt.group.max(1),
                why: "its tokens are quantised in groups; cutting below them would need a group re-encoded",
            });
        }
        Ok(())
    }

    /// [`KvEngine::swap_out`]/[`KvEngine::swap_in`] for a grouped cache: the blocks' codes, scales and zero
    /// points, and the request's ring, every layer, into `dst`'s blocks `to` (already reserved). Bytes
    /// as a device stores them (codes, f16 scales and zeros, f16 ring rows).
    pub(super) fn move_group_blocks(
        &self,
        req: RequestId,
        from: &[u32],
        to: &[u32],
        dst: &mut KvEngine,
    ) -> Result<usize, EngineError> {
        let src = self.store()?;
        let ring = self
            .ring_of(req)
            .ok_or_else(|| EngineError::Layout(format!("request {req} has written nothing")))?;
        let dst_ring = dst.take_ring(req)?;
        let d = dst
            .groups
            .as_mut()
            .ok_or_else(|| EngineError::Layout("no group cache there".into()))?;
        let s = src.shape;
        if (s.fmt, s.kv_heads, s.head_dim) != (d.shape.fmt, d.shape.kv_heads, d.shape.head_dim)
            || src.layers.len() != d.layers.len()
        {
            return Err(EngineError::Layout(
                "a swap needs two caches of the same format and shape".into(),
            ));
        }
        let zeros = usize::from(!s.fmt.symmetric);
        let codes = s.kv_heads * s.fmt.group * s.row_bytes();
        let k_params = s.kv_heads * s.head_dim;
        let v_params = s.v_params_len() / s.num_blocks.max(1);
        let ring_rows = s.fmt.cap() * s.kv_heads * s.head_dim;
        let mut bytes = 0;
        for (a, b) in src.layers.iter().zip(d.layers.iter_mut()) {
            for (&x, &y) in from.iter().zip(to) {
                let (x, y) = (x as usize, y as usize);
                let mv = |n: usize, src: &[u8], dst: &mut [u8]| {
                    dst[y * n..(y + 1) * n].copy_from_slice(&src[x * n..(x + 1) * n])
                };
                mv(codes, &a.k_codes, &mut b.k_codes);
                mv(codes, &a.v_codes, &mut b.v_codes);
                let mvf = |n: usize, src: &[f32], dst: &mut [f32]| {
                    dst[y * n..(y + 1) * n].copy_from_slice(&src[x * n..(x + 1) * n])
                };
                mvf(k_params, &a.k_scale, &mut b.k_scale);
                mvf(k_params, &a.k_zero, &mut b.k_zero);
                mvf(v_params, &a.v_scale, &mut b.v_scale);
                mvf(v_params, &a.v_zero, &mut b.v_zero);
                bytes += 2 * codes + 2 * (1 + zeros) * (k_params + v_params);
            }
            let (ra, rb) = (ring * ring_rows, dst_ring * ring_rows);
            b.k_ring[rb..rb + ring_rows].copy_from_slice(&a.k_ring[ra..ra + ring_rows]);
            b.v_ring[rb..rb + ring_rows].copy_from_slice(&a.v_ring[ra..ra + ring_rows]);
            bytes += 4 * ring_rows;
        }
        Ok(bytes)
    }

    /// Release `req`'s ring (when it is freed).
    pub(super) fn release_ring(&mut self, req: RequestId) {
        if let Some(g) = self.groups.as_mut() {
            g.rings.remove(&req);
        }
    }
}
