//! Lesson 5 serving the trained model: the scheduler's requests become real generation requests, with
//! prompts cut from the model's held-out text, and every scheduler step runs the model on what the
//! scheduler decided. Admission prefills a request's tokens (attention through the backend's attention
//! op) and writes every layer's K and V through the paged-append kernel at the slots the block table
//! gives; a decode step runs one new token of every running request through each layer as a **batch**:
//! one paged-append and one paged-decode launch per layer for all of them, each request reading its own
//! blocks through its row of the block-table matrix, as vLLM's decode does. Sampling is greedy.
//!
//! Bytes: a request emits its first byte at prefill and one per decode step. The scheduler's `generate`
//! counts decode steps, each of which stores one token's K/V, so a request ends with `generate + 1` new
//! bytes and the last one is never written to the cache (nothing would read it). A request preempted and
//! recomputed prefills its prompt plus the bytes it had stored, and the recompute must predict the same
//! next byte it had already emitted: [`Served::recompute_agrees`].
//!
//! Every decoded byte's logits are checked against recomputing the request's whole text without a cache
//! (on the CPU backend).

use std::collections::BTreeMap;

use ndarray::Array3;

use crate::cache::{PagedShape, RequestId};
use crate::compute::Against;
use crate::compute::{Backend, CheckReport, DecodeTables, Tolerance, check};
use crate::kv::{KvEngine, Request, StepEvents};
use crate::model::{Model, heldout_documents};

/// The model's side of one scheduler step.
#[derive(Debug, Clone, Default)]
pub struct ServedStep {
    /// Bytes emitted this step, by request (the first byte at prefill, then one per decode).
    pub emitted: Vec<(RequestId, u8)>,
    /// Bytes each request has emitted so far (after this step), by request id.
    pub out_len: Vec<usize>,
    /// The decoded bytes' logits against recomputing each request's text without a cache.
    pub check: Option<CheckReport>,
    /// K/V bytes the batched decode read through the block tables, over all layers.
    pub decode_bytes: usize,
    /// For each byte emitted this step, the three most likely next bytes under softmax(logits) (T = 1,
    /// [`crate::lessons::kv_decode::generate::next_byte_dist`]); the server takes the first (greedy).
    pub next: Vec<(RequestId, Vec<(u8, f64)>)>,
}

/// The scenario served by the model.
#[derive(Debug, Clone)]
pub struct Served {
    /// Each request's prompt (its first `prompt` bytes of a held-out document).
    pub prompts: Vec<Vec<u8>>,
    /// Each request's emitted bytes, in the end.
    pub outputs: Vec<Vec<u8>>,
    /// Per scheduler step.
    pub steps: Vec<ServedStep>,
    /// Each recompute after a preemption: the request, the byte it predicted and whether that is the
    /// byte it had emitted before it was preempted.
    pub recompute_agrees: Vec<(RequestId, u8, bool)>,
    /// The model's pool shape (per layer).
    pub shape: PagedShape,
    /// Layers (one K and one V pool each).
    pub layers: usize,
}

/// Prompts for `specs`: request `r` gets the first `prompt` bytes of a held-out document, the documents
/// taken in order from one that `seed` picks, skipping any too short or cut inside a character.
pub fn prompts(specs: &[Request], seed: u64) -> Vec<Vec<u8>> {
    let docs = heldout_documents();
    let mut next = seed as usize % docs.len().max(1);
    specs
        .iter()
        .map(|s| {
            for _ in 0..docs.len() {
                let d = docs[next];
                next = (next + 1) % docs.len();
                if d.len() >= s.prompt && d.is_char_boundary(s.prompt) {
                    return d.as_bytes()[..s.prompt].to_vec();
                }
            }
            // No document fits (a prompt longer than every document): repeat the first one's bytes.
            docs.first()
                .map_or(b" ".as_slice(), |d| d.as_bytes())
                .iter()
                .copied()
                .cycle()
                .take(s.prompt)
                .collect()
        })
        .collect()
}

/// `[KVH, n, hd]` → `[n, KVH, hd]`: one token's heads together, as the append kernels take them.
fn by_token(a: &Array3<f32>) -> Vec<f32> {
    a.view()
        .permuted_axes([1, 0, 2])
        .as_standard_layout()
        .iter()
        .copied()
        .collect()
}

/// The model serving a scenario, one scheduler step at a time.
pub struct Server<'m> {
    model: &'m Model,
    shape: PagedShape,
    /// Each request's bytes so far: prompt, then what it emitted.
    seqs: Vec<Vec<u8>>,
    out: Served,
}

impl<'m> Server<'m> {
    /// A server over a pool of `num_blocks` blocks of `block_size` tokens per layer.
    pub fn new(model: &'m Model, num_blocks: usize, block_size: usize, specs: &[Request], seed: u64) -> Self {
        let c = model.config;
        let shape = PagedShape {
            num_blocks,
            block_size,
            kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            dtype: crate::cache::KvDtype::F16,
        };
        let prompts = prompts(specs, seed);
        Server {
            model,
            shape,
            seqs: prompts.clone(),
            out: Served {
                outputs: vec![Vec::new(); specs.len()],
                prompts,
                steps: Vec::new(),
                recompute_agrees: Vec::new(),
                shape,
                layers: c.n_layers,
            },
        }
    }

    /// The shape of the engine it serves from: the scheduler's blocks, the model's KV heads and head_dim.
    pub fn shape(&self) -> PagedShape {
        self.shape
    }

    /// The model's layers (one pool pair each in the engine).
    pub fn layers(&self) -> usize {
        self.model.config.n_layers
    }

