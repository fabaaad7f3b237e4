//! A chart's axes: how an axis maps values (linear, log10, log2, categories), its range with 4% to spare,
//! and the round ticks and labels it draws.

use std::sync::Arc;

/// How a tick value becomes its label.
pub type Fmt = Arc<dyn Fn(f64) -> String + Send + Sync>;

/// How an axis maps values.
#[derive(Clone, Debug, PartialEq)]
pub enum Scale {
    /// Plain values.
    Linear,
    /// The plotted value is log10 of the quantity (ticks at decades, labelled with the quantity).
    Log10,
    /// The plotted value is log2 of the quantity (ticks at powers of two).
    Log2,
    /// Named categories at 0, 1, 2, … (not a quantity: no tick or range rule).
    Categories(Vec<String>),
}

/// One axis of a [`Chart`].
#[derive(Clone)]
pub struct ChartAxis {
    pub(super) title: String,
    pub(super) scale: Scale,
    pub(super) zero: bool,
    pub(super) fmt: Option<Fmt>,
    pub(super) suffix: String,
    pub(super) include: Vec<f64>,
}

impl ChartAxis {
    pub(super) fn new(title: impl Into<String>, scale: Scale) -> Self {
        Self {
            title: title.into(),
            scale,
            zero: false,
            fmt: None,
            suffix: String::new(),
            include: Vec::new(),
        }
    }

    /// A linear axis.
    pub fn linear(title: impl Into<String>) -> Self {
        Self::new(title, Scale::Linear)
    }

    /// An axis of log10 values.
    pub fn log10(title: impl Into<String>) -> Self {
        Self::new(title, Scale::Log10)
    }

    /// An axis of log2 values.
    pub fn log2(title: impl Into<String>) -> Self {
        Self::new(title, Scale::Log2)
    }

    /// An axis of named categories at 0, 1, 2, …
    pub fn categories(title: impl Into<String>, names: Vec<String>) -> Self {
        Self::new(title, Scale::Categories(names))
    }

    /// The quantity starts at zero: the range includes 0 and stops there.
    pub fn from_zero(mut self) -> Self {
        self.zero = true;
        self
    }

    /// Label a tick with `f(value)` (the plotted value: the exponent on a log axis).
    pub fn fmt(mut self, f: impl Fn(f64) -> String + Send + Sync + 'static) -> Self {
        self.fmt = Some(Arc::new(f));
        self
    }

    /// A unit written after each tick's number (`%`, `×`).
    pub fn suffix(mut self, s: &str) -> Self {
        self.suffix = s.to_string();
        self
    }

    /// A value the range must show although no item reaches it.
    pub fn include(mut self, v: f64) -> Self {
        self.include.push(v);
        self
    }

    pub(super) fn scale_name(&self) -> &'static str {
        match self.scale {
            Scale::Linear => "linear",
            Scale::Log10 => "log10",
            Scale::Log2 => "log2",
            Scale::Categories(_) => "categories",
        }
    }

    pub(super) fn label(&self, v: f64, step: f64) -> String {
        if let Some(f) = &self.fmt {
            return f(v);
        }
        match &self.scale {
            Scale::Linear => linear_label(v, step) + &self.suffix,
            Scale::Log10 => crate::ui::widgets::pow10_label(v),
            Scale::Log2 => {
                let x = 2f64.powf(v);
                if x >= 1.0 {
                    format!("{}", x.round())
                } else {
                    linear_label(x, x / 2.0)
                }
            }
            Scale::Categories(names) => {
                let i = v.round();
                if i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }

    /// The range shown for data spanning `lo..hi`, and the data's range as the rules read it (zero
    /// included on a [`from_zero`](Self::from_zero) axis).
    pub(super) fn range(&self, lo: f64, hi: f64) -> ([f64; 2], [f64; 2]) {
        if let Scale::Categories(names) = &self.scale {
            let r = [-0.6, names.len().max(1) as f64 - 0.4];
            return (r, r);
        }
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo, hi)
        } else {
            (0.0, 1.0)
        };
        for &v in &self.include {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if self.zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        let data = [lo, hi];
        let span = hi - lo;
        let pad = if span > 0.0 {
            span * PAD
        } else {
            (lo.abs() * 0.1)
                .max(if self.scale == Scale::Linear { 1e-9 } else { 0.0 })
                .max(0.5)
        };
        let a = if self.zero && lo == 0.0 { 0.0 } else { lo - pad };
        let b = if self.zero && hi == 0.0 { 0.0 } else { hi + pad };
        ([a, b], data)
    }

    /// Tick values in `lo..=hi`, at most about `max_n` of them (and at least three where the scale can).
    pub(super) fn ticks(&self, lo: f64, hi: f64, max_n: usize) -> Vec<f64> {
        match &self.scale {
            Scale::Linear => linear_ticks(lo, hi, max_n),
            Scale::Log10 => log_ticks(lo, hi, max_n, 10.0),
            Scale::Log2 => log_ticks(lo, hi, max_n, 2.0),
            Scale::Categories(names) => {
                let every = names.len().div_ceil(max_n.max(1)).max(1);
                (0..names.len()).step_by(every).map(|i| i as f64).collect()
            }
        }
    }
}

/// The share of the data's span left free at each end of a quantity axis.
pub(super) const PAD: f64 = 0.04;

/// `v` printed with the decimals a tick step of `step` needs.
pub fn linear_label(v: f64, step: f64) -> String {
    let step = step.abs().max(1e-12);
    let mut d = (-(step.log10() + 1e-9).floor()).max(0.0) as usize;
    // 2.5 × 10ⁿ needs one digit more than its decade.
    let m = step / 10f64.powf(step.log10().floor());
    if (m - 2.5).abs() < 1e-6 {
        d += 1;
    }
    let t = format!("{v:.d$}");
    if t.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        return t.trim_start_matches('-').to_string();
    }
    t
}

