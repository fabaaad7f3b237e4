//! How the synchronous [`crate::compute::Backend`] calls run on WebGPU in the browser, where a readback
//! can only be awaited: the page has one thread, and `map_async` answers through its event loop, so a
//! blocking wait would never return.
//!
//! How it works (the pattern React calls Suspense): a computation (a check-suite op, a lesson's job)
//! runs as a *pass*. Each wgpu call in a pass (`WgpuBackend::run`) either finds its readback recorded by
//! an earlier pass, and returns it at once, or submits its dispatches, leaves the readback as the pass's
//! *pending* future and fails with "waiting". [`finish`] hands that future to the caller, which awaits
//! it (between frames), records its words, and runs the pass again: the computation is deterministic, so
//! each pass gets one call further. A computation of n dispatches therefore runs n + 1 passes on the host
//! and each dispatch once on the GPU. A call is keyed by what determines its words: its entry points,
//! workgroup counts and output sizes, and a hash of every byte uploaded since the previous call (its
//! inputs and parameters). A pass that calls in another order still gets the right words, and a call
//! never gets words computed from other inputs.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::compute::BackendError;
use crate::compute::launch::LaunchDims;

use super::pool::Pooled;

/// A device error (this file's own: `mod.rs` uses this one, so it may not import from there).
fn dev(e: impl std::fmt::Display) -> BackendError {
    BackendError::Device(e.to_string())
}

/// A readback on its way.
type Readback = Pin<Box<dyn Future<Output = Result<Vec<Vec<u32>>, BackendError>>>>;

/// Why a web-build timing fails.
pub const NO_TIMING: &str = "the web build measures no GPU time: the browser cannot wait for the GPU inside a frame (the lesson shows its stored measurement)";

/// What a call that must wait returns.
const WAITING: &str = "waiting for a WebGPU readback (the page runs this computation again once it arrives)";

/// Recorded readbacks of one computation, by key.
type Records = HashMap<String, Result<Vec<Vec<u32>>, String>>;

/// More readbacks than this in one computation: it is not converging (each pass should add one).
const MAX_RECORDS: usize = 100_000;

