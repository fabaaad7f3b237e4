//! Timing helpers shared by the backends' default timings and the benchmarks: a median of repeated
//! runs, and the host's memory roofs measured on the same threads: a read-only stream (a sum), a copy,
//! and the same bytes read in the order a decode's block tables visit them.

use std::time::Duration;

use web_time::Instant;

use half::f16;
use rayon::prelude::*;

/// Median wall time of `reps` runs of `f` after one warm-up run.
pub fn median_time(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

/// Medians of `reps` runs each, after a warm-up run, of: `kernel` (one decode step), a read-only pass
/// over the pools `k_pool` and `v_pool` themselves (a parallel sum of their bits: the bytes the decode
/// reads, not a buffer of their size), and a parallel copy of `copy_bytes` bytes.
/// Returns (kernel seconds, seconds to read `read_bytes` at the pools' read rate, copy seconds).
pub fn host_decode_roofs(
    reps: usize,
    mut kernel: impl FnMut(),
    k_pool: &[f16],
    v_pool: &[f16],
    read_bytes: usize,
    copy_bytes: usize,
) -> (f64, f64, f64) {
    let threads = rayon::current_num_threads();
    // The pool's bytes as 64-bit words (the few unaligned f16 at either end summed on their own), so
    // that the stream is one load and one add per 8 bytes: bounded by memory, not by widening 16-bit
    // values (a sum of the u16 bits ran at 0.9 of this).
    let sum = |h: &[f16]| -> u64 {
        // Chunks of whole 64-bit words, so that each chunk keeps the slice's alignment.
        let chunk = (h.len() / 4).div_ceil(threads * 8).max(1) * 4;
        h.par_chunks(chunk)
            .map(|c| wrapping_sum(c, 0))
            .reduce(|| 0, u64::wrapping_add)
    };
    let src = vec![1u8; copy_bytes];
    let mut dst = vec![0u8; copy_bytes];
    let cchunk = copy_bytes.div_ceil(threads * 8).max(1);
    let pool_bytes = (k_pool.len() + v_pool.len()) * std::mem::size_of::<f16>();
    // The kernel's runs back to back, then the read's, then the copy's (interleaving them round by
    // round was tried: the kernel measured up to a quarter slower right after a 268 MB stream or copy).
    let tk = median_time(reps, &mut kernel).as_secs_f64();
    let tr = median_time(reps, || {
        std::hint::black_box(sum(k_pool).wrapping_add(sum(v_pool)));
    })
    .as_secs_f64();
    let tc = median_time(reps, || {
        dst.par_chunks_mut(cchunk)
            .zip(src.par_chunks(cchunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
        std::hint::black_box(&dst);
    })
    .as_secs_f64();
    (tk, tr * read_bytes as f64 / pool_bytes.max(1) as f64, tc)
}

/// Median seconds of `reps` plain reads (after a warm-up read) of the K/V bytes a paged decode reads, in
/// the order its block tables visit them: each request's blocks in table order, every KV head of a block
/// at once (one contiguous run of `kv_heads · block_size · head_dim` values per pool), summed as 64-bit
/// words, with no software prefetch; each request's blocks are split into four tasks on the rayon pool.
/// What the memory system gives for the table's shape (one-token blocks are small pieces scattered over
/// the pool), against the sequential stream of [`host_decode_roofs`].
pub fn host_table_order_read(inp: &crate::compute::PagedDecodeInput, reps: usize) -> f64 {
    median_time(reps, || {
        std::hint::black_box(table_order_sum(inp));
    })
    .as_secs_f64()
}

/// The wrapping sum of every block the tables visit (all KV heads, K then V, 64-bit words where aligned
/// and the f16 bits elsewhere), read as [`host_table_order_read`] reads them.
fn table_order_sum(inp: &crate::compute::PagedDecodeInput) -> u64 {
    let span = inp.shape.kv_heads * inp.shape.block_size * inp.shape.head_dim;
    // Pools of another dtype than f16 read as empty: the sweep times f16 pools.
    let (k, v) = (
        inp.k_pool.as_f16().unwrap_or_default(),
        inp.v_pool.as_f16().unwrap_or_default(),
    );
    let sum = |pool: &[f16], base: usize, acc: u64| wrapping_sum(pool.get(base..base + span).unwrap_or_default(), acc);
    table_order_tasks(inp)
        .par_iter()
        .map(|blocks| {
            blocks.iter().fold(0u64, |acc, &b| {
                let base = inp.shape.index(b as usize, 0, 0, 0);
                sum(v, base, sum(k, base, acc))
            })
        })
        .reduce(|| 0, u64::wrapping_add)
}

/// `acc` plus the wrapping sum of `h`'s bits: its aligned middle as 64-bit words (one load and one add per
/// 8 bytes, so that a read is bounded by memory, not by widening 16-bit values), the few f16 at either
/// end on their own.
fn wrapping_sum(h: &[f16], acc: u64) -> u64 {
    let (head, words, tail) = bytemuck::pod_align_to::<f16, u64>(h);
    let acc = words.iter().fold(acc, |a, &x| a.wrapping_add(x));
    head.iter()
        .chain(tail)
        .fold(acc, |a, x| a.wrapping_add(u64::from(x.to_bits())))
}

/// The table-order read's tasks: each request's blocks in table order (as many as its context needs),
/// split into four runs.
fn table_order_tasks<'a>(inp: &crate::compute::PagedDecodeInput<'a>) -> Vec<&'a [i32]> {
    let mut tasks = Vec::new();
    for req in 0..inp.requests() {
        let nblocks = (inp.context_lens[req].max(0) as usize).div_ceil(inp.shape.block_size);
        let table = &inp.block_tables[req * inp.max_blocks..][..nblocks];
        tasks.extend(table.chunks(nblocks.div_ceil(4).max(1)));
    }
    tasks
}

#[cfg(test)]
mod tests {
    use crate::cache::{PagedKvCache, PagedShape};
    use crate::compute::DecodeTables;

    /// The table-order read visits each request's blocks once, in table order, for ragged requests (0,
    /// 1, 17 and 6 tokens at block size 4), and its sum runs over them without going out of bounds.
    #[test]
    fn the_table_order_read_visits_each_requests_blocks_in_order() {
        let shape = PagedShape {
            num_blocks: 12,
            block_size: 4,
            kv_heads: 2,
            head_dim: 3,
            dtype: crate::cache::KvDtype::F16,
        };
        let mut cache = PagedKvCache::new(shape);
        let reqs = [0, 1, 2, 3];
        for (r, n) in reqs.iter().zip([0, 1, 17, 6]) {
            cache.append_slots(*r, n).expect("room");
        }
        let tables = DecodeTables::new(&cache, &reqs);
        let q = vec![0f32; reqs.len() * 2 * 3];
        let inp = tables.input(&cache, &q, 2);
        let visited: Vec<i32> = super::table_order_tasks(&inp).concat();
        let want: Vec<i32> = reqs
            .iter()
            .flat_map(|&r| cache.table(r).unwrap_or_default().iter().map(|&b| b as i32))
            .collect();
        assert_eq!((visited.len(), &visited), (1 + 5 + 2, &want));
        std::hint::black_box(super::table_order_sum(&inp));
    }
}
