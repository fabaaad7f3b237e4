//! Eviction through the engine: a policy's keep sets become dropped blocks and, inside blocks that stay,
//! a validity mask per layer, KV head and slot (lessons 8 and 9), which `score_decode` reads.

use super::*;

impl KvEngine {
    /// Layer `l`'s decode problem over `tables`, masked tokens included: what the score-returning and
    /// streaming decodes read, which carry their own mask ([`Self::input`] refuses such tables for the
    /// plain decode).
    pub fn masked_input<'a>(
        &'a self,
        l: usize,
        tables: &'a DecodeTables,
        q: &'a [f32],
        n_heads: usize,
    ) -> Result<PagedDecodeInput<'a>, EngineError> {
        let (k_pool, v_pool) = self.pools(l)?;
        Ok(PagedDecodeInput {
            q,
            n_heads,
            shape: self.shape(),
            k_pool,
            v_pool,
            block_tables: &tables.tables,
            max_blocks: tables.max_blocks,
            context_lens: &tables.context_lens,
        })
    }

    /// Apply `policy` to `req`: drop every full block (but the last) none of whose tokens it keeps,
    /// and mask, in every layer and KV head, the tokens it drops inside blocks that stay. Returns the
    /// logical blocks dropped.
    pub fn evict(&mut self, policy: &mut dyn EvictionPolicy, req: RequestId) -> Result<Vec<usize>, EngineError> {
        let len = self.cache.len(req);
        let Some(keep) = policy.keep(req, len) else {
            return Ok(Vec::new());
        };
        if keep.len() != len {
            return Err(EngineError::Layout(format!(
                "{} returned {} flags for a request of {len} tokens",
                policy.name(),
                keep.len()
            )));
        }
        let bs = self.shape().block_size;
        let already: std::collections::BTreeSet<usize> = self.cache.dropped(req).collect();
        let mut blocks = Vec::new();
        for lb in 0..len.div_ceil(bs) {
            let full_not_last = (lb + 1) * bs < len;
            if full_not_last && !already.contains(&lb) && keep[lb * bs..(lb + 1) * bs].iter().all(|k| !k) {
                self.cache.drop_block(req, lb)?;
                blocks.push(lb);
            }
        }
        let mut masked = Vec::new();
        for (pos, _) in keep.iter().enumerate().filter(|(_, k)| !**k) {
            if let Some(slot) = self.cache.slot(req, pos) {
                self.mask(slot);
                masked.push(pos);
            }
        }
        self.events.push(KvEvent::Evicted {
            req,
            policy: policy.name(),
            blocks: blocks.clone(),
            masked,
        });
        Ok(blocks)
    }

    /// Apply keep sets that differ per layer and KV head (H2O, SnapKV): `keep[l · kv_heads + h][pos]` for
    /// every position of `req`. Drops every full block (but the last) that no layer and KV head keeps a
    /// token of, and masks each dropped token in its own (layer, KV head) only: the holes token-level
    /// eviction leaves inside blocks, which `copy_blocks` (whole blocks of every KV head) cannot compact.
    /// Returns the logical blocks dropped.
    pub fn evict_heads(
        &mut self,
        req: RequestId,
        policy: &'static str,
        keep: &[Vec<bool>],
    ) -> Result<Vec<usize>, EngineError> {
        let s = self.shape();
        let len = self.cache.len(req);
        let rows = self.layers() * s.kv_heads;
        if keep.len() != rows || keep.iter().any(|k| k.len() != len) {
            return Err(EngineError::Layout(format!(
                "{policy} must give {rows} keep sets (layers × KV heads) of {len} flags"
            )));
        }
        let bs = s.block_size;
        let already: std::collections::BTreeSet<usize> = self.cache.dropped(req).collect();
        let mut blocks = Vec::new();
        for lb in 0..len.div_ceil(bs) {
            let full_not_last = (lb + 1) * bs < len;
            if full_not_last
                && !already.contains(&lb)
                && keep.iter().all(|k| k[lb * bs..(lb + 1) * bs].iter().all(|x| !x))
            {
                self.cache.drop_block(req, lb)?;
                blocks.push(lb);
            }
        }
        let n = self.layers();
        let valid = self
            .valid
            .get_or_insert_with(|| vec![vec![true; s.num_blocks * s.kv_heads * s.block_size]; n]);
        let mut masked = std::collections::BTreeSet::new();
        for pos in 0..len {
            let Some(slot) = self.cache.slot(req, pos) else {
                continue;
            };
            let (b, o) = (slot / bs, slot % bs);
            for (row, k) in keep.iter().enumerate() {
                let (l, h) = (row / s.kv_heads, row % s.kv_heads);
                let i = valid_index(s, b, h, o);
                valid[l][i] = k[pos];
                if !k[pos] {
                    masked.insert(pos);
                }
            }
        }
        self.events.push(KvEvent::Evicted {
            req,
            policy,
            blocks: blocks.clone(),
            masked: masked.into_iter().collect(),
        });
        Ok(blocks)
    }

    /// Layer `l`'s validity mask as the kernels read it: `[num_blocks, kv_heads, block_size]`, 1 where the
    /// slot takes part in attention.
    pub fn valid_mask(&self, l: usize) -> Vec<i32> {
        let s = self.shape();
        let n = s.num_blocks * s.kv_heads * s.block_size;
        match self.valid.as_ref().and_then(|v| v.get(l)) {
            Some(v) => v.iter().map(|&x| i32::from(x)).collect(),
            None => vec![1; n],
        }
    }

    /// Mark `slot` invalid in every layer and KV head.
    fn mask(&mut self, slot: usize) {
        let s = self.shape();
        let n = self.layers();
        let valid = self
            .valid
            .get_or_insert_with(|| vec![vec![true; s.num_blocks * s.kv_heads * s.block_size]; n]);
        let (b, o) = (slot / s.block_size, slot % s.block_size);
        for layer in valid.iter_mut() {
            for h in 0..s.kv_heads {
                layer[valid_index(s, b, h, o)] = false;
            }
        }
    }

    /// Whether any slot of `reqs` is masked (a decode through whole blocks would read it).
    pub(super) fn masks_any(&self, tables: &DecodeTables) -> bool {
        let Some(valid) = &self.valid else {
            return false;
        };
        let s = self.shape();
        tables
            .tables
            .chunks(tables.max_blocks)
            .zip(&tables.context_lens)
            .any(|(row, &len)| {
                (0..len.max(0) as usize).any(|t| {
                    let b = row[t / s.block_size] as usize;
                    let o = t % s.block_size;
                    valid
                        .iter()
                        .any(|l| (0..s.kv_heads).any(|h| !l[valid_index(s, b, h, o)]))
                })
            })
    }
}