/// Round ticks in `lo..=hi`: the densest of 1, 2, 2.5, 5 × 10ⁿ with at most `max_n` ticks, or, when
/// none has three or more within that, the sparsest with three.
pub fn linear_ticks(lo: f64, hi: f64, max_n: usize) -> Vec<f64> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 {
        return Vec::new();
    }
    let at = |s: f64| -> Vec<f64> {
        let a = (lo / s - 1e-9).ceil() as i64;
        let b = (hi / s + 1e-9).floor() as i64;
        (a..=b).map(|i| i as f64 * s).collect()
    };
    let e0 = (span / 100.0).log10().floor() as i32;
    let mut three = Vec::new();
    for e in e0..e0 + 5 {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let s = m * 10f64.powi(e);
            let t = at(s);
            if t.len() >= 3 {
                if t.len() <= max_n {
                    return t;
                }
                three = t;
            }
        }
    }
    three
}

/// Ticks on an axis of log-`base` values in `lo..=hi`: the powers of the base (every k-th when they
/// are too many), or, when fewer than three powers fall in the range, their 2 and 5 multiples (base 10)
/// or their 1.5 multiples (base 2), then round linear values.
pub fn log_ticks(lo: f64, hi: f64, max_n: usize, base: f64) -> Vec<f64> {
    if !(hi - lo).is_finite() || hi <= lo {
        return Vec::new();
    }
    let within = |v: f64| v >= lo - 1e-9 && v <= hi + 1e-9;
    let powers: Vec<f64> = ((lo - 1e-9).ceil() as i64..=(hi + 1e-9).floor() as i64)
        .map(|k| k as f64)
        .collect();
    if powers.len() >= 3 {
        // Every `every`-th decade: the sparsest stride with at most max_n ticks, but never one that
        // leaves fewer than three (four decades by twos would leave two).
        let count = |e: usize| powers.len().div_ceil(e);
        let every = (1..=powers.len())
            .take_while(|&e| count(e) >= 3)
            .find(|&e| count(e) <= max_n.max(3))
            .unwrap_or(1);
        return powers.into_iter().step_by(every).collect();
    }
    let multiples: &[&[f64]] = if base == 10.0 {
        &[&[1.0, 2.0, 5.0], &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]]
    } else {
        &[&[1.0, 1.5]]
    };
    for ms in multiples {
        let t: Vec<f64> = ((lo.floor() as i64)..=(hi.ceil() as i64))
            .flat_map(|k| ms.iter().map(move |m| k as f64 + m.log(base)))
            .filter(|&v| within(v))
            .collect();
        if t.len() >= 3 && t.len() <= max_n.max(3) {
            return t;
        }
    }
    linear_ticks(base.powf(lo), base.powf(hi), max_n)
        .into_iter()
        .filter(|&v| v > 0.0)
        .map(|v| v.log(base))
        .filter(|&v| within(v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_at_least_three() {
        assert_eq!(
            linear_ticks(0.0, 1.0, 6),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(linear_ticks(0.0, 2.6, 4).len(), 3);
        // A narrow range still gets three.
        let t = linear_ticks(2.31, 2.39, 3);
        assert!(t.len() >= 3, "{t:?}");
        assert!(linear_ticks(0.0, 0.0, 5).is_empty());
        for (lo, hi, n) in [(0.0, 123.0, 5), (-3.0, 0.76, 4), (1e-6, 3e-6, 6), (0.0, 4096.0, 9)] {
            let t = linear_ticks(lo, hi, n);
            assert!(
                t.len() >= 3 && t.iter().all(|&v| v >= lo - 1e-12 && v <= hi + 1e-12),
                "{lo} {hi}: {t:?}"
            );
        }
    }

    #[test]
    fn log_ticks_fall_back_to_multiples() {
        assert_eq!(log_ticks(0.0, 4.0, 8, 10.0), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(log_ticks(0.0, 12.0, 4, 10.0), vec![0.0, 4.0, 8.0, 12.0]);
        let t = log_ticks(0.1, 1.2, 8, 10.0);
        assert!(t.len() >= 3, "{t:?}");
        let t = log_ticks(3.2, 4.1, 8, 2.0);
        assert!(t.len() >= 3, "{t:?}");
        // Four decades where three ticks fit: every decade, not every other one (which leaves two).
        assert_eq!(log_ticks(-2.3, 1.7, 3, 10.0), vec![-2.0, -1.0, 0.0, 1.0]);
        assert_eq!(log_ticks(-2.3, 3.7, 3, 10.0), vec![-2.0, 0.0, 2.0]);
    }

    #[test]
    fn labels_carry_the_step_digits() {
        assert_eq!(linear_label(0.25, 0.25), "0.25");
        assert_eq!(linear_label(0.5, 0.5), "0.5");
        assert_eq!(linear_label(-0.0, 0.1), "0.0");
        assert_eq!(linear_label(1200.0, 200.0), "1200");
    }

    #[test]
    fn ranges_leave_little_empty_and_stop_at_zero() {
        let a = ChartAxis::linear("").from_zero();
        let (shown, data) = a.range(0.2, 0.76);
        assert_eq!(data, [0.0, 0.76]);
        assert_eq!(shown[0], 0.0);
        assert!((shown[1] - 0.76) / (shown[1] - shown[0]) < 0.2);
        let (shown, _) = ChartAxis::linear("").range(2.3, 2.3);
        assert!(shown[0] < 2.3 && shown[1] > 2.3);
    }
}
