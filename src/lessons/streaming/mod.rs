//! Lesson 8, a bounded cache for an endless stream (kind `streaming`): the trained model reads the
//! held-out text byte by byte far past its 256-byte context, through the paged cache, under four
//! policies (dense, window, sinks + window, recompute), with keys turned on read by the backend's
//! `stream_decode` kernel at positions by cache slot (StreamingLLM) or by text position
//! ([`crate::drivers::stream`]). Everything the views draw is measured here, on the active backend; the
//! 16 KiB results of `kvscope export streaming` (stored, [`stored`]) are drawn beside them, labelled as
//! stored.

#[cfg(feature = "native")]
pub mod cli;
pub mod export;
pub mod stored;

use super::{LessonKind, Output, Params, get};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::drivers::stream::{Positions, StreamConfig, StreamPolicy, StreamRun};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, Schema};
use crate::model::{HELDOUT, shared};

crate::views! {
    /// The views of lesson 8.
    pub enum View {
        /// KV memory against stream position for every policy, next to the trained context.
        Growth = "growth",
        /// The ring buffer: the live blocks at the timeline's step, slot by slot.
        Ring = "ring",
        /// Bits per byte against stream position for every policy.
        Quality = "quality",
        /// The measured attention mass on the first S bytes, per layer and head.
        Sinks = "sinks",
        /// The same on SmolLM2-135M (stored), and what its four policies score.
        SinksReal = "sinks-real",
        /// Which positions the model sees: by cache slot against by text, and what the switch costs.
        Positions = "positions",
        /// Bits per byte, memory and work per byte of the four policies, and real models' windows.
        Costs = "costs",
        /// The kernels that ran.
        Kernel = "kernel",
    }
}

/// Lesson 8.
pub struct Streaming;

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "trained_context",
    "stream",
    "window",
    "sinks",
    "block_size",
    "kv_per_byte",
    "dense_kv",
    "ring_blocks",
    "ring_bound",
    "stored_most",
    "bpb_dense",
    "bpb_window",
    "bpb_sinks",
    "bpb_recompute",
    "bpb_dense_before",
    "bpb_dense_after",
    "max_sink_mass",
    "max_sink_head",
    "sink_verdict",
    "sink_verdict_zh",
    "bpb_sinks_text",
    "bpb_window_text",
    "max_pos_cache",
    "max_pos_text",
    "recompute_pairs",
    "cached_pairs",
    "stored_bytes",
    "stored_window",
    "stored_sinks",
    "stored_bpb_dense",
    "stored_bpb_window",
    "stored_bpb_sinks",
    "stored_bpb_recompute",
    "stored_bucket",
    "stored_dense_low",
    "stored_dense_high",
    "stored_dense_early",
    "stored_dense_late",
    "uniform_bpb",
    "sinks_text_change",
    "sinks_text_change_zh",
    "stored_real_tokens",
    "stored_real_layers",
    "stored_real_query_heads",
    "stored_real_sinks",
    "stored_real_window",
    "stored_real_max_sink_mass",
    "stored_real_max_sink_head",
    "stored_real_sink_heads",
    "stored_real_heads",
    "stored_real_bpb_dense",
    "stored_real_bpb_window",
    "stored_real_bpb_sinks",
    "stored_real_bpb_recompute",
];

/// A simulated GPU runs its threads one after another on the CPU: it streams this many bytes at most.
pub const SIM_BYTES: usize = 128;

/// The runs of one computation, in [`RUNS`] order.
pub const RUNS: [(StreamPolicy, Positions); 6] = [
    (StreamPolicy::Dense, Positions::Cache),
    (StreamPolicy::Window, Positions::Cache),
    (StreamPolicy::Sinks, Positions::Cache),
    (StreamPolicy::Recompute, Positions::Cache),
    (StreamPolicy::Window, Positions::Text),
    (StreamPolicy::Sinks, Positions::Text),
];

