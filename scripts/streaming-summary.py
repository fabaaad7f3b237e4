#!/usr/bin/env python3
"""Summarise `kvscope export streaming` folders into assets/measurements/streaming.json (lesson 8).

Usage: python3 scripts/streaming-summary.py BASE_DIR [START_DIR] > assets/measurements/streaming.json
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


def model(d):
    runs, sink, model_file, backend, nbytes, s_sinks = [], None, None, None, None, None
    for name in sorted(os.listdir(d)):
        m = os.path.join(d, name, "manifest.json")
        if not os.path.exists(m):
            continue
        man = json.load(open(m))
        st = man["streaming"]
        nll = np.load(os.path.join(d, name, "nll.npy")).astype(np.float64)
        curve = [float(nll[i:i + BUCKET].mean() / math.log(2)) for i in range(0, len(nll), BUCKET)]
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
    return {"model": model_file, "bytes": nbytes, "backend": backend, "curve_bucket": BUCKET, "runs": runs,
            "dense_sink_mass": sink, "sink_mass_sinks": s_sinks}


out = {"command": "kvscope export streaming --policy P [--positions text] --window W --sinks S --block-size 16 "
                  "(the whole held-out file), summarised by scripts/streaming-summary.py",
       "base": model(sys.argv[1])}
if len(sys.argv) > 2:
    out["start"] = model(sys.argv[2])
print(json.dumps(out, indent=1))
