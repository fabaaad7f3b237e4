#!/usr/bin/env python3
"""Optional cross-check of reference.py against Hugging Face transformers' own GGUF loader.

transformers (load_gguf_checkpoint) dequantises the GGUF with the gguf package, un-permutes the
Q/K rows itself (LlamaTensorProcessor._reverse_permute_weights) and runs its LlamaForCausalLM in
PyTorch: an implementation of the forward pass that shares no code with reference.py.

Not needed by reference.py. Needs torch + transformers (large: ~5.6 GB with torch's CUDA wheels),
installed for example with
  python3 -m pip install --target .cache/smollm2/hfcheck torch==2.15.0 transformers==5.25.0
and run as
  python3 scripts/smollm2/hf_crosscheck.py MODEL.gguf [--hfcheck-dir .cache/smollm2/hfcheck] [--text FILE]

Feeds the same token ids (from reference.py's tokenizer) to both models and reports the largest
logit difference, whether the argmax agrees everywhere, and mean NLL for both. Also compares
transformers' GGUF-derived tokenizer with reference.py's on a few strings (informational).
"""
import argparse
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--hfcheck-dir", default=str(ROOT / ".cache" / "smollm2" / "hfcheck"))
    ap.add_argument("--text", help="a UTF-8 text file; its first --max-tokens tokens are compared too")
    ap.add_argument("--max-tokens", type=int, default=512)
    a = ap.parse_args()
    sys.path.insert(0, a.hfcheck_dir)
    sys.path.insert(1, str(ROOT / ".cache" / "smollm2" / "py"))
    sys.path.insert(0, str(HERE))
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import reference as R

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ref = R.Model(a.model)
    tok, _ = R.build_hf_tokenizer(ref.reader)
    d, f = os.path.split(os.path.abspath(a.model))
    hf = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    hf.eval()
    print(f"loaded both in {time.perf_counter() - t0:.1f}s; hf config: rope "
          f"{getattr(hf.config, 'rope_parameters', None) or getattr(hf.config, 'rope_theta', None)}, "
          f"eps {hf.config.rms_norm_eps}, tie {hf.config.tie_word_embeddings}, heads "
          f"{hf.config.num_attention_heads}/{hf.config.num_key_value_heads}")

    texts = ["The capital of France is", "def fibonacci(n):", "Once upon a time, there was a little"]
    if a.text:
        texts.append(Path(a.text).read_text(encoding="utf-8"))
    worst = 0.0
    for s in texts:
        ids = tok.encode(s).ids[: a.max_tokens]
        if s is texts[-1] and a.text:
            ids = ([0] + ids)[: a.max_tokens]
        lr = ref.forward(ids, 0, None, "hf")
        with torch.no_grad():
            lh = hf(torch.tensor([ids])).logits[0].float().numpy()
        diff = float(np.abs(lr.astype(np.float64) - lh).max())
        worst = max(worst, diff)
        nll = lambda L: float(-R.log_softmax64(L)[np.arange(len(ids) - 1), ids[1:]].mean())  # noqa: E731
        print(f"{s[:40]!r:44} T={len(ids):4d} max|dlogit|={diff:.3g} argmax_equal="
              f"{bool(np.array_equal(lr.argmax(-1), lh.argmax(-1)))} nll ref={nll(lr):.5f} hf={nll(lh):.5f}")

    # transformers' own tokenizer built from the GGUF (informational only)
    try:
        ht = AutoTokenizer.from_pretrained(d, gguf_file=f)
        for s in ["12345 and 3.14", "naïve café — 日本語", "Hello world! 123", "  multiple   spaces"]:
            a_ids = tok.encode(s).ids
            b_ids = ht(s, add_special_tokens=False)["input_ids"]
            print(f"tokenizer {s!r}: reference {a_ids} transformers-gguf {b_ids} same={a_ids == b_ids}")
    except Exception as e:  # noqa: BLE001
        print("transformers tokenizer from GGUF failed:", e)
    print(f"worst max|dlogit| = {worst:.3g}")


if __name__ == "__main__":
    main()
