//! The memory a KV pool lives in. A serving engine allocates its pool once, up front, and then reads it
//! through block tables that scatter a request's blocks over all of it, so every small block can be a
//! TLB miss on 4 KiB pages. Pools of 2 MiB or more are therefore anonymous mappings advised onto 2 MiB
//! transparent huge pages (`madvise(MADV_HUGEPAGE)`, through memmap2's safe API) on Linux; smaller ones,
//! the lessons' pools, and every pool elsewhere are plain vectors. Either way the pool is zeroed and reads as one `[f16]` slice.

use std::ops::{Deref, DerefMut};

use half::f16;

/// Pools at least this large get a mapping of their own, advised onto huge pages.
pub const HUGE_POOL_BYTES: usize = 2 << 20;

/// Set (to anything) in the environment, this keeps every pool on the heap, to measure what the pages
/// cost (`KVSCOPE_SMALL_PAGES=1 kvscope bench --only p3-b1`).
pub const SMALL_PAGES_ENV: &str = "KVSCOPE_SMALL_PAGES";

/// A zeroed `[f16]` pool: a vector when small, an anonymous mapping advised onto 2 MiB pages when large.
pub struct Pool(Storage);

enum Storage {
    Heap(Vec<f16>),
    /// The mapping and the number of f16 values it holds.
    Mapped(memmap2::MmapMut, usize),
}

impl Pool {
    /// `n` zeros. Large pools are mapped and advised onto huge pages; if the mapping fails the pool is
    /// a vector (slower to read through scattered block tables, but the same values).
    pub fn zeroed(n: usize) -> Self {
        if Self::maps(n)
            && let Ok(map) = memmap2::MmapMut::map_anon(n * std::mem::size_of::<f16>())
        {
            // Advice only: where the kernel has no transparent huge pages the pool keeps 4 KiB pages.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            return Self(Storage::Mapped(map, n));
        }
        Self(Storage::Heap(vec![f16::ZERO; n]))
    }

    /// Whether a pool of `n` values is mapped: from [`HUGE_POOL_BYTES`] up, on Linux (the only system
    /// with transparent huge pages to advise), unless [`SMALL_PAGES_ENV`] is set.
    pub fn maps(n: usize) -> bool {
        cfg!(target_os = "linux")
            && n * std::mem::size_of::<f16>() >= HUGE_POOL_BYTES
            && std::env::var_os(SMALL_PAGES_ENV).is_none()
    }

    /// Whether the pool is a mapping advised onto huge pages.
    pub fn is_mapped(&self) -> bool {
        matches!(self.0, Storage::Mapped(..))
    }
}

/// Bytes of this process's anonymous memory on transparent huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), where the system reports it.
pub fn process_huge_page_bytes() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kb = t.lines().find_map(|l| l.strip_prefix("AnonHugePages:"))?;
    Some(kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

impl Deref for Pool {
    type Target = [f16];
    fn deref(&self) -> &[f16] {
        match &self.0 {
            Storage::Heap(v) => v,
            Storage::Mapped(m, n) => &bytemuck::cast_slice(&m[..])[..*n],
        }
    }
}

impl DerefMut for Pool {
    fn deref_mut(&mut self) -> &mut [f16] {
        match &mut self.0 {
            Storage::Heap(v) => v,
            Storage::Mapped(m, n) => &mut bytemuck::cast_slice_mut(&mut m[..])[..*n],
        }
    }
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        let mut p = Self::zeroed(self.len());
        p.copy_from_slice(self);
        p
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("len", &self.len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_pools_are_vectors_large_ones_mappings_and_both_read_as_zeroed_slices() {
        for (n, large) in [(0, false), (1000, false), (HUGE_POOL_BYTES / 2, true), (3 << 20, true)] {
            let mapped = large && cfg!(target_os = "linux") && std::env::var_os(SMALL_PAGES_ENV).is_none();
            assert_eq!(Pool::maps(n), mapped, "{n}");
            let mut p = Pool::zeroed(n);
            assert_eq!((p.len(), p.is_mapped()), (n, mapped), "{n}");
            assert!(p.iter().all(|x| x.to_bits() == 0));
            if n > 0 {
                p[n - 1] = f16::ONE;
                let q = p.clone();
                assert_eq!((q[n - 1], q.is_mapped()), (f16::ONE, mapped));
                assert_eq!(&*p, &*q);
            }
        }
    }
}
