#!/usr/bin/env python3
"""What kvscope's real-model tests compare against, computed by the independent reference.

    expected.py MODEL.gguf OUTDIR

loads the model once with reference.py (NumPy, the gguf package, Hugging Face `tokenizers`; no kvscope
code) and writes OUTDIR/expected.json with

  * corpus: for each text of CORPUS, the ids of the HF tokenizer and of reference.py's pure-Python
    llama.cpp-style tokenizer (they must agree; the script fails if not);
  * prompts: for each prompt, its ids, the logits of every prompt position without a cache
    (OUTDIR/prompt<i>.logits.npy, float32 [T, vocab]), and a greedy continuation of GENERATE tokens
    with a KV cache, with the gap between the top two logits of the step that chose each token;
  * bpb: bits per byte of the held-out text (assets/texts/heldout-en.txt), reference.py's way.

./scripts/test.sh runs it and points the tests at OUTDIR with KVSCOPE_SMOLLM2_EXPECTED.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference as ref  # noqa: E402  (puts .cache/smollm2/py on sys.path)
import numpy as np  # noqa: E402

GENERATE = 64
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):\n",
]
CORPUS = ref.ROUNDTRIP_CORPUS + [
    "Prices rose 12.5% in 2023, then fell 3% (to $1,024.99).",
    "many     spaces\tand\ttabs\n\n\nand newlines",
    "Grüße aus Zürich, 東京, Москва, and ¿qué tal?",
    "The KV cache stores keys and values: K[t] = x[t] · W_K.",
]
HELDOUT = Path(__file__).resolve().parents[2] / "assets" / "texts" / "heldout-en.txt"


def main() -> int:
    model_path, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = ref.Model(model_path)
    tok, _specials = ref.build_hf_tokenizer(model.reader)
    pure = ref.PurePythonTokenizer(model.reader)
    result = dict(model=model_path, config=model.config(), generate=GENERATE, corpus=[], prompts=[])
    for text in CORPUS:
        hf = tok.encode(text).ids
        py = pure.encode(text)
        if list(hf) != list(py):
            print(f"expected.py: the two reference tokenizers disagree on {text!r}: {hf} vs {py}", file=sys.stderr)
            return 1
        result["corpus"].append(dict(text=text, ids=list(hf)))
    for i, text in enumerate(PROMPTS):
        ids = tok.encode(text).ids
        full = model.forward(ids, 0, None, "gguf")
        np.save(out / f"prompt{i}.logits.npy", full.astype(np.float32))
        prompt_logits, gen, steps = ref.greedy(model, ids, GENERATE, "gguf")
        choosing = np.concatenate([prompt_logits[-1:], steps])
        top2 = np.sort(choosing, axis=-1)[:, -2:]
        result["prompts"].append(dict(
            text=text, ids=list(ids), logits_npy=f"prompt{i}.logits.npy", greedy=gen,
            greedy_text=tok.decode(gen, skip_special_tokens=False),
            margins=[float(m) for m in (top2[:, 1] - top2[:, 0])]))
        print(f"expected.py: {text!r} -> {tok.decode(gen)!r}", file=sys.stderr)
    raw = HELDOUT.read_bytes()
    ids = tok.encode(raw.decode("utf-8")).ids
    result["bpb"] = ref.bits_per_byte(model, ids, len(raw), 512, 0, "gguf")
    result["bpb"]["file"] = "assets/texts/heldout-en.txt"
    result["seconds"] = time.perf_counter() - t0
    (out / "expected.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"expected.py: bpb {result['bpb']['bits_per_byte']:.4f} on {len(raw)} bytes; "
          f"{result['seconds']:.1f} s in all", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