/// What lesson 8 computed.
#[derive(Debug, Clone)]
pub struct StreamOut {
    /// The runs, in [`RUNS`] order.
    pub runs: Vec<StreamRun>,
    /// W, S and B.
    pub window: usize,
    /// S.
    pub sinks: usize,
    /// B.
    pub block_size: usize,
    /// The model's trained context (256).
    pub trained_context: usize,
    /// Bytes of K and V one byte of the stream stores (every layer, f16).
    pub kv_per_byte: usize,
    /// Whether the ring view shows sinks + window (else the window alone).
    pub ring_sinks: bool,
    /// Whether the positions view shows text positions.
    pub text_positions: bool,
    /// The layer and head of the sink view.
    pub layer: usize,
    /// The head.
    pub head: usize,
    /// Bytes asked for, when a simulated backend streamed fewer.
    pub capped_from: Option<usize>,
    /// Each cached run's kernel checked against the f64 reference (every few steps).
    pub checks: Vec<CheckReport>,
    numbers: Vec<(&'static str, String)>,
}

/// The first decode step the sink measurements count: before it a query has only a few bytes to
/// attend, so all of its mass is on the first ones whether the model has a sink or not.
pub const SINK_FROM: usize = 16;

/// The lesson's test for an attention sink: a head whose mean mass on the first S bytes (over the
/// dense steps from [`SINK_FROM`] on, inside the trained context) reaches a tenth. The chart of lesson 8
/// step 4 draws it, so that single steps above it are not read as sinks.
pub const SINK_TEST_MASS: f64 = 0.10;

impl StreamOut {
    /// The run of `policy` with `positions`.
    pub fn run(&self, policy: StreamPolicy, positions: Positions) -> &StreamRun {
        let i = RUNS.iter().position(|&r| r == (policy, positions)).unwrap_or(0);
        &self.runs[i]
    }

    /// The run the ring view shows.
    pub fn ring_run(&self) -> &StreamRun {
        let p = if self.ring_sinks {
            StreamPolicy::Sinks
        } else {
            StreamPolicy::Window
        };
        self.run(p, Positions::Cache)
    }

    /// Bytes streamed.
    pub fn stream(&self) -> usize {
        self.runs[0].tokens.len()
    }

    /// Mean sink mass of `layer`, `head` in the dense run's steps 16…255 (the definition of a
    /// sink; fewer steps when the stream is shorter).
    pub fn dense_sink_mass(&self, layer: usize, head: usize) -> f64 {
        self.runs[0].mean_sink_mass(layer, head, SINK_FROM..self.trained_context.min(self.stream()))
    }

    /// The head with the most mean sink mass in dense steps 16…255: (layer, head, mass).
    pub fn strongest_sink(&self) -> (usize, usize, f64) {
        let r = &self.runs[0];
        let mut best = (0, 0, f64::MIN);
        for l in 0..r.layers {
            for h in 0..r.heads {
                let m = self.dense_sink_mass(l, h);
                if m > best.2 {
                    best = (l, h, m);
                }
            }
        }
        best
    }

    /// Attention pairs (query, key) per byte, averaged over the stream: the tokens each step attends to
    /// for a cached policy; the whole causal triangle of the window for recompute.
    pub fn pairs_per_byte(&self, run: &StreamRun) -> f64 {
        let n = run.attended.len().max(1) as f64;
        let per_step = |k: u32| {
            let k = f64::from(k);
            if run.config.policy == StreamPolicy::Recompute {
                k * (k + 1.0) / 2.0
            } else {
                k
            }
        };
        run.attended.iter().map(|&k| per_step(k)).sum::<f64>() / n
    }
}

fn fmt_bpb(x: f64) -> String {
    format!("{x:.3}")
}

impl Schema for Streaming {
    fn name(&self) -> &'static str {
        "streaming"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &[
            "window",
            "sinks",
            "block_size",
            "stream",
            "ring_sinks",
            "text_positions",
            "layer",
            "head",
        ]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["last", "context", "edge"]
    }
}