    /// Run the model for scheduler step `ev`, its K/V in `engine`'s pools (of [`Self::shape`], one pair
    /// per layer); `tables` are the block tables after the step plus those of the requests that finished
    /// in it (their blocks are free but not yet reused, so their last decode can still read them, as it
    /// would on a GPU before the next step).
    pub fn step(
        &mut self,
        ev: &StepEvents,
        tables: &BTreeMap<RequestId, Vec<u32>>,
        engine: &mut KvEngine,
        backend: &dyn Backend,
    ) -> Result<(), String> {
        let m = self.model;
        let c = m.config;
        let bs = self.shape.block_size;
        let slot = |r: RequestId, pos: usize| -> Result<i32, String> {
            let b = tables
                .get(&r)
                .and_then(|t| t.get(pos / bs))
                .ok_or_else(|| format!("request {r} has no block for position {pos}"))?;
            Ok((*b as usize * bs + pos % bs) as i32)
        };
        let err = |e: crate::kv::EngineError| e.to_string();
        let mut st = ServedStep::default();
        // Decode: every running request's newest byte through each layer, as one batch.
        let dec = ev.decoded.as_slice();
        if !dec.is_empty() {
            let mut xs: Vec<_> = dec
                .iter()
                .map(|&(r, pos)| m.embed_tokens(&[self.seqs[r as usize][pos]]))
                .collect();
            let slots: Vec<i32> = dec.iter().map(|&(r, pos)| slot(r, pos)).collect::<Result<_, _>>()?;
            let max_blocks = dec.iter().map(|&(_, pos)| pos / bs + 1).max().unwrap_or(1);
            let mut table = vec![-1i32; dec.len() * max_blocks];
            for (i, &(r, pos)) in dec.iter().enumerate() {
                for j in 0..=pos / bs {
                    table[i * max_blocks + j] = tables[&r][j] as i32;
                }
            }
            let lens: Vec<i32> = dec.iter().map(|&(_, pos)| pos as i32 + 1).collect();
            let dt = DecodeTables {
                tables: table,
                max_blocks,
                context_lens: lens,
            };
            for (l, b) in m.blocks.iter().enumerate() {
                let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
                for (x, &(_, pos)) in xs.iter().zip(dec) {
                    let (qi, ki, vi) = m.qkv(b, x, pos);
                    q.extend(qi.iter().copied());
                    k.extend(by_token(&ki));
                    v.extend(by_token(&vi));
                }
                engine.write(backend, l, &slots, &k, &v).map_err(err)?;
                let o = engine.decode(backend, l, &dt, &q, c.n_heads).map_err(err)?;
                st.decode_bytes += engine.decode_bytes(&dt);
                let per = c.n_heads * c.head_dim;
                for (i, x) in xs.iter_mut().enumerate() {
                    let oi = Array3::from_shape_vec((c.n_heads, 1, c.head_dim), o[i * per..(i + 1) * per].to_vec())
                        .map_err(|e| e.to_string())?;
                    *x = m.mlp(b, &m.attn_residual(b, x, &oi));
                }
            }
            // Each request's next byte, and its logits against recomputing its text without a cache.
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for (x, &(r, pos)) in xs.iter().zip(dec) {
                let logits = m.logits(x).row(0).to_vec();
                // The recompute runs on the CPU backend: on a simulated GPU a prefill per byte would take
                // most of the lesson's time, and the point is the cache, not the kernel.
                let full = m.prefill(&self.seqs[r as usize][..=pos], &crate::compute::CpuBackend, false)?;
                want.extend(full.logits.row(pos).iter().map(|&v| f64::from(v)));
                let next = argmax(&logits);
                st.next
                    .push((r, crate::lessons::kv_decode::generate::next_byte_dist(&logits, 1.0, 3)));
                got.extend(logits);
                self.emit(r, next, &mut st);
            }
            st.check = Some(
                check(
                    "batched paged decode == recompute without a cache on the CPU (logits, f16 cache)",
                    &[dec.len(), c.vocab],
                    &got,
                    &want,
                    Tolerance { atol: 2e-2, rtol: 0.0 },
                )
                .against(Against::RecomputeWithoutCache),
            );
        }
        // Admission: prefill the prompt (or, after a preemption, the prompt plus the stored bytes).
        for &(r, n) in &ev.admitted {
            let toks = self.seqs[r as usize][..n].to_vec();
            let pre = m.prefill(&toks, backend, false)?;
            let slots: Vec<i32> = (0..n).map(|pos| slot(r, pos)).collect::<Result<_, _>>()?;
            for (l, (k, v)) in pre.kv.iter().enumerate() {
                engine
                    .write(backend, l, &slots, &by_token(k), &by_token(v))
                    .map_err(err)?;
            }
            let last = pre.logits.row(n - 1).to_vec();
            let next = argmax(&last);
            match self.seqs[r as usize].get(n).copied() {
                // A recompute: the byte after the stored ones was emitted before the preemption.
                Some(before) => self.out.recompute_agrees.push((r, next, next == before)),
                None => {
                    st.next
                        .push((r, crate::lessons::kv_decode::generate::next_byte_dist(&last, 1.0, 3)));
                    self.emit(r, next, &mut st)
                }
            }
        }
        st.out_len = self.out.outputs.iter().map(Vec::len).collect();
        self.out.steps.push(st);
        Ok(())
    }

    fn emit(&mut self, r: RequestId, b: u8, st: &mut ServedStep) {
        self.seqs[r as usize].push(b);
        self.out.outputs[r as usize].push(b);
        st.emitted.push((r, b));
    }

    /// The model's side of the last step run.
    pub fn last(&self) -> Option<&ServedStep> {
        self.out.steps.last()
    }

    /// What was served.
    pub fn finish(self) -> Served {
        self.out
    }
}

fn argmax(v: &[f32]) -> u8 {
    v.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i as u8)
}
