//! Labels for attention heads, measured on the text at hand. For every head and every query row
//! `i ≥ 2` (rows 0 and 1 have only one or two keys to choose from, so they say nothing about a
//! pattern), this measures:
//! - for each fixed offset `d` in `0..=MAX_OFFSET`, the mean weight on key `i − d` and how often `i − d`
//!   is the row's brightest key (its argmax), over the rows where `i − d` exists;
//! - the same for the first token, key 0 (an attention sink);
//! - the mean weight within the band `|i − j| ≤ 2` (a local head that spreads over its neighbours).
//!
//! A head gets the label of its best offset (the one with the most weight), or of the first token, when
//! that pattern's mean weight is at least [`SHARE_THRESHOLD`] or it is the argmax in at least
//! [`ARGMAX_THRESHOLD`] of the rows; when both qualify, the one with more weight wins. A head that meets
//! neither rule gets no label, and the views show its measurements instead. Nothing here is typed in:
//! every label comes from the probabilities the backend computed, and the patterns tested are these
//! offsets and the first token only.

use ndarray::Array3;

/// The two thresholds as whole percentages (mean weight, argmax rows), for the texts that state the rule.
pub const THRESHOLDS: (u32, u32) = (35, 60);
/// The least mean weight on one pattern's key that earns its label.
pub const SHARE_THRESHOLD: f64 = THRESHOLDS.0 as f64 / 100.0;
/// The least fraction of rows whose argmax is the pattern's key that earns its label.
pub const ARGMAX_THRESHOLD: f64 = THRESHOLDS.1 as f64 / 100.0;
/// The largest offset `d` tested (key `i − d`).
pub const MAX_OFFSET: usize = 8;
/// The half-width of the local band whose weight is reported (`|i − j| ≤ BAND`).
pub const BAND: usize = 2;

/// A pattern a head may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Pattern {
    /// Query i attends to key i − d (d = 0: itself; d = 1: the previous token).
    Offset(usize),
    /// Query i attends to key 0 (an attention sink).
    FirstToken,
}

impl Pattern {
    /// Its name in exports: `current-token`, `previous-token`, `offset-d` or `first-token sink`.
    pub fn name(self) -> String {
        match self {
            Pattern::Offset(0) => "current-token".into(),
            Pattern::Offset(1) => "previous-token".into(),
            Pattern::Offset(d) => format!("offset-{d}"),
            Pattern::FirstToken => "first-token sink".into(),
        }
    }

    /// The key it names, as the views write it: `i`, `i−1`, `i−d` or `token 0`.
    pub fn key(self, zh: bool) -> String {
        match (self, zh) {
            (Pattern::Offset(0), _) => "i".into(),
            (Pattern::Offset(d), _) => format!("i−{d}"),
            (Pattern::FirstToken, false) => "token 0".into(),
            (Pattern::FirstToken, true) => "token 0".into(),
        }
    }

    /// Its label in the app, "previous-token head: 71% on i−1, argmax 80%" (the key holds 71% of the
    /// weight on average and is the row's argmax in 80% of rows), in English or Chinese.
    pub fn describe(self, share: f64, argmax: f64, zh: bool) -> String {
        let (pct, arg) = ((share * 100.0).round(), (argmax * 100.0).round());
        let key = self.key(zh);
        let what = match (self, zh) {
            (Pattern::Offset(0), false) => "current-token head".to_string(),
            (Pattern::Offset(1), false) => "previous-token head".to_string(),
            (Pattern::Offset(d), false) => format!("offset-{d} head"),
            (Pattern::FirstToken, false) => "first-token sink".to_string(),
            (Pattern::Offset(0), true) => "当前 token 头".to_string(),
            (Pattern::Offset(1), true) => "前一个 token 头".to_string(),
            (Pattern::Offset(d), true) => format!("偏移 {d} 的头"),
            (Pattern::FirstToken, true) => "首 token 汇聚（sink）".to_string(),
        };
        // Short: it titles a heatmap. The view's detail line spells out what "argmax" counts.
        if zh {
            format!("{what}：{key} 上 {pct}%，argmax {arg}%")
        } else {
            format!("{what}: {pct}% on {key}, argmax {arg}%")
        }
    }
}

/// What was measured of one head (rows `i ≥ 2`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Profile {
    /// The offset with the most mean weight.
    pub best_offset: usize,
    /// Its mean weight, 0..1.
    pub offset_share: f64,
    /// The fraction of rows whose argmax is `i − best_offset`.
    pub offset_argmax: f64,
    /// Mean weight on key 0.
    pub sink_share: f64,
    /// The fraction of rows whose argmax is key 0.
    pub sink_argmax: f64,
    /// Mean weight within `|i − j| ≤ BAND`.
    pub band: f64,
}

/// A measured label: the pattern, its mean weight and how often its key is the row's argmax.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Label {
    /// The pattern.
    pub pattern: Pattern,
    /// Mean weight on its key, 0..1.
    pub share: f64,
    /// Fraction of rows whose argmax is its key.
    pub argmax: f64,
}

/// Whether a pattern with this weight and argmax rate earns its label.
fn qualifies(share: f64, argmax: f64) -> bool {
    share >= SHARE_THRESHOLD || argmax >= ARGMAX_THRESHOLD
}

