//! Where a computation's time goes: named spans, kept only while [`record`] runs on this thread
//! (`kvscope bench app` prints them); outside it a span costs one thread-local read.

use std::cell::RefCell;
use web_time::Instant;

thread_local! {
    static SPANS: RefCell<Option<Vec<(&'static str, f64)>>> = const { RefCell::new(None) };
}

/// Run `f`, and return with its result the spans (name, milliseconds) recorded inside it, in the
/// order they ended. A name met twice appears twice.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<(&'static str, f64)>) {
    let outer = SPANS.with(|s| s.borrow_mut().replace(Vec::new()));
    let r = f();
    let spans = SPANS
        .with(|s| std::mem::replace(&mut *s.borrow_mut(), outer))
        .unwrap_or_default();
    (r, spans)
}

/// Run `f` as the span `name`.
pub fn span<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    if SPANS.with(|s| s.borrow().is_none()) {
        return f();
    }
    let t = Instant::now();
    let r = f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    SPANS.with(|s| {
        if let Some(v) = s.borrow_mut().as_mut() {
            v.push((name, ms));
        }
    });
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_kept_only_inside_record() {
        span("outside", || ());
        let ((), spans) = record(|| {
            span("a", || std::thread::sleep(std::time::Duration::from_millis(2)));
            span("b", || ());
        });
        let names: Vec<_> = spans.iter().map(|s| s.0).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(spans[0].1 >= 2.0, "{spans:?}");
        let ((), after) = record(|| ());
        assert!(after.is_empty());
    }
}
