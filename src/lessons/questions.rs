//! Predict, then reveal: a step's questions (`crate::lesson_file::Question`) answered from the lesson's
//! own result. The answer is the value of a placeholder the lesson's kind fills from the run the step
//! shows, the same value the narration quotes; a guess is graded against it here (no egui: the app,
//! `kvscope` tests and the autograder of later issues share it).

use crate::lesson_file::Question;

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
        (Answer::Choice(a), Guess::Choice(g)) => a == g,
        _ => false,
    }
}

/// A guess that `answer` marks wrong (for the tests: a question whose every guess is right cannot teach).
pub fn a_wrong_guess(answer: &Answer) -> Guess {
    match answer {
        Answer::Number { value, slack, .. } => Guess::Number(value + 2.0 * slack.max(value.abs()) + 1.0),
        Answer::Choice(a) => Guess::Choice(if *a == 0 { 1 } else { 0 }),
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
