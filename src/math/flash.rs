//! FlashAttention's tiling and online softmax, walked tile by tile, with the global-memory traffic it
//! implies counted as the code runs.
//!
//! How it works (FlashAttention-2's forward loop, one head): the T query rows are cut into row blocks of
//! `Br`, the T keys into column tiles of `Bc`. For each row block, Q's tile is read once; for each key tile
//! that the mask does not hide entirely, K's and V's tiles are read, the `Br × Bc` scores are computed
//! on chip, and every row keeps a running max `m`, a running sum `l` and an unnormalised output
//! accumulator: `m_new = max(m, rowmax(S))`, the old sum and accumulator are rescaled by
//! `exp(m − m_new)`, then `l += Σ exp(S − m_new)` and `acc += exp(S − m_new)·V`. After the last tile the
//! row block's output `acc / l` is written once. The walker records the state after every tile (the
//! lesson's stepper needs it: a kernel cannot report its intermediate states) and counts elements read
//! from and written to global memory; [`naive_io`] counts the same for the materialising three-kernel
//! path (scores, softmax, P·V), which writes and rereads the T×T matrices.

use ndarray::{Array2, Array3, ArrayView2, Axis};

use super::Mask;

/// Elements read from and written to global memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Io {
    /// Elements read.
    pub read: u64,
    /// Elements written.
    pub write: u64,
}

/// The naive (v1) path for one head of `t` tokens and head_dim `hd`: scores read Q and K and write S;
/// softmax reads S and writes P; P·V reads P and V and writes O.
pub fn naive_io(t: usize, hd: usize) -> Io {
    let (t, hd) = (t as u64, hd as u64);
    Io {
        read: (t * hd + t * hd) + t * t + (t * t + t * hd),
        write: t * t + t * t + t * hd,
    }
}

/// One tile step of the walk.
#[derive(Debug, Clone, PartialEq)]
pub struct TileStep {
    /// The row block (queries `row_block·Br ..`).
    pub row_block: usize,
    /// The key tile (keys `col_tile·Bc ..`).
    pub col_tile: usize,
    /// The query rows and keys the tile covers.
    pub rows: std::ops::Range<usize>,
    /// Its keys.
    pub cols: std::ops::Range<usize>,
    /// Whether the mask hides the whole tile (then nothing is read or computed).
    pub skipped: bool,
    /// Running max per row of the block after this tile.
    pub m: Vec<f32>,
    /// Running sum per row after this tile.
    pub l: Vec<f32>,
    /// The factor `exp(m_old − m_new)` this tile applied to each row's sum and accumulator.
    pub rescale: Vec<f32>,
    /// The unnormalised accumulator `[rows, hd]` after this tile.
    pub acc: Vec<f32>,
    /// Global-memory traffic so far (the whole walk, not only this block).
    pub io: Io,
}

/// The walk of one head: every tile step, the output and the traffic.
#[derive(Debug, Clone)]
pub struct FlashWalk {
    /// Rows per query block.
    pub br: usize,
    /// Keys per tile.
    pub bc: usize,
    /// Every tile, row block by row block.
    pub steps: Vec<TileStep>,
    /// The output `[T, hd]`.
    pub out: Array2<f32>,
    /// The total traffic.
    pub io: Io,
    /// Tiles the mask hid entirely.
    pub skipped: usize,
}

