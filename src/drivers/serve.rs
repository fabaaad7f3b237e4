//! Serving the trained model through one paged engine (lesson 12): a step runs a chunk of tokens for each
//! scheduled request (a piece of a prompt, or the one token a decoding request appends) through every
//! layer. Each request's K/V are written at its reserved slots, then one `paged_prefill` launch per layer
//! attends every request's chunk over its cache, causally within the chunk. A whole prompt is one chunk
//! and a decode is a chunk of one token, so every schedule computes attention with the same kernel, and
//! a one-token chunk is `paged_decode` bit for bit.

use ndarray::{Array2, Array3, Axis};

use crate::cache::RequestId;
use crate::compute::Backend;
use crate::kv::KvEngine;
use crate::model::{Model, TokenId};

/// One request's chunk in a step: its id, the position of the chunk's first token, and the tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<T = u8> {
    /// The request.
    pub req: RequestId,
    /// Position of `tokens[0]`.
    pub pos0: usize,
    /// The tokens (bytes).
    pub tokens: Vec<T>,
}

impl Model {
    /// Run `chunks` through every layer of `engine` (their slots already reserved, each chunk the
    /// request's last tokens): write K/V, attend with `paged_prefill`. Returns each chunk's logits
    /// `[tokens, vocab]`, in order.
    pub fn serve_chunks<T: TokenId>(
        &self,
        engine: &mut KvEngine,
        backend: &dyn Backend,
        chunks: &[Chunk<T>],
    ) -> Result<Vec<Array2<f32>>, String> {
        self.serve_chunks_checked(engine, backend, chunks, None).map(|(l, _)| l)
    }

    /// [`Self::serve_chunks`], with layer `check`'s `paged_prefill` launch checked against the f64
    /// reference (its report returned).
    pub fn serve_chunks_checked<T: TokenId>(
        &self,
        engine: &mut KvEngine,
        backend: &dyn Backend,
        chunks: &[Chunk<T>],
        check: Option<usize>,
    ) -> Result<(Vec<Array2<f32>>, Option<crate::compute::CheckReport>), String> {
        let c = self.config;
        let mut report = None;
        let (h, hd) = (c.n_heads, c.head_dim);
        if chunks.is_empty() {
            return Ok((Vec::new(), None));
        }
        let reqs: Vec<RequestId> = chunks.iter().map(|ch| ch.req).collect();
        let query_lens: Vec<i32> = chunks.iter().map(|ch| ch.tokens.len() as i32).collect();
        for ch in chunks {
            let len = engine.cache().len(ch.req);
            if ch.tokens.is_empty() || ch.pos0 + ch.tokens.len() != len {
                return Err(format!(
                    "request {}: a chunk of {} tokens at {} must end at the {len} tokens reserved",
                    ch.req,
                    ch.tokens.len(),
                    ch.pos0
                ));
            }
        }
        let mut xs: Vec<Array2<f32>> = chunks.iter().map(|ch| self.embed_tokens(&ch.tokens)).collect();
        for (l, b) in self.blocks.iter().enumerate() {
            // Q of every chunk as rows [Q, H, hd]; K/V written at each chunk's slots.
            let mut q_rows = Vec::new();
            for (ch, x) in chunks.iter().zip(&xs) {
                let (q, k, v) = self.qkv(b, x, ch.pos0);
                let by_token = |a: &Array3<f32>| -> Vec<f32> {
                    a.view()
                        .permuted_axes([1, 0, 2])
                        .as_standard_layout()
                        .iter()
                        .copied()
                        .collect()
                };
                let slots: Vec<i32> = (ch.pos0..ch.pos0 + ch.tokens.len())
                    .map(|p| engine.cache().slot(ch.req, p).map_or(-1, |s| s as i32))
                    .collect();
                engine
                    .write(backend, l, &slots, &by_token(&k), &by_token(&v))
                    .map_err(|e| e.to_string())?;
                q_rows.extend(by_token(&q));
            }
            let tables = engine.tables(&reqs);
            let o = if check == Some(l) {
                let (o, r) = engine
                    .prefill_checked(backend, l, &tables, &query_lens, &q_rows, h)
                    .map_err(|e| e.to_string())?;
                report = Some(r);
                o
            } else {
                engine
                    .prefill(backend, l, &tables, &query_lens, &q_rows, h)
                    .map_err(|e| e.to_string())?
            };
            let mut at = 0;
            for (ch, x) in chunks.iter().zip(xs.iter_mut()) {
                let n = ch.tokens.len();
                // [n, H, hd] → [H, n, hd]
                let rows = Array3::from_shape_vec((n, h, hd), o[at * h * hd..(at + n) * h * hd].to_vec())
                    .map_err(|e| e.to_string())?;
                let heads = rows.permuted_axes([1, 0, 2]).as_standard_layout().to_owned();
                let y = self.attn_residual(b, x, &heads);
                *x = self.mlp(b, &y);
                at += n;
            }
        }
        Ok((xs.iter().map(|x| self.logits(x)).collect(), report))
    }
}

