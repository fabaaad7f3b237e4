//! Lesson 12, serving (kind `serving`): the trained model served by a scheduler that mixes prefill and
//! decode under a token budget, with and without chunked prefill; the `paged_prefill` kernel that attends
//! a chunk over the paged cache; a preempted request's KV swapped to a host pool against recomputed; and
//! speculative decoding, drafted by prompt lookup or a small draft model and verified in one
//! `paged_prefill` pass. Every count on screen (steps, tokens, blocks, acceptances, bytes) is computed
//! here on each slider change; wall-clock figures come from [`measure`]'s stored file, labelled with its
//! machine and date; device figures are quoted facts.

#[cfg(feature = "native")]
pub mod cli;
mod costs;
pub mod measure;
mod out;
pub use costs::{FACT_MODELS, crossover, device_rates, fact_costs};
pub use out::ServingOut;
use out::numbers;

use crate::calc::{self};
use crate::compute::{Backend, CheckReport, Kernel};
use crate::drivers::serve::{DEFAULT_SCENARIO, scenario};
use crate::drivers::spec::{Drafter, SpecConfig};
use crate::lessons::export::{ArrayData, NamedArray};
use crate::lessons::{Lesson, LessonKind, Output, Params, Schema, get};

crate::views! {
    /// The views of lesson 12.
    pub enum View {
        /// Each scheduler step's tokens, by request and kind, under the budget.
        Schedule = "schedule",
        /// TTFT and inter-token latency per request (live, in steps) and across budgets (stored, in ms).
        Latency = "latency",
        /// One chunk's rows against the cached positions: the prefix, and the causal triangle inside it.
        Chunk = "chunk",
        /// Swap against recompute: measured here, and from device facts against context length.
        Offload = "offload",
        /// Each verification pass: drafts accepted and rejected, the target's byte, the cache rolled back.
        Speculative = "speculative",
        /// Acceptance by position, passes per byte, bytes per second and memory.
        SpecStats = "spec_stats",
        /// The same measurements on SmolLM2-135M (stored) beside the tiny model's.
        Real = "real",
        /// The kernel that ran.
        Kernel = "kernel",
    }
}

/// Lesson 12.
pub struct Serving;

/// The placeholders the narration may use.
pub const PLACEHOLDERS: &[&str] = &[
    "budget",
    "policy",
    "policy_zh",
    "steps",
    "requests",
    "long_prompt",
    "long_arrive",
    "busy_step",
    "busy_prefill",
    "busy_decode",
    "long_ttft_steps",
    "long_chunks",
    "refused",
    "top_same",
    "top_same_zh",
    "refused_zh",
    "whole_budget",
    "whole_ttft",
    "small_budget",
    "small_ttft",
    "whole_stall",
    "small_stall",
    "stored_on",
    "chunk_rows",
    "chunk_first",
    "chunk_ctx",
    "chunk_prefix",
    "tiny_bpt",
    "swap_tokens",
    "swap_bytes",
    "swap_ms",
    "recompute_ms",
    "recompute_ratio",
    "mha_model",
    "mha_cross",
    "mha_cross_note",
    "mha_cross_note_zh",
    "gqa_model",
    "gqa_swap_us",
    "gqa_recompute_us",
    "drafter",
    "drafter_zh",
    "k",
    "passes",
    "spec_bytes",
    "first_proposed",
    "first_accepted",
    "freed_blocks",
    "alpha1",
    "mean_accepted",
    "passes_per_byte",
    "spec_kv",
    "plain_kv",
    "draft_weights",
    "spec_speed",
    "equal",
    "equal_zh",
    "check_err",
    "real_stored_on",
    "real_k",
    "real_speedup",
    "real_accepted",
    "real_passes",
    "tiny_speedup",
    "tiny_accepted",
    "real_pass_decodes",
    "tiny_pass_decodes",
];

