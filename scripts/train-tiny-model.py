#!/usr/bin/env python3
"""Train kvscope's tiny Llama-style byte-level language model (issue #16).

The corpus comes from two Debian packages, installed with apt (no network at run time):
  fortunes     English fortune files (BSD licence; see /usr/share/doc/fortunes/copyright)
  fortunes-zh  tang300 and song100: Tang and Song poems (GPL-3.0+ packaging; the poems are centuries old)
Each fortune (the text between "%" lines) is one document; ANSI colour codes are stripped. Documents go
to the held-out split by a hash of their text (about 1 in 20), the rest to training. The first
EVAL_BYTES bytes of the held-out split are written next to the weights: the Rust tests compute bits per
byte on exactly that file.

Architecture (Llama-style, decoder-only, documented in assets/models/README.md): byte vocabulary of 256,
RMSNorm (eps 1e-5, with a weight), RoPE (base 10000, "rotate half" layout: the first half of each head's
dimensions pairs with the second half), GQA attention (4 query heads, 2 KV heads, head_dim 32), SwiGLU MLP
(w2(silu(w1 x) * w3 x), hidden 384), pre-norm residual blocks, a final RMSNorm, tied input/output
embeddings; no biases.

Deterministic on one machine: fixed seeds, torch.use_deterministic_algorithms, a fixed thread count.

Usage: python3 scripts/train-tiny-model.py [--steps N] [--threads T] [--out assets/models]
Writes <out>/kvscope-tiny.safetensors, <out>/kvscope-tiny.check.json, <out>/kvscope-tiny.heldout.txt and
prints the loss curve. Needs torch and numpy (pip) and the two apt packages.
"""

import argparse
import hashlib
import json
import math
import os
import re
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

NAME = "kvscope-tiny"
FORTUNES = "/usr/share/games/fortunes"
ENGLISH = [
    "fortunes", "wisdom", "literature", "science", "people", "education", "work", "platitudes",
    "humorists", "songs-poems", "art", "food", "love", "kids", "tao", "riddles", "computers",
]
CHINESE = ["tang300", "song100"]
EVAL_BYTES = 16384
CONFIG = dict(
    vocab=256, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, ffn_hidden=384,
    context=256, rope_base=10000.0, rope_layout="rotate_half", norm_eps=1e-5, tied_embeddings=True,
)
# The draft model of lesson 12's speculative decoding (--draft): a two-layer sibling at half the width,
# the same vocabulary, tokenizer (bytes), RoPE and layout, so it drafts the target's bytes cheaply; its
# f32 weights stay under 1 MB.
DRAFT_CONFIG = dict(CONFIG, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_hidden=192)
CHECK_PROMPT = "The cache keeps keys and values. 春眠不觉晓，"


def documents():
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    docs = []
    for name in ENGLISH + CHINESE:
        path = os.path.join(FORTUNES, name)
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        for d in text.split("\n%\n"):
            d = ansi.sub("", d).strip("\n")
            if d.strip():
                docs.append(d + "\n\n")
    return docs