/// The logits of a chunk's last token.
pub fn last_row(logits: &Array2<f32>) -> Vec<f32> {
    logits.index_axis(Axis(0), logits.nrows().saturating_sub(1)).to_vec()
}

/// The default served scenario `(arrival step, prompt bytes, bytes to generate)`: three short requests
/// decoding when a long prompt arrives at step 6 (lesson 12 and `kvscope export serving`).
pub const DEFAULT_SCENARIO: [(usize, usize, usize); 4] = [(0, 24, 40), (0, 16, 40), (2, 32, 40), (6, 192, 8)];

/// Requests of `(arrival step, prompt bytes, bytes to generate)`, each prompt a different piece of the
/// held-out text (request i starts at byte 997·i, wrapped).
pub fn scenario(specs: &[(usize, usize, usize)]) -> Result<Vec<ServedRequest>, String> {
    scenario_from(crate::model::HELDOUT, specs)
}

/// [`scenario`] with prompts cut from the tokens `text` (a real model's tokens of its held-out text).
pub fn scenario_from<T: TokenId>(text: &[T], specs: &[(usize, usize, usize)]) -> Result<Vec<ServedRequest<T>>, String> {
    specs
        .iter()
        .enumerate()
        .map(|(i, &(arrive, prompt, generate))| {
            if prompt == 0 || prompt > text.len() {
                return Err(format!(
                    "request {i}: a prompt of {prompt} bytes (1 to {} are held out)",
                    text.len()
                ));
            }
            let from = (997 * i) % (text.len() - prompt + 1);
            Ok(ServedRequest {
                arrive,
                prompt: text[from..from + prompt].to_vec(),
                generate,
            })
        })
        .collect()
}

/// One request of a served scenario: its arrival step, prompt bytes and how many bytes to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRequest<T = u8> {
    /// Step at which it arrives.
    pub arrive: usize,
    /// The prompt.
    pub prompt: Vec<T>,
    /// Bytes to generate.
    pub generate: usize,
}

/// What a served scenario did, per request and per step.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeRun<T = u8> {
    /// The policy's name.
    pub policy: &'static str,
    /// Each request's generated bytes (greedy).
    pub outputs: Vec<Vec<T>>,
    /// Each step's events.
    pub steps: Vec<crate::kv::StepEvents>,
    /// Each step's wall-clock seconds on the backend (the model and its kernels).
    pub step_seconds: Vec<f64>,
    /// Each request's step of its first generated byte (the end of its prefill), if it got one.
    pub first_token_step: Vec<Option<usize>>,
    /// Each request's steps at which it decoded a byte.
    pub decode_steps: Vec<Vec<usize>>,
    /// Each request's step at which each generated byte was first sampled (streamed to its user): byte 0
    /// at the end of the prefill, byte j at the decode that read byte j − 1. A byte sampled before a
    /// preemption and sampled again after the recompute keeps its first step, as a streamed token is not
    /// taken back.
    pub emit_steps: Vec<Vec<usize>>,
}

/// One request's latencies in a served run, in steps and in wall-clock seconds on the backend.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Steps from its arrival to its first byte, both counted (1: the step it arrived in).
    pub ttft_steps: usize,
    /// Seconds from the start of its arrival step to the end of its first byte's step.
    pub ttft_seconds: f64,
    /// Steps between consecutive bytes.
    pub itl_steps: Vec<usize>,
    /// Seconds between consecutive bytes.
    pub itl_seconds: Vec<f64>,
}

impl Latency {
    /// The worst inter-token stall in steps (0 for fewer than two bytes).
    pub fn max_itl_steps(&self) -> usize {
        self.itl_steps.iter().copied().max().unwrap_or(0)
    }
    /// The worst inter-token stall in seconds.
    pub fn max_itl_seconds(&self) -> f64 {
        self.itl_seconds.iter().copied().fold(0.0, f64::max)
    }
    /// The mean inter-token latency in seconds (0 for fewer than two bytes).
    pub fn mean_itl_seconds(&self) -> f64 {
        if self.itl_seconds.is_empty() {
            0.0
        } else {
            self.itl_seconds.iter().sum::<f64>() / self.itl_seconds.len() as f64
        }
    }
}

impl<T> ServeRun<T> {
    /// The wall-clock time at the end of each step, from the start of step 0.
    pub fn step_ends(&self) -> Vec<f64> {
        self.step_seconds
            .iter()
            .scan(0.0, |t, s| {
                *t += s;
                Some(*t)
            })
            .collect()
    }

    /// Each request's TTFT and ITL (`arrivals`: each request's arrival step). A request that emitted no
    /// byte has `None`.
    pub fn latencies(&self, arrivals: &[usize]) -> Vec<Option<Latency>> {
        let ends = self.step_ends();
        let start = |s: usize| {
            if s == 0 {
                0.0
            } else {
                ends.get(s - 1).copied().unwrap_or(0.0)
            }
        };
        let end = |s: usize| ends.get(s).copied().unwrap_or(0.0);
        self.emit_steps
            .iter()
            .zip(arrivals)
            .map(|(emits, &arrive)| {
                let &first = emits.first()?;
                Some(Latency {
                    ttft_steps: first + 1 - arrive.min(first),
                    ttft_seconds: end(first) - start(arrive),
                    itl_steps: emits.windows(2).map(|w| w[1] - w[0]).collect(),
                    itl_seconds: emits.windows(2).map(|w| end(w[1]) - end(w[0])).collect(),
                })
            })
            .collect()
    }

