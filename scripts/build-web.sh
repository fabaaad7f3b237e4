#!/usr/bin/env bash
# Build kvscope's static web bundle into web/dist/ (index.html, kvscope.js, kvscope_bg.wasm): one folder
# that any static host serves (a course page, GitHub Pages, `python3 -m http.server -d web/dist`).
#
# It installs what it needs when missing: the wasm32 standard library (rustup) and the wasm-bindgen CLI
# at the version Cargo.lock pins (from crates.io, cached in .cache/). wasm-opt (binaryen) optimises the
# wasm where it is installed and works; otherwise that step is skipped and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "installing the wasm32-unknown-unknown standard library"
  rustup target add wasm32-unknown-unknown
fi

WB_VERSION=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
WB_ROOT="$PWD/.cache/wasm-bindgen-$WB_VERSION"
WB="$WB_ROOT/bin/wasm-bindgen"
if [ ! -x "$WB" ]; then
  log "installing wasm-bindgen-cli $WB_VERSION (the version Cargo.lock pins) into $WB_ROOT"
  # --locked first; the crates.io mirror may lack one of its locked dependencies, then resolve afresh.
  # Without scripts/test.sh's clippy-driver wrapper: it lints kvscope, not the tools it installs.
  # --debug: an unoptimised build of the tool takes 60 s here where the optimised one took 195 s, and it
  # writes the same bundle byte for byte (checked on this wasm); it runs in 5.6 s instead of 1.4 s.
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install wasm-bindgen-cli --version "$WB_VERSION" --debug --locked --root "$WB_ROOT" \
    || env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install wasm-bindgen-cli --version "$WB_VERSION" --debug --root "$WB_ROOT"
fi

log "cargo rustc --lib --crate-type cdylib --target wasm32-unknown-unknown --no-default-features --features web --profile web"
t0=$(date +%s)
cargo rustc --lib --crate-type cdylib --target wasm32-unknown-unknown --no-default-features --features web --profile web
echo "wasm build took $(( $(date +%s) - t0 )) s"

OUT=web/dist
rm -rf "$OUT"
mkdir -p "$OUT"
log "wasm-bindgen --target web"
"$WB" "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/web/kvscope.wasm" --out-dir "$OUT" --out-name kvscope --target web --no-typescript

if [ -n "${KVSCOPE_SKIP_WASM_OPT:-}" ]; then
  echo "wasm-opt skipped (KVSCOPE_SKIP_WASM_OPT): the bundle keeps wasm-bindgen's unoptimised wasm"
elif command -v wasm-opt >/dev/null 2>&1; then
  log "wasm-opt -O2 ($(wasm-opt --version))"
  cp "$OUT/kvscope_bg.wasm" "$OUT/kvscope_bg.plain.wasm"
  if ! wasm-opt -O2 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals \
       --enable-reference-types --enable-multivalue "$OUT/kvscope_bg.plain.wasm" -o "$OUT/kvscope_bg.wasm"; then
    cp "$OUT/kvscope_bg.plain.wasm" "$OUT/kvscope_bg.wasm"
    echo "wasm-opt failed: the bundle keeps wasm-bindgen's unoptimised wasm"
  elif command -v node >/dev/null 2>&1 && ! why=$(node scripts/wasm-instantiates.mjs "$OUT"); then
    cp "$OUT/kvscope_bg.plain.wasm" "$OUT/kvscope_bg.wasm"
    echo "wasm-opt's output does not instantiate ($why): the bundle keeps wasm-bindgen's unoptimised wasm"
  fi
  rm -f "$OUT/kvscope_bg.plain.wasm"
else
  echo "wasm-opt is not installed (Debian package binaryen): the bundle keeps wasm-bindgen's unoptimised wasm"
fi
if command -v node >/dev/null 2>&1; then
  node scripts/wasm-instantiates.mjs "$OUT" || { echo "the bundle's wasm does not instantiate"; exit 1; }
fi
cp web/index.html "$OUT/"

log "bundle sizes (bytes: raw, gzip -9)"
for f in "$OUT"/*; do
  printf '%-28s %10d %10d\n' "$(basename "$f")" "$(stat -c %s "$f")" "$(gzip -9 -c "$f" | wc -c)"
done
