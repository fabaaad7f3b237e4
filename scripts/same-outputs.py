#!/usr/bin/env python3
"""Are two kvscope binaries' numbers the same? For a refactor that must change no number.

    scripts/same-outputs.py BEFORE_BIN AFTER_BIN [--tables] [--backends cpu,wgpu,cuda-sim]

Runs each binary through the same list of commands: `kvscope check --json` on every backend named,
every `kvscope export` (each format, policy and kernel variant the lessons use, on the CPU, plus the
model-free exports on the other backends), and with `--tables` the two slow stored tables
(`eviction-table`, `quant-table`, about 8 minutes on 2 cores), which are also compared with their
committed copies in `assets/measurements/`.

Every file a command writes is compared byte for byte, except JSON files, which are compared after
dropping the fields that are wall-clock measurements (listed in TIMING below; the dropped paths are
printed), since two runs of one binary differ there. Exit status 0 only when every command of both
binaries exits alike and every output is identical.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# Keys whose values are measured times or rates: they differ between two runs of one binary.
TIMING = re.compile(
    r"(^|_)(s|ms|us|seconds|secs|per_s|per_second|speedup|wall|elapsed|device)$"
)

PROMPT = "The cache keeps the keys and values of every token."


def commands(backends, tables):
    """(name, args, wants an --out folder) for every comparison."""
    out = []
    for b in backends:
        out.append((f"check-{b}", ["check", "--backend", b, "--json"], False))
    cpu = ["--backend", "cpu"]
    for b in backends:
        be = ["--backend", b]
        out.append((f"attention-{b}", ["export", "attention", *be], True))
        out.append((f"attention-gqa-{b}", ["export", "attention", "--kv-heads", "2", "--mask", "window:4,sinks:1", *be], True))
        out.append((f"attention-flash-{b}", ["export", "attention", "--kernel", "flash", "--seq", "24", *be], True))
        out.append((f"paged-decode-{b}", ["export", "paged-decode", "--requests", "3", "--context-lens", "5,17,33", *be], True))
        out.append((f"logits-{b}", ["export", "logits", "--prompt", PROMPT, *be], True))
        # The decode kernels of lessons 8-10 on this backend: quantised caches on seeded rows (shape
        # mode), the streaming decode and the score-returning decode on the model.
        for f in ["int8-token", "fp8-e5m2-head", "int8-channel", "kivi2", "kivi4"]:
            out.append((f"quant-shapes-{f}-{b}", ["export", "quant", "--format", f, "--requests", "3",
                                                  "--context-lens", "5,17,40", *be], True))
        out.append((f"streaming-sinks-{b}", ["export", "streaming", "--policy", "sinks", "--bytes", "300", *be], True))
        out.append((f"eviction-h2o-{b}", ["export", "eviction", "--policy", "h2o", "--budget", "24",
                                          "--prompt", PROMPT * 2, *be], True))
        out.append((f"eviction-snapkv-{b}", ["export", "eviction", "--policy", "snapkv", "--budget", "24",
                                             "--prompt", PROMPT * 2, *be], True))
    out.append(("model-attention", ["export", "model-attention", "--prompt", PROMPT, *cpu], True))
    out.append(("speculative-ngram", ["export", "speculative", "--speculative", "ngram"], True))
    out.append(("speculative-draft", ["export", "speculative", "--speculative", "draft"], True))
    out.append(("serving", ["export", "serving"], True))
    for p in ["dense", "window", "sinks", "recompute"]:
        out.append((f"streaming-{p}", ["export", "streaming", "--policy", p, "--bytes", "600"], True))
    out.append(("streaming-text-positions", ["export", "streaming", "--policy", "window", "--positions", "text", "--bytes", "600"], True))
    for p in ["full", "window", "sinks", "h2o", "snapkv", "random"]:
        out.append((f"eviction-{p}", ["export", "eviction", "--policy", p, "--budget", "24", "--prompt", PROMPT * 2], True))
    for f in ["f16", "int8-token", "int8-channel", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3-head", "fp8-e5m2-head",
              "fp8-e4m3-scale1", "fp8-e5m2-scale1", "kivi2", "kivi4"]:
        out.append((f"quant-{f}", ["export", "quant", "--format", f], True))
    out.append(("quant-kivi2-g16", ["export", "quant", "--format", "kivi2", "--group", "16", "--residual", "32"], True))
    for f in ["e4m3", "e5m2"]:
        out.append((f"fp8-table-{f}", ["export", "fp8-table", "--format", f], True))
    out.append(("schedule", ["export", "schedule"], True))
    out.append(("prefix-schedule", ["export", "prefix-schedule"], True))
    if tables:
        out.append(("eviction-table", ["export", "eviction-table"], True))
        out.append(("quant-table", ["export", "quant-table"], True))
    return out


def strip_timing(v, path, dropped):
    if isinstance(v, dict):
        res = {}
        for k, x in v.items():
            if TIMING.search(k):
                dropped.add(re.sub(r"\[\d+\]", "[]", f"{path}.{k}"))
                continue
            res[k] = strip_timing(x, f"{path}.{k}", dropped)
        return res
    if isinstance(v, list):
        return [strip_timing(x, f"{path}[{i}]", dropped) for i, x in enumerate(v)]
    return v


def digest(path, dropped):
    data = open(path, "rb").read()
    if path.endswith(".json"):
        data = json.dumps(strip_timing(json.loads(data), "", dropped), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def run(binary, name, args, wants_out, root, dropped):
    """Outputs of one command: {relative file: digest}, with its exit status and stdout."""
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    argv = [binary, *args] + (["--out", folder] if wants_out else [])
    p = subprocess.run(argv, capture_output=True)
    files = {"<exit>": str(p.returncode)}
    if not wants_out:
        stdout = p.stdout
        try:
            stdout = json.dumps(strip_timing(json.loads(stdout), "", dropped), sort_keys=True).encode()
        except ValueError:
            pass
        files["<stdout>"] = hashlib.sha256(stdout).hexdigest()
    for dirpath, _, names in os.walk(folder):
        for n in names:
            f = os.path.join(dirpath, n)
            files[os.path.relpath(f, folder)] = digest(f, dropped)
    return files, p


def main():
    argv = sys.argv[1:]
    tables = "--tables" in argv
    backends = ["cpu", "wgpu", "cuda-sim"]
    if "--backends" in argv:
        backends = argv[argv.index("--backends") + 1].split(",")
    bins = [a for a in argv if not a.startswith("--") and "," not in a and a not in backends]
    if len(bins) != 2:
        sys.exit(__doc__)
    dropped = set()
    diffs = 0
    files_compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, args, wants_out in commands(backends, tables):
            got = []
            t0 = time.time()
            for i, b in enumerate(bins):
                files, p = run(b, name, args, wants_out, os.path.join(tmp, str(i)), dropped)
                got.append(files)
                if p.returncode != 0 and i == 0:
                    print(f"  {name}: exit {p.returncode}: {p.stderr.decode(errors='replace').strip()[-300:]}")
            before, after = got
            secs = time.time() - t0
            bad = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            files_compared += len(before)
            if bad:
                diffs += 1
                print(f"DIFFERS {name}: {', '.join(bad)}", flush=True)
            else:
                print(f"same    {name} ({len(before) - 1} outputs, {secs:.1f} s for both)", flush=True)
            if name in ("eviction-table", "quant-table"):
                stored = os.path.join("assets", "measurements", name.split("-")[0] + ".json")
                mine = os.path.join(tmp, "1", name, os.path.basename(stored))
                if digest(stored, dropped) != digest(mine, dropped):
                    diffs += 1
                    print(f"DIFFERS {name}: from the stored {stored}")
                else:
                    print(f"same    {name} as the stored {stored}")
    print(f"\n{files_compared} outputs compared; fields dropped as timing: {', '.join(sorted(dropped)) or 'none'}")
    if diffs:
        sys.exit(f"{diffs} command(s) differ")
    print("every output is identical")


if __name__ == "__main__":
    main()
