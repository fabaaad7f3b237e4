//! Automatic prefix caching on the paged cache, following vLLM V1's block pool, and copy-on-write as
//! the PagedAttention paper and vLLM V0 did it.
//!
//! Which vLLM: the V1 engine's `vllm/v1/core/block_pool.py` (`BlockPool`, `FreeKVCacheBlockQueue`) and
//! `kv_cache_manager.py` (`get_computed_blocks`), after vLLM #42656 (a freed block without a hash goes to
//! the head of the free queue) and #51482 (with prefix caching off, every freed block does). Not the
//! prefix-caching design doc's figures from time 5 on, which predate #42656, and not V0's separate free
//! list and LRU evictor.
//!
//! - A *full* block is named by a hash of its parent block's hash and its own token ids, so a hash names
//!   a whole prefix. vLLM adds extra keys (LoRA adapter, multimodal input hashes, `cache_salt` in the
//!   first block) and uses SHA-256 by default since v0.10.2; kvscope hashes token ids only, 64 bits
//!   ([`block_hash`]).
//! - The hash → blocks map keeps duplicates, as V1 does: a block that fills up with a prefix another block
//!   caches is cached too (tables never change once written), and a lookup returns the first.
//! - [`PagedKvCache::admit`] looks a prompt up block by block; each hit reuses the block (count + 1) and
//!   skips its prefill; the first miss ends the hits. A hit covers at most the prompt minus one token
//!   (V1's `max_cache_hit_length`): a fully cached prompt recomputes its last block, so the last token's
//!   logits exist. A prompt's full blocks are cached at admission, before their K/V are written, as V1
//!   caches them when they are scheduled, so a request admitted in the same step can hit them; a block
//!   that fills during decode is cached when it fills.
//! - V1 keeps one free queue and hands out its head. A freed block without a hash goes to the head; a
//!   freed cached block keeps its K/V and hash and joins the tail, a request's blocks last one first, so
//!   cached blocks leave least recently freed first and are evicted (their hash forgotten) as they
//!   leave. kvscope keeps the two ends apart: the allocator's free list (the head, last freed first)
//!   and the *evictor* (the tail, by release time, ties deepest first). Handing out the free list first
//!   and then the evictor's first block is the same order as popping V1's queue.
//! - [`PagedKvCache::fork`] gives a child (parallel sampling, beam search) a copy of its parent's table,
//!   every count + 1; the first append into a shared, partly filled last block copies the filled slots
//!   into a new block (copy-on-write, [`PagedKvCache::append_token`] returns the copy for the backend's
//!   `copy_blocks`). This is the PagedAttention paper's and V0's mechanism: V1 has no copy-on-write (it
//!   shares only full blocks, and runs n samples as child requests that share them by prefix caching).
//!
//! Paged decode needs no change: it reads through whatever table a request has.

use super::paged::{OutOfBlocks, PagedError, PagedKvCache, RequestId};
pub use super::prefix_state::{CachedBlock, PrefixState, block_hash, chain_hashes};

/// K and V of token `pos` as a deterministic function of the whole prefix `tokens[..=pos]` (as in a
/// real model: the same prefix gives the same K/V, the same token after another prefix does not):
/// `[kv_heads·head_dim]` each, seeded by the prefix's hash.
pub fn prefix_kv(tokens: &[u32], pos: usize, width: usize) -> (Vec<f32>, Vec<f32>) {
    let seed = block_hash(0x006b_7673_636f_7065, &tokens[..=pos]);
    let mut rng = crate::math::Rng::new(seed);
    (rng.normal_vec(width, 1.0), rng.normal_vec(width, 1.0))
}

/// What admitting a prompt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Leading full blocks found in the cache (their prefill is skipped).
    pub hit_blocks: Vec<u32>,
    /// Blocks newly allocated for the rest of the prompt.
    pub new_blocks: Vec<u32>,
    /// Tokens whose K/V were already cached.
    pub cached_tokens: usize,
    /// Slot mapping of the tokens that still need prefill (positions `cached_tokens..`).
    pub slots: Vec<i32>,
}