impl Streaming {
    /// The six runs of [`RUNS`] on `text`, and the kernel checks of the cached ones.
    fn runs(
        &self,
        text: &[u8],
        window: usize,
        sinks: usize,
        block_size: usize,
        backend: &dyn Backend,
        ring_steps: &[usize],
    ) -> Result<(Vec<StreamRun>, Vec<CheckReport>), String> {
        let m = shared().map_err(|e| e.to_string())?;
        let (mut runs, mut checks) = (Vec::new(), Vec::new());
        for (policy, positions) in RUNS {
            let cfg = StreamConfig {
                policy,
                positions,
                // Recompute runs a prefill of W bytes, at most the model's context.
                window: if policy == StreamPolicy::Recompute {
                    window.min(m.config.context)
                } else {
                    window
                },
                sinks,
                block_size,
            };
            let ring = matches!(policy, StreamPolicy::Window | StreamPolicy::Sinks) && positions == Positions::Cache;
            let run = m.stream_verified(text, cfg, backend, if ring { ring_steps } else { &[] }, 16)?;
            if let Some(r) = &run.check {
                checks.push(r.clone());
            }
            runs.push(run);
        }
        Ok((runs, checks))
    }
}

impl LessonKind for Streaming {
    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::STREAMING]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[
            Kernel::PagedAppend,
            Kernel::StreamDecode,
            Kernel::AttentionScores,
            Kernel::Softmax,
            Kernel::AttentionPv,
        ]
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let m = shared().map_err(|e| e.to_string())?;
        let window = get(p, "window", 64).max(1) as usize;
        let sinks = get(p, "sinks", 4).max(0) as usize;
        let block_size = get(p, "block_size", 16).max(1) as usize;
        let asked = (get(p, "stream", 400).max(2) as usize).min(HELDOUT.len());
        let ring_sinks = get(p, "ring_sinks", 1) != 0;
        let text_positions = get(p, "text_positions", 0) != 0;
        let c = m.config;
        let layer = (get(p, "layer", 0).max(0) as usize).min(c.n_layers - 1);
        let head = (get(p, "head", 0).max(0) as usize).min(c.n_heads - 1);
        let simulated = backend.kind().info().simulated;
        let n = if simulated { asked.min(SIM_BYTES) } else { asked };
        let text = &HELDOUT[..n];
        let all: Vec<usize> = (0..n).collect();
        // The runs depend on W, S, B, the length and the backend only: the view switches (ring, positions,
        // layer, head) reuse the last computation.
        // A reused result reports the launches that computed it again, for the kernel panel.
        type Key = (usize, usize, usize, usize, String);
        type Memo = Option<(
            Key,
            Vec<StreamRun>,
            Vec<CheckReport>,
            Vec<crate::compute::launch::Launch>,
        )>;
        static MEMO: std::sync::Mutex<Memo> = std::sync::Mutex::new(None);
        let key = (
            window,
            sinks,
            block_size,
            n,
            format!("{:?} {}", backend.kind(), backend.device()),
        );
        let cached = MEMO.lock().ok().and_then(|m| {
            m.as_ref()
                .filter(|(k, ..)| *k == key)
                .map(|(_, r, c, l)| (r.clone(), c.clone(), l.clone()))
        });
        let (runs, checks) = match cached {
            Some((r, c, l)) => {
                crate::compute::launch::report(l);
                (r, c)
            }
            None => {
                let (rc, launches) =
                    crate::compute::launch::capture(|| self.runs(text, window, sinks, block_size, backend, &all));
                let rc = rc?;
                if let Ok(mut m) = MEMO.lock() {
                    *m = Some((key, rc.0.clone(), rc.1.clone(), launches));
                }
                rc
            }
        };
        let kv_per_byte = c.n_layers
            * crate::cache::kv_bytes_per_token(1, c.n_kv_heads as u64, c.head_dim as u64, crate::cache::KvDtype::F16)
                as usize;
        let mut out = StreamOut {
            runs,
            window,
            sinks,
            block_size,
            trained_context: c.context,
            kv_per_byte,
            ring_sinks,
            text_positions,
            layer,
            head,
            capped_from: (n < asked).then_some(asked),
            checks,
            numbers: Vec::new(),
        };
        out.numbers = numbers(&out);
        Ok(Box::new(out))
    }
}

