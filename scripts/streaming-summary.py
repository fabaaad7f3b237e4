#!/usr/bin/env python3
"""Summarise `kvscope export streaming` folders into assets/measurements/streaming.json (lesson 8).

Usage: python3 scripts/streaming-summary.py BASE_DIR [START_DIR] > assets/measurements/streaming.json
       python3 scripts/streaming-summary.py --add-smollm2 SMOLLM2_DIR assets/measurements/streaming.json
The second form adds (or replaces) the `smollm2` entry of the file in place, the other entries untouched:
runs of `kvscope export streaming --model smollm2`, whose curves are bits per byte per bucket of 64
tokens (each bucket's loss over the bytes of the tokens it predicts, from token_bytes.npy).
Each DIR holds one folder per run (tokens.npy, nll.npy, blocks_in_use.npy, sink_mass.npy,
manifest.json), as written by, for example:
    kvscope export streaming --policy sinks --window 64 --sinks 4 --out DIR/sinks-64-4
The dense run's sink mass gives the per-head mean over steps 16..255; `bytes` is each run's stream
length (the model's is the longest). Needs numpy.
"""
import json
import math
import os
import sys

import numpy as np

BUCKET = 512


def model(d, bucket=BUCKET):
    runs, sink, model_file, backend, nbytes, s_sinks, tokens = [], None, None, None, None, None, None
    for name in sorted(os.listdir(d)):
        m = os.path.join(d, name, "manifest.json")
        if not os.path.exists(m):
            continue
        man = json.load(open(m))
        st = man["streaming"]
        nll = np.load(os.path.join(d, name, "nll.npy")).astype(np.float64)
        tb = os.path.join(d, name, "token_bytes.npy")
        if os.path.exists(tb):
            # A BPE model: loss over the bytes of the predicted tokens 1..N-1, bucket by bucket.
            nb = np.load(tb).astype(np.float64)[1:]
            curve = [float(nll[i:i + bucket].sum() / nb[i:i + bucket].sum() / math.log(2))
                     for i in range(0, len(nll), bucket)]
            tokens = max(tokens or 0, st["tokens"])
        else:
            curve = [float(nll[i:i + bucket].mean() / math.log(2)) for i in range(0, len(nll), bucket)]
        runs.append({"policy": st["policy"], "positions": st["positions"], "window": st["window"], "bytes": st["bytes"],
                     "sinks": st["sinks"], "block_size": st["block_size"], "bits_per_byte": st["bits_per_byte"],
                     "max_blocks_in_use": st["max_blocks_in_use"], "seconds": round(st["seconds"], 1),
                     "curve": [round(c, 4) for c in curve]})
        model_file, backend = st["model"], man["backend"]
        nbytes = max(nbytes or 0, st["bytes"])
        if st["policy"] == "dense":
            mass = np.load(os.path.join(d, name, "sink_mass.npy"))
            sink = [[round(float(x), 5) for x in row] for row in mass[:, :, 16:256].mean(axis=2)]
            s_sinks = st["sinks"]
    out = {"model": model_file, "bytes": nbytes, "backend": backend, "curve_bucket": bucket, "runs": runs,
           "dense_sink_mass": sink, "sink_mass_sinks": s_sinks}
    if tokens is not None:
        out["tokens"] = tokens
    return out


if sys.argv[1] == "--add-smollm2":
    path = sys.argv[3]
    data = json.load(open(path))
    data["smollm2"] = model(sys.argv[2], bucket=64)
    data["smollm2"]["command"] = ("kvscope export streaming --model smollm2 --policy P [--positions text] --window 64 "
                                  "--sinks 4 --block-size 16 (all of assets/texts/heldout-en.txt)")
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
    sys.exit(0)


out = {"command": "kvscope export streaming --policy P [--positions text] --window W --sinks S --block-size 16 "
                  "(the whole held-out file), summarised by scripts/streaming-summary.py",
       "base": model(sys.argv[1])}
if len(sys.argv) > 2:
    out["start"] = model(sys.argv[2])
print(json.dumps(out, indent=1))
