//! Scaled dot-product attention with multi-head, GQA and MQA, written once for f32 and f64.
//!
//! How it works: X `[T, d_model]` is projected by W_Q, W_K, W_V into Q `[H, T, hd]` and K, V
//! `[KVH, T, hd]`. For each query head `h`, the KV head is `h / (H / KVH)`. Scores are
//! `Q·Kᵀ / √hd` (a GEMM), masked entries become −∞, each row goes through a stable softmax, and
//! `P·V` (another GEMM) gives each head's output. The heads are concatenated and multiplied by W_O.
//! Heads run in parallel on the rayon pool.

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, Array3, ArrayView2, ArrayViewMut2, Axis, s};
use rayon::prelude::*;

use super::{Mask, Real, Rng};

/// The sizes of one attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttnShape {
    /// Number of tokens T.
    pub seq: usize,
    /// Model width d_model.
    pub d_model: usize,
    /// Query heads H.
    pub n_heads: usize,
    /// Key/value heads KVH (H for MHA, 1 for MQA, a divisor of H for GQA).
    pub n_kv_heads: usize,
}

/// Why a shape is not a valid attention layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// A size that must be positive is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// `heads` does not divide `d_model`.
    #[error("heads ({heads}) must divide d_model ({d_model}) so that head_dim = d_model / heads is whole")]
    HeadsDontDivide {
        /// Query heads.
        heads: usize,
        /// Model width.
        d_model: usize,
    },
    /// `kv_heads` does not divide `heads`.
    #[error("kv-heads ({kv_heads}) must divide heads ({heads}): each KV head serves a whole group of query heads")]
    KvHeadsDontDivide {
        /// KV heads.
        kv_heads: usize,
        /// Query heads.
        heads: usize,
    },
    /// A size too large for this teaching tool.
    #[error("{what} = {value} is larger than the limit {limit}")]
    TooLarge {
        /// Which size.
        what: &'static str,
        /// Its value.
        value: usize,
        /// The limit.
        limit: usize,
    },
}

/// The name of a layout with `kv_heads` K/V heads for `heads` query heads: MHA (one per query head),
/// MQA (one) or GQA (between).
pub fn kv_family(heads: usize, kv_heads: usize) -> &'static str {
    if kv_heads == heads {
        "MHA"
    } else if kv_heads == 1 {
        "MQA"
    } else {
        "GQA"
    }
}

impl AttnShape {
    /// Check the shape and return it.
    pub fn validated(self) -> Result<Self, ShapeError> {
        for (v, name) in [
            (self.seq, "seq"),
            (self.d_model, "d_model"),
            (self.n_heads, "heads"),
            (self.n_kv_heads, "kv-heads"),
        ] {
            if v == 0 {
                return Err(ShapeError::Zero(name));
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ShapeError::HeadsDontDivide {
                heads: self.n_heads,
                d_model: self.d_model,
            });
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(ShapeError::KvHeadsDontDivide {
                kv_heads: self.n_kv_heads,
                heads: self.n_heads,
            });
        }
        const MAX_SEQ: usize = 16_384;
        const MAX_D: usize = 8192;
        if self.seq > MAX_SEQ {
            return Err(ShapeError::TooLarge {
                what: "seq",
                value: self.seq,
                limit: MAX_SEQ,
            });
        }
        if self.d_model > MAX_D {
            return Err(ShapeError::TooLarge {
                what: "d_model",
                value: self.d_model,
                limit: MAX_D,
            });
        }
        // Scores and probabilities are [H, T, T] each; keep one under 512 MiB of f32.
        const MAX_SCORES: usize = 1 << 27;
        let cells = self.n_heads.saturating_mul(self.seq).saturating_mul(self.seq);
        if cells > MAX_SCORES {
            return Err(ShapeError::TooLarge {
                what: "heads × seq × seq",
                value: cells,
                limit: MAX_SCORES,
            });
        }
        Ok(self)
    }

    /// head_dim = d_model / heads.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Query heads per KV head (the GQA group size).
    pub fn group(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// The layout's name: MHA, GQA or MQA ([`kv_family`]).
    pub fn family(&self) -> &'static str {
        kv_family(self.n_heads, self.n_kv_heads)
    }

