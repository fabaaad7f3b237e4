//! Timing helpers shared by the backends' default timings and the benchmarks: a median of repeated
//! runs, and the host's memory roofs measured on the same threads: a read-only stream (a sum) and a
//! copy.

use std::time::{Duration, Instant};

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
        let (head, words, tail) = bytemuck::pod_align_to::<f16, u64>(h);
        let chunk = words.len().div_ceil(threads * 8).max(1);
        let body = words
            .par_chunks(chunk)
            .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
            .reduce(|| 0, u64::wrapping_add);
        let ends = head
            .iter()
            .chain(tail)
            .fold(0u64, |a, x| a.wrapping_add(u64::from(x.to_bits())));
        body.wrapping_add(ends)
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
