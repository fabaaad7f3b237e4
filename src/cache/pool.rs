//! The memory a KV pool lives in: its values' bytes, its scales and its dtype, together (candle's
//! rule: the dtype sits on the storage, and a quantised block keeps its codes and scales together).
//!
//! A serving engine allocates its pool once, up front, and then reads it through block tables that
//! scatter a request's blocks over all of it, so every small block can be a TLB miss on 4 KiB pages.
//! Pools of 2 MiB or more are therefore anonymous mappings advised onto 2 MiB transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, through memmap2's safe API) on Linux; smaller ones, the lessons' pools,
//! and every pool elsewhere are vectors of 8-byte words. Either way the pool is zeroed, 8-byte aligned,
//! and is read through [`PoolRef`] and written through [`PoolMut`], the views the ops take.

use half::f16;

use super::dtype::KvDtype;

/// Pools at least this large get a mapping of their own, advised onto huge pages.
pub const HUGE_POOL_BYTES: usize = 2 << 20;

/// Set (to anything) in the environment, this keeps every pool on the heap, to measure what the pages
/// cost (`KVSCOPE_SMALL_PAGES=1 kvscope bench --only p3-b1`).
pub const SMALL_PAGES_ENV: &str = "KVSCOPE_SMALL_PAGES";

/// A zeroed pool of `len` values of one dtype, and the dtype's scales.
pub struct Pool {
    dtype: KvDtype,
    len: usize,
    data: Storage,
    scales: Vec<f32>,
}

enum Storage {
    /// 8-byte words, so that every dtype's view of the bytes is aligned.
    Heap(Vec<u64>),
    /// The mapping (page aligned).
    #[cfg(feature = "native")]
    Mapped(memmap2::MmapMut),
}

impl Pool {
    /// `n` f16 zeros.
    pub fn zeroed(n: usize) -> Self {
        Self::new(KvDtype::F16, n, 0)
    }

    /// `len` values of `dtype` (zero bytes) and `scales` zero scales. Large pools are mapped and
    /// advised onto huge pages; if the mapping fails the pool is a vector (slower to read through
    /// scattered block tables, but the same values).
    pub fn new(dtype: KvDtype, len: usize, scales: usize) -> Self {
        let bytes = dtype.format().bytes_for(len);
        let scales = vec![dtype.format().scale_init; scales];
        #[cfg(feature = "native")]
        if Self::maps(bytes)
            && let Ok(map) = memmap2::MmapMut::map_anon(bytes)
        {
            // Advice only: where the kernel has no transparent huge pages the pool keeps 4 KiB pages.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            return Self {
                dtype,
                len,
                data: Storage::Mapped(map),
                scales,
            };
        }
        Self {
            dtype,
            len,
            data: Storage::Heap(vec![0; bytes.div_ceil(8)]),
            scales,
        }
    }

    /// Whether a pool of `bytes` bytes is mapped: from [`HUGE_POOL_BYTES`] up, on Linux (the only system
    /// with transparent huge pages to advise), unless [`SMALL_PAGES_ENV`] is set.
    pub fn maps(bytes: usize) -> bool {
        cfg!(all(feature = "native", target_os = "linux"))
            && bytes >= HUGE_POOL_BYTES
            && std::env::var_os(SMALL_PAGES_ENV).is_none()
    }

    /// Whether the pool is a mapping advised onto huge pages.
    pub fn is_mapped(&self) -> bool {
        #[cfg(feature = "native")]
        return matches!(self.data, Storage::Mapped(..));
        #[cfg(not(feature = "native"))]
        false
    }

    /// Its dtype.
    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }

    /// Values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        let n = self.dtype.format().bytes_for(self.len);
        match &self.data {
            Storage::Heap(v) => &bytemuck::cast_slice(v)[..n],
            #[cfg(feature = "native")]
            Storage::Mapped(m) => &m[..n],
        }
    }

    /// Its bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.view_mut().bytes
    }

    /// Its scales (empty for f16).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// A read-only view: what the decode ops take.
    pub fn view(&self) -> PoolRef<'_> {
        PoolRef {
            dtype: self.dtype,
            bytes: self.bytes(),
            scales: &self.scales,
        }
    }

    /// A writable view: what the append and copy ops take.
    pub fn view_mut(&mut self) -> PoolMut<'_> {
        let dtype = self.dtype;
        let n = dtype.format().bytes_for(self.len);
        let bytes = match &mut self.data {
            Storage::Heap(v) => &mut bytemuck::cast_slice_mut(v)[..n],
            #[cfg(feature = "native")]
            Storage::Mapped(m) => &mut m[..n],
        };
        PoolMut {
            dtype,
            bytes,
            scales: &mut self.scales,
        }
    }

    /// The values as f16, when the dtype is f16.
    pub fn as_f16(&self) -> Option<&[f16]> {
        self.view().as_f16()
    }

    /// The values as f16 to write, when the dtype is f16.
    pub fn as_f16_mut(&mut self) -> Option<&mut [f16]> {
        self.view_mut().into_f16()
    }
}

