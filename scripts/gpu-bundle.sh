#!/usr/bin/env bash
# Build everything an NVIDIA machine with no Rust toolchain, no network and CUDA 13 needs to run
# kvscope's GPU check, into one ignored folder (default: gpu-bundle/ at the repository root):
#   kvscope        the release binary, stripped (NVRTC and the driver are loaded at run time; the
#                  kernels' sources, the lessons, the models and the fonts are inside it)
#   gpu-check.sh   the check itself (a copy of scripts/gpu-check.sh; it finds the binary beside it)
#   lib/           Debian's Vulkan loader and GL dispatch libraries (libvulkan1, libglvnd0, libglx0,
#                  libegl1, libgl1, libopengl0, libgles2), which the NVIDIA Vulkan driver needs and a
#                  CUDA image often lacks: only for `check --backend wgpu` on the same GPU
#   MANIFEST       the commit, each file's size and SHA-256
# No CUDA headers and no NVRTC: the GPU machine's CUDA 13 toolkit or its nvidia-cuda-nvrtc and
# nvidia-cuda-runtime Python packages have both (libnvrtc.so.13 alone is 109 MB; the limit is 64 MiB).
#
#   ./scripts/gpu-bundle.sh [DIR]
# then, on the GPU machine, from the folder that holds DIR:   bash DIR/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-gpu-bundle}"
LIMIT_MIB=60

echo "== cargo build --release"
cargo build --release --bin kvscope

rm -rf "$DIR"
mkdir -p "$DIR/lib"
strip -o "$DIR/kvscope" target/release/kvscope
cp scripts/gpu-check.sh "$DIR/gpu-check.sh"
chmod +x "$DIR/kvscope" "$DIR/gpu-check.sh"

# Debian's loader libraries for this machine's architecture (amd64), unpacked; the .debs come from
# Debian's archive through apt (no other network).
DEBS="$(mktemp -d)"
trap 'rm -rf "$DEBS"' EXIT
apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$DEBS/lists")
mkdir -p "$DEBS/lists/partial"
echo "== apt-get download the Vulkan loader and GL dispatch libraries"
apt-get "${apt_opts[@]}" update -qq
(cd "$DEBS" && apt-get "${apt_opts[@]}" download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 2>&1 | grep -v "unsandboxed" || true)
for deb in "$DEBS"/*.deb; do
  dpkg-deb -x "$deb" "$DEBS/root"
done
# Only the shared objects (and their links), flat.
find "$DEBS/root" \( -type f -o -type l \) -name '*.so*' -exec cp -P {} "$DIR/lib/" \;

{
  echo "kvscope GPU bundle"
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src kernels Cargo.toml Cargo.lock build.rs || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(rustc --version)"
  (cd "$DIR" && find . -type f ! -name MANIFEST | sort | while read -r f; do
    printf '%10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-64)" "${f#./}"
  done)
} > "$DIR/MANIFEST"

bytes=$(du -sb "$DIR" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "== $DIR: $mib MiB ($bytes bytes)"
cat "$DIR/MANIFEST"
if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "the bundle is over $LIMIT_MIB MiB" >&2
  exit 1
fi
