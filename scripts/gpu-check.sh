#!/usr/bin/env bash
# kvscope's check on a machine with an NVIDIA GPU, in one command and well under 8 minutes. It needs
# no cargo and no network: it runs a prebuilt binary (scripts/gpu-bundle.sh makes one, with this
# script beside it), and loads that machine's driver and NVRTC, CUDA 13's or CUDA 12's.
#   0. what it found: the binary, `nvidia-smi -L`, the NVRTC it loads and the headers it compiles with;
#   1. every kernel file compiled by that NVRTC for compute_90 (needs no GPU);
#   2. kvscope check --backend cuda: every kernel against the f64 reference;
#   3. the CUDA benchmarks (P1, P3 at block sizes 1/16/64, lesson 10's decode lines), the CPU's for scale;
#   4. kvscope check --backend wgpu and its benchmarks on the same GPU (Vulkan);
#   5. a table at the end.
# Everything goes under $OUT (a new temporary folder when unset): at most 8 files.
# Without a GPU it stops after step 1 with the driver's reason and exits 2; a failed step exits 1.
#
#   bash gpu-bundle/gpu-check.sh          (or scripts/gpu-check.sh, with target/release/kvscope)
# Environment: KVSCOPE_BIN (the binary), KVSCOPE_NVRTC (a libnvrtc.so.N to use), KVSCOPE_CUDA_INCLUDE.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
# Everything printed also goes to $OUT/gpu-check.log.
if [ -z "${KVSCOPE_GPU_CHECK_LOGGED:-}" ]; then
  export KVSCOPE_GPU_CHECK_LOGGED=1 OUT
  bash "$0" "$@" 2>&1 | tee "$OUT/gpu-check.log"
  exit "${PIPESTATUS[0]}"
fi
WORK="$(mktemp -d)"
status=()
failed=0
t_start=$(date +%s)
t_step=$t_start
# One line of the summary: what, how it went, and the seconds since the last line.
note() {
  local now; now=$(date +%s)
  status+=("$1|$2 [$((now - t_step)) s]"); t_step=$now
  printf '\n== %s: %s\n' "$1" "$2"
  case "$2" in ok*|skipped*) ;; *) failed=1 ;; esac
}

# --- 0. the binary ------------------------------------------------------------------------------
BIN=""
for b in "${KVSCOPE_BIN:-}" "$HERE/kvscope" "$PWD/gpu-bundle/kvscope" "$HERE/../gpu-bundle/kvscope" "$HERE/../target/release/kvscope"; do
  if [ -n "$b" ] && [ -x "$b" ]; then BIN="$b"; break; fi
done
if [ -z "$BIN" ]; then
  echo "no kvscope binary: run scripts/gpu-bundle.sh where cargo is, copy gpu-bundle/ here, or set KVSCOPE_BIN"
  exit 1
fi
echo "binary: $BIN"
[ -e "$(dirname "$BIN")/MANIFEST" ] && head -3 "$(dirname "$BIN")/MANIFEST"