fn numbers(o: &StreamOut) -> Vec<(&'static str, String)> {
    let n = o.stream();
    let ctx = o.trained_context;
    let bpb = |p, pos| fmt_bpb(o.run(p, pos).bits_per_byte());
    let dense = o.run(StreamPolicy::Dense, Positions::Cache);
    let ring = o.ring_run();
    let (sl, sh, sm) = o.strongest_sink();
    let gain = o.run(StreamPolicy::Window, Positions::Cache).bits_per_byte()
        - o.run(StreamPolicy::Sinks, Positions::Cache).bits_per_byte();
    let no_sink = gain < 0.05 && sm < SINK_TEST_MASS;
    let bytes_mib = |b: usize| format!("{:.2} MiB", b as f64 / (1024.0 * 1024.0));
    let mut v = vec![
        ("trained_context", ctx.to_string()),
        ("stream", n.to_string()),
        ("window", o.window.to_string()),
        ("sinks", o.sinks.to_string()),
        ("block_size", o.block_size.to_string()),
        ("kv_per_byte", format!("{} B", o.kv_per_byte)),
        (
            "dense_kv",
            bytes_mib(dense.blocks_in_use.last().copied().unwrap_or(0) as usize * o.block_size * o.kv_per_byte),
        ),
        (
            "ring_blocks",
            ring.blocks_in_use.iter().max().copied().unwrap_or(0).to_string(),
        ),
        ("ring_bound", ring.pool_blocks.to_string()),
        (
            "stored_most",
            ring.stored.iter().max().copied().unwrap_or(0).to_string(),
        ),
        ("bpb_dense", bpb(StreamPolicy::Dense, Positions::Cache)),
        ("bpb_window", bpb(StreamPolicy::Window, Positions::Cache)),
        ("bpb_sinks", bpb(StreamPolicy::Sinks, Positions::Cache)),
        ("bpb_recompute", bpb(StreamPolicy::Recompute, Positions::Cache)),
        ("bpb_dense_before", fmt_bpb(dense.bits_per_byte_in(0..ctx.min(n) - 1))),
        ("max_sink_mass", format!("{:.1}%", 100.0 * sm)),
        ("max_sink_head", format!("L{sl} H{sh}")),
        (
            "sink_verdict",
            if no_sink {
                "no attention sink".into()
            } else {
                "an attention sink".into()
            },
        ),
        (
            "sink_verdict_zh",
            if no_sink {
                "没有注意力汇聚（attention sink）".into()
            } else {
                "出现了注意力汇聚（attention sink）".into()
            },
        ),
        ("bpb_sinks_text", bpb(StreamPolicy::Sinks, Positions::Text)),
        ("bpb_window_text", bpb(StreamPolicy::Window, Positions::Text)),
        (
            "max_pos_cache",
            o.run(StreamPolicy::Sinks, Positions::Cache)
                .max_position
                .iter()
                .max()
                .copied()
                .unwrap_or(0)
                .to_string(),
        ),
        (
            "max_pos_text",
            o.run(StreamPolicy::Sinks, Positions::Text)
                .max_position
                .iter()
                .max()
                .copied()
                .unwrap_or(0)
                .to_string(),
        ),
        (
            "recompute_pairs",
            format!(
                "{:.0}",
                o.pairs_per_byte(o.run(StreamPolicy::Recompute, Positions::Cache))
            ),
        ),
        (
            "cached_pairs",
            format!("{:.0}", o.pairs_per_byte(o.run(StreamPolicy::Sinks, Positions::Cache))),
        ),
    ];
    if n > ctx {
        v.push(("bpb_dense_after", fmt_bpb(dense.bits_per_byte_in(ctx..n))));
    }
    // Whether giving the kept bytes their text positions raises or lowers sinks + window's loss.
    let (by_cache, by_text) = (
        o.run(StreamPolicy::Sinks, Positions::Cache).bits_per_byte(),
        o.run(StreamPolicy::Sinks, Positions::Text).bits_per_byte(),
    );
    let rises = by_text > by_cache;
    v.push(("sinks_text_change", if rises { "rises" } else { "falls" }.into()));
    v.push(("sinks_text_change_zh", if rises { "升到" } else { "降到" }.into()));
    // A uniform guess over the 256 byte values costs log2(256) bits per byte.
    v.push(("uniform_bpb", format!("{}", (256f64).log2())));
    if let Some(s) = stored::smollm2() {
        // SmolLM2's stored runs (one setting: the file's sinks run).
        let (l, h, m) = s.strongest_sink();
        let (at, all) = s.heads_at_least(SINK_TEST_MASS);
        let (w, k) = s
            .runs
            .iter()
            .find(|r| r.policy == "sinks" && r.positions == "cache")
            .map_or((0, 0), |r| (r.window, r.sinks));
        v.push(("stored_real_tokens", s.tokens.unwrap_or(0).to_string()));
        v.push(("stored_real_layers", s.dense_sink_mass.len().to_string()));
        v.push((
            "stored_real_query_heads",
            s.dense_sink_mass.first().map_or(0, Vec::len).to_string(),
        ));
        v.push(("stored_real_sinks", s.sink_mass_sinks.to_string()));
        v.push(("stored_real_window", w.to_string()));
        v.push(("stored_real_max_sink_mass", format!("{:.0}%", 100.0 * m)));
        v.push(("stored_real_max_sink_head", format!("L{l} H{h}")));
        v.push(("stored_real_sink_heads", at.to_string()));
        v.push(("stored_real_heads", all.to_string()));
        for (name, policy) in [
            ("stored_real_bpb_dense", "dense"),
            ("stored_real_bpb_window", "window"),
            ("stored_real_bpb_sinks", "sinks"),
            ("stored_real_bpb_recompute", "recompute"),
        ] {
            if let Some(r) = s.find(policy, "cache", w, k) {
                v.push((name, fmt_bpb(r.bits_per_byte)));
            }
        }
    }
    if let Some(s) = stored::embedded() {
        // The stored runs at these sliders' W and S when they were measured, else at the first setting
        // stored (the narration names the setting).
        let (w, k) = s
            .find("sinks", "cache", o.window, o.sinks)
            .or_else(|| s.runs.iter().find(|r| r.policy == "sinks" && r.positions == "cache"))
            .map_or((o.window, o.sinks), |r| (r.window, r.sinks));
        v.push(("stored_bytes", s.bytes.to_string()));
        if let Some(t) = s.dense_trend() {
            v.push(("stored_bucket", s.curve_bucket.to_string()));
            v.push(("stored_dense_low", fmt_bpb(t.low)));
            v.push(("stored_dense_high", fmt_bpb(t.high)));
            v.push(("stored_dense_early", fmt_bpb(t.early)));
            v.push(("stored_dense_late", fmt_bpb(t.late)));
        }
        v.push(("stored_window", w.to_string()));
        v.push(("stored_sinks", k.to_string()));
        for (name, policy) in [
            ("stored_bpb_dense", StreamPolicy::Dense),
            ("stored_bpb_window", StreamPolicy::Window),
            ("stored_bpb_sinks", StreamPolicy::Sinks),
            ("stored_bpb_recompute", StreamPolicy::Recompute),
        ] {
            if let Some(r) = s.find(policy.name(), "cache", w, k) {
                v.push((name, fmt_bpb(r.bits_per_byte)));
            }
        }
    }
    v
}