/// A read-only view of a pool: its dtype, bytes and scales.
#[derive(Debug, Clone, Copy)]
pub struct PoolRef<'a> {
    /// The dtype the bytes hold.
    pub dtype: KvDtype,
    /// The values' bytes.
    pub bytes: &'a [u8],
    /// The dtype's scales ([`super::ScaleLayout`]).
    pub scales: &'a [f32],
}

impl<'a> PoolRef<'a> {
    /// An f16 slice as a pool (a static cache's layer read as one block per request, a test's pool).
    pub fn f16(values: &'a [f16]) -> Self {
        Self {
            dtype: KvDtype::F16,
            bytes: bytemuck::cast_slice(values),
            scales: &[],
        }
    }

    /// Values it holds.
    pub fn len(&self) -> usize {
        self.bytes.len() * 8 / self.dtype.format().bits
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The values as f16, when the dtype is f16 (and the bytes are aligned, as a [`Pool`]'s are).
    pub fn as_f16(&self) -> Option<&'a [f16]> {
        (self.dtype == KvDtype::F16)
            .then(|| bytemuck::try_cast_slice(self.bytes).ok())
            .flatten()
    }

    /// `n` values from value `start` as f32, through the dtype's `read` (`scales`: the row's scales).
    pub fn read(&self, start: usize, n: usize, scales: &[f32], dst: &mut [f32]) {
        let f = self.dtype.format();
        let (a, b) = (f.bytes_for(start), f.bytes_for(start + n));
        (f.read)(&self.bytes[a..b], scales, &mut dst[..n]);
    }
}

/// A writable view of a pool.
#[derive(Debug)]
pub struct PoolMut<'a> {
    /// The dtype the bytes hold.
    pub dtype: KvDtype,
    /// The values' bytes.
    pub bytes: &'a mut [u8],
    /// The dtype's scales.
    pub scales: &'a mut [f32],
}

impl<'a> PoolMut<'a> {
    /// An f16 slice as a pool.
    pub fn f16(values: &'a mut [f16]) -> Self {
        Self {
            dtype: KvDtype::F16,
            bytes: bytemuck::cast_slice_mut(values),
            scales: &mut [],
        }
    }

    /// A shorter-lived view of the same pool.
    pub fn reborrow(&mut self) -> PoolMut<'_> {
        PoolMut {
            dtype: self.dtype,
            bytes: self.bytes,
            scales: self.scales,
        }
    }

    /// Read-only.
    pub fn as_ref(&self) -> PoolRef<'_> {
        PoolRef {
            dtype: self.dtype,
            bytes: self.bytes,
            scales: self.scales,
        }
    }

    /// Values it holds.
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The values as f16 to write, when the dtype is f16.
    pub fn as_f16_mut(&mut self) -> Option<&mut [f16]> {
        self.reborrow().into_f16()
    }

    /// The view as f16, when the dtype is f16.
    pub fn into_f16(self) -> Option<&'a mut [f16]> {
        if self.dtype != KvDtype::F16 {
            return None;
        }
        bytemuck::try_cast_slice_mut(self.bytes).ok()
    }
}

/// Bytes of this process's anonymous memory on transparent huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), where the system reports it.
pub fn process_huge_page_bytes() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kb = t.lines().find_map(|l| l.strip_prefix("AnonHugePages:"))?;
    Some(kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        let mut p = Self::new(self.dtype, self.len, self.scales.len());
        p.bytes_mut().copy_from_slice(self.bytes());
        p.scales.copy_from_slice(&self.scales);
        p
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("dtype", &self.dtype)
            .field("len", &self.len)
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
            assert_eq!(Pool::maps(n * 2), mapped, "{n}");
            let mut p = Pool::zeroed(n);
            assert_eq!((p.len(), p.is_mapped()), (n, mapped), "{n}");
            assert!(p.as_f16().unwrap().iter().all(|x| x.to_bits() == 0));
            if n > 0 {
                p.as_f16_mut().unwrap()[n - 1] = f16::ONE;
                let q = p.clone();
                assert_eq!((q.as_f16().unwrap()[n - 1], q.is_mapped()), (f16::ONE, mapped));
                assert_eq!(p.as_f16().unwrap(), q.as_f16().unwrap());
            }
        }
    }
}