#[derive(Default)]
struct State {
    /// The running pass's session (a lesson job's generation, a check op's number).
    session: u64,
    /// Each unfinished session's records (the app's lesson job and the page's check may interleave).
    done: HashMap<u64, Records>,
    /// The hash of the bytes uploaded since the last call.
    uploaded: u64,
    /// Whether a pass is running.
    active: bool,
    /// The readback this pass submitted.
    pending: Option<(String, Readback)>,
    /// Sessions whose readback is being awaited.
    in_flight: HashSet<u64>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::default();
    /// The most readbacks a completed computation took, for the page's report.
    static MOST: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most readbacks (passes less one) a completed computation has taken so far.
pub fn most_readbacks() -> usize {
    MOST.get()
}

/// The hash of no upload.
const HASH_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Bytes the next call uploads (its inputs, parameters and zeroed outputs), hashed 8 bytes at a time
/// (every pass hashes every upload again, so this is on the replay's hot path).
pub(crate) fn uploaded(bytes: &[u8]) {
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    STATE.with_borrow_mut(|s| {
        let mut h = mix(s.uploaded, bytes.len() as u64);
        let words = bytes.chunks_exact(8);
        let tail = words.remainder();
        for w in words {
            h = mix(h, u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
        for &b in tail {
            h = mix(h, u64::from(b));
        }
        s.uploaded = h;
    });
}

/// The key of a call: its entry points, workgroup counts, output sizes and the hash of what was uploaded
/// for it (which starts again for the next call).
pub(crate) fn key<'a>(dims: impl Iterator<Item = &'a LaunchDims>, outputs: impl Iterator<Item = usize>) -> String {
    let h = STATE.with_borrow_mut(|s| std::mem::replace(&mut s.uploaded, HASH_START));
    let mut k = format!("{h:016x}:");
    for d in dims {
        k += &format!("{}{:?};", d.entry, d.grid);
    }
    for o in outputs {
        k += &format!("{o},");
    }
    k
}

/// The recorded readback of this call: `Some` when an earlier pass recorded it, `None` when the call
/// must submit now, an error outside a pass or while an earlier call of this pass waits.
pub(crate) fn recorded(key: &str) -> Result<Option<Vec<Vec<u32>>>, BackendError> {
    STATE.with_borrow_mut(|s| {
        if !s.active {
            return Err(dev(
                "a WebGPU readback outside a replayed computation (web build): the page drives these through compute::wgpu::replay",
            ));
        }
        let session = s.session;
        let records = s.done.get(&session);
        if let Some(r) = records.and_then(|d| d.get(key)) {
            return r.clone().map(Some).map_err(dev);
        }
        if s.pending.is_some() || s.in_flight.contains(&session) {
            return Err(dev(WAITING));
        }
        if records.is_some_and(|d| d.len() >= MAX_RECORDS) {
            return Err(dev(format!(
                "{MAX_RECORDS} WebGPU readbacks in one computation and it still asks for new ones: it is not deterministic"
            )));
        }
        Ok(None)
    })
}

/// Leave `readback` as this pass's pending call; the error the call returns.
pub(crate) fn pend(
    key: String,
    readback: impl Future<Output = Result<Vec<Vec<u32>>, BackendError>> + 'static,
) -> BackendError {
    STATE.with_borrow_mut(|s| s.pending = Some((key, Box::pin(readback))));
    dev(WAITING)
}

/// Start a pass of computation `session`. A lesson job's session is its generation: starting one
/// forgets the records of older generations below [`CHECK_SESSIONS`].
pub fn begin(session: u64) {
    STATE.with_borrow_mut(|s| {
        if session < CHECK_SESSIONS {
            s.done.retain(|&k, _| k >= session);
        }
        s.session = session;
        s.uploaded = HASH_START;
        s.active = true;
        s.pending = None;
    });
}

/// End the pass. `None`: the computation is complete, and its records are dropped. `Some`: the future
/// to await before the next pass (it records the readback).
pub fn finish() -> Option<impl Future<Output = ()> + 'static> {
    STATE.with_borrow_mut(|s| {
        s.active = false;
        let session = s.session;
        let Some((key, readback)) = s.pending.take() else {
            if let Some(d) = s.done.remove(&session) {
                MOST.set(MOST.get().max(d.len()));
            }
            return None;
        };
        s.in_flight.insert(session);
        Some(async move {
            let words = readback.await.map_err(|e| e.to_string());
            STATE.with_borrow_mut(|s| {
                s.in_flight.remove(&session);
                s.done.entry(session).or_default().insert(key, words);
            });
        })
    })
}

/// Drop the records of `session` (a computation given up on).
pub fn forget(session: u64) {
    STATE.with_borrow_mut(|s| {
        s.done.remove(&session);
        s.in_flight.remove(&session);
    });
}

/// Sessions from here up belong to the page's check (one per op), below to the app's lesson jobs.
pub const CHECK_SESSIONS: u64 = 1 << 62;

/// Run `f` to completion: a pass, then each pending readback awaited and the pass run again.
pub async fn resolve<T>(session: u64, mut f: impl FnMut() -> T) -> T {
    loop {
        begin(session);
        let out = f();
        match finish() {
            Some(wait) => wait.await,
            None => return out,
        }
    }
}

/// Read `len` words of a staging buffer once the GPU is done with it (awaiting `map_async`'s callback).
pub(crate) async fn read(staging: Pooled, len: usize) -> Result<Vec<u32>, BackendError> {
    let buf = staging.buffer().clone();
    let slice = buf.slice(..staging.bytes());
    let slot: Arc<Mutex<Slot>> = Arc::default();
    let s2 = slot.clone();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let mut s = s2.lock().unwrap_or_else(|e| e.into_inner());
        s.result = Some(r.map_err(|e| e.to_string()));
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    });
    if let Err(e) = (Mapped { slot }).await {
        staging.discard();
        return Err(dev(e));
    }
    let words = match slice.get_mapped_range() {
        Ok(data) => Ok(bytemuck::cast_slice::<u8, u32>(&data)[..len].to_vec()),
        Err(e) => Err(dev(e)),
    };
    buf.unmap();
    words
}

/// `map_async`'s answer and who waits for it.
#[derive(Default)]
struct Slot {
    result: Option<Result<(), String>>,
    waker: Option<Waker>,
}

/// The future of a mapping.
struct Mapped {
    slot: Arc<Mutex<Slot>>,
}

impl Future for Mapped {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
