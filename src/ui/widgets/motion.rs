//! Brief transitions when a lesson's timeline moves one step (a block freed from the ring, a token
//! evicted, a chunk scheduled): how far the move from the previous position to this one has run.
//!
//! How it works: a transition is keyed by an egui id and remembers, in egui's temporary memory, the
//! position it last saw and the input time it changed. A view asks [`Motion::of`] with the position it
//! draws; a move of at most `max_jump` starts a transition of [`DURATION`] seconds (the view draws
//! both ends, mixed by [`Motion::ease`], and egui is asked to repaint until it ends); a longer jump (a
//! dragged timeline, another step) settles at once. An app that computes on the UI thread (the tests,
//! `kvscope render`, the snapshots) always gets the settled frame, so nothing it draws depends on time;
//! `kvscope render --transition F` asks for the frame a fraction F of the way through a move instead
//! ([`preview`]), to look at one.

use std::sync::atomic::{AtomicU32, Ordering};

use eframe::egui::{self, Ui};

/// [`preview`]'s fraction as f32 bits; `NONE` when unset.
static PREVIEW: AtomicU32 = AtomicU32::new(NONE);
const NONE: u32 = u32::MAX;

/// From now on in this process, draw every move a fraction `t` of the way through, whatever the clock
/// and even in a sync app (`kvscope render --transition`); `None`: as the clock says.
pub fn preview(t: Option<f32>) {
    PREVIEW.store(t.map_or(NONE, |t| t.clamp(0.0, 1.0).to_bits()), Ordering::Relaxed);
}

fn previewed() -> Option<f32> {
    let bits = PREVIEW.load(Ordering::Relaxed);
    (bits != NONE).then(|| f32::from_bits(bits))
}

/// How long a transition runs, in seconds.
pub const DURATION: f64 = 0.45;

/// A move of a view's position, and how far it has run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Motion {
    /// The position before the move (equal to `to` when nothing moves).
    pub from: usize,
    /// The position drawn.
    pub to: usize,
    /// How far the move has run, 0 to 1 (1: settled).
    pub t: f32,
}

#[derive(Clone, Copy)]
struct Memory {
    last: usize,
    from: usize,
    since: f64,
}

impl Motion {
    /// Nothing moving: the frame at `to`.
    pub fn settled(to: usize) -> Motion {
        Motion { from: to, to, t: 1.0 }
    }

    /// Whether a transition is under way.
    pub fn moving(&self) -> bool {
        self.t < 1.0 && self.from != self.to
    }

    /// The run so far, eased (slow in, slow out): 0 shows `from`, 1 shows `to`.
    pub fn ease(&self) -> f32 {
        let t = self.t.clamp(0.0, 1.0);
        t * t * (3.0 - 2.0 * t)
    }

    /// The transition of the position `now` that the view `id` draws. `sync`: the settled frame always.
    pub fn of(ui: &Ui, id: egui::Id, now: usize, sync: bool, max_jump: usize) -> Motion {
        let preview = previewed();
        if sync && preview.is_none() {
            return Motion::settled(now);
        }
        let time = ui.input(|i| i.time);
        let settled = Memory {
            last: now,
            from: now,
            since: time - DURATION,
        };
        let mem = match ui.data(|d| d.get_temp::<Memory>(id)) {
            None => settled,
            Some(m) if m.last == now => m,
            Some(m) if now.abs_diff(m.last) <= max_jump => Memory {
                last: now,
                from: m.last,
                since: time,
            },
            Some(_) => settled,
        };
        ui.data_mut(|d| d.insert_temp(id, mem));
        let t = match preview {
            Some(p) if mem.from != now => p,
            _ => ((time - mem.since) / DURATION).clamp(0.0, 1.0) as f32,
        };
        let m = Motion {
            from: mem.from,
            to: now,
            t,
        };
        if m.moving() && preview.is_none() {
            ui.ctx().request_repaint();
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One frame at input time `time` in which a view at position `now` asks for its motion.
    fn frame(ctx: &egui::Context, time: f64, now: usize, sync: bool) -> Motion {
        let mut m = None;
        let input = egui::RawInput {
            time: Some(time),
            ..Default::default()
        };
        let _ = ctx.run_ui(input, |ui| {
            m = Some(Motion::of(ui, egui::Id::unique("motion test"), now, sync, 1));
        });
        m.expect("the frame ran")
    }

    #[test]
    fn a_step_runs_its_transition_then_settles() {
        let ctx = egui::Context::default();
        assert_eq!(frame(&ctx, 0.0, 5, false), Motion::settled(5));
        let start = frame(&ctx, 1.0, 6, false);
        assert_eq!((start.from, start.to, start.t), (5, 6, 0.0));
        assert!(start.moving());
        let mid = frame(&ctx, 1.0 + DURATION / 2.0, 6, false);
        assert!((mid.t - 0.5).abs() < 1e-4 && (mid.ease() - 0.5).abs() < 1e-4, "{mid:?}");
        let end = frame(&ctx, 1.0 + DURATION, 6, false);
        assert!(!end.moving() && end.t == 1.0, "{end:?}");
        // Back one step runs backwards.
        let back = frame(&ctx, 3.0, 5, false);
        assert_eq!((back.from, back.to, back.t), (6, 5, 0.0));
    }

    #[test]
    fn jumps_and_sync_apps_draw_the_settled_frame() {
        let ctx = egui::Context::default();
        frame(&ctx, 0.0, 5, false);
        assert_eq!(
            frame(&ctx, 1.0, 9, false),
            Motion::settled(9),
            "a jump of 4 > max_jump 1"
        );
        assert_eq!(frame(&ctx, 2.0, 10, true), Motion::settled(10), "sync");
        assert_eq!(frame(&ctx, 2.1, 10, true), Motion::settled(10));
    }
}