    /// Every byte generated, per second of the whole run.
    pub fn bytes_per_second(&self) -> f64 {
        let bytes: usize = self.outputs.iter().map(Vec::len).sum();
        let secs: f64 = self.step_seconds.iter().sum();
        if secs > 0.0 { bytes as f64 / secs } else { 0.0 }
    }
}

impl Model {
    /// Serve `requests` greedily through a paged engine of `shape` (f16, every layer) scheduled by
    /// `policy`: each step's prefill chunks and decodes run through [`Model::serve_chunks`], so every
    /// schedule computes attention with `paged_prefill`.
    pub fn serve<T: TokenId>(
        &self,
        shape: crate::cache::PagedShape,
        requests: &[ServedRequest<T>],
        policy: Box<dyn crate::kv::SchedulePolicy>,
        backend: &dyn Backend,
    ) -> Result<ServeRun<T>, String> {
        use crate::kv::{Request, Scheduler};
        let c = self.config;
        for (i, r) in requests.iter().enumerate() {
            if r.prompt.len() + r.generate > crate::model::MAX_POSITIONS {
                return Err(format!("request {i}: more tokens than the RoPE tables hold"));
            }
        }
        let specs: Vec<Request> = requests
            .iter()
            .map(|r| Request {
                arrive: r.arrive,
                prompt: r.prompt.len(),
                generate: r.generate,
            })
            .collect();
        let engine = KvEngine::new(
            crate::cache::PagedShape {
                kv_heads: c.n_kv_heads,
                head_dim: c.head_dim,
                dtype: crate::cache::KvDtype::F16,
                ..shape
            },
            c.n_layers,
        );
        let mut sched = Scheduler::with_engine(engine, specs, policy).map_err(|e| e.to_string())?;
        let name = sched.policy().name();
        let n = requests.len();
        // Each request's bytes so far (prompt, then what it generated), and the byte sampled but not
        // yet appended.
        let mut seq: Vec<Vec<T>> = requests.iter().map(|r| r.prompt.clone()).collect();
        let mut pending: Vec<Option<T>> = vec![None; n];
        let mut run = ServeRun {
            policy: name,
            outputs: vec![Vec::new(); n],
            steps: Vec::new(),
            step_seconds: Vec::new(),
            first_token_step: vec![None; n],
            decode_steps: vec![Vec::new(); n],
            emit_steps: vec![Vec::new(); n],
        };
        let mut guard = 0;
        while !sched.is_done() {
            guard += 1;
            if guard > 100_000 {
                return Err("the scenario did not finish".into());
            }
            let t0 = web_time::Instant::now();
            let step_no = run.steps.len();
            let ev = sched.step_with(|engine, ev| {
                for &(id, _) in &ev.preempted {
                    pending[id as usize] = None;
                }
                let work = ev.prefill_work();
                let mut chunks = Vec::new();
                for &(id, first, len) in &work {
                    let s = &seq[id as usize];
                    chunks.push(Chunk {
                        req: id,
                        pos0: first,
                        tokens: s[first..first + len].to_vec(),
                    });
                }
                for &(id, pos) in &ev.decoded {
                    let i = id as usize;
                    let tok = pending[i]
                        .take()
                        .ok_or_else(|| format!("request {id} decodes at {pos} with no sampled byte"))?;
                    seq[i].push(tok);
                    run.outputs[i].push(tok);
                    run.decode_steps[i].push(step_no);
                    chunks.push(Chunk {
                        req: id,
                        pos0: pos,
                        tokens: vec![tok],
                    });
                }
                let logits = self.serve_chunks(engine, backend, &chunks)?;
                for (ch, lg) in chunks.iter().zip(&logits) {
                    let i = ch.req as usize;
                    // A chunk that reaches the end of what the request holds samples its next byte.
                    if ch.pos0 + ch.tokens.len() == seq[i].len() {
                        pending[i] = Some(T::from_index(
                            crate::model::decode::Sampler::greedy().pick_id(&last_row(lg)),
                        ));
                        run.first_token_step[i].get_or_insert(step_no);
                        // The byte to come is number `outputs[i].len()`; its first sampling is its emission.
                        if run.emit_steps[i].len() == run.outputs[i].len()
                            && run.outputs[i].len() < requests[i].generate
                        {
                            run.emit_steps[i].push(step_no);
                        }
                    }
                }
                Ok::<(), String>(())
            })?;
            run.step_seconds.push(t0.elapsed().as_secs_f64());
            run.steps.push(ev);
        }
        Ok(run)
    }
}