/// What appending one token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The token's slot (`block × block_size + offset`).
    pub slot: i32,
    /// A copy-on-write `(src, dst)` block copy the backend must run before writing the slot.
    pub cow: Option<(u32, u32)>,
    /// A block allocated for this token (a new last block, or the copy's destination).
    pub new_block: Option<u32>,
}

impl PagedKvCache {
    /// The prefix-caching invariants, given the cache: the map and the per-block records agree, cached
    /// blocks' hashes match their parent and tokens, and every request's cached blocks match its tokens.
    pub(super) fn check_prefix(&self) -> Result<(), String> {
        let (c, p) = (self, &self.prefix);
        let mut cached = 0;
        for b in 0..c.shape().num_blocks {
            let Some(m) = p.cached(b as u32) else { continue };
            cached += 1;
            if !p.map().get(&m.hash).is_some_and(|v| v.contains(&(b as u32))) {
                return Err(format!("block {b} is cached as {:016x} but the map disagrees", m.hash));
            }
            if block_hash(m.parent, &m.tokens) != m.hash || m.tokens.len() != c.shape().block_size {
                return Err(format!("block {b}: its tokens do not hash to {:016x}", m.hash));
            }
        }
        let entries: usize = p.map().values().map(Vec::len).sum();
        if cached != entries {
            return Err(format!("{entries} blocks in the map, {cached} cached blocks"));
        }
        for b in p.evictor_blocks() {
            if !p.is_cached(b) {
                return Err(format!("block {b} is in the evictor but caches nothing"));
            }
        }
        let bs = c.shape().block_size;
        for (req, toks) in &p.tokens {
            if toks.len() != c.len(*req) {
                return Err(format!(
                    "request {req} has {} token ids for {} tokens",
                    toks.len(),
                    c.len(*req)
                ));
            }
            let table = c.table(*req).unwrap_or_default();
            let mut parent = 0;
            for (i, chunk) in toks.chunks_exact(bs).enumerate() {
                let h = block_hash(parent, chunk);
                if let Some(m) = p.cached(table[i])
                    && (m.hash != h || m.tokens != chunk)
                {
                    return Err(format!(
                        "request {req} block {i} (physical {}) is cached as another prefix",
                        table[i]
                    ));
                }
                parent = h;
            }
        }
        Ok(())
    }

    /// The prefix-caching state (hash map, evictor, per-block records).
    pub fn prefix(&self) -> &PrefixState {
        &self.prefix
    }

    /// Token ids of `req`, if it was admitted with tokens.
    pub fn tokens(&self, req: RequestId) -> Option<&[u32]> {
        self.prefix.tokens.get(&req).map(Vec::as_slice)
    }

    /// Admit request `req` with `prompt`: reuse the cached blocks of its longest cached prefix of full
    /// blocks, allocate the rest. All or nothing: on OOM nothing changes. The caller writes the K/V of
    /// the returned slots (the prefill of the uncached tokens).
    pub fn admit(&mut self, req: RequestId, prompt: &[u32]) -> Result<Admission, PagedError> {
        if self.tables.contains_key(&req) {
            return Err(PagedError::AlreadyAdmitted(req));
        }
        let bs = self.shape().block_size;
        let hashes = chain_hashes(prompt, bs);
        // A hit covers at most the prompt minus its last token, in whole blocks (vLLM's
        // `max_cache_hit_length = num_tokens - 1`): the last token must go through the model, or there
        // would be no logits to sample the next token from. A fully cached prompt recomputes its last
        // block, which is then cached again as a duplicate.
        let max_hit = prompt.len().saturating_sub(1) / bs;
        let hit_blocks: Vec<u32> = hashes
            .iter()
            .take(max_hit)
            .map_while(|h| self.prefix.lookup(*h))
            .collect();
        let from_evictor = hit_blocks.iter().filter(|&&b| self.refs[b as usize] == 0).count();
        let needed = self.shape().blocks_for(prompt.len()) - hit_blocks.len();
        // Hits taken out of the evictor can no longer be evicted for the new blocks.
        if needed + from_evictor > self.num_available() {
            return Err(OutOfBlocks {
                needed,
                free: self.num_available() - from_evictor,
                total: self.allocator.total(),
            }
            .into());
        }
        self.prefix.lookups += hashes.len().min(max_hit) as u64;
        self.prefix.hits += hit_blocks.len() as u64;
        let now = self.prefix.tick();
        for &b in &hit_blocks {
            if self.refs[b as usize] == 0 {
                self.prefix.unpark(b);
            }
            self.refs[b as usize] += 1;
            self.prefix.last_access[b as usize] = now;
        }
        let mut table = hit_blocks.clone();
        let mut new_blocks = Vec::with_capacity(needed);
        for _ in 0..needed {
            let b = self.take_block()?;
            new_blocks.push(b);
            table.push(b);
        }
        let cached_tokens = hit_blocks.len() * bs;
        self.tables.insert(req, table);
        self.lens.insert(req, prompt.len());
        self.prefix.tokens.insert(req, prompt.to_vec());
        // The prompt's new full blocks are cached once their K/V are written (this step).
        for i in hit_blocks.len()..hashes.len() {
            self.cache_block_of(req, i);
        }
        let slots = (cached_tokens..prompt.len())
            .map(|p| self.slot(req, p).expect("allocated") as i32)
            .collect();
        Ok(Admission {
            hit_blocks,
            new_blocks,
            cached_tokens,
            slots,
        })
    }