    /// The KV head that query head `h` reads.
    pub fn kv_head_of(&self, h: usize) -> usize {
        h / self.group()
    }
}

/// Inputs and weights of one layer.
#[derive(Debug, Clone)]
pub struct AttnWeights<T> {
    /// The shape these were made for.
    pub shape: AttnShape,
    /// Token activations `[T, d_model]`.
    pub x: Array2<T>,
    /// `[d_model, H·hd]`.
    pub wq: Array2<T>,
    /// `[d_model, KVH·hd]`.
    pub wk: Array2<T>,
    /// `[d_model, KVH·hd]`.
    pub wv: Array2<T>,
    /// `[H·hd, d_model]`.
    pub wo: Array2<T>,
}

impl AttnWeights<f32> {
    /// Reproducible inputs for `seed`: X ~ N(0, 1) and W ~ N(0, 1/d_model), so that Q and K entries
    /// have unit variance and the scaled scores are O(1).
    pub fn random(shape: AttnShape, seed: u64) -> Self {
        let (t, d, hd) = (shape.seq, shape.d_model, shape.head_dim());
        let w_scale = 1.0 / (d as f64).sqrt();
        let gen_mat = |stream: u64, rows: usize, cols: usize, scale: f64| {
            let data = Rng::stream(seed, stream).normal_vec(rows * cols, scale);
            Array2::from_shape_vec((rows, cols), data).expect("length matches shape")
        };
        AttnWeights {
            shape,
            x: gen_mat(1, t, d, 1.0),
            wq: gen_mat(2, d, shape.n_heads * hd, w_scale),
            wk: gen_mat(3, d, shape.n_kv_heads * hd, w_scale),
            wv: gen_mat(4, d, shape.n_kv_heads * hd, w_scale),
            wo: gen_mat(5, shape.n_heads * hd, d, w_scale),
        }
    }

    /// The same values in f64, for the oracle.
    pub fn to_f64(&self) -> AttnWeights<f64> {
        let c = |a: &Array2<f32>| a.mapv(|x| x as f64);
        AttnWeights {
            shape: self.shape,
            x: c(&self.x),
            wq: c(&self.wq),
            wk: c(&self.wk),
            wv: c(&self.wv),
            wo: c(&self.wo),
        }
    }
}

/// Q, K, V for every head.
#[derive(Debug, Clone)]
pub struct Qkv<T> {
    /// `[H, T, hd]`.
    pub q: Array3<T>,
    /// `[KVH, T, hd]`.
    pub k: Array3<T>,
    /// `[KVH, T, hd]`.
    pub v: Array3<T>,
}

/// What attention computes from Q, K, V.
#[derive(Debug, Clone, Default)]
pub struct AttnCore<T> {
    /// Scaled scores `[H, T, T]`, −∞ where masked.
    pub scores: Array3<T>,
    /// Softmax of each row `[H, T, T]`.
    pub probs: Array3<T>,
    /// `P·V` per head `[H, T, hd]`.
    pub out: Array3<T>,
}

/// Everything one layer computes, for exports and lessons.
#[derive(Debug, Clone)]
pub struct Forward<T> {
    /// Q, K, V.
    pub qkv: Qkv<T>,
    /// Scores, probabilities and per-head outputs.
    pub core: AttnCore<T>,
    /// Concatenated heads times W_O: `[T, d_model]`.
    pub y: Array2<T>,
}

/// `C = A·B` through the GEMM crate (ndarray → matrixmultiply).
pub fn matmul<T: Real>(a: ArrayView2<T>, b: ArrayView2<T>) -> Array2<T> {
    let mut c = Array2::<T>::zeros((a.nrows(), b.ncols()));
    general_mat_mul(T::one(), &a, &b, T::zero(), &mut c);
    c
}

/// `[T, n·hd]` → `[n, T, hd]`.
fn split_heads<T: Real>(m: &Array2<T>, n: usize, hd: usize) -> Array3<T> {
    let t = m.nrows();
    let mut out = Array3::<T>::zeros((n, t, hd));
    for h in 0..n {
        out.index_axis_mut(Axis(0), h)
            .assign(&m.slice(s![.., h * hd..(h + 1) * hd]));
    }
    out
}

