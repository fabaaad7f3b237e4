//! Lesson 6, FlashAttention (kind `flash`): one head computed by the backend's tiled kernel
//! (`flash_attention_f32`, Br query rows per block, Bc-key tiles in shared memory) and by lesson 1's three
//! kernels, which materialise S and P. The Rust tile walker (`math::flash::walk`) runs the same
//! algorithm and records the state after every tile, which a kernel cannot report: the lesson's timeline
//! is the walker's tile steps, and the walker's output is checked against the kernel's. The I/O numbers
//! are the walker's counts; the split-K merge is `math::flash::merge` on two halves of the last row's
//! keys, checked against the full attention of that row.

use std::collections::BTreeMap;

use ndarray::{Array3, Axis};

use std::sync::Arc;

use super::{LessonKind, Output, Params, get, heat, heat_probs};
use crate::compute::Against;
use crate::compute::launch::LaunchDims;
use crate::compute::ops::flash::launch;
use crate::compute::ops::flash::{MAX_BLOCK_Q, smem_floats};
use crate::compute::{AttnInput, Backend, CheckReport, FlashInput, Kernel, Tolerance, check, reference};
use crate::figure::HeatmapData;
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::math::flash::{FlashWalk, Io, Partial, forward_io, merge, naive_io, partial, walk};
use crate::math::{AttnCore, AttnShape, AttnWeights, Mask, project};

crate::views! {
    /// The views of lesson 6.
    pub enum View {
        /// Bytes of S and P against T, next to on-chip memory.
        Memory = "memory",
        /// One row's online softmax, tile by tile, against the full softmax.
        Online = "online",
        /// The T×T grid in tiles, the current tile, and the tiles in shared memory.
        Tiles = "tiles",
        /// The current row block's accumulator, m and l.
        Acc = "acc",
        /// Tiles visited and skipped; the work.
        Work = "work",
        /// Elements read and written, naive against flash, and against T.
        Io = "io",
        /// Split-K: two partial results of the last row merged.
        Split = "split",
        /// The kernel that ran.
        Kernel = "kernel",
    }
}

/// Lesson 6.
pub struct FlashAttention;

/// The sequence lengths of the memory plot and of the I/O bars.
pub const MEMORY_TS: [usize; 6] = [256, 512, 1024, 2048, 4096, 8192];
/// The T of the I/O bars (walked with the lesson's head_dim, tiles and mask).
pub const IO_TS: [usize; 6] = [16, 32, 64, 128, 256, 512];

impl Schema for FlashAttention {
    fn name(&self) -> &'static str {
        "flash"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["seq", "head_dim", "smem_kib", "block_q", "block_k", "causal", "seed"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["first", "mid", "end", "row-mid"]
    }
}

impl LessonKind for FlashAttention {
    fn ops(&self) -> &'static [Kernel] {
        &[
            Kernel::FlashAttention,
            Kernel::AttentionScores,
            Kernel::Softmax,
            Kernel::AttentionPv,
        ]
    }

    /// Br and Bc are limited by the shared-memory slider: `(2·Br + 2·Bc)·hd + Br·Bc` floats must fit.
    fn allowed_values(&self, id: &str, p: &Params) -> Option<Vec<i64>> {
        let hd = get(p, "head_dim", 8).max(1) as usize;
        let budget = get(p, "smem_kib", 16).max(1) as usize * 1024 / 4;
        match id {
            "block_q" => Some(
                (1..=MAX_BLOCK_Q)
                    .filter(|&br| smem_floats(br, 1, hd) <= budget)
                    .map(|x| x as i64)
                    .collect(),
            ),
            "block_k" => {
                let br = get(p, "block_q", 8).max(1) as usize;
                Some(
                    (1..=64)
                        .filter(|&bc| smem_floats(br, bc, hd) <= budget)
                        .map(|x| x as i64)
                        .collect(),
                )
            }
            _ => None,
        }
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        Ok(Box::new(FlashOut::compute(p, backend)?))
    }
}

