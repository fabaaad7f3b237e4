//! What lesson 7's views share: plural words and short hashes.

/// "1 token" / "2 tokens" in English; Chinese has one form.
pub(super) fn plural(
    lang: crate::ui::text::Lang,
    n: usize,
    one: &'static str,
    many: &'static str,
    zh: &'static str,
) -> &'static str {
    lang.t(if n == 1 { one } else { many }, zh)
}

/// A hash as the views show it: its first four hex digits.
pub(super) fn short(h: u64) -> String {
    format!("#{:04x}", h >> 48)
}