    /// Record logical block `i` of `req` (full) in the hash map.
    fn cache_block_of(&mut self, req: RequestId, i: usize) {
        let bs = self.shape().block_size;
        let toks = &self.prefix.tokens[&req];
        let parent = if i == 0 {
            0
        } else {
            chain_hashes(&toks[..i * bs], bs)[i - 1]
        };
        let chunk = toks[i * bs..(i + 1) * bs].to_vec();
        let m = CachedBlock {
            hash: block_hash(parent, &chunk),
            parent,
            tokens: chunk,
            depth: i,
        };
        let b = self.tables[&req][i];
        self.prefix.cache(b, m);
    }

    /// Append one generated token to `req`. A new block when the last one is full; copy-on-write when
    /// the last block is partly filled and shared (the filled slots go to a new block, the table points
    /// there, the old block loses one reference). A block that fills up is cached.
    pub fn append_token(&mut self, req: RequestId, token: u32) -> Result<Appended, PagedError> {
        let bs = self.shape().block_size;
        let len = self.len(req);
        let table_len = self.tables.get(&req).ok_or(PagedError::UnknownRequest(req))?.len();
        if self.dropped_blocks(req) > 0 {
            return Err(PagedError::Gapped(req));
        }
        let mut cow = None;
        let mut new_block = None;
        if len == table_len * bs {
            self.check_available(1)?;
            let b = self.take_block()?;
            self.tables.get_mut(&req).expect("known").push(b);
            new_block = Some(b);
        } else {
            let last = *self.tables[&req].last().expect("a partly filled block");
            if self.refs[last as usize] > 1 {
                self.check_available(1)?;
                let dst = self.take_block()?;
                *self.tables.get_mut(&req).expect("known").last_mut().expect("nonempty") = dst;
                self.refs[last as usize] -= 1;
                cow = Some((last, dst));
                new_block = Some(dst);
            }
        }
        self.prefix.tokens.entry(req).or_default().push(token);
        self.lens.insert(req, len + 1);
        if (len + 1).is_multiple_of(bs) {
            self.cache_block_of(req, len / bs);
        }
        Ok(Appended {
            slot: self.slot(req, len).expect("allocated") as i32,
            cow,
            new_block,
        })
    }

    /// Fork `parent` into `child` (parallel sampling n > 1, beam search): the child gets a copy of the
    /// parent's block table and tokens, and every block's count goes up by 1. Nothing is copied.
    pub fn fork(&mut self, parent: RequestId, child: RequestId) -> Result<(), PagedError> {
        let table = self
            .tables
            .get(&parent)
            .ok_or(PagedError::UnknownRequest(parent))?
            .clone();
        if self.tables.contains_key(&child) {
            return Err(PagedError::AlreadyAdmitted(child));
        }
        if self.dropped_blocks(parent) > 0 {
            return Err(PagedError::Gapped(parent));
        }
        for &b in &table {
            self.refs[b as usize] += 1;
        }
        self.tables.insert(child, table);
        self.lens.insert(child, self.len(parent));
        if let Some(t) = self.prefix.tokens.get(&parent).cloned() {
            self.prefix.tokens.insert(child, t);
        }
        Ok(())
    }