/// Project X to Q, K, V.
pub fn project<T: Real>(w: &AttnWeights<T>) -> Qkv<T> {
    let (hd, sh) = (w.shape.head_dim(), w.shape);
    Qkv {
        q: split_heads(&matmul(w.x.view(), w.wq.view()), sh.n_heads, hd),
        k: split_heads(&matmul(w.x.view(), w.wk.view()), sh.n_kv_heads, hd),
        v: split_heads(&matmul(w.x.view(), w.wv.view()), sh.n_kv_heads, hd),
    }
}

/// A stable softmax of one row, in place. A row with every entry −∞ becomes all zeros.
pub fn softmax_row<T: Real>(row: &mut [T]) {
    let max = T::max_of_slice(row);
    if max == T::NEG_INFINITY {
        row.iter_mut().for_each(|x| *x = T::zero());
        return;
    }
    let inv = T::one() / T::exp_shifted_sum(row, max);
    row.iter_mut().for_each(|x| *x = *x * inv);
}

/// Rows per tile in [`one_head`]: a tile's scores stay in cache between the GEMM, the softmax and P·V.
const ROW_TILE: usize = 64;

/// Keys a query row may see lie in `0..end(i)`: causal masks never look right of the diagonal, so a
/// tile of rows `i0..i1` needs only keys `0..i1` and the GEMMs skip the masked upper triangle.
fn key_end(mask: Mask, i1: usize, t: usize) -> usize {
    match mask {
        Mask::None => t,
        Mask::Causal | Mask::Window { .. } => i1,
    }
}

/// Where one head writes: its output and the full score and probability matrices (the lessons show
/// them; the CPU backend's fused f32 kernel, which keeps none, is `compute::ops::attention_fused::cpu`).
struct HeadOut<'a, T> {
    out: ArrayViewMut2<'a, T>,
    scores: ArrayViewMut2<'a, T>,
    probs: ArrayViewMut2<'a, T>,
}

/// Scores, mask, softmax and P·V for one query head, `ROW_TILE` query rows at a time. The tile's
/// scores live in a scratch buffer that stays in cache from the GEMM through the softmax to P·V.
fn one_head<T: Real>(q: ArrayView2<T>, k: ArrayView2<T>, v: ArrayView2<T>, mask: Mask, mut dst: HeadOut<T>) {
    let t = q.nrows();
    let scale = T::from_f64(1.0 / (q.ncols() as f64).sqrt());
    let mut scratch = Array2::<T>::zeros((ROW_TILE.min(t), t));
    for i0 in (0..t).step_by(ROW_TILE) {
        let i1 = (i0 + ROW_TILE).min(t);
        let end = key_end(mask, i1, t);
        let mut tile = scratch.slice_mut(s![0..i1 - i0, 0..end]);
        general_mat_mul(
            scale,
            &q.slice(s![i0..i1, ..]),
            &k.slice(s![0..end, ..]).t(),
            T::zero(),
            &mut tile,
        );
        for (r, mut row) in tile.rows_mut().into_iter().enumerate() {
            let row = row.as_slice_mut().expect("scratch rows are contiguous");
            for gap in mask.hidden(i0 + r, end) {
                row[gap].fill(T::NEG_INFINITY);
            }
        }
        let mut st = dst.scores.slice_mut(s![i0..i1, ..]);
        st.slice_mut(s![.., 0..end]).assign(&tile);
        st.slice_mut(s![.., end..]).fill(T::NEG_INFINITY);
        for mut row in tile.rows_mut() {
            softmax_row(row.as_slice_mut().expect("scratch rows are contiguous"));
        }
        let mut pt = dst.probs.slice_mut(s![i0..i1, ..]);
        pt.slice_mut(s![.., 0..end]).assign(&tile);
        pt.slice_mut(s![.., end..]).fill(T::zero());
        general_mat_mul(
            T::one(),
            &tile,
            &v.slice(s![0..end, ..]),
            T::zero(),
            &mut dst.out.slice_mut(s![i0..i1, ..]),
        );
    }
}