# --- NVRTC: the newest libnvrtc.so.N found, loaded through a link named libnvrtc.so -------------
# (cudarc's loader asks for libnvrtc.so first, then libnvrtc.so.12 and older; CUDA 13 names it .so.13.)
candidates() {
  [ -n "${KVSCOPE_NVRTC:-}" ] && echo "$KVSCOPE_NVRTC"
  # NVIDIA's Python packages: nvidia/cu13/lib (CUDA 13) and nvidia/cuda_nvrtc/lib (CUDA 12).
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'PY' 2>/dev/null
import glob, os, sys
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
roots += glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia"))
for r in roots:
    for p in glob.glob(os.path.join(r, "*", "lib", "libnvrtc.so.1[0-9]*")):
        print(p)
PY
    break
  done
  ls /usr/local/cuda*/lib64/libnvrtc.so.1[0-9]* /usr/local/cuda*/targets/*/lib/libnvrtc.so.1[0-9]* \
     /usr/lib/x86_64-linux-gnu/libnvrtc.so.1[0-9]* "$HERE"/../.cache/pydeps/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null
}
nvrtc=""
if [ -n "${KVSCOPE_NVRTC:-}" ]; then
  nvrtc="$KVSCOPE_NVRTC"
else
  # The highest major version; among equals, the first found (Python package before toolkit).
  nvrtc=$(candidates | grep -E 'libnvrtc\.so\.[0-9]+(\.[0-9]+)*$' | grep -v alt | awk -F'libnvrtc.so.' '{ split($2, v, "."); print v[1] "\t" NR "\t" $0 }' \
          | sort -t$'\t' -k1,1nr -k2,2n | head -1 | cut -f3)
fi
if [ -n "$nvrtc" ] && [ -e "$nvrtc" ]; then
  mkdir -p "$WORK/lib"
  ln -sf "$(readlink -f "$nvrtc")" "$WORK/lib/libnvrtc.so"
  export LD_LIBRARY_PATH="$WORK/lib:$(dirname "$(readlink -f "$nvrtc")")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Headers that belong to that NVRTC: its own include/ first, then the toolkit's and the packages'.
  if [ -z "${KVSCOPE_CUDA_INCLUDE:-}" ]; then
    for d in "$(dirname "$nvrtc")/../include" "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include \
             "$(dirname "$nvrtc")/../../cuda_runtime/include"; do
      if [ -e "$d/cuda_fp16.h" ]; then export KVSCOPE_CUDA_INCLUDE="$(cd "$d" && pwd)"; break; fi
    done
  fi
fi
echo "NVRTC file: ${nvrtc:-none found}"
echo "KVSCOPE_CUDA_INCLUDE=${KVSCOPE_CUDA_INCLUDE:-unset}"

# The Vulkan loader and GL dispatch libraries from the bundle, where the machine has none.
if [ -d "$(dirname "$BIN")/lib" ] && ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(cd "$(dirname "$BIN")/lib" && pwd)"
  echo "Vulkan loader: the bundle's lib/"
fi
# NVIDIA's container images keep the driver's ICD files here.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -e /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi

echo
echo "nvidia-smi -L:"
nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
echo
"$BIN" kernels nvrtc

# --- 1. NVRTC compiles every kernel for compute_90 (no GPU needed) ------------------------------
t_step=$(date +%s)
if timeout 60 "$BIN" kernels ptx --arch compute_90 --out "$WORK/ptx" > "$WORK/ptx.txt" 2>&1; then
  note "nvrtc sm_90" "ok: $(grep -c '^wrote' "$WORK/ptx.txt") files"
else
  cat "$WORK/ptx.txt"
  note "nvrtc sm_90" "FAILED"
fi

# --- 2. correctness -------------------------------------------------------------------------------
timeout 120 "$BIN" check --backend cuda > "$OUT/check-cuda.txt" 2>&1
rc=$?
if grep -q '^== cuda: unavailable' "$OUT/check-cuda.txt"; then
  reason=$(sed -n 's/^== cuda: unavailable: //p' "$OUT/check-cuda.txt")
  # Exit 2 says "no GPU, and everything before that passed"; 1 says something before it failed too.
  code=$((failed ? 1 : 2))
  note "check cuda" "no GPU here: $reason"
  echo
  echo "kvscope's CUDA backend needs an NVIDIA GPU and its driver; this machine has none usable, so the"
  echo "checks and benchmarks that need one were not run. (NVRTC compiled the kernels above without one.)"
  for s in "${status[@]}"; do printf '%-16s %s\n' "${s%%|*}" "${s#*|}"; done
  rm -rf "$WORK"
  exit $code
fi
tail -3 "$OUT/check-cuda.txt"
if [ $rc -eq 0 ]; then note "check cuda" "ok: $(sed -n 's/^== cuda: //p' "$OUT/check-cuda.txt")"; else note "check cuda" "FAILED (exit $rc): $(sed -n 's/^== cuda: //p' "$OUT/check-cuda.txt")"; fi

# --- 3. benchmarks --------------------------------------------------------------------------------
if timeout 120 "$BIN" bench --backend cuda --json > "$OUT/bench-cuda.json" 2> "$WORK/bench-cuda.err"; then note "bench cuda" ok; else cat "$WORK/bench-cuda.err"; note "bench cuda" FAILED; fi
# Lesson 10's decode lines on the GPU: 8-bit and group-quantised pools against f16, same run.
if timeout 90 "$BIN" bench --backend cuda --only p3-int8-token,p3-fp8-e4m3,p3-fp8-e5m2,p3-int8-channel,p3-kivi2,p3-kivi4 > "$OUT/bench-cuda-quant.txt" 2>&1; then note "bench cuda quant" ok; else note "bench cuda quant" FAILED; fi
tail -8 "$OUT/bench-cuda-quant.txt"
if timeout 45 "$BIN" bench --backend cpu --quick --only p1,p3 --json > "$OUT/bench-cpu.json" 2> "$WORK/bench-cpu.err"; then note "bench cpu" ok; else cat "$WORK/bench-cpu.err"; note "bench cpu" FAILED; fi

# --- 4. the WGSL twins on the same GPU through wgpu -----------------------------------------------
timeout 90 "$BIN" check --backend wgpu > "$OUT/check-wgpu.txt" 2>&1
rc=$?
tail -2 "$OUT/check-wgpu.txt"
if [ $rc -eq 0 ]; then note "check wgpu" "ok: $(sed -n 's/^== wgpu: //p' "$OUT/check-wgpu.txt")"; else note "check wgpu" "FAILED (exit $rc): $(sed -n 's/^== wgpu: //p' "$OUT/check-wgpu.txt" | head -1)"; fi
if grep -q '^== wgpu: unavailable' "$OUT/check-wgpu.txt"; then
  note "bench wgpu" "skipped: wgpu unavailable"
elif timeout 60 "$BIN" bench --backend wgpu --quick --json > "$OUT/bench-wgpu.json" 2> "$WORK/bench-wgpu.err"; then note "bench wgpu" ok; else cat "$WORK/bench-wgpu.err"; note "bench wgpu" FAILED; fi

# --- 5. summary -------------------------------------------------------------------------------------
{
  echo
  echo "================ kvscope gpu-check summary ($(( $(date +%s) - t_start )) s) ================"
  for s in "${status[@]}"; do printf '%-16s %s\n' "${s%%|*}" "${s#*|}"; done
  grep -hE "^== (cuda|wgpu) \(" "$OUT/check-cuda.txt" "$OUT/check-wgpu.txt" 2>/dev/null
  python3 - "$OUT" <<'PY' 2>/dev/null || cat "$OUT"/bench-*.json 2>/dev/null
import json, sys, os
for name in ("bench-cuda.json", "bench-cpu.json", "bench-wgpu.json"):
    p = os.path.join(sys.argv[1], name)
    if not os.path.exists(p) or os.path.getsize(p) == 0:
        continue
    print(name)
    for l in json.load(open(p)):
        r = l["ratio"]
        ratio = "-" if r is None or r != r else f"{r:.3f}"
        print(f'  {l["id"]:8} {l["ms"]:9.3f} ms {l["value"]:10.1f} {l["unit"]:8} ratio {ratio:>6} (goal {l["goal"]})  {l["what"]}')
PY
} | tee "$OUT/summary.txt"
echo "everything is in $OUT"
rm -rf "$WORK"
exit $failed
