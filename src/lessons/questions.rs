//! Predict, then reveal: a step's questions (`crate::lesson_file::Question`) answered from the lesson's
//! own result. The answer is the value of a placeholder the lesson's kind fills from the run the step
//! shows, the same value the narration quotes; a guess is graded against it here (no egui: the app,
//! `kvscope` tests and the autograder of later issues share it).

use crate::lesson_file::{PickOn, Question};

/// A question's answer, as the lesson computed it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A number, with the text the lesson shows for it and how far a guess may be from it.
    Number {
        /// The value.
        value: f64,
        /// The placeholder's text ("4", "2.058", "64.0 KiB").
        shown: String,
        /// The largest distance from `value` that still counts as right.
        slack: f64,
    },
    /// A choice: its index in `Question::choices`.
    Choice(usize),
    /// A pick: the index of the item the run picks on the question's [`PickSurface`].
    Pick(usize),
}

/// The shape of a view to pick on, without its values (what the lesson computed stays veiled): a grid of
/// `rows × cols` items (cells of a heatmap, blocks of a pool), with labels for the rows and columns.
#[derive(Debug, Clone, PartialEq)]
pub struct PickSurface {
    /// What a click picks.
    pub on: PickOn,
    /// Rows of the grid.
    pub rows: usize,
    /// Columns of the grid.
    pub cols: usize,
    /// How many items there are (a pool's last row may be short); `rows × cols` for a heatmap.
    pub len: usize,
    /// A label per row (a heatmap's query tokens; empty for a pool).
    pub row_labels: Vec<String>,
    /// A label per column (a heatmap's key tokens; empty for a pool).
    pub col_labels: Vec<String>,
    /// Items drawn as not available (a masked cell): a pick there is allowed, and wrong.
    pub off: Vec<bool>,
}

impl PickSurface {
    /// A `labels.len()`-square heatmap whose cells above the diagonal are masked (`causal`).
    pub fn heatmap(on: PickOn, labels: Vec<String>, causal: bool) -> Self {
        let n = labels.len();
        Self {
            on,
            rows: n,
            cols: n,
            len: n * n,
            off: (0..n * n).map(|i| causal && i % n > i / n).collect(),
            row_labels: labels.clone(),
            col_labels: labels,
        }
    }

    /// A pool of `n` blocks, in rows of at most `per_row`.
    pub fn pool(n: usize, per_row: usize) -> Self {
        let cols = n.clamp(1, per_row.max(1));
        Self {
            on: PickOn::Block,
            rows: n.div_ceil(cols),
            cols,
            len: n,
            row_labels: Vec::new(),
            col_labels: Vec::new(),
            off: vec![false; n],
        }
    }

    /// How many answers a click can give (rows for a row pick, else items).
    pub fn choices(&self) -> usize {
        match self.on {
            PickOn::Row => self.rows,
            _ => self.len,
        }
    }

    /// The answer a click on item `i` (row-major) gives.
    pub fn pick_of_item(&self, i: usize) -> usize {
        match self.on {
            PickOn::Row => i / self.cols.max(1),
            _ => i,
        }
    }

    /// Whether item `i` belongs to pick `p` (the row's cells for a row pick).
    pub fn item_in_pick(&self, i: usize, p: usize) -> bool {
        self.pick_of_item(i) == p
    }

    /// Pick `p` in words ("row 3 ' the'", "key 0 '<s>' of row 11", "block 15").
    pub fn describe(&self, p: usize, zh: bool) -> String {
        // A label that only repeats the index (a position) is left out.
        let tok = |labels: &[String], i: usize| {
            labels
                .get(i)
                .filter(|l| l.trim() != i.to_string())
                .map(|l| format!(" ({})", l.trim_end()))
                .unwrap_or_default()
        };
        match (self.on, zh) {
            (PickOn::Block, false) => format!("block {p}"),
            (PickOn::Block, true) => format!("块 {p}"),
            (PickOn::Row, false) => format!("row {p}{}", tok(&self.row_labels, p)),
            (PickOn::Row, true) => format!("第 {p} 行{}", tok(&self.row_labels, p)),
            (PickOn::Cell, _) => {
                let (r, c) = (p / self.cols.max(1), p % self.cols.max(1));
                if zh {
                    format!(
                        "第 {r} 行{}、第 {c} 列{}",
                        tok(&self.row_labels, r),
                        tok(&self.col_labels, c)
                    )
                } else {
                    format!(
                        "row {r}{}, key {c}{}",
                        tok(&self.row_labels, r),
                        tok(&self.col_labels, c)
                    )
                }
            }
        }
    }
}

