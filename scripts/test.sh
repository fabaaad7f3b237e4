#!/usr/bin/env bash
# Run every test of kvscope: the one command the README names and CI calls.
# It installs what the tests need when it is missing, then runs rustfmt, clippy and cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

# Rust components (the toolchain itself comes with the machine).
for comp in rustfmt clippy; do
  if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
    log "installing $comp"
    rustup component add "$comp"
  fi
done

log "cargo fmt --check"
cargo fmt --check

log "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

log "cargo test"
cargo test "$@"
