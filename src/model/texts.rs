//! The texts the lessons run the trained model on: the built-in [`PROMPTS`] and whatever a user types.
//!
//! How it works: lesson parameters are integers (they are hashed, clamped, saved and sent to the
//! compute worker as `i64`), so a text parameter (`kind = "text"` in a lesson file) holds an id into
//! this process-wide table. Ids `0..PROMPTS.len()` are the built-in texts; a typed text is added once
//! ([`intern`]) and keeps its id for the life of the process, so the worker and the memo caches see
//! an ordinary integer change. Typed texts are cut to [`MAX_BYTES`] at a character boundary.

use std::sync::Mutex;

use super::PROMPTS;

/// The longest text the lessons take, in bytes (tokens): lessons 1–3 draw one heatmap cell per
/// token pair, and lesson 4 generates after it within the model's context of 256.
pub const MAX_BYTES: usize = 64;

static TYPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn typed() -> std::sync::MutexGuard<'static, Vec<String>> {
    TYPED.lock().unwrap_or_else(|e| e.into_inner())
}

/// `s` cut to at most [`MAX_BYTES`] bytes without splitting a character.
pub fn clip(s: &str) -> &str {
    let mut end = s.len().min(MAX_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The id of text `s` (clipped to [`MAX_BYTES`]): a built-in text's index, or a typed text's id, added
/// on first use. `None` for an empty text (the model needs at least one token).
pub fn intern(s: &str) -> Option<i64> {
    let s = clip(s);
    if s.is_empty() {
        return None;
    }
    if let Some(i) = PROMPTS.iter().position(|p| *p == s) {
        return Some(i as i64);
    }
    let mut t = typed();
    let i = match t.iter().position(|x| x == s) {
        Some(i) => i,
        None => {
            t.push(s.to_string());
            t.len() - 1
        }
    };
    Some((PROMPTS.len() + i) as i64)
}

/// How many ids exist (built-in and typed): ids are `0..count()`.
pub fn count() -> usize {
    PROMPTS.len() + typed().len()
}

/// The text of id `id`; an unknown id gives the first built-in text.
pub fn get(id: i64) -> String {
    let i = id.max(0) as usize;
    if i < PROMPTS.len() {
        return PROMPTS[i].to_string();
    }
    typed()
        .get(i - PROMPTS.len())
        .cloned()
        .unwrap_or_else(|| PROMPTS[0].to_string())
}

/// Whether `id` is a built-in text.
pub fn is_builtin(id: i64) -> bool {
    (0..PROMPTS.len() as i64).contains(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_texts_get_stable_ids_and_builtins_keep_theirs() {
        assert_eq!(intern(PROMPTS[2]), Some(2));
        assert_eq!(intern(""), None);
        let a = intern("kvscope texts test: hello").unwrap();
        assert!(a >= PROMPTS.len() as i64);
        assert_eq!(intern("kvscope texts test: hello"), Some(a));
        assert_eq!(get(a), "kvscope texts test: hello");
        assert!(count() as i64 > a);
        assert_eq!(get(-5), PROMPTS[0]);
        assert_eq!(get(1 << 40), PROMPTS[0]);
    }

    #[test]
    fn clipping_keeps_whole_characters() {
        let s = "明".repeat(30); // 90 bytes
        let c = clip(&s);
        assert_eq!(c.len(), 63);
        assert!(c.chars().all(|ch| ch == '明'));
        assert_eq!(clip("abc"), "abc");
    }

    #[test]
    fn tick_labels_name_each_byte() {
        let l = super::super::tick_labels("a 明\n".as_bytes());
        assert_eq!(l, ["a", "‿", "明", "·", "·", "↵"]);
        // A cut character and a control byte show as hex.
        assert_eq!(super::super::tick_labels(&[0xe6, 0x98, 0x07]), ["e6", "98", "07"]);
    }
}