/// The numbers lesson 6's narration may show, all computed.
const PLACEHOLDERS: &[&str] = &[
    "t",
    "br",
    "bc",
    "row_blocks",
    "col_tiles",
    "tiles_total",
    "tiles_visited",
    "tiles_skipped",
    "work_pct",
    "tile_kib",
    "chip_smem",
    "lse_final",
    "big_t",
    "sp_big",
    "row",
    "row_tiles",
    "m_final",
    "l_final",
    "full_max",
    "full_sum",
    "row_err",
    "naive_read",
    "naive_write",
    "flash_read",
    "flash_write",
    "io_ratio",
    "io_ratio_big",
    "io_big_t",
    "split_at",
    "split_m1",
    "split_m2",
    "split_c1",
    "split_c2",
    "split_err",
    "grid_x",
    "threads",
    "kernel_err",
    "three_kernels_err",
];

/// Lesson 6's result.
pub struct FlashOut {
    /// Tokens.
    pub t: usize,
    /// Head dim.
    pub hd: usize,
    /// Query rows per block.
    pub br: usize,
    /// Keys per tile.
    pub bc: usize,
    /// The mask (causal or none).
    pub mask: Mask,
    /// The shared-memory budget of the slider, in KiB.
    pub smem_kib: usize,
    /// Floats the active backend's kernel may use for its tiles.
    pub kernel_floats: usize,
    /// What the active backend reports as on-chip memory, when it has any: bytes and what the figure is.
    pub device_smem: Option<(u64, [&'static str; 2])>,
    /// Q, K, V of the head, `[1, T, hd]`.
    pub q: Array3<f32>,
    /// Keys.
    pub k: Array3<f32>,
    /// Values.
    pub v: Array3<f32>,
    /// The walker's record of every tile.
    pub walk: FlashWalk,
    /// The flash kernel's output `[1, T, hd]`.
    pub out: Array3<f32>,
    /// Lesson 1's three kernels on the same input (S, P and O).
    pub full: AttnCore<f32>,
    /// Checks: the kernel against the f64 reference, the kernel against lesson 1's kernels, the walker
    /// against the kernel, the merged split against the full row.
    pub checks: Vec<CheckReport>,
    /// Naive traffic at this T.
    pub naive: Io,
    /// `(T, naive, flash)` traffic for [`IO_TS`], walked with this head_dim, tiles and mask.
    pub io_sweep: Vec<(usize, Io, Io)>,
    /// The two halves of the last row's keys and their merge (with the two factors).
    pub split: (Partial, Partial, Partial, [f32; 2]),
    /// The kernel's launch.
    pub launch: LaunchDims,
    /// Lesson 1's P for the tile grid (masked entries hatched).
    pub p_map: Arc<HeatmapData>,
    /// The accumulator after every tile step.
    pub acc_maps: Vec<Arc<HeatmapData>>,
    /// Rows: partition 1's output, partition 2's, the merge, lesson 1's row `[4, hd]`.
    pub split_values: Vec<f32>,
    /// Their heatmap.
    pub split_map: Arc<HeatmapData>,
    numbers: Vec<(&'static str, String)>,
    points: BTreeMap<&'static str, usize>,
}

/// `x` with four decimals (narration numbers).
fn fmt4(x: f32) -> String {
    format!("{x:.4}")
}

impl FlashOut {
    fn compute(p: &Params, backend: &dyn Backend) -> Result<FlashOut, String> {
        let t = get(p, "seq", 24).max(1) as usize;
        let hd = get(p, "head_dim", 8).max(1) as usize;
        let br = get(p, "block_q", 8).max(1) as usize;
        let bc = get(p, "block_k", 8).max(1) as usize;
        let seed = get(p, "seed", 0).max(0) as u64;
        let smem_kib = get(p, "smem_kib", 16).max(1) as usize;
        let mask = if get(p, "causal", 1) != 0 {
            Mask::Causal
        } else {
            Mask::None
        };
        let shape = AttnShape {
            seq: t,
            d_model: hd,
            n_heads: 1,
            n_kv_heads: 1,
        };
        let qkv = project(&AttnWeights::random(shape, seed));
        let attn = AttnInput {
            q: &qkv.q,
            k: &qkv.k,
            v: &qkv.v,
            mask,
        };
        let inp = FlashInput {
            attn,
            block_q: br,
            block_k: bc,
        };
        let out = backend.flash_attention(&inp).map_err(|e| e.to_string())?;
        let full = backend.attention(&attn).map_err(|e| e.to_string())?;
        let head = |a: &Array3<f32>| a.index_axis(Axis(0), 0).to_owned();
        let (q0, k0, v0) = (head(&qkv.q), head(&qkv.k), head(&qkv.v));
        let w = walk(q0.view(), k0.view(), v0.view(), mask, br, bc);
        let want = reference::attention(&attn);
        let slice = |a: &Array3<f32>| a.as_slice().unwrap_or_default().to_vec();
        let mut checks = vec![
            check(
                "flash kernel vs f64 reference",
                out.shape(),
                &slice(&out),
                want.out.as_slice().unwrap_or_default(),
                Tolerance::F32,
            ),
            check(
                "flash kernel vs lesson 1's three kernels",
                out.shape(),
                &slice(&out),
                &full.out.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
                Tolerance::F32,
            )
            .against(Against::ThreeKernels),
            check(
                "tile walker vs flash kernel",
                out.shape(),
                w.out.as_slice().unwrap_or_default(),
                &out.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
                Tolerance::F32,
            )
            .against(Against::FlashKernel),
        ];
        // The last row's keys split in two halves, each reduced on its own, then merged.
        let last = t - 1;
        let split_at = t.div_ceil(2).min(t);
        let qrow: Vec<f32> = q0.row(last).to_vec();
        let vis = |j: usize| mask.visible(last, j);
        let a = partial(&qrow, k0.view(), v0.view(), 0..split_at, vis);
        let b = partial(&qrow, k0.view(), v0.view(), split_at..t, vis);
        let (merged, factors) = merge(&a, &b);
        checks.push(check(
            "split-K merge vs full attention (last row)",
            &[hd],
            &merged.out(),
            &want.out.index_axis(Axis(0), 0).row(last).to_vec(),
            Tolerance::F32,
        ));
        let naive = naive_io(t, hd);
        let io_sweep = IO_TS
            .iter()
            .map(|&tt| {
                let z = ndarray::Array2::<f32>::zeros((tt, hd));
                (tt, naive_io(tt, hd), forward_io(z.view(), mask, br, bc))
            })
            .collect();
        let launch = launch::cuda(1, t, br);
        let mut points = BTreeMap::new();
        points.insert("first", 0);
        points.insert("mid", w.steps.len() / 2);
        points.insert("end", w.steps.len().saturating_sub(1));
        // The middle key tile of the last row's row block (the online-softmax step opens there).
        let row_tiles: Vec<usize> = (0..w.steps.len())
            .filter(|&i| w.steps[i].rows.contains(&last))
            .collect();
        points.insert(
            "row-mid",
            row_tiles
                .get(row_tiles.len().saturating_sub(1) / 2)
                .copied()
                .unwrap_or(0),
        );
        let p_map = heat_probs(&full.probs, 0, mask);
        let acc_maps = w.steps.iter().map(|s| heat(s.rows.len(), hd, s.acc.clone())).collect();
        let mut split_values = a.out();
        split_values.extend(b.out());
        split_values.extend(merged.out());
        split_values.extend(full.out.index_axis(Axis(0), 0).row(last).iter().copied());
        let split_map = heat(4, hd, split_values.clone());
        let mut o = FlashOut {
            p_map,
            acc_maps,
            split_values,
            split_map,
            t,
            hd,
            br,
            bc,
            mask,
            smem_kib,
            kernel_floats: backend.flash_smem_floats(),
            device_smem: backend.shared_memory(),
            q: qkv.q.clone(),
            k: qkv.k.clone(),
            v: qkv.v.clone(),
            walk: w,
            out,
            full,
            checks,
            naive,
            io_sweep,
            split: (a, b, merged, factors),
            launch,
            numbers: Vec::new(),
            points,
        };
        o.numbers = o.fill_numbers(split_at);
        Ok(o)
    }

    /// The row the online-softmax view follows at timeline position `c`: the last row of the current
    /// row block (under the causal mask it sees the most keys).
    pub fn row_at(&self, c: usize) -> usize {
        self.walk.steps.get(c).map_or(self.t - 1, |s| s.rows.end - 1)
    }

    /// Tiles of the grid.
    pub fn tile_counts(&self) -> (usize, usize, usize) {
        let total = self.t.div_ceil(self.br) * self.t.div_ceil(self.bc);
        (total, total - self.walk.skipped, self.walk.skipped)
    }

    /// Score elements the visited tiles cover (what the kernel computes, masked entries inside a
    /// visited tile included).
    pub fn visited_elements(&self) -> usize {
        self.walk
            .steps
            .iter()
            .filter(|s| !s.skipped)
            .map(|s| s.rows.len() * s.cols.len())
            .sum()
    }

    fn fill_numbers(&self, split_at: usize) -> Vec<(&'static str, String)> {
        let (t, hd, br, bc) = (self.t, self.hd, self.br, self.bc);
        let (total, visited, skipped) = self.tile_counts();
        let kib = |floats: usize| super::format_bytes(floats as f64 * 4.0);
        let big_t = *MEMORY_TS.last().unwrap_or(&8192);
        let sp_big = (2 * big_t * big_t * 4) as f64 / (1024.0 * 1024.0);
        // The online softmax of the last row, at the end of the walk.
        let row = t - 1;
        let last = self.walk.steps.iter().rev().find(|s| s.rows.contains(&row));
        let r = last.map_or(0, |s| row - s.rows.start);
        let (m_final, l_final) = last.map_or((0.0, 0.0), |s| (s.m[r], s.l[r]));
        let row_tiles = self
            .walk
            .steps
            .iter()
            .filter(|s| s.rows.contains(&row) && !s.skipped)
            .count();
        let scores = self.full.scores.index_axis(Axis(0), 0);
        let srow: Vec<f32> = scores.row(row).to_vec();
        let full_max = srow.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let full_sum: f32 = srow
            .iter()
            .filter(|s| s.is_finite())
            .map(|s| (s - full_max).exp())
            .sum();
        let row_err = (0..hd)
            .map(|d| (self.out[[0, row, d]] - self.full.out[[0, row, d]]).abs())
            .fold(0f32, f32::max);
        let fl = self.walk.io;
        let (a, b, _, [c1, c2]) = &self.split;
        let m_text = |m: f32| if m.is_finite() { fmt4(m) } else { "−∞".to_string() };
        vec![
            ("t", t.to_string()),
            ("br", br.to_string()),
            ("bc", bc.to_string()),
            ("row_blocks", t.div_ceil(br).to_string()),
            ("col_tiles", t.div_ceil(bc).to_string()),
            ("tiles_total", total.to_string()),
            ("tiles_visited", visited.to_string()),
            ("tiles_skipped", skipped.to_string()),
            (
                "work_pct",
                format!("{:.0}%", 100.0 * self.visited_elements() as f64 / (t * t) as f64),
            ),
            ("tile_kib", kib(smem_floats(br, bc, hd))),
            // The whole chip's shared memory, from two quoted facts (SMs × shared memory per SM).
            (
                "chip_smem",
                super::format_bytes(
                    crate::facts::fact("h100_sxm_sms").number()
                        * crate::facts::fact("hopper_smem_per_sm").number()
                        * 1024.0,
                ),
            ),
            ("lse_final", fmt4(m_final + l_final.ln())),
            ("big_t", big_t.to_string()),
            ("sp_big", format!("{sp_big:.0} MiB")),
            ("row", row.to_string()),
            ("row_tiles", row_tiles.to_string()),
            ("m_final", fmt4(m_final)),
            ("l_final", fmt4(l_final)),
            ("full_max", fmt4(full_max)),
            ("full_sum", fmt4(full_sum)),
            ("row_err", format!("{row_err:.1e}")),
            ("naive_read", self.naive.read.to_string()),
            ("naive_write", self.naive.write.to_string()),
            ("flash_read", fl.read.to_string()),
            ("flash_write", fl.write.to_string()),
            (
                "io_ratio",
                format!(
                    "{:.1}×",
                    (self.naive.read + self.naive.write) as f64 / (fl.read + fl.write).max(1) as f64
                ),
            ),
            ("io_big_t", self.io_sweep.last().map_or(0, |x| x.0).to_string()),
            (
                "io_ratio_big",
                self.io_sweep.last().map_or(String::new(), |(_, a, b)| {
                    format!("{:.1}×", (a.read + a.write) as f64 / (b.read + b.write).max(1) as f64)
                }),
            ),
            ("split_at", split_at.to_string()),
            ("split_m1", m_text(a.m)),
            ("split_m2", m_text(b.m)),
            ("split_c1", fmt4(*c1)),
            ("split_c2", fmt4(*c2)),
            (
                "split_err",
                format!("{:.1e}", self.checks.get(3).map_or(0.0, |c| c.max_abs)),
            ),
            ("grid_x", self.launch.grid[0].to_string()),
            ("threads", self.launch.block[0].to_string()),
            (
                "kernel_err",
                format!("{:.1e}", self.checks.first().map_or(0.0, |c| c.max_abs)),
            ),
            (
                "three_kernels_err",
                format!("{:.1e}", self.checks.get(1).map_or(0.0, |c| c.max_abs)),
            ),
        ]
    }
}

impl Output for FlashOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.checks.iter().collect()
    }

    fn has_nan(&self) -> bool {
        self.out.iter().any(|x| x.is_nan()) || self.walk.out.iter().any(|x| x.is_nan())
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let (t, hd) = (self.t, self.hd);
        let mut v = vec![
            NamedArray::new("q", &[1, t, hd], ArrayData::F32(self.q.iter().copied().collect())),
            NamedArray::new("k", &[1, t, hd], ArrayData::F32(self.k.iter().copied().collect())),
            NamedArray::new("v", &[1, t, hd], ArrayData::F32(self.v.iter().copied().collect())),
            NamedArray::new("out", &[1, t, hd], ArrayData::F32(self.out.iter().copied().collect())),
        ];
        if let Some(s) = self.walk.steps.get(cursor.min(self.walk.steps.len().saturating_sub(1))) {
            let n = s.rows.len();
            v.push(NamedArray::new("tile_m", &[n], ArrayData::F32(s.m.clone())));
            v.push(NamedArray::new("tile_l", &[n], ArrayData::F32(s.l.clone())));
            v.push(NamedArray::new("tile_acc", &[n, hd], ArrayData::F32(s.acc.clone())));
        }
        (v, self.checks.clone())
    }

    fn frames(&self) -> usize {
        self.walk.steps.len().max(1)
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    fn point(&self, name: &str) -> Option<usize> {
        self.points.get(name).copied()
    }

    fn op_check(&self, op: Kernel) -> Option<&CheckReport> {
        (op == Kernel::FlashAttention).then(|| &self.checks[1])
    }

    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // The key-tile loop, in flash_attention.cu and flash_attention.wgsl alike.
        (op == Kernel::FlashAttention).then_some("j0 += bc)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::CpuBackend;

    /// Each check names what it compared with, so the badge and the check lines can say it: the f64
    /// reference, lesson 1's three kernels, the flash kernel (the walker's replay), the f64 reference.
    #[test]
    fn the_checks_name_what_they_compared_with() {
        let out = FlashOut::compute(&Params::new(), &CpuBackend::new()).unwrap();
        let against: Vec<Against> = out.checks.iter().map(|c| c.against).collect();
        assert_eq!(
            against,
            [
                Against::F64Reference,
                Against::ThreeKernels,
                Against::FlashKernel,
                Against::F64Reference
            ]
        );
    }
}
