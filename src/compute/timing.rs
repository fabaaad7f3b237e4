//! Timing helpers shared by the backends' default timings and the benchmarks: a median of repeated
//! runs, and the host's memory roofs measured on the same threads: a read-only stream (a sum) and a
//! copy.

use std::time::{Duration, Instant};

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

/// Seconds of one parallel read-only pass over `bytes` bytes (a wrapping sum of 64-bit words on every
/// rayon thread, the way the decode spreads its reads), median of `reps`.
pub fn host_read_seconds(bytes: usize, reps: usize) -> f64 {
    let words = bytes.div_ceil(8).max(1);
    let data: Vec<u64> = (0..words as u64).collect();
    let chunk = words.div_ceil(rayon::current_num_threads() * 8).max(1);
    median_time(reps, || {
        let sum = data
            .par_chunks(chunk)
            .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
            .reduce(|| 0, u64::wrapping_add);
        std::hint::black_box(sum);
    })
    .as_secs_f64()
}

/// Seconds of one parallel host copy of `bytes` bytes (every rayon thread, like the decode), median
/// of `reps`.
pub fn host_copy_seconds(bytes: usize, reps: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let chunk = bytes.div_ceil(rayon::current_num_threads() * 8).max(1);
    median_time(reps, || {
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
        std::hint::black_box(&dst);
    })
    .as_secs_f64()
}