/// Every head's measurements of `probs` (`[H, T, T]`); `None` when the text has fewer than three tokens.
pub fn profiles(probs: &Array3<f32>) -> Vec<Option<Profile>> {
    let (h, t, _) = probs.dim();
    (0..h)
        .map(|head| {
            if t < 3 {
                return None;
            }
            let rows = 2..t;
            // A row's brightest key, when one key is strictly brighter than every other (a tie, as in a
            // uniform row, counts for no key).
            let argmax = |i: usize| {
                let best = (0..=i).max_by(|&a, &b| probs[[head, i, a]].total_cmp(&probs[[head, i, b]]))?;
                let top = probs[[head, i, best]];
                ((0..=i).filter(|&j| probs[[head, i, j]] == top).count() == 1).then_some(best)
            };
            let arg: Vec<Option<usize>> = rows.clone().map(argmax).collect();
            // Per offset: mean weight and argmax rate over the rows where key i − d exists.
            let mut best = (0usize, f64::NEG_INFINITY, 0f64);
            for d in 0..=MAX_OFFSET.min(t - 1) {
                let (mut w, mut hits, mut n) = (0f64, 0usize, 0usize);
                for (k, i) in rows.clone().enumerate() {
                    if i >= d {
                        w += f64::from(probs[[head, i, i - d]]);
                        hits += usize::from(arg[k] == Some(i - d));
                        n += 1;
                    }
                }
                let (share, rate) = (w / n.max(1) as f64, hits as f64 / n.max(1) as f64);
                if share > best.1 {
                    best = (d, share, rate);
                }
            }
            let n = (t - 2) as f64;
            let sink_share = rows.clone().map(|i| f64::from(probs[[head, i, 0]])).sum::<f64>() / n;
            let sink_argmax = arg.iter().filter(|&&a| a == Some(0)).count() as f64 / n;
            let band = rows
                .clone()
                .map(|i| {
                    (i.saturating_sub(BAND)..=i)
                        .map(|j| f64::from(probs[[head, i, j]]))
                        .sum::<f64>()
                })
                .sum::<f64>()
                / n;
            Some(Profile {
                best_offset: best.0,
                offset_share: best.1,
                offset_argmax: best.2,
                sink_share,
                sink_argmax,
                band,
            })
        })
        .collect()
}

/// A head's label from its measurements, or `None` when no pattern tested meets the rule.
pub fn label_of(p: &Profile) -> Option<Label> {
    let offset = Label {
        pattern: Pattern::Offset(p.best_offset),
        share: p.offset_share,
        argmax: p.offset_argmax,
    };
    let sink = Label {
        pattern: Pattern::FirstToken,
        share: p.sink_share,
        argmax: p.sink_argmax,
    };
    [offset, sink]
        .into_iter()
        .filter(|l| qualifies(l.share, l.argmax))
        .max_by(|a, b| a.share.total_cmp(&b.share).then(a.argmax.total_cmp(&b.argmax)))
}

/// Each head's label, or `None` when no pattern tested meets the rule.
pub fn labels(probs: &Array3<f32>) -> Vec<Option<Label>> {
    profiles(probs)
        .into_iter()
        .map(|p| p.as_ref().and_then(label_of))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made-up attention with a known pattern per head gets that label; uniform attention gets none.
    #[test]
    fn labels_follow_the_weights() {
        let t = 10;
        let mut p = Array3::<f32>::zeros((5, t, t));
        for i in 0..t {
            p[[0, i, i.saturating_sub(1)]] = 1.0; // previous token
            p[[1, i, 0]] = 0.7; // sink
            p[[1, i, i]] += 0.3;
            p[[2, i, i]] = 1.0; // itself
            for j in 0..=i {
                p[[3, i, j]] = 1.0 / (i + 1) as f32; // uniform
            }
            // i − 2 is the brightest key of each row, with little of the weight: the argmax rule.
            for j in 0..=i {
                p[[4, i, j]] = 0.9 / (i + 1) as f32;
            }
            p[[4, i, i.saturating_sub(2)]] += 0.1;
        }
        let l = labels(&p);
        assert_eq!(l[0].map(|x| x.pattern), Some(Pattern::Offset(1)));
        assert_eq!(l[1].map(|x| x.pattern), Some(Pattern::FirstToken));
        assert!((l[1].unwrap().share - 0.7).abs() < 1e-6);
        assert_eq!(l[2].map(|x| x.pattern), Some(Pattern::Offset(0)));
        assert_eq!(l[3], None, "{:?}", profiles(&p)[3]);
        assert_eq!(
            l[4].map(|x| x.pattern),
            Some(Pattern::Offset(2)),
            "{:?}",
            profiles(&p)[4]
        );
        assert!(l[4].unwrap().share < SHARE_THRESHOLD && l[4].unwrap().argmax >= ARGMAX_THRESHOLD);
        assert_eq!(
            Pattern::Offset(1).describe(0.714, 0.8, false),
            "previous-token head: 71% on i−1, argmax 80%"
        );
        assert_eq!(profiles(&Array3::<f32>::zeros((1, 2, 2))), vec![None]);
    }
}