/// Attention over Q `[H,T,hd]`, K and V `[KVH,T,hd]` with `mask`, keeping the score and probability
/// matrices. Heads run in parallel.
pub fn attention_core<T: Real>(q: &Array3<T>, k: &Array3<T>, v: &Array3<T>, mask: Mask) -> AttnCore<T> {
    let (h, t, hd) = q.dim();
    let group = h / k.dim().0;
    let mut scores = Array3::<T>::zeros((h, t, t));
    let mut probs = Array3::<T>::zeros((h, t, t));
    let mut out = Array3::<T>::zeros((h, t, hd));
    scores
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(probs.axis_iter_mut(Axis(0)).into_par_iter())
        .zip(out.axis_iter_mut(Axis(0)).into_par_iter())
        .enumerate()
        .for_each(|(head, ((s, p), o))| {
            let kv = head / group;
            one_head(
                q.index_axis(Axis(0), head),
                k.index_axis(Axis(0), kv),
                v.index_axis(Axis(0), kv),
                mask,
                HeadOut {
                    out: o,
                    scores: s,
                    probs: p,
                },
            );
        });
    AttnCore { scores, probs, out }
}

/// Concatenate heads `[H,T,hd]` → `[T, H·hd]` and multiply by W_O.
pub fn output_projection<T: Real>(out: &Array3<T>, wo: &Array2<T>) -> Array2<T> {
    let (h, t, hd) = out.dim();
    let mut cat = Array2::<T>::zeros((t, h * hd));
    for head in 0..h {
        cat.slice_mut(s![.., head * hd..(head + 1) * hd])
            .assign(&out.index_axis(Axis(0), head));
    }
    matmul(cat.view(), wo.view())
}

/// The whole layer: projections, attention and W_O.
pub fn forward<T: Real>(w: &AttnWeights<T>, mask: Mask) -> Forward<T> {
    let qkv = project(w);
    let core = attention_core(&qkv.q, &qkv.k, &qkv.v, mask);
    let y = output_projection(&core.out, &w.wo);
    Forward { qkv, core, y }
}

