//! Buffers reused between calls. Creating a wgpu buffer is an allocation on the device (and, on a real
//! GPU, a driver call); a lesson recomputed on every slider move would make dozens per frame. So every
//! buffer the backend uses comes from this pool: it is taken by usage and size class (the next power of
//! two), filled with `Queue::write_buffer` and bound with its exact size, and it goes back to the pool
//! when the op drops it. Writes and dispatches are ordered by the queue, so a buffer returned while a
//! submission that used it is still in flight is only rewritten after that submission.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a pooled buffer is for; each kind has one fixed set of usages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    /// Kernel inputs and outputs (`var<storage>`), copied into and out of.
    Storage,
    /// Kernel parameters (`var<uniform>`).
    Uniform,
    /// Mappable buffers the outputs are copied into for reading back.
    Staging,
    /// Where timestamp queries are resolved.
    Resolve,
}

impl Kind {
    fn usage(self) -> wgpu::BufferUsages {
        use wgpu::BufferUsages as U;
        match self {
            Kind::Storage => U::STORAGE | U::COPY_DST | U::COPY_SRC,
            Kind::Uniform => U::UNIFORM | U::COPY_DST,
            Kind::Staging => U::MAP_READ | U::COPY_DST,
            Kind::Resolve => U::QUERY_RESOLVE | U::COPY_SRC,
        }
    }
}

/// Free buffers kept per (kind, size class): at most this many, and at most [`KEEP_BYTES`] of them
/// (always at least one, however large).
const KEEP: usize = 32;
const KEEP_BYTES: u64 = 128 << 20;

/// The free buffers, and how many were created and reused (for tests and the note).
#[derive(Default)]
pub(super) struct Pool {
    free: Mutex<HashMap<(Kind, u64), Vec<wgpu::Buffer>>>,
    created: AtomicUsize,
    reused: AtomicUsize,
}

/// How many buffers the pool has created, and how many times it handed out a reused one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers created on the device.
    pub created: usize,
    /// Buffers handed out again.
    pub reused: usize,
}

impl Pool {
    /// A buffer of `kind` with room for `bytes` (at least 4), from the free list or new.
    pub(super) fn take(self: &Arc<Self>, device: &wgpu::Device, kind: Kind, bytes: u64) -> Pooled {
        let bytes = bytes.max(4).next_multiple_of(4);
        let class = bytes
            .next_power_of_two()
            .max(256)
            .min(device.limits().max_buffer_size.max(bytes));
        let found = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.get_mut(&(kind, class)).and_then(|v| v.pop()));
        let buf = match found {
            Some(b) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                b
            }
            None => {
                self.created.fetch_add(1, Ordering::Relaxed);
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: class,
                    usage: kind.usage(),
                    mapped_at_creation: false,
                })
            }
        };
        Pooled {
            buf: Some(buf),
            bytes,
            kind,
            class,
            pool: self.clone(),
        }
    }

    pub(super) fn stats(&self) -> PoolStats {
        PoolStats {
            created: self.created.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }
}

/// A buffer on loan from the pool; it goes back when dropped.
pub(crate) struct Pooled {
    buf: Option<wgpu::Buffer>,
    bytes: u64,
    kind: Kind,
    class: u64,
    pool: Arc<Pool>,
}

impl Pooled {
    /// The buffer.
    pub(super) fn buffer(&self) -> &wgpu::Buffer {
        self.buf.as_ref().expect("a pooled buffer is present until dropped")
    }

    /// The bytes asked for (the buffer may be larger).
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The binding of exactly the bytes asked for.
    pub(super) fn binding(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buffer(),
            offset: 0,
            size: NonZeroU64::new(self.bytes),
        })
    }

    /// Drop the buffer instead of returning it (it may still be mapped after a failed read).
    pub(super) fn discard(mut self) {
        self.buf = None;
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take()
            && let Ok(mut free) = self.pool.free.lock()
        {
            let list = free.entry((self.kind, self.class)).or_default();
            if list.is_empty() || (list.len() < KEEP && (list.len() as u64 + 1) * self.class <= KEEP_BYTES) {
                list.push(b);
            }
        }
    }
}