    /// Write the K/V of token `pos` of `req` on the host as a model would, a function of its prefix
    /// ([`prefix_kv`]), through [`PagedKvCache::append`] (tests and suite cases; lessons write through the
    /// backend's `paged_append`).
    pub fn write_prefix_kv(&mut self, req: RequestId, pos: usize) -> Result<(), PagedError> {
        let s = self.shape();
        let tokens = self.tokens(req).ok_or(PagedError::UnknownRequest(req))?;
        let (k, v) = prefix_kv(tokens, pos, s.kv_heads * s.head_dim);
        self.append(req, pos, &k, &v)
    }

    /// The host version of the `copy_blocks` kernel: copy every slot of block `src` into block `dst`,
    /// in both pools (the reference the backends' kernels are checked against).
    pub fn copy_block_host(&mut self, src: u32, dst: u32) {
        let s = self.shape();
        super::paged::copy_block(self.k_pool.view_mut(), s, src as usize, dst as usize);
        super::paged::copy_block(self.v_pool.view_mut(), s, src as usize, dst as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::PagedShape;
    use crate::math::Rng;

    fn cache(num_blocks: usize, block_size: usize) -> PagedKvCache {
        PagedKvCache::new(PagedShape {
            num_blocks,
            block_size,
            kv_heads: 1,
            head_dim: 2,
            dtype: crate::cache::KvDtype::F16,
        })
    }

    /// Admit and write the prefill K/V as a model would (a function of the prefix).
    fn admit(c: &mut PagedKvCache, req: RequestId, prompt: &[u32]) -> Admission {
        let a = c.admit(req, prompt).unwrap();
        for pos in a.cached_tokens..prompt.len() {
            c.write_prefix_kv(req, pos).unwrap();
        }
        a
    }

    fn append(c: &mut PagedKvCache, req: RequestId, token: u32) -> Appended {
        let a = c.append_token(req, token).unwrap();
        if let Some((src, dst)) = a.cow {
            c.copy_block_host(src, dst);
        }
        c.write_prefix_kv(req, c.len(req) - 1).unwrap();
        a
    }

    /// Every request's K/V, read through its table, equal the model's K/V of its own tokens.
    fn kv_matches_tokens(c: &PagedKvCache) {
        let s = c.shape();
        for (&req, toks) in &c.prefix().tokens {
            let (k, _) = c.gather(req).unwrap();
            for pos in 0..toks.len() {
                let (want, _) = prefix_kv(toks, pos, s.kv_heads * s.head_dim);
                for d in 0..s.head_dim {
                    let got = k[pos * s.head_dim + d];
                    let w = half::f16::from_f32(want[d]).to_f32();
                    assert_eq!(got, w, "request {req} pos {pos}");
                }
            }
        }
    }

    #[test]
    fn a_shared_prompt_hits_full_blocks_only() {
        let mut c = cache(16, 4);
        let sys = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        let a = admit(&mut c, 0, &sys);
        assert_eq!((a.hit_blocks.len(), a.new_blocks.len(), a.slots.len()), (0, 3, 10));
        let b = admit(&mut c, 1, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12]);
        // Two full blocks hit; the partial third block is never cached, so token 9 is recomputed.
        assert_eq!(b.hit_blocks, c.table(0).unwrap()[..2].to_vec());
        assert_eq!(b.cached_tokens, 8);
        assert_eq!(c.ref_count(b.hit_blocks[0]), 2);
        c.check_invariants().unwrap();
        kv_matches_tokens(&c);
        // The same token after another prefix is another block.
        let d = admit(&mut c, 2, &[9, 2, 3, 4, 5, 6, 7, 8]);
        assert!(d.hit_blocks.is_empty());
        // Looked up: the blocks a hit may cover, at most the prompt minus its last token (2, 2, then 1).
        assert_eq!(c.prefix().hit_counts(), (2 + 2 + 1, 2));
    }

    /// A prompt cached in full hits all but its last block, recomputes that block (the last token's logits
    /// need it), and caches the copy as a duplicate under the same hash; lookups return the first.
    #[test]
    fn a_fully_cached_prompt_recomputes_its_last_block() {
        let mut c = cache(8, 4);
        let p: Vec<u32> = (1..=8).collect();
        let a = admit(&mut c, 0, &p);
        let b = admit(&mut c, 1, &p);
        assert_eq!(b.hit_blocks, a.new_blocks[..1].to_vec());
        assert_eq!((b.cached_tokens, b.slots.len(), b.new_blocks.len()), (4, 4, 1));
        let h = chain_hashes(&p, 4)[1];
        assert_eq!(c.prefix().map()[&h], vec![a.new_blocks[1], b.new_blocks[0]]);
        assert_eq!(c.prefix().duplicates(), 1);
        assert_eq!(c.prefix().lookup(h), Some(a.new_blocks[1]));
        c.check_invariants().unwrap();
        kv_matches_tokens(&c);
        // One token more and both blocks hit: the first of the duplicates.
        let mut longer = p.clone();
        longer.push(9);
        let d = admit(&mut c, 2, &longer);
        assert_eq!(d.hit_blocks, a.new_blocks);
        // When the first duplicate is evicted, a lookup finds the other.
        c.free_request(0).unwrap();
        c.free_request(2).unwrap();
        admit(&mut c, 3, &(100..124).collect::<Vec<u32>>());
        assert_ne!(c.prefix().cached(a.new_blocks[1]).map(|m| m.hash), Some(h));
        assert_eq!(c.prefix().lookup(h), Some(b.new_blocks[0]));
        c.check_invariants().unwrap();
        kv_matches_tokens(&c);
    }

    #[test]
    fn a_finished_turn_stays_cached_until_evicted() {
        let mut c = cache(3, 2);
        admit(&mut c, 0, &[1, 2, 3, 4]);
        let blocks = c.table(0).unwrap().to_vec();
        c.free_request(0).unwrap();
        assert_eq!(c.prefix().evictable(), 2);
        assert_eq!(c.allocator().num_free(), 1);
        c.check_invariants().unwrap();
        // Turn 2 reuses turn 1's blocks out of the evictor.
        let t2 = admit(&mut c, 1, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(t2.hit_blocks, blocks);
        assert_eq!(c.prefix().evictable(), 0);
        c.check_invariants().unwrap();
        c.free_request(1).unwrap();
        // Under pressure, LRU among count-0 cached blocks is evicted before anything else is refused.
        let other = admit(&mut c, 2, &[7, 8, 9, 10, 11, 12]);
        assert_eq!(other.hit_blocks.len(), 0);
        assert_eq!(c.prefix().evictable(), 0);
        assert!(
            c.prefix().lookup(chain_hashes(&[1, 2], 2)[0]).is_none(),
            "evicted hashes are forgotten"
        );
        c.check_invariants().unwrap();
        kv_matches_tokens(&c);
    }

    #[test]
    fn eviction_is_lru_then_deepest_first() {
        let mut c = cache(4, 1);
        admit(&mut c, 0, &[1, 2]);
        admit(&mut c, 1, &[3]);
        // Request 0's blocks ([1] and [1,2]) are released together: the same access time, so the deeper
        // one goes first; request 1's block is released later and goes last.
        c.free_request(0).unwrap();
        c.free_request(1).unwrap();
        let order: Vec<Vec<u32>> = c
            .prefix()
            .evictor_blocks()
            .map(|b| c.prefix().cached(b).unwrap().tokens.clone())
            .collect();
        assert_eq!(order, vec![vec![2], vec![1], vec![3]]);
        // Three new blocks: the free one, then the two LRU cached ones.
        admit(&mut c, 2, &[9, 9, 9]);
        assert!(c.prefix().lookup(chain_hashes(&[1, 2], 1)[1]).is_none());
        assert!(c.prefix().lookup(chain_hashes(&[1], 1)[0]).is_none());
        assert!(c.prefix().lookup(chain_hashes(&[3], 1)[0]).is_some());
        c.check_invariants().unwrap();
    }

    #[test]
    fn fork_shares_and_copy_on_write_copies_only_the_partial_block() {
        let mut c = cache(8, 4);
        admit(&mut c, 0, &[1, 2, 3, 4, 5, 6]);
        c.fork(0, 1).unwrap();
        let t = c.table(0).unwrap().to_vec();
        assert!(t.iter().all(|&b| c.ref_count(b) == 2));
        c.check_invariants().unwrap();
        let a = append(&mut c, 1, 42);
        let (src, dst) = a.cow.expect("shared partial block is copied");
        assert_eq!(src, t[1]);
        assert_eq!(c.table(1).unwrap(), &[t[0], dst]);
        assert_eq!((c.ref_count(t[0]), c.ref_count(src), c.ref_count(dst)), (2, 1, 1));
        // The parent now owns its block alone: no copy.
        let p = append(&mut c, 0, 7);
        assert_eq!(p.cow, None);
        c.check_invariants().unwrap();
        kv_matches_tokens(&c);
    }

    #[test]
    fn oom_admission_changes_nothing() {
        let mut c = cache(2, 2);
        admit(&mut c, 0, &[1, 2, 3]);
        let before = (c.tables().clone(), c.prefix().map().clone());
        assert!(matches!(c.admit(1, &[5, 6, 7]), Err(PagedError::Oom(_))));
        assert_eq!((c.tables().clone(), c.prefix().map().clone()), before);
        c.check_invariants().unwrap();
    }

    /// Random admit / fork / append / finish under memory pressure with a tiny alphabet (hits are
    /// common), invariants and K/V checked after every operation. `KVSCOPE_PREFIX_OPS` sets the count.
    #[test]
    fn random_operations_keep_every_invariant() {
        let ops: usize = std::env::var("KVSCOPE_PREFIX_OPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000);
        let mut rng = Rng::new(2024);
        let mut c = cache(24, 3);
        let mut next_id = 0u32;
        let mut live: Vec<RequestId> = Vec::new();
        let (mut hits, mut cows, mut ooms) = (0u64, 0u64, 0u64);
        for op in 0..ops {
            let pick = (rng.next_u64() % 100) as usize;
            if pick < 30 || live.is_empty() {
                let len = 1 + (rng.next_u64() % 10) as usize;
                let prompt: Vec<u32> = (0..len).map(|_| (rng.next_u64() % 3) as u32).collect();
                match c.admit(next_id, &prompt) {
                    Ok(a) => {
                        hits += a.hit_blocks.len() as u64;
                        for pos in a.cached_tokens..prompt.len() {
                            c.write_prefix_kv(next_id, pos).unwrap();
                        }
                        live.push(next_id);
                        next_id += 1;
                    }
                    Err(PagedError::Oom(_)) => ooms += 1,
                    Err(e) => panic!("op {op}: {e}"),
                }
            } else if pick < 45 {
                let parent = live[(rng.next_u64() as usize) % live.len()];
                c.fork(parent, next_id).unwrap();
                live.push(next_id);
                next_id += 1;
            } else if pick < 80 {
                let r = live[(rng.next_u64() as usize) % live.len()];
                match c.append_token(r, (rng.next_u64() % 3) as u32) {
                    Ok(a) => {
                        if let Some((s, d)) = a.cow {
                            cows += 1;
                            c.copy_block_host(s, d);
                        }
                        c.write_prefix_kv(r, c.len(r) - 1).unwrap();
                    }
                    Err(PagedError::Oom(_)) => ooms += 1,
                    Err(e) => panic!("op {op}: {e}"),
                }
            } else {
                let i = (rng.next_u64() as usize) % live.len();
                c.free_request(live.swap_remove(i)).unwrap();
            }
            if let Err(e) = c.check_invariants() {
                panic!("op {op}: {e}");
            }
            if op % 97 == 0 {
                kv_matches_tokens(&c);
            }
        }
        kv_matches_tokens(&c);
        assert!(
            hits > 500 && cows > 100 && ooms > 10,
            "hits {hits}, cows {cows}, ooms {ooms}"
        );
    }
}