def split(docs):
    train, held = [], []
    for d in docs:
        h = hashlib.sha256(d.encode("utf-8")).digest()[0]
        (held if h % 20 == 0 else train).append(d)
    return train, held


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(context, head_dim, base):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    t = torch.arange(context, dtype=torch.float64)
    ang = torch.outer(t, inv)  # [T, hd/2]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    # x [B, H, T, hd]; rotate half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[: x.shape[2]], sin[: x.shape[2]]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["d_model"], c["head_dim"]
        self.c = c
        self.attention_norm = RMSNorm(d, c["norm_eps"])
        self.wq = torch.nn.Linear(d, c["n_heads"] * hd, bias=False)
        self.wk = torch.nn.Linear(d, c["n_kv_heads"] * hd, bias=False)
        self.wv = torch.nn.Linear(d, c["n_kv_heads"] * hd, bias=False)
        self.wo = torch.nn.Linear(c["n_heads"] * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, c["norm_eps"])
        self.w1 = torch.nn.Linear(d, c["ffn_hidden"], bias=False)
        self.w3 = torch.nn.Linear(d, c["ffn_hidden"], bias=False)
        self.w2 = torch.nn.Linear(c["ffn_hidden"], d, bias=False)

    def forward(self, x, cos, sin):
        c = self.c
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, t, c["n_heads"], c["head_dim"]).transpose(1, 2)
        k = self.wk(h).view(b, t, c["n_kv_heads"], c["head_dim"]).transpose(1, 2)
        v = self.wv(h).view(b, t, c["n_kv_heads"], c["head_dim"]).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        g = c["n_heads"] // c["n_kv_heads"]
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(c["head_dim"])
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(b, t, c["n_heads"] * c["head_dim"])
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = torch.nn.Embedding(c["vocab"], c["d_model"])
        self.layers = torch.nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
        self.norm = RMSNorm(c["d_model"], c["norm_eps"])
        cos, sin = rope_tables(c["context"], c["head_dim"], c["rope_base"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, std=0.02)
        torch.nn.init.normal_(self.tok_embeddings.weight, std=0.02)
        for blk in self.layers:  # scaled residual projections (GPT-2)
            torch.nn.init.normal_(blk.wo.weight, std=0.02 / math.sqrt(2 * c["n_layers"]))
            torch.nn.init.normal_(blk.w2.weight, std=0.02 / math.sqrt(2 * c["n_layers"]))

    def forward(self, idx):
        x = self.tok_embeddings(idx)
        for blk in self.layers:
            x = blk(x, self.cos, self.sin)
        return self.norm(x) @ self.tok_embeddings.weight.T


def tensors(model):
    """The weights under the names the Rust loader validates (Meta's Llama names)."""
    out = {"tok_embeddings.weight": model.tok_embeddings.weight, "norm.weight": model.norm.weight}
    for i, b in enumerate(model.layers):
        p = f"layers.{i}."
        out[p + "attention_norm.weight"] = b.attention_norm.weight
        out[p + "attention.wq.weight"] = b.wq.weight
        out[p + "attention.wk.weight"] = b.wk.weight
        out[p + "attention.wv.weight"] = b.wv.weight
        out[p + "attention.wo.weight"] = b.wo.weight
        out[p + "ffn_norm.weight"] = b.ffn_norm.weight
        out[p + "feed_forward.w1.weight"] = b.w1.weight
        out[p + "feed_forward.w3.weight"] = b.w3.weight
        out[p + "feed_forward.w2.weight"] = b.w2.weight
    return {k: v.detach().float().contiguous().numpy() for k, v in out.items()}


def write_safetensors(path, arrays, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


@torch.no_grad()
def bits_per_byte(model, data, context, start_byte=None):
    """Non-overlapping windows of `context` inputs: window s predicts data[s+1 .. s+context+1] from
    data[s .. s+context]; every byte after the first is predicted once. The Rust side does the same.
    With a start byte, each window is that byte followed by context - 1 bytes of the text, and the
    predictions read from position 1 on: still every byte after the first, once."""
    model.eval()
    nll, n = 0.0, 0
    step = context if start_byte is None else context - 1
    for s in range(0, len(data) - 1, step):
        y = data[s + 1 : s + step + 1]
        x = data[s : s + len(y)]
        if start_byte is not None:
            x = [start_byte] + x
        logits = model(torch.tensor(x, dtype=torch.long)[None])[0].double()
        if start_byte is not None:
            logits = logits[1:]
        nll += F.cross_entropy(logits, torch.tensor(y, dtype=torch.long), reduction="sum").item()
        n += len(y)
    model.train()
    return nll / n / math.log(2), n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="assets/models")
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--start-byte", type=int, default=None,
                    help="begin every training window with this byte (as real models see <s> at the start of "
                         "every sequence), for lesson 8's attention-sink variant; writes kvscope-tiny-start.*")
    ap.add_argument("--draft", action="store_true",
                    help="train lesson 12's draft model (DRAFT_CONFIG: 2 layers, d_model 64); writes kvscope-draft.*")
    args = ap.parse_args()
    name = NAME if args.start_byte is None else NAME + "-start"
    if args.draft:
        if args.start_byte is not None:
            sys.exit("--draft and --start-byte do not combine")
        name = "kvscope-draft"
    sb = args.start_byte

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)

    train_docs, held_docs = split(documents())
    train = np.frombuffer("".join(train_docs).encode("utf-8"), dtype=np.uint8)
    # Held-out documents in the order of their hashes, so English and Chinese are mixed in the eval file.
    held_docs.sort(key=lambda d: hashlib.sha256(d.encode("utf-8")).hexdigest())
    held = "".join(held_docs).encode("utf-8")
    eval_bytes = held[:EVAL_BYTES]
    # Cut at a UTF-8 boundary so the file is valid text.
    while eval_bytes and (eval_bytes[-1] & 0xC0) == 0x80:
        eval_bytes = eval_bytes[:-1]
    if eval_bytes and eval_bytes[-1] >= 0xC0:
        eval_bytes = eval_bytes[:-1]
    held_eval = list(eval_bytes)
    print(f"corpus: {len(train_docs)} training documents ({len(train)} bytes), {len(held_docs)} held out "
          f"({len(held)} bytes; eval file {len(held_eval)} bytes)", flush=True)

    c = DRAFT_CONFIG if args.draft else CONFIG
    model = Model(c)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, config {json.dumps(c)}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warm = 200
    t0 = time.time()
    T = c["context"]
    log = []
    for step in range(1, args.steps + 1):
        lr = args.lr * min(1.0, step / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train) - T - 1, size=args.batch)
        if sb is None:
            xb = torch.tensor(np.stack([train[s : s + T] for s in starts]), dtype=torch.long)
            yb = torch.tensor(np.stack([train[s + 1 : s + T + 1] for s in starts]), dtype=torch.long)
        else:
            # The start byte, then T - 1 bytes of text; the targets are the text from its first byte on.
            xb = torch.tensor(np.stack([np.concatenate([[sb], train[s : s + T - 1]]) for s in starts]), dtype=torch.long)
            yb = torch.tensor(np.stack([train[s : s + T] for s in starts]), dtype=torch.long)
        loss = F.cross_entropy(model(xb).view(-1, c["vocab"]), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == 1:
            bpb = loss.item() / math.log(2)
            print(f"step {step:5d}  train loss {bpb:.4f} bits/byte  lr {lr:.2e}  {time.time() - t0:7.1f} s", flush=True)
            log.append({"step": step, "train_bpb": bpb, "seconds": round(time.time() - t0, 1)})
        if step % args.eval_every == 0 or step == args.steps:
            hb, _ = bits_per_byte(model, held_eval, T, sb)
            print(f"step {step:5d}  held-out {hb:.4f} bits/byte", flush=True)
            log[-1]["heldout_bpb"] = hb
    seconds = time.time() - t0

    model.eval()
    held_bpb, held_n = bits_per_byte(model, held_eval, T, sb)
    # Training bits per byte on a fixed sample of the training text, measured the same way.
    train_bpb, _ = bits_per_byte(model, list(train[:EVAL_BYTES].tobytes()), T, sb)
    os.makedirs(args.out, exist_ok=True)
    meta = {k: str(v) for k, v in c.items()}
    meta.update({"name": name, "format": "kvscope tiny llama v1"})
    if sb is not None:
        meta["start_byte"] = str(sb)
    arrays = tensors(model)
    write_safetensors(os.path.join(args.out, f"{name}.safetensors"), arrays, meta)
    if sb is None and not args.draft:
        with open(os.path.join(args.out, f"{NAME}.heldout.txt"), "wb") as f:
            f.write(bytes(held_eval))
    prompt = list(CHECK_PROMPT.encode("utf-8"))
    if sb is not None:
        prompt = [sb] + prompt
    with torch.no_grad():
        logits = model(torch.tensor(prompt, dtype=torch.long)[None])[0]
    positions = [0, len(prompt) // 2, len(prompt) - 1]
    check = {
        "prompt": CHECK_PROMPT,
        "tokens": prompt,
        "positions": positions,
        "logits": [[float(x) for x in logits[p]] for p in positions],
        "heldout_bits_per_byte": held_bpb,
        "heldout_bytes_predicted": held_n,
        "train_sample_bits_per_byte": train_bpb,
        "config": c,
        "parameters": n_params,
        "training": {"steps": args.steps, "batch": args.batch, "context": T, "lr": args.lr, "warmup": warm,
                     "schedule": "linear warm-up, cosine to 0.1x", "optimizer": "AdamW(0.9, 0.95), wd 0.1 on matrices",
                     "grad_clip": 1.0, "seed": args.seed, "threads": args.threads, "seconds": round(seconds, 1),
                     "torch": torch.__version__, "start_byte": sb},
        "corpus": {"english": ENGLISH, "chinese": CHINESE, "train_documents": len(train_docs),
                   "train_bytes": int(len(train)), "heldout_documents": len(held_docs), "heldout_bytes": len(held)},
        "loss_curve": log,
    }
    with open(os.path.join(args.out, f"{name}.check.json"), "w") as f:
        json.dump(check, f, indent=1)
    print(f"done in {seconds:.0f} s: held-out {held_bpb:.4f} bits/byte ({held_n} bytes), training sample "
          f"{train_bpb:.4f}; wrote {args.out}/{name}.safetensors", flush=True)


if __name__ == "__main__":
    sys.exit(main())