/// Whether `mask` hides every (query, key) pair of the tile (the kernel's skip rule).
pub fn tile_hidden(mask: Mask, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> bool {
    !rows.into_iter().any(|i| cols.clone().any(|j| mask.visible(i, j)))
}

/// Walk FlashAttention over one head: `q`, `k`, `v` are `[T, hd]`, tiles of `br` query rows and `bc`
/// keys (both at least 1). Scores are scaled by `1/√hd`.
pub fn walk(q: ArrayView2<f32>, k: ArrayView2<f32>, v: ArrayView2<f32>, mask: Mask, br: usize, bc: usize) -> FlashWalk {
    walk_impl(q, k, v, mask, br, bc, true)
}

/// The tiled forward pass of every head (`q` `[H,T,hd]`, `k` and `v` `[KVH,T,hd]`, query head `h` reads
/// KV head `h / (H/KVH)`), heads in parallel, without recording the steps: the CPU backend's
/// `flash_attention`, the same algorithm the kernels run.
pub fn forward(q: &Array3<f32>, k: &Array3<f32>, v: &Array3<f32>, mask: Mask, br: usize, bc: usize) -> Array3<f32> {
    use rayon::prelude::*;
    let (h, t, hd) = q.dim();
    let group = (h / k.dim().0.max(1)).max(1);
    let heads: Vec<Array2<f32>> = (0..h)
        .into_par_iter()
        .map(|hh| {
            let kv = hh / group;
            let (qh, kh, vh) = (
                q.index_axis(Axis(0), hh),
                k.index_axis(Axis(0), kv),
                v.index_axis(Axis(0), kv),
            );
            walk_impl(qh, kh, vh, mask, br, bc, false).out
        })
        .collect();
    let mut out = Array3::<f32>::zeros((h, t, hd));
    for (hh, o) in heads.into_iter().enumerate() {
        out.index_axis_mut(Axis(0), hh).assign(&o);
    }
    out
}

/// The global-memory traffic of one head's walk (`k` and `v` have `q`'s shape; only shapes, tiles and
/// mask matter, so a head of zeros will do).
pub fn forward_io(q: ArrayView2<f32>, mask: Mask, br: usize, bc: usize) -> Io {
    walk_impl(q, q, q, mask, br, bc, false).io
}

fn walk_impl(
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    mask: Mask,
    br: usize,
    bc: usize,
    record: bool,
) -> FlashWalk {
    let (t, hd) = q.dim();
    let (br, bc) = (br.max(1), bc.max(1));
    let scale = 1.0 / (hd.max(1) as f32).sqrt();
    let mut out = Array2::<f32>::zeros((t, hd));
    let mut io = Io::default();
    let mut steps = Vec::new();
    let mut skipped = 0;
    for (rb, i0) in (0..t).step_by(br).enumerate() {
        let rows = i0..(i0 + br).min(t);
        let n = rows.len();
        io.read += (n * hd) as u64; // Q's tile, once per row block
        let mut m = vec![f32::NEG_INFINITY; n];
        let mut l = vec![0f32; n];
        let mut acc = vec![0f32; n * hd];
        for (ct, j0) in (0..t).step_by(bc).enumerate() {
            let cols = j0..(j0 + bc).min(t);
            if tile_hidden(mask, rows.clone(), cols.clone()) {
                skipped += 1;
                if !record {
                    continue;
                }
                steps.push(TileStep {
                    row_block: rb,
                    col_tile: ct,
                    rows: rows.clone(),
                    cols,
                    skipped: true,
                    m: m.clone(),
                    l: l.clone(),
                    rescale: vec![1.0; n],
                    acc: acc.clone(),
                    io,
                });
                continue;
            }
            io.read += (2 * cols.len() * hd) as u64; // K's and V's tiles
            let mut rescale = vec![1f32; n];
            for (r, i) in rows.clone().enumerate() {
                let s: Vec<f32> = cols
                    .clone()
                    .map(|j| {
                        if mask.visible(i, j) {
                            (0..hd).map(|d| q[[i, d]] * k[[j, d]]).sum::<f32>() * scale
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                    .collect();
                let m_new = s.iter().copied().fold(m[r], f32::max);
                if m_new == f32::NEG_INFINITY {
                    continue; // nothing visible yet in this row
                }
                let corr = (m[r] - m_new).exp(); // exp(−∞) = 0 on the row's first visible tile
                rescale[r] = corr;
                l[r] *= corr;
                let a = &mut acc[r * hd..(r + 1) * hd];
                a.iter_mut().for_each(|x| *x *= corr);
                for (c, j) in cols.clone().enumerate() {
                    let p = (s[c] - m_new).exp();
                    l[r] += p;
                    for d in 0..hd {
                        a[d] += p * v[[j, d]];
                    }
                }
                m[r] = m_new;
            }
            if !record {
                continue;
            }
            steps.push(TileStep {
                row_block: rb,
                col_tile: ct,
                rows: rows.clone(),
                cols,
                skipped: false,
                m: m.clone(),
                l: l.clone(),
                rescale,
                acc: acc.clone(),
                io,
            });
        }
        for (r, i) in rows.clone().enumerate() {
            let inv = if l[r] > 0.0 { 1.0 / l[r] } else { 0.0 };
            for d in 0..hd {
                out[[i, d]] = acc[r * hd + d] * inv;
            }
        }
        io.write += (n * hd) as u64; // O's tile, once
        if let Some(last) = steps.last_mut() {
            last.io = io;
        }
    }
    FlashWalk {
        br,
        bc,
        steps,
        out,
        io,
        skipped,
    }
}

/// One query row's attention over a slice of the keys, not yet normalised: the max score `m`, the sum
/// `l = Σ exp(s − m)` and the accumulator `Σ exp(s − m)·v`. A split-K (FlashDecoding) partition, or one
/// partition of the split-context paged decode kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    /// The keys it covers.
    pub keys: std::ops::Range<usize>,
    /// Max score (−∞ when it covers no visible key).
    pub m: f32,
    /// Sum of `exp(s − m)`.
    pub l: f32,
    /// Unnormalised accumulator `[hd]`.
    pub acc: Vec<f32>,
}

impl Partial {
    /// The partition's own normalised output `acc / l` (what a split kernel writes per partition).
    pub fn out(&self) -> Vec<f32> {
        let inv = if self.l > 0.0 { 1.0 / self.l } else { 0.0 };
        self.acc.iter().map(|a| a * inv).collect()
    }
}

/// The partial result of query row `q` (`[hd]`, unscaled) over `keys` of `k` and `v` (`[T, hd]`), keys
/// the row may see only (`visible`), scores scaled by `1/√hd`.
pub fn partial(
    q: &[f32],
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    keys: std::ops::Range<usize>,
    visible: impl Fn(usize) -> bool,
) -> Partial {
    let hd = q.len();
    let scale = 1.0 / (hd.max(1) as f32).sqrt();
    let s: Vec<(usize, f32)> = keys
        .clone()
        .filter(|&j| visible(j))
        .map(|j| (j, (0..hd).map(|d| q[d] * k[[j, d]]).sum::<f32>() * scale))
        .collect();
    let m = s.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
    let mut l = 0f32;
    let mut acc = vec![0f32; hd];
    for &(j, sj) in &s {
        let p = (sj - m).exp();
        l += p;
        for d in 0..hd {
            acc[d] += p * v[[j, d]];
        }
    }
    Partial { keys, m, l, acc }
}

/// Merge two partial results with the online softmax's rescaling: `m = max(m₁, m₂)`, each side's sum and
/// accumulator scaled by `exp(mᵢ − m)`. Returns the merged partial and the two factors. The merge is
/// exact: merging the partitions of a row gives the row's full attention.
pub fn merge(a: &Partial, b: &Partial) -> (Partial, [f32; 2]) {
    let m = a.m.max(b.m);
    let f = |x: f32| if x == f32::NEG_INFINITY { 0.0 } else { (x - m).exp() };
    let (ca, cb) = (f(a.m), f(b.m));
    let acc = a.acc.iter().zip(&b.acc).map(|(x, y)| x * ca + y * cb).collect();
    let keys = a.keys.start.min(b.keys.start)..a.keys.end.max(b.keys.end);
    (
        Partial {
            keys,
            m,
            l: a.l * ca + b.l * cb,
            acc,
        },
        [ca, cb],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two partitions merged equal one partition over all the keys; an empty partition (nothing
    /// visible) contributes nothing.
    #[test]
    fn merging_partitions_equals_the_whole_row() {
        let mut rng = crate::math::Rng::new(5);
        let (t, hd) = (11, 3);
        let k = Array2::from_shape_vec((t, hd), rng.normal_vec(t * hd, 1.0)).unwrap();
        let v = Array2::from_shape_vec((t, hd), rng.normal_vec(t * hd, 1.0)).unwrap();
        let q = rng.normal_vec(hd, 1.0);
        let whole = partial(&q, k.view(), v.view(), 0..t, |_| true);
        for split in [1, 5, 10] {
            let (a, b) = (
                partial(&q, k.view(), v.view(), 0..split, |_| true),
                partial(&q, k.view(), v.view(), split..t, |_| true),
            );
            let (m, [ca, cb]) = merge(&a, &b);
            assert_eq!(m.m, whole.m);
            assert!((m.l - whole.l).abs() < 1e-5, "{} {}", m.l, whole.l);
            assert!(ca <= 1.0 && cb <= 1.0 && (ca == 1.0 || cb == 1.0));
            for (x, y) in m.out().iter().zip(whole.out()) {
                assert!((x - y).abs() < 1e-5);
            }
        }
        let empty = partial(&q, k.view(), v.view(), 0..t, |_| false);
        let (m, [c0, _]) = merge(&empty, &whole);
        assert_eq!((c0, m.out()), (0.0, whole.out()));
    }

    /// The closed forms of the traffic: naive reads Q, K, S, P, V and writes S, P, O; flash reads Q
    /// once, K and V once per row block and visible tile, and writes O once.
    #[test]
    fn traffic_matches_the_closed_forms() {
        for (t, hd, br, bc) in [
            (1, 1, 1, 1),
            (8, 4, 2, 2),
            (37, 16, 8, 5),
            (64, 8, 16, 16),
            (10, 3, 4, 7),
        ] {
            let z = Array2::<f32>::zeros((t, hd));
            let n = naive_io(t, hd);
            let (t64, hd64) = (t as u64, hd as u64);
            assert_eq!(n.read, 3 * t64 * hd64 + 2 * t64 * t64);
            assert_eq!(n.write, 2 * t64 * t64 + t64 * hd64);
            let full = walk(z.view(), z.view(), z.view(), Mask::None, br, bc);
            let blocks = t.div_ceil(br) as u64;
            assert_eq!(
                full.io.read,
                t64 * hd64 + blocks * 2 * t64 * hd64,
                "none t{t} br{br} bc{bc}"
            );
            assert_eq!(full.io.write, t64 * hd64);
            assert_eq!(full.skipped, 0);
            // Causal: row block r (rows up to i1) reads keys of the tiles that start at or before i1 − 1.
            let causal = walk(z.view(), z.view(), z.view(), Mask::Causal, br, bc);
            let keys: u64 = (0..t)
                .step_by(br)
                .map(|i0| {
                    let i1 = (i0 + br).min(t);
                    ((i1 - 1) / bc * bc + bc).min(t) as u64
                })
                .sum();
            assert_eq!(
                causal.io.read,
                t64 * hd64 + 2 * hd64 * keys,
                "causal t{t} br{br} bc{bc}"
            );
            let tiles = (t.div_ceil(br) * t.div_ceil(bc)) as u64;
            let visited = tiles - causal.skipped as u64;
            assert!(causal.skipped as u64 <= tiles / 2 + 1 && visited >= 1);
        }
    }
}