/// Decode attention for one query token per head in f64: `q [H, hd]`, `k`/`v` `[KVH, n, hd]`.
/// This is the oracle for the paged and static decode kernels.
pub fn decode_attention_f64(q: &Array2<f64>, k: &Array3<f64>, v: &Array3<f64>) -> Array2<f64> {
    let (h, hd) = q.dim();
    let (kvh, n, _) = k.dim();
    let group = h / kvh;
    let scale = 1.0 / (hd as f64).sqrt();
    let mut out = Array2::<f64>::zeros((h, hd));
    for head in 0..h {
        let kv = head / group;
        let kk = k.index_axis(Axis(0), kv);
        let mut s: Vec<f64> = (0..n).map(|j| kk.row(j).dot(&q.row(head)) * scale).collect();
        softmax_row(&mut s);
        let vv = v.index_axis(Axis(0), kv);
        for (j, p) in s.iter().enumerate() {
            out.row_mut(head).scaled_add(*p, &vv.row(j));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seq: usize, d: usize, h: usize, kvh: usize) -> AttnShape {
        AttnShape {
            seq,
            d_model: d,
            n_heads: h,
            n_kv_heads: kvh,
        }
        .validated()
        .unwrap()
    }

    fn naive_matmul(a: &Array2<f64>, b: &Array2<f64>) -> Array2<f64> {
        let mut c = Array2::zeros((a.nrows(), b.ncols()));
        for i in 0..a.nrows() {
            for j in 0..b.ncols() {
                c[[i, j]] = (0..a.ncols()).map(|k| a[[i, k]] * b[[k, j]]).sum();
            }
        }
        c
    }

    #[test]
    fn gemm_wrapper_matches_triple_loop() {
        let w = AttnWeights::random(shape(7, 12, 3, 1), 3).to_f64();
        let fast = matmul(w.x.view(), w.wq.view());
        let slow = naive_matmul(&w.x, &w.wq);
        assert!((fast - slow).iter().all(|d| d.abs() < 1e-12));
    }

    #[test]
    fn softmax_rows_sum_to_one_and_causal_is_lower_triangular() {
        let w = AttnWeights::random(shape(9, 16, 4, 2), 1).to_f64();
        let f = forward(&w, Mask::Causal);
        for row in f.core.probs.rows() {
            assert!((row.sum() - 1.0).abs() < 1e-12);
        }
        for ((_, i, j), p) in f.core.probs.indexed_iter() {
            if j > i {
                assert_eq!(*p, 0.0);
                assert_eq!(f.core.scores[[0, i, j]], f64::NEG_INFINITY);
            }
        }
    }

    #[test]
    fn fully_masked_row_gives_zeros_not_nan() {
        let mut row = [f64::NEG_INFINITY; 4];
        softmax_row(&mut row);
        assert_eq!(row, [0.0; 4]);
    }

    #[test]
    fn gqa_with_all_kv_heads_equals_mha_and_shared_kv_is_really_shared() {
        let w = AttnWeights::random(shape(6, 16, 4, 4), 5).to_f64();
        let qkv = project(&w);
        let mha = attention_core(&qkv.q, &qkv.k, &qkv.v, Mask::Causal);
        // Build an MQA layer by using KV head 0 for everyone, and compare with repeating it by hand.
        let k1 = qkv.k.slice(s![0..1, .., ..]).to_owned();
        let v1 = qkv.v.slice(s![0..1, .., ..]).to_owned();
        let mqa = attention_core(&qkv.q, &k1, &v1, Mask::Causal);
        let k_rep = ndarray::concatenate(Axis(0), &[k1.view(), k1.view(), k1.view(), k1.view()]).unwrap();
        let v_rep = ndarray::concatenate(Axis(0), &[v1.view(), v1.view(), v1.view(), v1.view()]).unwrap();
        let rep = attention_core(&qkv.q, &k_rep, &v_rep, Mask::Causal);
        assert_eq!(mqa.out, rep.out);
        assert_ne!(mqa.out, mha.out);
    }

    #[test]
    fn f32_path_tracks_f64_oracle() {
        let w = AttnWeights::random(shape(33, 48, 6, 3), 9);
        let a = forward(&w, Mask::Window { window: 5, sinks: 2 });
        let b = forward(&w.to_f64(), Mask::Window { window: 5, sinks: 2 });
        let err =
            a.y.iter()
                .zip(b.y.iter())
                .map(|(x, y)| (*x as f64 - y).abs())
                .fold(0.0, f64::max);
        assert!(err < 1e-4, "max err {err}");
    }

    #[test]
    fn edge_shapes() {
        // T=1, one head, head_dim 1, window >= T, sinks > window.
        for (sh, mask) in [
            (shape(1, 1, 1, 1), Mask::Causal),
            (shape(5, 3, 3, 1), Mask::Window { window: 10, sinks: 0 }),
            (shape(5, 4, 2, 2), Mask::Window { window: 1, sinks: 4 }),
        ] {
            let f = forward(&AttnWeights::random(sh, 2).to_f64(), mask);
            assert!(f.y.iter().all(|x| x.is_finite()));
            for row in f.core.probs.rows() {
                assert!((row.sum() - 1.0).abs() < 1e-12);
            }
        }
        // head_dim 1 and T = 1: the only probability is 1 and out = v.
        let w = AttnWeights::random(shape(1, 2, 2, 1), 4).to_f64();
        let f = forward(&w, Mask::Causal);
        assert_eq!(f.core.probs[[0, 0, 0]], 1.0);
        assert_eq!(f.core.out[[1, 0, 0]], f.qkv.v[[0, 0, 0]]);
    }

    #[test]
    fn shape_errors_are_clear() {
        let e = AttnShape {
            seq: 4,
            d_model: 10,
            n_heads: 3,
            n_kv_heads: 1,
        }
        .validated()
        .unwrap_err();
        assert!(e.to_string().contains("must divide d_model"));
        let e = AttnShape {
            seq: 4,
            d_model: 12,
            n_heads: 4,
            n_kv_heads: 3,
        }
        .validated()
        .unwrap_err();
        assert!(e.to_string().contains("kv-heads (3) must divide heads (4)"));
        assert!(
            AttnShape {
                seq: 0,
                d_model: 12,
                n_heads: 4,
                n_kv_heads: 1
            }
            .validated()
            .is_err()
        );
        let e = AttnShape {
            seq: 16_384,
            d_model: 8192,
            n_heads: 64,
            n_kv_heads: 8,
        }
        .validated()
        .unwrap_err();
        assert!(e.to_string().contains("heads × seq × seq"), "{e}");
        assert!(
            AttnShape {
                seq: 8192,
                d_model: 64,
                n_heads: 1,
                n_kv_heads: 1
            }
            .validated()
            .is_ok()
        );
    }
}
