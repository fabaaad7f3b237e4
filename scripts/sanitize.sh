#!/usr/bin/env bash
# The CUDA kernels on the CPU shim under sanitizers: the kernel selftest (kernels/shim/selftest.cpp, which
# runs every kernel entry point at small, odd shapes against a double-precision reference) built and run
#   tsan  with -fsanitize=thread, on the fiber runtime the app uses (the shim tells TSan about each
#         fiber switch and each barrier): a data race between the simulated threads of a block (a
#         missing __syncthreads or __syncwarp) is reported. kernels/shim/race_check.cpp first shows
#         that it is: its kernels without the barrier must be reported, with it must not;
#   asan  with -fsanitize=address,undefined: an out-of-bounds read or write in shared memory (the shim makes
#         __shared__ arrays globals), in a local array or in a global buffer (the selftest's buffers have
#         exact sizes), and undefined behaviour, are reported.
# asan builds the shim's OS-thread runtime (KVS_SHIM_OS_THREADS: one OS thread per CUDA thread; ASan
# would need its own fiber annotations to follow the stack switches); and
#   fibers the same selftest on the fiber runtime without a sanitizer, at -O2.
# Any report fails the run. Usage: scripts/sanitize.sh [tsan|asan|fibers|all] (default all).
# Needs g++ with libtsan and libasan/libubsan (Debian: libtsan2 libasan8 libubsan1; scripts/test.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
OUT="${SANITIZE_OUT:-$(mktemp -d)}"
CXX="${CXX:-g++}"
src=(kernels/shim/selftest.cpp kernels/shim/sim.cpp)
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -pthread -I kernels/shim -I kernels)
tsan_options="halt_on_error=1 exitcode=66 report_signal_unsafe=0"

run_tsan() {
  echo "== ThreadSanitizer: does it see a missing barrier? (kernels/shim/race_check.cpp)"
  "$CXX" "${flags[@]}" -fsanitize=thread kernels/shim/race_check.cpp -o "$OUT/race-check-tsan"
  local case rc want
  for case in block-ok block-race warp-ok warp-race grid-ok; do
    rc=0
    TSAN_OPTIONS="$tsan_options" "$OUT/race-check-tsan" "$case" > "$OUT/race-$case.log" 2>&1 || rc=$?
    want=0; [[ $case == *-race ]] && want=66
    if [ $rc -ne $want ]; then
      cat "$OUT/race-$case.log"
      echo "race_check $case: exit $rc, expected $want (66: TSan reported a data race)"
      exit 1
    fi
    echo "race_check $case: exit $rc, as expected"
  done
  echo "== ThreadSanitizer: building the kernel selftest"
  "$CXX" "${flags[@]}" -fsanitize=thread "${src[@]}" -o "$OUT/selftest-tsan"
  echo "== ThreadSanitizer: running it"
  TSAN_OPTIONS="$tsan_options" "$OUT/selftest-tsan"
}

run_asan() {
  echo "== AddressSanitizer + UBSan: building the kernel selftest"
  "$CXX" "${flags[@]}" -DKVS_SHIM_OS_THREADS -fsanitize=address,undefined -fno-sanitize-recover=all "${src[@]}" -o "$OUT/selftest-asan"
  echo "== AddressSanitizer + UBSan: running it"
  ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" "$OUT/selftest-asan"
}

run_fibers() {
  echo "== fibers (the app's runtime): building the kernel selftest"
  "$CXX" -std=c++20 -O2 -pthread -I kernels/shim -I kernels "${src[@]}" -o "$OUT/selftest-fibers"
  echo "== fibers: running it"
  "$OUT/selftest-fibers"
}

case "$what" in
  tsan) run_tsan ;;
  asan) run_asan ;;
  fibers) run_fibers ;;
  all) run_fibers; run_tsan; run_asan ;;
  *) echo "usage: $0 [tsan|asan|fibers|all]" >&2; exit 2 ;;
esac
