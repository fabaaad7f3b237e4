//! Labels for attention heads, measured on the text at hand: the share of a head's attention weight
//! that goes to the previous token, to the first token (an attention sink) or to the token itself,
//! averaged over the query rows `i ≥ 2` (rows 0 and 1 have only one or two keys to choose from, so
//! they say nothing about a pattern). A head gets the label of its largest share when that share is at
//! least [`THRESHOLD`]; a head with no clear pattern gets none. Nothing here is typed in: every label
//! comes from the probabilities the backend computed.

use ndarray::Array3;

/// The least share of weight that earns a label.
pub const THRESHOLD: f64 = 0.5;

/// A pattern a head may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Pattern {
    /// Query i attends to key i − 1.
    PreviousToken,
    /// Query i attends to key 0 (an attention sink).
    FirstToken,
    /// Query i attends to itself.
    CurrentToken,
}

impl Pattern {
    /// Its name in exports.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::PreviousToken => "previous-token",
            Pattern::FirstToken => "first-token sink",
            Pattern::CurrentToken => "current-token",
        }
    }

    /// Its label in the app, "previous-token head: 71% of weight on i−1", in English or Chinese.
    pub fn describe(self, share: f64, zh: bool) -> String {
        let pct = (share * 100.0).round();
        match (self, zh) {
            (Pattern::PreviousToken, false) => format!("previous-token head: {pct}% of weight on i−1"),
            (Pattern::FirstToken, false) => format!("first-token sink: {pct}% on token 0"),
            (Pattern::CurrentToken, false) => format!("current-token head: {pct}% on i itself"),
            (Pattern::PreviousToken, true) => format!("前一个 token 头：{pct}% 的权重在 i−1 上"),
            (Pattern::FirstToken, true) => format!("首 token 汇聚（sink）：{pct}% 在 token 0 上"),
            (Pattern::CurrentToken, true) => format!("当前 token 头：{pct}% 在 i 自身上"),
        }
    }
}

/// A measured label: the pattern and the share of weight that follows it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Label {
    /// The pattern.
    pub pattern: Pattern,
    /// Mean share of weight, 0..1.
    pub share: f64,
}

/// The shares of each pattern for every head of `probs` (`[H, T, T]`), rows `i ≥ 2`; `None` when the
/// text has fewer than three tokens.
pub fn shares(probs: &Array3<f32>) -> Vec<Option<[f64; 3]>> {
    let (h, t, _) = probs.dim();
    (0..h)
        .map(|head| {
            if t < 3 {
                return None;
            }
            let mut s = [0f64; 3];
            for i in 2..t {
                s[0] += f64::from(probs[[head, i, i - 1]]);
                s[1] += f64::from(probs[[head, i, 0]]);
                s[2] += f64::from(probs[[head, i, i]]);
            }
            Some(s.map(|x| x / (t - 2) as f64))
        })
        .collect()
}

/// Each head's label, or `None` when no pattern reaches [`THRESHOLD`].
pub fn labels(probs: &Array3<f32>) -> Vec<Option<Label>> {
    shares(probs)
        .into_iter()
        .map(|s| {
            let s = s?;
            let pats = [Pattern::PreviousToken, Pattern::FirstToken, Pattern::CurrentToken];
            let (k, &share) = s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
            (share >= THRESHOLD).then_some(Label {
                pattern: pats[k],
                share,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made-up attention with a known pattern per head gets that label; uniform attention gets none.
    #[test]
    fn labels_follow_the_weights() {
        let t = 10;
        let mut p = Array3::<f32>::zeros((4, t, t));
        for i in 0..t {
            p[[0, i, i.saturating_sub(1)]] = 1.0; // previous token
            p[[1, i, 0]] = 0.7; // sink
            p[[1, i, i]] += 0.3;
            p[[2, i, i]] = 1.0; // itself
            for j in 0..=i {
                p[[3, i, j]] = 1.0 / (i + 1) as f32; // uniform
            }
        }
        let l = labels(&p);
        assert_eq!(l[0].map(|x| x.pattern), Some(Pattern::PreviousToken));
        assert_eq!(l[1].map(|x| x.pattern), Some(Pattern::FirstToken));
        assert!((l[1].unwrap().share - 0.7).abs() < 1e-6);
        assert_eq!(l[2].map(|x| x.pattern), Some(Pattern::CurrentToken));
        assert_eq!(l[3], None);
        assert_eq!(
            Pattern::PreviousToken.describe(0.714, false),
            "previous-token head: 71% of weight on i−1"
        );
        assert_eq!(shares(&Array3::<f32>::zeros((1, 2, 2))), vec![None]);
    }
}