impl Schema for Serving {
    fn name(&self) -> &'static str {
        "serving"
    }

    fn view_names(&self) -> &'static [&'static str] {
        View::NAMES
    }

    fn params(&self) -> &'static [&'static str] {
        &["budget", "chunked", "drafter", "k", "block_size"]
    }

    fn placeholders(&self) -> &'static [&'static str] {
        PLACEHOLDERS
    }

    fn timeline_points(&self) -> &'static [&'static str] {
        &["busiest", "last_pass"]
    }
}

impl LessonKind for Serving {
    #[cfg(feature = "native")]
    fn benches(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::BENCH_SERVING]
    }

    #[cfg(feature = "native")]
    fn exports(&self) -> Vec<&'static dyn crate::command::LessonCommand> {
        vec![&cli::SPECULATIVE, &cli::SERVING]
    }

    fn ops(&self) -> &'static [Kernel] {
        &[Kernel::PagedPrefill]
    }

    fn idle_params(&self, _p: &Params, views: &[&str]) -> Vec<(&'static str, [&'static str; 2])> {
        let mut v = Vec::new();
        let serving = views.iter().any(|x| ["schedule", "latency", "chunk"].contains(x));
        if !serving {
            for id in ["budget", "chunked"] {
                v.push((id, ["The token budget: steps 1 to 3.", "token 预算：第 1 到 3 步。"]));
            }
        }
        let spec = views
            .iter()
            .any(|x| ["speculative", "spec_stats", "kernel"].contains(x));
        if !spec {
            for id in ["drafter", "k", "block_size"] {
                v.push((id, ["Speculative decoding: steps 5 to 7.", "投机解码：第 5 到 7 步。"]));
            }
        }
        v
    }

    fn compute(&self, _lesson: &Lesson, p: &Params, backend: &dyn Backend) -> Result<Box<dyn Output>, String> {
        let model = crate::model::shared().map_err(|e| e.to_string())?;
        let draft = crate::model::draft().map_err(|e| e.to_string())?;
        let budget = get(p, "budget", 32).clamp(1, 4096) as usize;
        let chunked = get(p, "chunked", 1) != 0;
        let k = get(p, "k", 4).clamp(1, 16) as usize;
        let block_size = get(p, "block_size", 4).clamp(1, 64) as usize;
        let use_draft = get(p, "drafter", 2) >= 2;
        let requests = DEFAULT_SCENARIO.to_vec();
        let reqs = scenario(&requests)?;
        let run = model.serve(measure::serve_shape(), &reqs, measure::policy(chunked, budget), backend);
        let drafter = if use_draft {
            Drafter::Model(draft)
        } else {
            Drafter::Ngram { min_n: 1, max_n: 3 }
        };
        let cfg = |d| SpecConfig {
            drafter: d,
            k,
            temperature: 0.0,
            seed: 0,
            block_size,
        };
        let prompt = measure::spec_prompt();
        let spec = model.speculative(prompt, measure::SPEC_BYTES, &cfg(drafter), backend)?;
        let plain = model.speculative(prompt, measure::SPEC_BYTES, &cfg(Drafter::None), backend)?;
        // The kernel check: the first verification pass with drafts (or the first pass), again, checked.
        let first = spec.steps.iter().position(|s| !s.proposed.is_empty()).unwrap_or(0);
        let (check, chunk) = match spec.steps.get(first) {
            Some(s) => {
                let mut seq = prompt.to_vec();
                seq.extend_from_slice(&spec.output[..s.pos + 1 - prompt.len()]);
                let mut chunk = vec![seq[s.pos]];
                chunk.extend_from_slice(&s.proposed);
                let r = crate::drivers::spec::verify_pass_checked(
                    model,
                    backend,
                    &seq[..s.pos],
                    &chunk,
                    block_size,
                    model.config.n_layers - 1,
                )?;
                (r, (s.pos, chunk.len(), block_size))
            }
            None => (
                CheckReport::failed("paged_prefill", "no verification pass ran"),
                (0, 0, block_size),
            ),
        };
        // The chunk the kernel step draws: the long request's second chunk (its first has no cached
        // prefix), or its only one; the verification pass when the policy refused the scenario.
        let chunk = match &run {
            Ok(r) => {
                let long = requests.len() - 1;
                let mine: Vec<(usize, usize)> = r
                    .steps
                    .iter()
                    .flat_map(|e| e.chunks.iter().filter(|c| c.0 as usize == long).map(|c| (c.1, c.2)))
                    .collect();
                mine.get(1)
                    .or(mine.first())
                    .map_or(chunk, |&(p, n)| (p, n, measure::serve_shape().block_size))
            }
            Err(_) => chunk,
        };
        let stored = measure::stored()?;
        let real = measure::stored_smollm2()?;
        // Prompt lookup on the tiny model at each k the stored files time: counts (greedy), so computed
        // here, on the CPU backend whatever the lesson's (a few milliseconds each; on a simulated GPU
        // they would multiply the lesson's launches), and outside the launch capture: the kernel step
        // shows the lesson's verification pass, not these.
        let tiny_ngram = crate::compute::launch::uncaptured(|| {
            measure::SPEC_KS
                .iter()
                .map(|&k| {
                    let c = SpecConfig {
                        drafter: Drafter::Ngram { min_n: 1, max_n: 3 },
                        k,
                        temperature: 0.0,
                        seed: 0,
                        block_size,
                    };
                    model
                        .speculative(prompt, measure::SPEC_BYTES, &c, &crate::compute::CpuBackend)
                        .map(|r| (k, r.mean_accepted(), r.passes_per_byte()))
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        // Whole prompts against chunks at the largest measured budget, scheduled (no model: the schedule
        // depends on the lengths only).
        let top = measure::BUDGETS[measure::BUDGETS.len() - 1];
        let whole_top = measure::default_schedule(false, top)?;
        let same_at_top = (whole_top == measure::default_schedule(true, top)?).then_some(whole_top.len());
        let fact_models = FACT_MODELS
            .iter()
            .map(|n| calc::configs::bundled(n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut o = ServingOut {
            requests,
            budget,
            chunked,
            run,
            spec,
            plain,
            drafter: if use_draft { "draft" } else { "ngram" },
            block_size,
            check,
            chunk,
            stored,
            fact_models,
            real,
            tiny_ngram,
            same_at_top,
            numbers: Vec::new(),
        };
        o.numbers = numbers(&o);
        Ok(Box::new(o))
    }
}

impl ServingOut {
    /// Index of the long request (the last of the scenario).
    pub fn long(&self) -> usize {
        self.requests.len() - 1
    }

    /// The stored latency row of `policy` at `budget`.
    pub fn stored_latency(&self, policy: &str, budget: usize) -> Option<&measure::LatencyRow> {
        self.stored
            .latency
            .iter()
            .find(|r| r.policy == policy && r.budget == budget)
    }

    /// The stored speculative row of this drafter and k.
    pub fn stored_spec(&self) -> Option<&measure::SpecRow> {
        self.stored
            .speculative
            .iter()
            .find(|r| r.drafter == self.drafter && r.k == self.spec.k)
    }

    /// The step the first step's narration calls the busiest (`{busy_step}`), none when the policy refused.
    pub fn busiest_step(&self) -> Option<usize> {
        // The busiest step that mixes prefill and decode (or the busiest step when none does).
        self.step_tokens()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (pf, dc) = t.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
                (i, (pf > 0 && dc > 0, pf + dc))
            })
            .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)))
            .map(|(i, _)| i)
    }

    /// Prefill tokens and decode tokens of each step, by request: `[step][request] = (prefill, decode)`.
    pub fn step_tokens(&self) -> Vec<Vec<(usize, usize)>> {
        let Ok(run) = &self.run else { return Vec::new() };
        run.steps
            .iter()
            .map(|e| {
                let mut t = vec![(0, 0); self.requests.len()];
                for c in &e.chunks {
                    t[c.0 as usize].0 += c.2;
                }
                for d in &e.decoded {
                    t[d.0 as usize].1 += 1;
                }
                t
            })
            .collect()
    }
}
impl Output for ServingOut {
    fn source_focus(&self, op: Kernel) -> Option<&'static str> {
        // Where a row finds its request's tokens: the block table, in paged_attention.cu and its WGSL
        // twin alike (the prefill entry shares the decode body).
        (op == Kernel::PagedPrefill).then_some("The block table: logical block -> physical block")
    }

    fn reports(&self) -> Vec<&CheckReport> {
        vec![&self.check]
    }

    fn has_nan(&self) -> bool {
        false
    }

    fn export_arrays(&self, _cursor: usize, _verified: Option<&[CheckReport]>) -> (Vec<NamedArray>, Vec<CheckReport>) {
        let tokens = self.step_tokens();
        let n = self.requests.len();
        let flat: Vec<f32> = tokens
            .iter()
            .flat_map(|t| t.iter().flat_map(|&(a, b)| [a as f32, b as f32]))
            .collect();
        let accepted: Vec<f32> = self.spec.steps.iter().map(|s| s.accepted as f32).collect();
        let proposed: Vec<f32> = self.spec.steps.iter().map(|s| s.proposed.len() as f32).collect();
        let v = vec![
            NamedArray::new("step_tokens", &[tokens.len(), n, 2], ArrayData::F32(flat)),
            NamedArray::new("spec_proposed", &[proposed.len()], ArrayData::F32(proposed)),
            NamedArray::new("spec_accepted", &[accepted.len()], ArrayData::F32(accepted)),
        ];
        (v, vec![self.check.clone()])
    }

    fn values(&self) -> Vec<(&'static str, String)> {
        self.numbers.clone()
    }

    /// `busiest`: the scheduler step of `{busy_step}`; `last_pass`: the speculative run's last pass that
    /// had drafts to verify (a pass at the end of the budget may have none).
    fn point(&self, name: &str) -> Option<usize> {
        match name {
            "busiest" => self.busiest_step(),
            "last_pass" => self.spec.steps.iter().rposition(|s| !s.proposed.is_empty()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device-fact comparison: MHA's KV per token makes a swap cost more than recomputing short
    /// requests, with a crossover where attention's quadratic term catches up; GQA's swap is cheaper
    /// from the first token.
    #[test]
    fn swap_against_recompute_from_device_facts() {
        let (pcie, flops) = device_rates();
        let mha = calc::configs::bundled("Llama-2-7B").unwrap();
        let gqa = calc::configs::bundled("Llama-3-8B").unwrap();
        let cross = crossover(&mha, pcie, flops).expect("an MHA model crosses over");
        let (s, r) = fact_costs(&mha, cross - 1, pcie, flops);
        assert!(r <= s);
        let (s, r) = fact_costs(&mha, cross, pcie, flops);
        assert!(r > s);
        // 128 KiB per token both ways at 64 GB/s: 4.1 µs; 2 · 8.03 B FLOPs at 989 TFLOP/s: 16.2 µs.
        let (s, r) = fact_costs(&gqa, 1, pcie, flops);
        assert!((s * 1e6 - 4.096).abs() < 0.01, "{s}");
        assert!(r > s);
        assert_eq!(crossover(&gqa, pcie, flops), None);
        // The offload step says the MHA crossover lies past the 4096 tokens Llama-2-7B serves.
        assert_eq!((cross, calc::context_limit(&mha)), (10403, Some(4096)));
        let lessons = crate::lessons::load_embedded().unwrap();
        let l = lessons.iter().find(|l| l.kind.name() == "serving").unwrap();
        let mut p = Params::new();
        crate::lessons::normalize(l, &mut p);
        let o = l.kind.compute(l, &p, &crate::compute::CpuBackend).unwrap();
        let note = o.values().into_iter().find(|(n, _)| *n == "mha_cross_note").unwrap().1;
        assert_eq!(
            note,
            "beyond the 4096 tokens it serves, so within them recomputing is cheaper"
        );
    }
}
