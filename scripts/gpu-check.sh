#!/usr/bin/env bash
# Everything a machine with an NVIDIA GPU should check, in one call (< 8 minutes on one H200):
#   1. build kvscope (or use a prebuilt target/release/kvscope when cargo is absent);
#   2. kvscope check --backend cuda: every kernel against the f64 reference;
#   3. the CUDA P1/P3 benchmarks (P3 as a ratio to a read-only stream kernel over the same bytes; a
#      device-to-device copy is reported too, counted as bytes read + written), and the CPU ones for scale;
#   4. a short table at the end.
# Needs the CUDA driver and NVRTC 12.x (from the toolkit or the nvidia-cuda-nvrtc-cu12 wheel); no internet.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
status=()
note() { status+=("$1|$2"); printf '\n== %s: %s\n' "$1" "$2"; }

# --- 1. build -------------------------------------------------------------------------------
if command -v cargo >/dev/null 2>&1; then
  if timeout 300 cargo build --release 2>&1 | tail -3; then note build ok; else note build FAILED; fi
fi
BIN=target/release/kvscope
if [ ! -x "$BIN" ]; then note build "no cargo and no prebuilt $BIN"; fi

# --- NVRTC and cuda_fp16.h --------------------------------------------------------------------
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-12* /usr/lib/cuda "$PWD/.cache/pydeps/nvidia/cuda_runtime"; do
  if [ -n "$d" ] && [ -e "$d/include/cuda_fp16.h" ]; then export KVSCOPE_CUDA_INCLUDE="$d/include"; break; fi
done
nvrtc=$( (ls /usr/local/cuda*/lib64/libnvrtc.so.12* /usr/local/cuda*/targets/*/lib/libnvrtc.so.12* "$PWD"/.cache/pydeps/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null; \
          python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib", "libnvrtc.so.12"))' 2>/dev/null) | head -1)
if [ -n "$nvrtc" ] && [ -e "$nvrtc" ]; then export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
echo "KVSCOPE_CUDA_INCLUDE=${KVSCOPE_CUDA_INCLUDE:-unset}  libnvrtc=${nvrtc:-not found}"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi not found"

if [ -x "$BIN" ]; then
  # --- 2. correctness -------------------------------------------------------------------------
  if timeout 180 "$BIN" check --backend cuda | tee "$OUT/check-cuda.txt" | tail -5; then note "check cuda" ok; else note "check cuda" FAILED; fi
  # --- 3. benchmarks --------------------------------------------------------------------------
  if timeout 180 "$BIN" bench --backend cuda --json > "$OUT/bench-cuda.json"; then note "bench cuda" ok; else note "bench cuda" FAILED; fi
  if timeout 120 "$BIN" bench --backend cpu --only p1,p3 --json > "$OUT/bench-cpu.json"; then note "bench cpu" ok; else note "bench cpu" FAILED; fi
  # Lesson 10's 8-bit decode lines on the GPU (quant_decode_u8 against paged decode on f16, same run;
  # the time includes the pools' upload, so they are not a read-roof figure).
  if timeout 180 "$BIN" bench --backend cuda --only p3-int8-token,p3-fp8-e4m3,p3-fp8-e5m2,p3-int8-channel,p3-kivi2,p3-kivi4 | tee "$OUT/bench-cuda-quant.txt" | tail -8; then note "bench cuda quant" ok; else note "bench cuda quant" FAILED; fi
  # The WGSL twins on the same GPU through wgpu (Vulkan), next to CUDA.
  if timeout 180 "$BIN" check --backend wgpu | tee "$OUT/check-wgpu.txt" | tail -3; then note "check wgpu" ok; else note "check wgpu" FAILED; fi
  if timeout 180 "$BIN" bench --backend wgpu --quick --json > "$OUT/bench-wgpu.json"; then note "bench wgpu" ok; else note "bench wgpu" FAILED; fi
fi

# --- 4. summary -------------------------------------------------------------------------------
echo
echo "================ kvscope gpu-check summary ================"
for s in "${status[@]}"; do printf '%-12s %s\n' "${s%%|*}" "${s#*|}"; done
grep -E "^== (cuda|wgpu)" "$OUT/check-cuda.txt" "$OUT/check-wgpu.txt" 2>/dev/null
python3 - "$OUT" <<'PY' 2>/dev/null || cat "$OUT"/bench-*.json 2>/dev/null
import json, sys, os
for name in ("bench-cuda.json", "bench-cpu.json", "bench-wgpu.json"):
    p = os.path.join(sys.argv[1], name)
    if not os.path.exists(p) or os.path.getsize(p) == 0:
        continue
    for l in json.load(open(p)):
        r = l["ratio"]
        ratio = "-" if r is None or r != r else f"{r:.3f}"
        print(f'{l["id"]:4} {l["ms"]:9.3f} ms {l["value"]:10.1f} {l["unit"]:8} ratio {ratio:>6} (goal {l["goal"]})  {l["what"]}')
PY
echo "raw output in $OUT"
