//! The prefix-caching state of a paged cache: per block what it caches (hash, parent hash, tokens),
//! the hash → block map, the evictor of unused cached blocks in LRU-then-deepest order, and each
//! request's token ids; and the block hashes. The operations that use it on a cache (admit, append with
//! copy-on-write, fork) are in `prefix.rs`; this file knows no cache, so the two do not import each other.

use std::collections::{BTreeMap, BTreeSet};

use super::request::RequestId;

/// What the cache knows about one cached block: its hash, its parent's hash (0 for the first block),
/// its token ids and how many blocks precede it in its prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedBlock {
    /// Hash of the parent's hash and this block's tokens.
    pub hash: u64,
    /// The parent block's hash (the hash of everything before this block).
    pub parent: u64,
    /// The block's token ids.
    pub tokens: Vec<u32>,
    /// Blocks before this one in its prefix.
    pub depth: usize,
}

/// The prefix-caching state of a paged cache.
#[derive(Debug, Clone)]
pub struct PrefixState {
    /// Per physical block: what it caches, if it is a cached full block.
    meta: Vec<Option<CachedBlock>>,
    /// hash → the blocks that cache that prefix, first cached first. Duplicates are kept, as in vLLM V1
    /// (`BlockHashToBlockMap`): a block that fills up with a prefix already cached elsewhere is cached
    /// too, so block tables never change once written, and a lookup returns the first.
    map: BTreeMap<u64, Vec<u32>>,
    /// Count-0 cached blocks in eviction order: (last access, −depth, block).
    evictor: BTreeSet<(u64, std::cmp::Reverse<usize>, u32)>,
    /// Each block's last access (for the evictor's order).
    pub(super) last_access: Vec<u64>,
    /// The logical clock of accesses.
    clock: u64,
    /// Token ids per request (requests admitted with tokens).
    pub(super) tokens: BTreeMap<RequestId, Vec<u32>>,
    /// Lifetime counters: blocks looked up and blocks hit.
    pub(super) lookups: u64,
    pub(super) hits: u64,
}

impl PrefixState {
    /// No block cached.
    pub fn new(num_blocks: usize) -> Self {
        Self {
            meta: vec![None; num_blocks],
            map: BTreeMap::new(),
            evictor: BTreeSet::new(),
            last_access: vec![0; num_blocks],
            clock: 0,
            tokens: BTreeMap::new(),
            lookups: 0,
            hits: 0,
        }
    }

    /// Cached blocks nobody uses (in the evictor).
    pub fn evictable(&self) -> usize {
        self.evictor.len()
    }

    /// The evictor's blocks, next to be evicted first.
    pub fn evictor_blocks(&self) -> impl Iterator<Item = u32> + '_ {
        self.evictor.iter().map(|&(_, _, b)| b)
    }

    /// Whether block `b` holds a cached full block.
    pub fn is_cached(&self, b: u32) -> bool {
        self.meta.get(b as usize).is_some_and(Option::is_some)
    }

    /// What block `b` caches.
    pub fn cached(&self, b: u32) -> Option<&CachedBlock> {
        self.meta.get(b as usize).and_then(Option::as_ref)
    }

    /// The block a lookup of prefix `hash` returns, if cached: the first cached of its duplicates.
    pub fn lookup(&self, hash: u64) -> Option<u32> {
        self.map.get(&hash).and_then(|v| v.first()).copied()
    }

    /// The hash → blocks map (duplicates in the order they were cached).
    pub fn map(&self) -> &BTreeMap<u64, Vec<u32>> {
        &self.map
    }

    /// Cached blocks that duplicate a prefix another block caches too.
    pub fn duplicates(&self) -> usize {
        self.map.values().map(|v| v.len().saturating_sub(1)).sum()
    }

    /// Blocks looked up and blocks hit since the cache was made.
    pub fn hit_counts(&self) -> (u64, u64) {
        (self.lookups, self.hits)
    }

    /// A new access time: every block one operation touches gets the same one, so ties in the evictor
    /// (a whole request released at once) go to the deepest block first.
    pub(super) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn evictor_key(&self, b: u32) -> (u64, std::cmp::Reverse<usize>, u32) {
        let depth = self.cached(b).map_or(0, |m| m.depth);
        (self.last_access[b as usize], std::cmp::Reverse(depth), b)
    }

    /// Put count-0 cached block `b` into the evictor, released at time `now` (its last access).
    pub(super) fn park(&mut self, b: u32, now: u64) {
        self.last_access[b as usize] = now;
        let key = self.evictor_key(b);
        self.evictor.insert(key);
    }

    /// Take `b` out of the evictor (it is being reused).
    pub(super) fn unpark(&mut self, b: u32) -> bool {
        let key = self.evictor_key(b);
        self.evictor.remove(&key)
    }

    /// Evict the least recently used cached block (ties: the deepest), forgetting its hash.
    pub(super) fn evict_lru(&mut self) -> Option<u32> {
        let (_, _, b) = self.evictor.pop_first()?;
        self.uncache(b);
        Some(b)
    }

    fn uncache(&mut self, b: u32) {
        if let Some(m) = self.meta[b as usize].take()
            && let Some(blocks) = self.map.get_mut(&m.hash)
        {
            blocks.retain(|&x| x != b);
            if blocks.is_empty() {
                self.map.remove(&m.hash);
            }
        }
    }

    /// Record that block `b` now holds the full block `m`. When another block caches the same prefix
    /// already, `b` is cached as its duplicate (after it, so lookups keep returning the first), as vLLM
    /// V1 does: it does not deduplicate, so that a block table never has to change.
    pub(super) fn cache(&mut self, b: u32, m: CachedBlock) {
        if self.meta[b as usize].is_some() {
            return;
        }
        self.map.entry(m.hash).or_default().push(b);
        self.meta[b as usize] = Some(m);
    }
}

/// The hash of a full block: its parent's hash (0 for the first block) and its token ids. FNV-1a over
/// the little-endian bytes, then a SplitMix64 finaliser: the same on every machine (no random seed).
pub fn block_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parent
        .to_le_bytes()
        .into_iter()
        .chain(tokens.iter().flat_map(|t| t.to_le_bytes()))
    {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hashes of every full block of `tokens`, in order (each covers its whole prefix).
pub fn chain_hashes(tokens: &[u32], block_size: usize) -> Vec<u64> {
    let mut parent = 0;
    tokens
        .chunks_exact(block_size.max(1))
        .map(|chunk| {
            parent = block_hash(parent, chunk);
            parent
        })
        .collect()
}
