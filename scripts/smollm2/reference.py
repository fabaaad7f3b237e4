#!/usr/bin/env python3
"""Independent NumPy reference for SmolLM2-135M-Instruct read from a GGUF file.

Written from the format definitions (GGUF, ggml block quantisation, llama.cpp's
LLaMA graph), not from any kvscope Rust code. A later Rust implementation is
tested against the numbers this script writes.

Usage
-----
  reference.py MODEL.gguf --prompt TEXT [--generate N] --json OUT.json
      token ids, logits for every prompt position (OUT.logits.npy, float32
      [T, 49152]), greedy continuation of N tokens (with a KV cache; the
      decode-step logits go to OUT.gen_logits.npy, float32 [N, 49152]).
  reference.py MODEL.gguf --bpb FILE [--json OUT.json]
      bits per byte of a UTF-8 text file (windows of at most 512 tokens).
  reference.py MODEL.gguf --selftest [--json OUT.json]
      dequantisation vs gguf.quants, tokenizer round trips and known ids,
      pure-Python tokenizer vs HF `tokenizers`, RoPE convention check
      (all four row-order x rotation combinations), KV cache vs recompute.

Dependencies: numpy, gguf, tokenizers (pinned in requirements.txt). If
../../.cache/smollm2/py exists (pip --target install) it is put on sys.path.
BLAS threads default to 1 (override with OPENBLAS_NUM_THREADS etc.).

Model facts used (all read from the GGUF metadata, asserted where relevant)
---------------------------------------------------------------------------
  general.architecture = llama, 30 blocks, n_embd 576, n_ff 1536,
  9 query heads, 3 KV heads (GQA group of 3), head_dim 64, rope.dimension_count 64,
  llama.rope.freq_base = 100000, llama.attention.layer_norm_rms_epsilon = 1e-5,
  vocab 49152, no output.weight tensor -> logits use token_embd.weight (tied).
  Tensor types: token_embd Q8_0, all 2-D block weights Q4_1, norms F32.

GGUF dims are listed innermost first: a tensor with GGUF shape [ne0, ne1] is
a row-major numpy array of shape (ne1, ne0). For a linear layer ne0 = in
features, ne1 = out features, so W has numpy shape (out, in) and y = x @ W.T.
Quantisation blocks run along ne0 (the in-features of one row), so permuting
rows (below) can be done on the raw quantised rows without dequantising.

Dequantisation: written here from the ggml block definitions (ggml-common.h):
  Q4_1: block of 32 = f16 d, f16 m, uint8 qs[16] (20 bytes). For j in 0..16:
        x[j] = d * (qs[j] & 0xF) + m ;  x[j+16] = d * (qs[j] >> 4) + m
        (low nibbles are elements 0-15, high nibbles are elements 16-31)
  Q8_0: block of 32 = f16 d, int8 qs[32] (34 bytes). x[j] = d * qs[j]
  (all little-endian). --selftest compares every tensor with
  gguf.quants.dequantize (the gguf package's own implementation).

RoPE and the Q/K row permutation
--------------------------------
llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) reorders the rows of
attn_q (n_head = 9) and attn_k (n_head_kv = 3) per head:
    W.reshape(n_head, 2, head_dim//2, n_in).swapaxes(1, 2).reshape(W.shape)
i.e. within each head of 64 rows (i in 0..31, j in {0, 1}):
    gguf_row[h*64 + 2*i + j] = hf_row[h*64 + j*32 + i]
so HF row i (first half) lands at 2i and HF row 32+i at 2i+1. LLM_ARCH_LLAMA
uses LLAMA_ROPE_TYPE_NORM (ggml rope mode 0), which rotates ADJACENT pairs
(x[2i], x[2i+1]) by angle pos * freq_base^(-2i/64) (ggml-cpu rotate_pairs
with n_offset = 1). That is the "gguf" form below.
The inverse (undo the permutation, the "hf" form):
    W_hf = W_gguf.reshape(n_head, head_dim//2, 2, n_in).swapaxes(1, 2).reshape(W.shape)
    hf_row[h*64 + j*32 + i] = gguf_row[h*64 + 2*i + j]
after which RoPE is Hugging Face's rotate_half form (= ggml NEOX mode): pair
(x[i], x[i+32]) rotated by pos * freq_base^(-2i/64). Both forms give the same
logits to float rounding (checked by --selftest and by every --prompt run).
The Q.K dot product is invariant to the (shared) row order within a head and
V/O rows are untouched, so nothing else changes.
Empirically (see README): gguf rows + adjacent pairs, and hf rows + rotate
half, give low loss and sensible English; the two crossed combinations give
much higher loss.

Forward pass (as llama.cpp's llm_build_llama for this file):
  x = token_embd[ids]
  per block: h = rmsnorm(x) * attn_norm;  q,k,v = h Wq^T, h Wk^T, h Wv^T
             rope(q), rope(k) at absolute positions;  causal softmax(q k^T / 8)
             with query head h using KV head h // 3;  x += attn Wo^T
             h = rmsnorm(x) * ffn_norm;  x += (silu(h Wg^T) * (h Wu^T)) Wd^T
  logits = (rmsnorm(x) * output_norm) token_embd^T
  rmsnorm(x) = x / sqrt(mean(x^2) + eps)
Numerics: float32 weights/activations and float32 BLAS matmuls; RMSNorm
statistics, RoPE angles and softmax in float64. This is the exact dequantised
model; llama.cpp itself quantises activations to Q8_1 for Q4_1/Q8_0 matmuls
and computes RoPE angles in float32, so its logits differ slightly.

Tokenizer (byte-level BPE, built with HF `tokenizers` from the GGUF's
tokenizer.ggml.tokens and tokenizer.ggml.merges; tokenizer.ggml.pre = "smollm")
-----------------------------------------------------------------------------
llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe constructor) groups
LLAMA_VOCAB_PRE_TYPE_SMOLLM with STARCODER/REFACT/COMMAND_R/CODESHELL/EXAONE:
    regex_exprs = {
        "\\p{N}",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    };
and "smollm" sets clean_spaces = false; the GGUF says add_bos_token = false.
The first expression isolates every numeric code point as its own piece;
the second (GPT-2's pattern) splits what is between them. llama.cpp runs the
GPT-2 pattern with a hand-written matcher (src/unicode.cpp,
unicode_regex_split_custom_gpt2) that also implements the trailing "|\\s+".
In HF terms this is pre_tokenizers.Sequence([Digits(individual_digits=True),
ByteLevel(add_prefix_space=False, use_regex=True)]), the same as SmolLM2's
own tokenizer.json. Control tokens (token_type 3, e.g. <|im_start|>) are
added as special tokens, so they are matched whole when they appear in the
text (like llama.cpp with parse_special = true). No BOS is added.
PurePythonTokenizer below re-implements the llama.cpp splitter + rank BPE
independently of HF, and --selftest checks the two agree.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

_PY_TARGET = Path(__file__).resolve().parents[2] / ".cache" / "smollm2" / "py"
if _PY_TARGET.is_dir() and str(_PY_TARGET) not in sys.path:
    sys.path.insert(0, str(_PY_TARGET))

import numpy as np  # noqa: E402
from gguf import GGUFReader, GGMLQuantizationType  # noqa: E402

F32 = np.float32
F64 = np.float64


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# Dequantisation (own implementation, from the ggml block definitions)
# ----------------------------------------------------------------------------

QK = 32  # elements per block for Q4_1 and Q8_0


def dequant_q4_1(raw: np.ndarray) -> np.ndarray:
    """raw: uint8 bytes of whole Q4_1 blocks (20 bytes each). Returns float32, flat."""
    b = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, 20)
    d = b[:, 0:2].copy().view("<f2").astype(F32)  # (nb, 1)
    m = b[:, 2:4].copy().view("<f2").astype(F32)  # (nb, 1)
    qs = b[:, 4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(F32)  # (nb, 32): lo 0-15, hi 16-31
    return (d * q + m).reshape(-1)


def dequant_q8_0(raw: np.ndarray) -> np.ndarray:
    """raw: uint8 bytes of whole Q8_0 blocks (34 bytes each). Returns float32, flat."""
    b = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, 0:2].copy().view("<f2").astype(F32)
    q = b[:, 2:34].copy().view(np.int8).astype(F32)
    return (d * q).reshape(-1)


def tensor_to_f32(t) -> np.ndarray:
    """GGUF tensor -> float32 numpy array of shape reversed(GGUF dims)."""
    shape = tuple(int(s) for s in reversed(list(t.shape)))  # GGUF dims innermost first
    tt = t.tensor_type
    if tt == GGMLQuantizationType.F32:
        return np.asarray(t.data, dtype=F32).reshape(shape)
    if tt == GGMLQuantizationType.F16:
        return np.asarray(t.data).view("<f2").astype(F32).reshape(shape)
    if tt == GGMLQuantizationType.Q4_1:
        return dequant_q4_1(t.data).reshape(shape)
    if tt == GGMLQuantizationType.Q8_0:
        return dequant_q8_0(t.data).reshape(shape)
    raise NotImplementedError(f"tensor {t.name}: type {tt.name} not supported")


# ----------------------------------------------------------------------------
# Q/K row permutation (llama.cpp convert_hf_to_gguf.py LlamaModel.permute)
# ----------------------------------------------------------------------------

def permute_hf_to_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    """What the converter does: HF row h*hd + j*hd/2 + i -> GGUF row h*hd + 2i + j."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_gguf_to_hf(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse: GGUF row h*hd + 2i + j -> HF row h*hd + j*hd/2 + i."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_row_index(n_head: int, hd: int) -> np.ndarray:
    """idx such that W_hf = W_gguf[idx] (a plain row gather, usable on raw quantised rows)."""
    idx = np.empty(n_head * hd, dtype=np.int64)
    for h in range(n_head):
        for j in range(2):
            for i in range(hd // 2):
                idx[h * hd + j * (hd // 2) + i] = h * hd + 2 * i + j
    return idx


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

class Model:
    def __init__(self, path: str):
        t0 = time.perf_counter()
        self.path = path
        r = GGUFReader(path)
        self.reader = r
        f = r.fields

        def kv(name):
            return f[name].contents()

        assert kv("general.architecture") == "llama", kv("general.architecture")
        self.n_layer = int(kv("llama.block_count"))
        self.n_embd = int(kv("llama.embedding_length"))
        self.n_ff = int(kv("llama.feed_forward_length"))
        self.n_head = int(kv("llama.attention.head_count"))
        self.n_head_kv = int(kv("llama.attention.head_count_kv"))
        self.head_dim = self.n_embd // self.n_head
        self.n_rot = int(kv("llama.rope.dimension_count")) if "llama.rope.dimension_count" in f else self.head_dim
        self.rope_base = float(kv("llama.rope.freq_base"))
        self.eps = float(kv("llama.attention.layer_norm_rms_epsilon"))
        self.ctx_len = int(kv("llama.context_length"))
        assert self.n_rot == self.head_dim, "partial rotary not handled"
        assert "llama.rope.scaling.type" not in f or kv("llama.rope.scaling.type") in ("none",)

        tensors = {t.name: t for t in r.tensors}
        self.tensor_types = {t.name: t.tensor_type.name for t in r.tensors}
        W = lambda name: tensor_to_f32(tensors[name])  # noqa: E731
        self.tok_embd = W("token_embd.weight")  # (vocab, n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.output = W("output.weight") if "output.weight" in tensors else self.tok_embd  # tied
        self.tied = "output.weight" not in tensors
        self.out_norm = W("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            L = {
                "attn_norm": W(p + "attn_norm.weight"),
                "wq": W(p + "attn_q.weight"),  # (n_head*hd, n_embd), GGUF (permuted) row order
                "wk": W(p + "attn_k.weight"),  # (n_head_kv*hd, n_embd), GGUF row order
                "wv": W(p + "attn_v.weight"),
                "wo": W(p + "attn_output.weight"),
                "ffn_norm": W(p + "ffn_norm.weight"),
                "wg": W(p + "ffn_gate.weight"),
                "wu": W(p + "ffn_up.weight"),
                "wd": W(p + "ffn_down.weight"),
            }
            L["wq_hf"] = unpermute_gguf_to_hf(L["wq"], self.n_head)
            L["wk_hf"] = unpermute_gguf_to_hf(L["wk"], self.n_head_kv)
            self.layers.append(L)
        assert self.layers[0]["wq"].shape == (self.n_head * self.head_dim, self.n_embd)
        assert self.layers[0]["wk"].shape == (self.n_head_kv * self.head_dim, self.n_embd)
        assert self.layers[0]["wg"].shape == (self.n_ff, self.n_embd)
        assert self.layers[0]["wd"].shape == (self.n_embd, self.n_ff)
        self.load_s = time.perf_counter() - t0

    def config(self) -> dict:
        return dict(n_layer=self.n_layer, n_embd=self.n_embd, n_ff=self.n_ff, n_head=self.n_head,
                    n_head_kv=self.n_head_kv, head_dim=self.head_dim, n_rot=self.n_rot,
                    rope_freq_base=self.rope_base, rms_eps=self.eps, n_vocab=self.n_vocab,
                    context_length=self.ctx_len, tied_embeddings=self.tied)

    # --- pieces ---------------------------------------------------------------

    def rmsnorm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        x64 = x.astype(F64)
        ms = np.mean(x64 * x64, axis=-1, keepdims=True)
        return (x64 / np.sqrt(ms + self.eps)).astype(F32) * w

    def rope(self, x: np.ndarray, pos: np.ndarray, pairs: str) -> np.ndarray:
        """x: (T, H, hd); pos: (T,) absolute positions.
        pairs='adjacent': rotate (x[2i], x[2i+1])   -- ggml mode 0 (NORM), llama.cpp for llama
        pairs='half'    : rotate (x[i], x[i+hd/2])  -- ggml NEOX / HF rotate_half
        Angle for pair i: pos * base^(-2i/hd)."""
        hd = x.shape[-1]
        inv = self.rope_base ** (-np.arange(0, hd // 2, dtype=F64) * 2.0 / hd)  # (hd/2,)
        ang = pos.astype(F64)[:, None] * inv[None, :]  # (T, hd/2)
        c = np.cos(ang).astype(F32)[:, None, :]
        s = np.sin(ang).astype(F32)[:, None, :]
        if pairs == "adjacent":
            x0, x1 = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2] = x0 * c - x1 * s
            out[..., 1::2] = x0 * s + x1 * c
            return out
        if pairs == "half":
            x0, x1 = x[..., : hd // 2], x[..., hd // 2:]
            return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
        raise ValueError(pairs)

    def new_cache(self):
        return [{"k": np.zeros((0, self.n_head_kv, self.head_dim), F32),
                 "v": np.zeros((0, self.n_head_kv, self.head_dim), F32)} for _ in range(self.n_layer)]

    # --- forward --------------------------------------------------------------

    FORMS = {
        # name: (which Q/K rows, which rotation)
        "gguf": ("gguf", "adjacent"),   # llama.cpp: file row order + NORM rope
        "hf": ("hf", "half"),           # un-permuted rows + rotate_half (what kvscope's Rust will use)
        "gguf_half": ("gguf", "half"),  # WRONG on purpose (convention check)
        "hf_adjacent": ("hf", "adjacent"),  # WRONG on purpose (convention check)
    }

    def forward(self, ids, pos0: int = 0, cache=None, form: str = "gguf") -> np.ndarray:
        """Logits (T, n_vocab) float32 for tokens ids at positions pos0..pos0+T-1.
        cache: list from new_cache() holding post-RoPE K and V of earlier positions
        (appended to in place), or None for a fresh sequence starting at pos0 = 0."""
        rows, pairs = self.FORMS[form]
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        if cache is None:
            assert pos0 == 0
            cache = self.new_cache()
        pos = np.arange(pos0, pos0 + T)
        H, G, hd = self.n_head, self.n_head_kv, self.head_dim
        R = H // G  # query heads per KV head
        scale = 1.0 / np.sqrt(hd)
        x = self.tok_embd[ids].astype(F32)
        for li, L in enumerate(self.layers):
            wq = L["wq"] if rows == "gguf" else L["wq_hf"]
            wk = L["wk"] if rows == "gguf" else L["wk_hf"]
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ wq.T).reshape(T, H, hd)
            k = (h @ wk.T).reshape(T, G, hd)
            v = (h @ L["wv"].T).reshape(T, G, hd)
            q = self.rope(q, pos, pairs)
            k = self.rope(k, pos, pairs)
            c = cache[li]
            c["k"] = np.concatenate([c["k"], k], axis=0)
            c["v"] = np.concatenate([c["v"], v], axis=0)
            K, V = c["k"], c["v"]  # (S, G, hd)
            S = K.shape[0]
            assert S == pos0 + T
            # query head index = g*R + r uses KV head g (= h // R)
            qh = q.reshape(T, G, R, hd).transpose(1, 2, 0, 3)  # (G, R, T, hd)
            Kh = K.transpose(1, 2, 0)[:, None]  # (G, 1, hd, S)
            sc = (qh @ Kh).astype(F64) * scale  # (G, R, T, S)
            mask = np.arange(S)[None, :] > pos[:, None]  # (T, S) future keys
            sc[..., mask] = -np.inf
            sc -= sc.max(axis=-1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=-1, keepdims=True)
            Vh = V.transpose(1, 0, 2)[:, None]  # (G, 1, S, hd)
            o = (p.astype(F32) @ Vh)  # (G, R, T, hd)
            o = o.transpose(2, 0, 1, 3).reshape(T, H * hd)
            x = x + o @ L["wo"].T
            h = self.rmsnorm(x, L["ffn_norm"])
            g = h @ L["wg"].T
            u = h @ L["wu"].T
            a = (g / (F32(1.0) + np.exp(-g))) * u  # silu(g) * u
            x = x + a @ L["wd"].T
        x = self.rmsnorm(x, self.out_norm)
        return (x @ self.output.T).astype(F32)


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(F64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def greedy(model: Model, prompt_ids, n: int, form: str = "gguf", stop_ids=()):
    """Greedy continuation using a KV cache. Returns (prompt_logits, gen_ids, gen_step_logits).
    gen_step_logits[i] are the logits that chose gen_ids[i+1] (the logits of the decode step
    that consumed gen_ids[i]); the logits that chose gen_ids[0] are prompt_logits[-1]."""
    cache = model.new_cache()
    prompt_logits = model.forward(prompt_ids, 0, cache, form)
    out, steps = [], []
    nxt = int(np.argmax(prompt_logits[-1]))
    pos = len(prompt_ids)
    for i in range(n):
        out.append(nxt)
        if nxt in stop_ids or i == n - 1:
            break
        lg = model.forward([nxt], pos, cache, form)[0]
        steps.append(lg)
        pos += 1
        nxt = int(np.argmax(lg))
    return prompt_logits, out, (np.stack(steps) if steps else np.zeros((0, model.n_vocab), F32))


# ----------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------

def gguf_vocab(reader: GGUFReader):
    f = reader.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = [int(x) for x in f["tokenizer.ggml.token_type"].contents()]
    meta = {k: f[k].contents() for k in ("tokenizer.ggml.model", "tokenizer.ggml.pre",
                                         "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id",
                                         "tokenizer.ggml.eos_token_id") if k in f}
    return tokens, merges, types, meta


TOKEN_TYPE_CONTROL = 3


def build_hf_tokenizer(reader: GGUFReader):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens, merges, types, meta = gguf_vocab(reader)
    assert meta.get("tokenizer.ggml.model") == "gpt2", meta
    assert meta.get("tokenizer.ggml.pre") == "smollm", meta
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token strings"
    pairs = []
    for m in merges:
        a, b = m.split(" ")  # byte-level symbols never contain a literal space
        pairs.append((a, b))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(tokens, types) if ty == TOKEN_TYPE_CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    for t in specials:
        assert tok.token_to_id(t) == vocab[t]
    return tok, specials


def bytes_to_unicode() -> dict:
    """GPT-2's byte -> printable code point map (same as llama.cpp unicode_byte_to_utf8_map)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# Unicode White_Space property (what llama.cpp's unicode_set_whitespace and \s mean);
# not Python's str.isspace(), which also accepts U+001C..U+001F.
_WHITE_SPACE = set([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
                    0x205F, 0x3000] + list(range(0x2000, 0x200B)))


def _is_ws(ch):
    return ch is not None and ord(ch) in _WHITE_SPACE


def _is_letter(ch):
    return ch is not None and unicodedata.category(ch).startswith("L")


def _is_number(ch):
    return ch is not None and unicodedata.category(ch).startswith("N")


def _is_other(ch):
    # [^\s\p{L}\p{N}] restricted to code points with some category (llama.cpp's
    # flags.as_uint() != 0 test excludes unassigned code points)
    return (ch is not None and not _is_ws(ch) and not _is_letter(ch) and not _is_number(ch)
            and unicodedata.category(ch) != "Cn")


def split_gpt2(s: str) -> list:
    """Port of llama.cpp unicode_regex_split_custom_gpt2 on one piece:
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    out = []
    n = len(s)
    get = lambda p: s[p] if 0 <= p < n else None  # noqa: E731
    pos = 0
    prev = 0

    def add(end):
        nonlocal prev
        if end > prev:
            out.append(s[prev:end])
        prev = end

    while pos < n:
        c = s[pos]
        if c == "'" and pos + 1 < n:
            c1 = s[pos + 1]
            if c1 in "stmd":
                add(pos + 2)
                pos += 2
                continue
            if pos + 2 < n and (c1 + s[pos + 2]) in ("re", "ve", "ll"):
                add(pos + 3)
                pos += 3
                continue
        c2 = get(pos + 1) if c == " " else c
        for pred in (_is_letter, _is_number, _is_other):
            if pred(c2):
                pos += 1 if c == " " else 0
                while pred(get(pos)):
                    pos += 1
                add(pos)
                break
        else:
            nws = 0
            while _is_ws(get(pos + nws)):
                nws += 1
            if nws > 1 and get(pos + nws) is not None:  # \s+(?!\S): leave the last space
                pos += nws - 1
                add(pos)
                continue
            if nws > 0:
                pos += nws
                add(pos)
                continue
            pos += 1
            add(pos)
    return out


def pretokenize_smollm(text: str) -> list:
    """llama.cpp smollm: first "\\p{N}" isolates each numeric code point, then GPT-2 on the rest."""
    pieces, cur = [], []
    for ch in text:
        if _is_number(ch):
            if cur:
                pieces.append("".join(cur))
                cur = []
            pieces.append(ch)
        else:
            cur.append(ch)
    if cur:
        pieces.append("".join(cur))
    out = []
    for p in pieces:
        out.extend([p] if (len(p) == 1 and _is_number(p)) else split_gpt2(p))
    return out


class PurePythonTokenizer:
    """Independent of HF: llama.cpp-style pre-tokenizer + byte-level rank BPE."""

    def __init__(self, reader: GGUFReader):
        tokens, merges, types, _ = gguf_vocab(reader)
        self.tokens = tokens
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.b2u = bytes_to_unicode()
        self.u2b = {v: k for k, v in self.b2u.items()}
        self.specials = sorted((t for t, ty in zip(tokens, types) if ty == TOKEN_TYPE_CONTROL),
                               key=len, reverse=True)
        self._cache = {}

    def _bpe(self, word: str) -> list:
        if word in self._cache:
            return self._cache[word]
        syms = list(word)
        while len(syms) > 1:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
        ids = [self.vocab[s] for s in syms]
        self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list:
        ids = []
        i, start = 0, 0
        chunks = []
        while i < len(text):  # split out control tokens (leftmost, longest)
            hit = next((s for s in self.specials if text.startswith(s, i)), None)
            if hit:
                chunks.append((False, text[start:i]))
                chunks.append((True, hit))
                i += len(hit)
                start = i
            else:
                i += 1
        chunks.append((False, text[start:]))
        for special, chunk in chunks:
            if special:
                ids.append(self.vocab[chunk])
                continue
            for piece in pretokenize_smollm(chunk):
                ids.extend(self._bpe("".join(self.b2u[b] for b in piece.encode("utf-8"))))
        return ids

    def decode(self, ids) -> str:
        bs = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.specials:
                bs.extend(t.encode("utf-8"))
            else:
                bs.extend(self.u2b[c] for c in t)
        return bs.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------
# Bits per byte
# ----------------------------------------------------------------------------

def bits_per_byte(model: Model, ids, n_bytes: int, window: int = 512, context_token: int = 0,
                  form: str = "gguf"):
    """Stream = [context_token] + ids (context_token < 0: stream = ids and ids[0] is not scored).
    Windows of at most `window` tokens: stream[s : s+window] for s = 0, window-1, 2(window-1), ...
    (consecutive windows share one token, each window starts with a fresh context), and every
    stream token after the first is scored exactly once as a target.
    bpb = sum(-log2 p(target)) / n_bytes."""
    stream = ([context_token] if context_token >= 0 else []) + list(ids)
    total_nats, n_scored, n_windows = 0.0, 0, 0
    s = 0
    while s < len(stream) - 1:
        w = stream[s:s + window]
        lp = log_softmax64(model.forward(w, 0, None, form))
        tgt = np.asarray(w[1:])
        total_nats += float(-lp[np.arange(len(tgt)), tgt].sum())
        n_scored += len(tgt)
        n_windows += 1
        s += window - 1
    bits = total_nats / np.log(2.0)
    return dict(bits_per_byte=bits / n_bytes, total_bits=bits, n_bytes=n_bytes, n_text_tokens=len(ids),
                n_scored=n_scored, n_windows=n_windows, window=window, context_token=context_token,
                nats_per_token=total_nats / max(n_scored, 1),
                perplexity_per_token=float(np.exp(total_nats / max(n_scored, 1))))


# ----------------------------------------------------------------------------
# Self tests
# ----------------------------------------------------------------------------

ROUNDTRIP_CORPUS = [
    "12345 and 3.14",
    "a  b   c    d",
    "   leading and trailing   ",
    "line one\nline two\n\n\nline five\r\n",
    "tab\tseparated\t\tvalues\t",
    "Hello, world! (really?) [yes]; {ok} <tag/> a-b_c \"quoted\" 'single' `tick`",
    "don't you'll we've I'm she's they'd they're DON'T",
    "naïve café — 日本語",
    "Ünïcödé: ÀÉÎÕÜ ß ø æ œ ﬁ ½ ² ٣ ४ Ⅻ 🙂👍🏽 \u00a0nbsp\u2009thin",
    "x = [1, 22, 333]; y = x**2 + 1e-5 # comment\n    return y\n",
    "<|im_start|>user\nHi<|im_end|>\n",
    "",
    " ",
    "\n",
]

# Token ids for SmolLM2's vocabulary with the "smollm" pre-tokenizer, taken from a third-party
# repository's self-check table (found with the code search tool; provenance not verified against
# llama.cpp itself -- treated as an external cross-check, not ground truth).
EXTERNAL_IDS = {
    "Hello, we can use": [19556, 28, 392, 416, 722],
    "The capital of France is": [504, 3575, 282, 4649, 314],
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face":
        [2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182],
    "\n": [198],
    "Hello world! 123": [19556, 905, 17, 216, 33, 34, 35],
    "Café déjà vu.": [51, 1939, 2756, 32564, 90, 16739, 386, 101, 30],
    "  multiple   spaces": [216, 2701, 256, 5600],
}

CONVENTION_TEXT = (
    "The licenses for most software and other practical works are designed to take away your "
    "freedom to share and change the works. By contrast, the GNU General Public License is intended "
    "to guarantee your freedom to share and change all versions of a program--to make sure it remains "
    "free software for all its users."
)


def selftest(model: Model, tok, specials, path_text: str | None):
    res = {}
    ok = True

    # 1. dequantisation vs gguf.quants
    t0 = time.perf_counter()
    try:
        from gguf import quants
        worst, n = 0.0, 0
        for t in model.reader.tensors:
            if t.tensor_type in (GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q8_0):
                mine = tensor_to_f32(t)
                ref = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=F32).reshape(mine.shape)
                worst = max(worst, float(np.max(np.abs(mine - ref))))
                n += 1
        res["dequant_vs_gguf_quants"] = dict(tensors=n, max_abs_diff=worst)
        ok &= worst == 0.0
    except ImportError:
        res["dequant_vs_gguf_quants"] = "gguf.quants not available"
    # permutation helpers are inverses and match the gather index
    w = np.arange(576 * 3, dtype=F32).reshape(576, 3)
    inv_ok = bool(np.array_equal(unpermute_gguf_to_hf(permute_hf_to_gguf(w, 9), 9), w)
                  and np.array_equal(unpermute_gguf_to_hf(w, 9), w[unpermute_row_index(9, 64)]))
    res["permutation_inverse_ok"] = inv_ok
    ok &= inv_ok
    log(f"[selftest] dequant/permutation: {res['dequant_vs_gguf_quants']} inverse_ok={inv_ok} "
        f"({time.perf_counter() - t0:.1f}s)")

    # 2. tokenizer
    t0 = time.perf_counter()
    pure = PurePythonTokenizer(model.reader)
    corpus = list(ROUNDTRIP_CORPUS)
    if path_text:
        corpus.append(Path(path_text).read_text(encoding="utf-8"))
    rt = []
    for s in corpus:
        ids = tok.encode(s).ids
        back = tok.decode(ids, skip_special_tokens=False)
        pids = pure.encode(s)
        rt.append(dict(text=s[:60], n_tokens=len(ids), roundtrip=back == s, pure_python_same_ids=pids == ids,
                       pure_decode_ok=pure.decode(ids) == s))
        ok &= back == s and pids == ids
    res["tokenizer_roundtrip"] = rt
    ext = {}
    for s, want in EXTERNAL_IDS.items():
        got = tok.encode(s).ids
        ext[s] = dict(match=got == want, got=got, want=want)
        ok &= got == want
    res["tokenizer_external_ids"] = ext
    res["tokenizer_examples"] = {s: [tok.id_to_token(i) for i in tok.encode(s).ids]
                                 for s in ["12345 and 3.14", "naïve café — 日本語", "a  b\n\n\tc"]}
    log(f"[selftest] tokenizer: roundtrip {sum(r['roundtrip'] for r in rt)}/{len(rt)}, "
        f"pure==hf {sum(r['pure_python_same_ids'] for r in rt)}/{len(rt)}, "
        f"external ids {sum(v['match'] for v in ext.values())}/{len(ext)} ({time.perf_counter() - t0:.1f}s)")

    # 3. RoPE convention: loss and greedy under the four combinations
    t0 = time.perf_counter()
    ids = tok.encode(CONVENTION_TEXT).ids
    pids = tok.encode("The capital of France is").ids
    conv = {}
    logits_by_form = {}
    for form in ("gguf", "hf", "gguf_half", "hf_adjacent"):
        lg = model.forward(ids, 0, None, form)
        logits_by_form[form] = lg
        lp = log_softmax64(lg)
        nll = float(-lp[np.arange(len(ids) - 1), np.asarray(ids[1:])].mean())
        _, gen, _ = greedy(model, pids, 8, form)
        conv[form] = dict(rows=Model.FORMS[form][0], rope_pairs=Model.FORMS[form][1],
                          mean_nll_nats=nll, greedy8=tok.decode(gen))
    d = np.abs(logits_by_form["gguf"].astype(F64) - logits_by_form["hf"])
    conv["gguf_vs_hf_logits"] = dict(max_abs_diff=float(d.max()),
                                     max_abs_logit=float(np.abs(logits_by_form["gguf"]).max()),
                                     argmax_equal=bool(np.array_equal(logits_by_form["gguf"].argmax(-1),
                                                                      logits_by_form["hf"].argmax(-1))))
    res["rope_convention"] = conv
    ok &= conv["gguf_vs_hf_logits"]["max_abs_diff"] < 1e-3
    ok &= conv["gguf"]["mean_nll_nats"] < conv["gguf_half"]["mean_nll_nats"] - 0.5
    log(f"[selftest] rope: " + ", ".join(f"{k}: nll {v['mean_nll_nats']:.3f} {v['greedy8']!r}"
                                         for k, v in conv.items() if "mean_nll_nats" in v)
        + f"; gguf vs hf max|dlogit| {conv['gguf_vs_hf_logits']['max_abs_diff']:.3g}"
        + f" ({time.perf_counter() - t0:.1f}s)")

    # 4. KV cache (incremental, chunked) vs full recompute
    t0 = time.perf_counter()
    full = model.forward(ids, 0, None, "gguf")
    cache = model.new_cache()
    parts, p = [], 0
    for chunk in (7, 1, 1, 13, len(ids)):
        parts.append(model.forward(ids[p:p + chunk], p, cache, "gguf"))
        p += chunk
        if p >= len(ids):
            break
    inc = np.concatenate(parts)
    res["kv_cache_vs_recompute"] = dict(tokens=len(ids), max_abs_diff=float(np.abs(inc - full).max()))
    ok &= res["kv_cache_vs_recompute"]["max_abs_diff"] < 1e-3
    log(f"[selftest] kv cache vs recompute: max|d| {res['kv_cache_vs_recompute']['max_abs_diff']:.3g} "
        f"({time.perf_counter() - t0:.1f}s)")
    res["ok"] = bool(ok)
    return res


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt")
    ap.add_argument("--generate", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--form", choices=sorted(Model.FORMS), default="gguf",
                    help="Q/K row order + RoPE pairing used for the outputs (gguf = llama.cpp; hf = un-permuted)")
    ap.add_argument("--no-check-forms", action="store_true",
                    help="with --prompt: skip recomputing the prompt logits in the other (gguf/hf) form")
    ap.add_argument("--stop-at-eos", action="store_true", help="stop greedy generation at an EOS/control token")
    ap.add_argument("--bpb", metavar="FILE")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--context-token", type=int, default=0,
                    help="token prepended to each bpb stream (0 = <|endoftext|>; -1 = none, first token unscored)")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--selftest-text", help="extra file for the tokenizer round-trip in --selftest")
    a = ap.parse_args(argv)
    if not (a.prompt is not None or a.bpb or a.selftest):
        ap.error("give --prompt, --bpb or --selftest")

    t_all = time.perf_counter()
    model = Model(a.model)
    t0 = time.perf_counter()
    tok, specials = build_hf_tokenizer(model.reader)
    t_tok = time.perf_counter() - t0
    log(f"loaded {a.model}: {model.config()} in {model.load_s:.1f}s (tokenizer {t_tok:.1f}s)")
    out = dict(model=os.path.abspath(a.model), model_bytes=os.path.getsize(a.model), config=model.config(),
               tokenizer=dict(pre="smollm", add_bos=False, n_special=len(specials)),
               timings=dict(load_s=model.load_s, tokenizer_build_s=t_tok))

    if a.selftest:
        out["selftest"] = selftest(model, tok, specials, a.selftest_text)
        log(f"[selftest] ok = {out['selftest']['ok']}")

    if a.prompt is not None:
        if not a.json:
            ap.error("--prompt needs --json OUT")
        ids = tok.encode(a.prompt).ids
        stop = set(tok.token_to_id(s) for s in specials) if a.stop_at_eos else set()
        t0 = time.perf_counter()
        if a.generate > 0:
            logits, gen, step_logits = greedy(model, ids, a.generate, a.form, stop)
        else:
            logits, gen, step_logits = model.forward(ids, 0, None, a.form), [], None
        dt = time.perf_counter() - t0
        base = os.path.splitext(a.json)[0]
        np.save(base + ".logits.npy", logits.astype(F32))
        out.update(prompt=a.prompt, form=a.form, token_ids=ids, token_pieces=[tok.id_to_token(i) for i in ids],
                   logits_npy=os.path.abspath(base + ".logits.npy"), logits_shape=list(logits.shape),
                   top5_per_position=[[int(j) for j in np.argsort(-row)[:5]] for row in logits])
        if a.generate > 0:
            np.save(base + ".gen_logits.npy", step_logits.astype(F32))
            out["generate"] = dict(n=a.generate, ids=gen, text=tok.decode(gen, skip_special_tokens=False),
                                   pieces=[tok.id_to_token(i) for i in gen],
                                   step_logits_npy=os.path.abspath(base + ".gen_logits.npy"),
                                   step_logits_note="row i = logits after feeding generated token i "
                                                    "(chooses token i+1); token 0 came from logits[-1]")
            # cached decoding must equal a full recompute over prompt + generated[:-1]
            full = model.forward(ids + gen[:-1], 0, None, a.form)
            ref = np.concatenate([logits, step_logits])
            out["generate"]["kv_cache_vs_recompute_max_abs_diff"] = float(np.abs(full - ref).max())
        out["timings"]["prompt_and_generate_s"] = dt
        if not a.no_check_forms and a.form in ("gguf", "hf"):
            other = "hf" if a.form == "gguf" else "gguf"
            lg2 = model.forward(ids, 0, None, other)
            out["check_forms"] = dict(other=other, max_abs_diff=float(np.abs(lg2.astype(F64) - logits).max()),
                                      argmax_equal=bool(np.array_equal(lg2.argmax(-1), logits.argmax(-1))))
        log(f"prompt {a.prompt!r}: {len(ids)} tokens {ids}")
        if a.generate > 0:
            log(f"greedy {len(gen)}: {out['generate']['text']!r}  ({dt:.2f}s incl. prompt, "
                f"{dt / max(len(gen), 1):.3f}s/token; cache vs recompute max|d| "
                f"{out['generate']['kv_cache_vs_recompute_max_abs_diff']:.3g})")
        if "check_forms" in out:
            log(f"gguf vs hf form: max|dlogit| {out['check_forms']['max_abs_diff']:.3g}, "
                f"argmax equal {out['check_forms']['argmax_equal']}")

    if a.bpb:
        raw = Path(a.bpb).read_bytes()
        text = raw.decode("utf-8")
        t0 = time.perf_counter()
        ids = tok.encode(text).ids
        assert tok.decode(ids) == text, "tokenizer round trip failed on the bpb text"
        r = bits_per_byte(model, ids, len(raw), a.window, a.context_token, a.form)
        r["seconds"] = time.perf_counter() - t0
        r["file"] = os.path.abspath(a.bpb)
        out["bpb"] = r
        log(f"bpb {a.bpb}: {r['bits_per_byte']:.4f} bits/byte ({r['n_bytes']} bytes, {r['n_text_tokens']} tokens, "
            f"{r['n_windows']} windows, {r['nats_per_token']:.4f} nats/token) in {r['seconds']:.1f}s")

    out["timings"]["total_s"] = time.perf_counter() - t_all
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1, ensure_ascii=False)
        log(f"wrote {a.json}")
    if a.selftest and not out["selftest"]["ok"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
