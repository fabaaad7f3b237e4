//! The FlashAttention tile walker (`math::flash`) against the f64 reference through the shared checker:
//! its output equals full attention, and after a row block's last tile its running max and sum equal
//! the max and the sum of the full softmax of that row. Ragged tiles, T = 1, Br = 1, head_dim 1 and 3,
//! no mask, causal and a sliding window.

use kvscope::compute::{Tolerance, check};
use kvscope::math::flash::walk;
use kvscope::math::{Mask, Rng, attention_core};
use ndarray::{Array2, Array3, Axis};

fn rand(rng: &mut Rng, t: usize, hd: usize) -> Array2<f32> {
    Array2::from_shape_vec((t, hd), rng.normal_vec(t * hd, 1.0)).unwrap()
}

#[test]
fn the_walk_equals_full_attention_and_its_softmax() {
    let mut rng = Rng::new(13);
    let masks = [Mask::None, Mask::Causal, Mask::Window { window: 3, sinks: 1 }];
    for (t, hd, br, bc) in [
        (1, 1, 1, 1),
        (7, 3, 2, 3),
        (16, 8, 4, 4),
        (37, 16, 8, 5),
        (33, 1, 1, 16),
        (20, 3, 7, 2),
    ] {
        for mask in masks {
            let (q, k, v) = (rand(&mut rng, t, hd), rand(&mut rng, t, hd), rand(&mut rng, t, hd));
            let w = walk(q.view(), k.view(), v.view(), mask, br, bc);
            let to3 = |a: &Array2<f32>| a.mapv(f64::from).insert_axis(Axis(0));
            let r = attention_core::<f64>(&to3(&q), &to3(&k), &to3(&v), mask);
            let want: Vec<f64> = r.out.iter().copied().collect();
            let got: Vec<f32> = w.out.iter().copied().collect();
            let tag = format!("flash walk T{t} hd{hd} Br{br} Bc{bc} {mask:?}");
            let rep = check(&tag, &[t, hd], &got, &want, Tolerance::F32);
            assert!(rep.passed(), "{rep}");
            // The last tile of each row block holds the full row's max and sum.
            let scores: Array3<f64> = r.scores;
            for step in w.steps.iter().filter(|s| s.cols.end == t) {
                for (i_r, i) in step.rows.clone().enumerate() {
                    let row: Vec<f64> = (0..t).map(|j| scores[[0, i, j]]).collect();
                    let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = row.iter().map(|s| (s - mx).exp()).sum();
                    let m = check(&format!("{tag} m row {i}"), &[1], &[step.m[i_r]], &[mx], Tolerance::F32);
                    let l = check(
                        &format!("{tag} l row {i}"),
                        &[1],
                        &[step.l[i_r]],
                        &[sum],
                        Tolerance::F32,
                    );
                    assert!(m.passed() && l.passed(), "{m}\n{l}");
                }
            }
        }
    }
}