impl Output for StreamOut {
    fn reports(&self) -> Vec<&CheckReport> {
        self.checks.iter().collect()
    }

    /// The kernel panel opens on this lesson's own kernel: the window + sinks decode (`stream_decode`), not the append that feeds it.
    fn main_op(&self) -> Option<Kernel> {
        Some(Kernel::StreamDecode)
    }

    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // The key rotated to its position as it is read (RoPE on read, the point of storing keys unrotated),
        // in stream_attention.cu and stream_attention.wgsl alike.
        (op == Kernel::StreamDecode).then_some("dot += s_q[d] * (k1 * c - k2 * s)")
    }

    fn has_nan(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.nll.iter().chain(&r.sink_mass).any(|x| x.is_nan()))
    }

    fn export_arrays(&self, cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let n = self.stream();
        let mut v = vec![NamedArray::new(
            "tokens",
            &[n],
            ArrayData::I32(self.runs[0].tokens.iter().map(|&b| i32::from(b)).collect()),
        )];
        for r in &self.runs {
            let tag = format!("{}_{}", r.config.policy.name(), r.config.positions.name());
            v.push(NamedArray::new(
                &format!("nll_{tag}"),
                &[n - 1],
                ArrayData::F32(r.nll.clone()),
            ));
            v.push(NamedArray::new(
                &format!("blocks_in_use_{tag}"),
                &[n],
                ArrayData::I32(r.blocks_in_use.iter().map(|&b| b as i32).collect()),
            ));
            v.push(NamedArray::new(
                &format!("sink_mass_{tag}"),
                &[r.layers, r.heads, n],
                ArrayData::F32(r.sink_mass.clone()),
            ));
        }
        let ring = self.ring_run();
        if let Some((_, table)) = ring.tables.get(cursor.min(n - 1)) {
            v.push(NamedArray::new(
                "ring_block_table",
                &[table.len(), 2],
                ArrayData::I32(table.iter().flat_map(|&(l, p)| [l as i32, p as i32]).collect()),
            ));
        }
        (v, self.checks.clone())
    }

    fn frames(&self) -> usize {
        self.stream()
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    fn point(&self, name: &str) -> Option<usize> {
        match name {
            "last" => Some(self.stream() - 1),
            "context" => Some(self.trained_context.min(self.stream() - 1)),
            // The last step whose window edge falls mid-block: the ring shows stored, masked bytes.
            "edge" => {
                let (w, b) = (self.window, self.block_size);
                (0..self.stream())
                    .rev()
                    .find(|&t| b > 1 && t + 1 >= w && (t + 1 - w) % b == b / 2)
                    .or(Some(self.stream() - 1))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled_on_a_stream_past_the_context() {
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "streaming").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        p.insert("stream".into(), 300);
        let out = l.kind.compute(l, &p, &crate::compute::CpuBackend).unwrap();
        let vals = out.values();
        for name in PLACEHOLDERS {
            let stored = name.starts_with("stored_");
            assert!(stored || vals.iter().any(|(n, _)| n == name), "{name} is not filled");
        }
        assert!(!out.has_nan());
        // The positions step says which way sinks + window moves when its keys take text positions.
        let get = |k: &str| vals.iter().find(|(n, _)| *n == k).unwrap().1.clone();
        let o = out.as_ref().downcast_ref::<StreamOut>().unwrap();
        let (c, t) = (
            o.run(StreamPolicy::Sinks, Positions::Cache).bits_per_byte(),
            o.run(StreamPolicy::Sinks, Positions::Text).bits_per_byte(),
        );
        assert_eq!(
            get("sinks_text_change"),
            if t > c { "rises" } else { "falls" },
            "{c} {t}"
        );
        assert_eq!(get("uniform_bpb"), "8");
    }
}
