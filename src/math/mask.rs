//! Attention masks: which keys a query may see.
//!
//! `none` sees everything; `causal` sees keys `j <= i`; `window:W` is causal and keeps only the last
//! `W` keys (`i-W < j <= i`); `window:W,sinks:S` also keeps the first `S` tokens visible to every later
//! query, as StreamingLLM's attention sinks do. A masked score is −∞ before the softmax.

use std::fmt;
use std::str::FromStr;

/// A mask kind. The integer codes in [`Mask::code`] are the ones the CUDA kernels take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Mask {
    /// Every query sees every key (an encoder, or the "mask off" toggle of lesson 2).
    None,
    /// A query sees itself and earlier keys.
    #[default]
    Causal,
    /// Causal, limited to the last `window` keys, plus the first `sinks` tokens.
    Window {
        /// How many most recent keys (the query itself included) stay visible. At least 1.
        window: usize,
        /// How many leading tokens stay visible to every later query (0 = a plain sliding window).
        sinks: usize,
    },
}

impl Mask {
    /// Whether query `i` may attend to key `j`.
    #[inline]
    pub fn visible(self, i: usize, j: usize) -> bool {
        match self {
            Mask::None => true,
            Mask::Causal => j <= i,
            Mask::Window { window, sinks } => j <= i && (j + window > i || j < sinks),
        }
    }

    /// The keys query `i` sees among `0..t`, as at most two ranges (sinks, then the window or the
    /// causal prefix). `visible(i, j)` holds exactly for `j` in one of them.
    pub fn spans(self, i: usize, t: usize) -> [std::ops::Range<usize>; 2] {
        let upto = (i + 1).min(t);
        match self {
            Mask::None => [0..t, 0..0],
            Mask::Causal => [0..upto, 0..0],
            Mask::Window { window, sinks } => {
                let lo = (i + 1).saturating_sub(window).min(upto);
                [0..sinks.min(lo), lo..upto]
            }
        }
    }

    /// The keys query `i` may not see among `0..t`, as at most two ranges: the complement of
    /// [`Mask::spans`] (whose first span starts at 0), i.e. the gap after each span.
    pub fn hidden(self, i: usize, t: usize) -> [std::ops::Range<usize>; 2] {
        let [a, b] = self.spans(i, t);
        [a.end..b.start.max(a.end), b.end.max(a.end)..t]
    }

    /// (kind, window, sinks) as the kernels take them: kind 0 none, 1 causal, 2 window.
    pub fn code(self) -> (i32, i32, i32) {
        match self {
            Mask::None => (0, 0, 0),
            Mask::Causal => (1, 0, 0),
            Mask::Window { window, sinks } => (2, clamp_i32(window), clamp_i32(sinks)),
        }
    }
}

fn clamp_i32(x: usize) -> i32 {
    i32::try_from(x).unwrap_or(i32::MAX)
}

impl fmt::Display for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mask::None => write!(f, "none"),
            Mask::Causal => write!(f, "causal"),
            Mask::Window { window, sinks: 0 } => write!(f, "window:{window}"),
            Mask::Window { window, sinks } => write!(f, "window:{window},sinks:{sinks}"),
        }
    }
}

/// Why a mask string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad mask `{input}`: {reason} (expected none | causal | window:W | window:W,sinks:S)")]
pub struct MaskParseError {
    input: String,
    reason: String,
}

impl FromStr for Mask {
    type Err = MaskParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| MaskParseError {
            input: s.to_string(),
            reason: reason.to_string(),
        };
        let t = s.trim();
        match t {
            "none" => return Ok(Mask::None),
            "causal" => return Ok(Mask::Causal),
            _ => {}
        }
        let rest = t.strip_prefix("window:").ok_or_else(|| err("unknown mask kind"))?;
        let (w, sinks) = match rest.split_once(',') {
            None => (rest, None),
            Some((w, s)) => {
                let s = s
                    .trim()
                    .strip_prefix("sinks:")
                    .ok_or_else(|| err("after the window, expected `,sinks:S`"))?;
                (w, Some(s))
            }
        };
        let window: usize = w.trim().parse().map_err(|_| err("W must be a whole number"))?;
        if window == 0 {
            return Err(err("W must be at least 1 (the query always sees itself)"));
        }
        let sinks: usize = match sinks {
            None => 0,
            Some(s) => s.trim().parse().map_err(|_| err("S must be a whole number"))?,
        };
        Ok(Mask::Window { window, sinks })
    }
}

impl From<Mask> for String {
    fn from(m: Mask) -> String {
        m.to_string()
    }
}

impl TryFrom<String> for Mask {
    type Error = MaskParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_round_trip() {
        for s in ["none", "causal", "window:4", "window:4,sinks:2"] {
            let m: Mask = s.parse().unwrap();
            assert_eq!(m.to_string(), s);
        }
        assert!("window:0".parse::<Mask>().is_err());
        assert!("window:x".parse::<Mask>().is_err());
        assert!("diagonal".parse::<Mask>().is_err());
        assert!("window:3,sink:1".parse::<Mask>().is_err());
    }

    #[test]
    fn window_and_sinks_semantics() {
        let m = Mask::Window { window: 3, sinks: 1 };
        // query 5 sees 3,4,5 and the sink 0, nothing else.
        let seen: Vec<usize> = (0..8).filter(|&j| m.visible(5, j)).collect();
        assert_eq!(seen, vec![0, 3, 4, 5]);
        // still causal: a sink is not visible to an earlier query... token 0 to query 0 only itself.
        assert!(!m.visible(0, 1));
        assert!(Mask::Causal.visible(3, 3) && !Mask::Causal.visible(3, 4));
        // sinks larger than the window still never break causality.
        let big = Mask::Window { window: 1, sinks: 10 };
        assert!((0..=4).all(|j| big.visible(4, j)) && !big.visible(4, 5));
    }

    #[test]
    fn spans_agree_with_visible() {
        for m in [
            Mask::None,
            Mask::Causal,
            Mask::Window { window: 3, sinks: 0 },
            Mask::Window { window: 2, sinks: 4 },
            Mask::Window { window: 9, sinks: 1 },
        ] {
            for t in [1, 5, 12] {
                for i in 0..t {
                    let [a, b] = m.spans(i, t);
                    for j in 0..t {
                        assert_eq!(m.visible(i, j), a.contains(&j) || b.contains(&j), "{m} i{i} j{j} t{t}");
                    }
                }
            }
        }
    }
}
