//! GEMMs: [`sgemm`] (the one call into the `gemm` crate, the benchmark's baseline) and the fused
//! attention's 6 × 16 register tile [`micro_gemm`].

#[allow(unused_imports)]
use super::*;

/// `C = A·B` in f32 through the `gemm` crate (its own run-time dispatch to AVX2/AVX-512/NEON kernels),
/// on `threads` rayon threads (1: this thread only). The fastest GEMM this project can call from Rust:
/// `kvscope bench` measures P1 against it.
pub fn sgemm(a: ndarray::ArrayView2<f32>, b: ndarray::ArrayView2<f32>, threads: usize) -> ndarray::Array2<f32> {
    let mut c = ndarray::Array2::<f32>::zeros((a.nrows(), b.ncols()));
    sgemm_into(1.0, a, b, c.view_mut(), threads);
    c
}

/// `C = scale · A·B` into the view `c` (its old values are not read), as [`sgemm`].
pub fn sgemm_into(
    scale: f32,
    a: ndarray::ArrayView2<f32>,
    b: ndarray::ArrayView2<f32>,
    mut c: ndarray::ArrayViewMut2<f32>,
    threads: usize,
) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert!(
        k == k2 && c.dim() == (m, n),
        "sgemm: {m}×{k} · {k2}×{n} into {:?}",
        c.dim()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let par = if threads > 1 {
        ::gemm::Parallelism::Rayon(threads)
    } else {
        ::gemm::Parallelism::None
    };
    let (sa, sb, sc) = (a.strides().to_vec(), b.strides().to_vec(), c.strides().to_vec());
    // SAFETY: the pointers and the element strides (ndarray reports row stride, then column stride;
    // the gemm crate takes column stride, then row stride) describe exactly the m×k, k×n and m×n arrays
    // borrowed here; `c` is borrowed mutably, so it aliases neither input; `read_dst` is false, so its
    // old values are never read.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            sc[1],
            sc[0],
            false,
            a.as_ptr(),
            sa[1],
            sa[0],
            b.as_ptr(),
            sb[1],
            sb[0],
            0.0,
            scale,
            false,
            false,
            false,
            par,
        );
    }
}

/// Rows of the register tile [`micro_gemm`] keeps in accumulators (one broadcast each).
pub const MICRO_ROWS: usize = 6;
/// Columns of that tile (two 8-lane vectors): 6 × 16 = twelve accumulators, the shape the `gemm`
/// crate's AVX2 kernel uses too.
pub const MICRO_COLS: usize = 16;

/// A matrix operand read in place, without packing: element (i, p) is `data[i·rs + p·cs]`, so the same
/// buffer serves as a matrix (cs = 1) or as its transpose (rs = 1).
#[derive(Clone, Copy)]
pub struct Strided<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Step between rows.
    pub rs: usize,
    /// Step between columns.
    pub cs: usize,
}

/// One register tile of a product: `c[i·ldc + j] = Σ_{p<k} a(i, p) · b[p·ldb + j]` for `i < m ≤ 6`,
/// `j < n ≤ 16` (old values of `c` are overwritten). Each sum runs over p in order with one fused
/// multiply-add per term, in every build and on every tile shape, so the bits do not depend on the CPU
/// or on where a tile falls. A full-width tile (n = 16) runs in AVX2 registers where the CPU has them:
/// per p, two loads of B, m broadcasts of A and 2m FMAs; nothing is packed, so a caller can keep K, V
/// and the score tile where they are.
#[allow(clippy::too_many_arguments)]
pub fn micro_gemm(m: usize, n: usize, k: usize, a: Strided, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    assert!(m <= MICRO_ROWS && n <= MICRO_COLS, "micro_gemm: a {m} × {n} tile");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        (0..m).for_each(|i| c[i * ldc..i * ldc + n].fill(0.0));
        return;
    }
    assert!(
        (m - 1) * a.rs + (k - 1) * a.cs < a.data.len() && (k - 1) * ldb + n <= b.len() && (m - 1) * ldc + n <= c.len(),
        "micro_gemm: operands too short for a {m} × {n} × {k} tile"
    );
    #[cfg(target_arch = "x86_64")]
    if n == MICRO_COLS && accelerated() {
        // SAFETY: `accelerated()` just checked that this CPU has AVX2 and FMA, the features the
        // `micro_avx2` versions are compiled for; they take only safe references.
        unsafe {
            match m {
                6 => micro_avx2::<6>(k, a, b, ldb, c, ldc),
                5 => micro_avx2::<5>(k, a, b, ldb, c, ldc),
                4 => micro_avx2::<4>(k, a, b, ldb, c, ldc),
                3 => micro_avx2::<3>(k, a, b, ldb, c, ldc),
                2 => micro_avx2::<2>(k, a, b, ldb, c, ldc),
                _ => micro_avx2::<1>(k, a, b, ldb, c, ldc),
            }
        }
        return;
    }
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for p in 0..k {
                s = a.data[i * a.rs + p * a.cs].mul_add(b[p * ldb + j], s);
            }
            c[i * ldc + j] = s;
        }
    }
}

/// The full-width tile of [`micro_gemm`] in AVX2: `M` rows × 16 columns of accumulators.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) fn micro_avx2<const M: usize>(k: usize, a: Strided, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    use std::arch::x86_64::*;
    assert!(
        k >= 1
            && (M - 1) * a.rs + (k - 1) * a.cs < a.data.len()
            && (k - 1) * ldb + 16 <= b.len()
            && (M - 1) * ldc + 16 <= c.len()
    );
    let (ap, bp, cp) = (a.data.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut acc = [[_mm256_setzero_ps(); 2]; M];
    for p in 0..k {
        // SAFETY: p < k, so B's loads end at (k−1)·ldb + 16 <= b.len() and A's broadcasts index at
        // most (M−1)·rs + (k−1)·cs < a.data.len(), as asserted above; unaligned loads.
        unsafe {
            let b0 = _mm256_loadu_ps(bp.add(p * ldb));
            let b1 = _mm256_loadu_ps(bp.add(p * ldb + 8));
            for (i, ai) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*ap.add(i * a.rs + p * a.cs));
                ai[0] = _mm256_fmadd_ps(x, b0, ai[0]);
                ai[1] = _mm256_fmadd_ps(x, b1, ai[1]);
            }
        }
    }
    for (i, ai) in acc.iter().enumerate() {
        // SAFETY: row i < M ends at (M−1)·ldc + 16 <= c.len(), as asserted above; unaligned stores.
        unsafe {
            _mm256_storeu_ps(cp.add(i * ldc), ai[0]);
            _mm256_storeu_ps(cp.add(i * ldc + 8), ai[1]);
        }
    }
}
