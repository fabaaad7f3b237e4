//! Results the lessons reuse while other sliders move: the kernels ran once for these exact inputs on
//! this backend, and the outputs are deterministic, so a lesson recomputing for an unrelated slider
//! (lesson 4's layers, lesson 3's heads) does not rerun the model (seconds on the CPU shim).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::decode::{CacheKind, Generation, Sampler};
use super::{Model, Prefill, shared};
use crate::compute::Backend;
use crate::compute::launch::{Launch, capture, report};

const KEEP: usize = 8;

/// A result, with the launches its computation reported (reported again when it is reused, so a
/// lesson that reuses it still shows what ran).
type Entry<T> = ((String, Vec<u32>, usize), (Arc<T>, Vec<Launch>));

fn key(backend: &dyn Backend, model: &Model, prompt: &[u32], n: usize) -> (String, Vec<u32>, usize) {
    (
        format!("{} {} {}", model.name.id(), backend.kind().name(), backend.device()),
        prompt.to_vec(),
        n,
    )
}

fn get_or<T>(
    memo: &Mutex<VecDeque<Entry<T>>>,
    k: (String, Vec<u32>, usize),
    make: impl FnOnce() -> Result<T, String>,
) -> Result<Arc<T>, String> {
    if let Some((_, (v, launches))) = memo.lock().map_err(|e| e.to_string())?.iter().find(|(kk, _)| *kk == k) {
        report(launches.iter().copied());
        return Ok(v.clone());
    }
    let (made, launches) = capture(make);
    let v = Arc::new(made?);
    let mut m = memo.lock().map_err(|e| e.to_string())?;
    m.push_front((k, (v.clone(), launches)));
    m.truncate(KEEP);
    Ok(v)
}

/// The committed model's prefill of `prompt` on `backend`.
pub fn prefill(prompt: &[u8], backend: &dyn Backend) -> Result<Arc<Prefill>, String> {
    let m = shared().map_err(|e| e.to_string())?;
    prefill_ids(m, &prompt.iter().map(|&b| u32::from(b)).collect::<Vec<u32>>(), backend)
}

/// Model `m`'s prefill of token ids `ids` on `backend` (the tiny model's ids are its bytes).
pub fn prefill_ids(m: &Model, ids: &[u32], backend: &dyn Backend) -> Result<Arc<Prefill>, String> {
    static MEMO: Mutex<VecDeque<Entry<Prefill>>> = Mutex::new(VecDeque::new());
    get_or(&MEMO, key(backend, m, ids, 0), || m.prefill(ids, backend, false))
}

/// Model `m`'s greedy generation of `n` tokens after the ids `prompt` through the static cache.
pub fn generate_static_ids(
    m: &Model,
    prompt: &[u32],
    n: usize,
    backend: &dyn Backend,
) -> Result<Arc<Generation<u32>>, String> {
    static MEMO: Mutex<VecDeque<Entry<Generation<u32>>>> = Mutex::new(VecDeque::new());
    get_or(&MEMO, key(backend, m, prompt, n), || {
        m.generate(prompt, n, CacheKind::Static, &mut Sampler::greedy(), backend)
    })
}
