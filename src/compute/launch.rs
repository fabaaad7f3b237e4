//! Launch geometry: the [`LaunchDims`] type and the helpers every op's `launch.rs` uses (each op keeps
//! the geometry of its own kernels in its folder: `cuda…` for the CUDA launches, which the CUDA backend
//! and the shim run, `wgsl…` for the WGSL dispatches), and the record of the launches the backends
//! report ([`capture`]).

use std::cell::RefCell;
use std::fmt;

/// A kernel launch: grid and block dimensions (for WGSL: workgroups and `@workgroup_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LaunchDims {
    /// The kernel entry point.
    pub entry: &'static str,
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
}

impl LaunchDims {
    /// Total threads launched.
    pub fn threads(&self) -> u64 {
        self.grid.iter().chain(&self.block).map(|&d| d as u64).product()
    }
}

impl fmt::Display for LaunchDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        write!(
            f,
            "{}<<<grid ({gx}, {gy}, {gz}), block ({bx}, {by}, {bz})>>>",
            self.entry
        )
    }
}

/// Which kind of launch: a CUDA grid or a WGSL dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Api {
    /// `entry<<<grid, block>>>` (the CUDA backend and the shim).
    Cuda,
    /// `dispatch_workgroups(grid)` of an entry with `@workgroup_size(block)`.
    Wgsl,
}

/// A launch a backend reported: what it launched, or, from the CPU backend (which launches nothing and
/// runs the op in Rust), the CUDA launch it stands in for (`ran` false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Launch {
    /// The entry point and its geometry.
    pub dims: LaunchDims,
    /// CUDA or WGSL.
    pub api: Api,
    /// Whether it ran; false for the CUDA geometry the CPU backend reports in place of its Rust.
    pub ran: bool,
}

thread_local! {
    /// The launches of the innermost [`capture`] on this thread, if one is open.
    static RECORD: RefCell<Option<Vec<Launch>>> = const { RefCell::new(None) };
}

/// Report launches to the open [`capture`] of this thread (nothing happens outside one). The backends
/// call it where they launch: the CUDA backend when it configures a launch, the shim when it passes
/// the grid to a wrapper, the wgpu backend for every dispatch it submits, the CPU backend with the
/// geometry the CUDA backend would launch.
pub fn report(launches: impl IntoIterator<Item = Launch>) {
    RECORD.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.extend(launches);
        }
    });
}

/// A CUDA launch that ran (CUDA backend or shim).
pub fn ran_cuda(dims: &LaunchDims) {
    report([Launch {
        dims: *dims,
        api: Api::Cuda,
        ran: true,
    }]);
}

/// A WGSL dispatch that ran.
pub fn ran_wgsl(dims: &LaunchDims) {
    report([Launch {
        dims: *dims,
        api: Api::Wgsl,
        ran: true,
    }]);
}

/// The CUDA launches the CPU backend stands in for: it ran the op in Rust.
pub fn would_run_cuda(dims: &[LaunchDims]) {
    report(dims.iter().map(|d| Launch {
        dims: *d,
        api: Api::Cuda,
        ran: false,
    }));
}

/// Run `f` and return what it returned with every launch the backends reported meanwhile on this
/// thread, in order. Captures nest: an enclosing capture also gets these launches.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Launch>) {
    /// Puts the enclosing record back (also when `f` panics) and hands it this capture's launches.
    struct Restore(Option<Vec<Launch>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            let inner = RECORD.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
            report(inner.unwrap_or_default());
        }
    }
    let outer = RECORD.with(|r| r.borrow_mut().replace(Vec::new()));
    let restore = Restore(outer);
    let out = f();
    let got = RECORD.with(|r| r.borrow().clone().unwrap_or_default());
    drop(restore);
    (out, got)
}

/// Run `f` outside any [`capture`] of this thread: its launches are reported to no one. For side
/// computations that are not the op a lesson shows (lesson 12's acceptance counts on the CPU backend),
/// so that the kernel panel and the launch counts stay those of the lesson's own run.
pub fn uncaptured<T>(f: impl FnOnce() -> T) -> T {
    /// Puts the enclosing record back (also when `f` panics).
    struct Restore(Option<Vec<Launch>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            RECORD.with(|r| *r.borrow_mut() = outer);
        }
    }
    let _restore = Restore(RECORD.with(|r| r.borrow_mut().take()));
    f()
}

/// Tile edge of the 2-D attention kernels (scores and P·V).
pub const TILE: usize = 16;
/// Threads of the 1-D kernels.
pub const THREADS: u32 = 128;

/// `n` as a grid dimension (saturating).
pub fn d(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `n` workgroups of a 1-D WGSL kernel, in x and (past 65535) y.
pub fn groups_2d(n: usize) -> [u32; 3] {
    let g = n.max(1);
    if g <= 65535 {
        [g as u32, 1, 1]
    } else {
        [65535, d(g.div_ceil(65535)), 1]
    }
}

/// How the kernel panel writes a WGSL dispatch.
pub fn describe_wgsl(l: &LaunchDims) -> String {
    let [gx, gy, gz] = l.grid;
    let [bx, by, bz] = l.block;
    format!(
        "{}: dispatch ({gx}, {gy}, {gz}) × @workgroup_size({bx}, {by}, {bz})",
        l.entry
    )
}

/// `read_stream_u32` (the read-only roof, not an op): 256 threads per block, grid-stride over `words`
/// 16-byte words, at most 4096 blocks; the same on CUDA and WGSL.
pub fn read_stream(words: usize) -> LaunchDims {
    LaunchDims {
        entry: "read_stream_u32",
        grid: [d(words.div_ceil(256).clamp(1, 4096)), 1, 1],
        block: [256, 1, 1],
    }
}