/// The first number in `s` ("1,234.5 KiB" → 1234.5, "2.5e-3" → 0.0025, "−3" → -3), and how many digits
/// it shows after the point. None when `s` holds no number.
pub fn first_number(s: &str) -> Option<(f64, usize)> {
    let s = s.replace('−', "-");
    let chars: Vec<char> = s.chars().collect();
    let start = chars.iter().position(|c| c.is_ascii_digit())?;
    let neg = start > 0 && chars[start - 1] == '-';
    let mut text = String::new();
    let mut decimals = None;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        let digit_after = chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() {
            text.push(c);
            if let Some(d) = decimals.as_mut() {
                *d += 1;
            }
        } else if c == ',' && digit_after && decimals.is_none() {
            // A thousands separator.
        } else if c == '.' && digit_after && decimals.is_none() {
            text.push('.');
            decimals = Some(0);
        } else if (c == 'e' || c == 'E')
            && (digit_after
                || (matches!(chars.get(i + 1), Some('-' | '+')) && chars.get(i + 2).is_some_and(char::is_ascii_digit)))
        {
            text.push('e');
            text.push(chars[i + 1]);
            i += 1;
            // The exponent: digits only, and they are not decimals of the mantissa.
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                text.push(chars[j]);
                j += 1;
            }
            break;
        } else {
            break;
        }
        i += 1;
    }
    let v: f64 = text.trim_start_matches('+').parse().ok()?;
    Some((if neg { -v } else { v }, decimals.unwrap_or(0)))
}

/// Question `q`'s answer from the placeholder values `values` (the lesson's `values` for the run the
/// step shows), or why there is none (the lesson did not fill it, or filled it with no number or with
/// a value none of the choices has).
pub fn answer(q: &Question, values: &[(&'static str, String)]) -> Result<Answer, String> {
    let name = q.answer.get_ref();
    let v = values
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim())
        .ok_or_else(|| format!("the lesson filled no `{name}`"))?;
    if q.pick.is_some() {
        let (i, _) = first_number(v).ok_or_else(|| format!("`{name}` is {v:?}, which holds no item"))?;
        return if i >= 0.0 && i.fract() == 0.0 {
            Ok(Answer::Pick(i as usize))
        } else {
            Err(format!("`{name}` is {v:?}, which is no item's index"))
        };
    }
    if !q.choices.is_empty() {
        return q
            .choices
            .iter()
            .position(|c| c.value == v)
            .map(Answer::Choice)
            .ok_or_else(|| format!("`{name}` is {v:?}, which none of the choices is"));
    }
    let (value, decimals) = first_number(v).ok_or_else(|| format!("`{name}` is {v:?}, which holds no number"))?;
    // Right within the tolerance, and at least to the precision the lesson shows the answer in.
    let shown_precision = 0.5 * 10f64.powi(-(decimals as i32));
    let tolerance = q.tolerance.as_ref().map_or(0.0, |t| *t.get_ref());
    Ok(Answer::Number {
        value,
        shown: v.to_string(),
        slack: (tolerance * value.abs()).max(shown_precision),
    })
}

/// A guess, as the student gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Guess {
    /// A number typed.
    Number(f64),
    /// A choice picked (its index).
    Choice(usize),
    /// An item picked on the view's surface (its index, as [`PickSurface::pick_of_item`] gives it).
    Pick(usize),
}

impl Guess {
    /// The guess typed as `text` for a number question (None when it holds no number).
    pub fn typed(text: &str) -> Option<Self> {
        first_number(text).map(|(v, _)| Guess::Number(v))
    }
}

/// What the student did with one question of one step.
#[derive(Debug, Clone, Default)]
pub struct Answered {
    /// The text in the number box.
    pub typed: String,
    /// The guess checked, if any.
    pub guess: Option<Guess>,
}

/// One step's questions as answered, and whether the presenter revealed the step.
#[derive(Debug, Clone, Default)]
pub struct StepAnswers {
    /// Per question.
    pub answered: Vec<Answered>,
    /// Revealed (class mode's `R`) before every question was answered.
    pub revealed: bool,
}

/// Whether `guess` is right for `answer`.
pub fn is_right(answer: &Answer, guess: &Guess) -> bool {
    match (answer, guess) {
        (Answer::Number { value, slack, .. }, Guess::Number(g)) => (g - value).abs() <= *slack + 1e-12 * value.abs(),
        (Answer::Choice(a), Guess::Choice(g)) | (Answer::Pick(a), Guess::Pick(g)) => a == g,
        _ => false,
    }
}

/// A guess that `answer` marks wrong (for the tests: a question whose every guess is right cannot teach).
pub fn a_wrong_guess(answer: &Answer) -> Guess {
    match answer {
        Answer::Number { value, slack, .. } => Guess::Number(value + 2.0 * slack.max(value.abs()) + 1.0),
        Answer::Choice(a) => Guess::Choice(if *a == 0 { 1 } else { 0 }),
        Answer::Pick(a) => Guess::Pick(if *a == 0 { 1 } else { 0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_shown() {
        assert_eq!(first_number("4"), Some((4.0, 0)));
        assert_eq!(first_number("2.058"), Some((2.058, 3)));
        assert_eq!(first_number("1,234.5 KiB"), Some((1234.5, 1)));
        assert_eq!(first_number("max abs 2.5e-3"), Some((2.5e-3, 1)));
        assert_eq!(first_number("−3 tokens"), Some((-3.0, 0)));
        assert_eq!(first_number("64.0 KiB per token"), Some((64.0, 1)));
        assert_eq!(first_number("step 9."), Some((9.0, 0)));
        assert_eq!(first_number("—"), None);
    }
}
