#!/usr/bin/env bash
# Rebuilds assets/fonts/kvscope-sans-sc.otf: a subset of Noto Sans CJK SC Regular (SIL OFL 1.1) that
# covers printable ASCII, CJK punctuation, the 3755 level-1 hanzi of GB 2312 (the most common
# characters of simplified Chinese) and every character used in lessons/*.toml, so Chinese renders on
# machines without CJK system fonts. Renamed to "Kvscope Sans SC" because it is a modified version
# (OFL §3; the upstream licence reserves the name "Source"). Re-run after adding Chinese text to a lesson;
# tests/fonts.rs fails when a lesson uses a character the subset lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
if [ ! -e "$SRC" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk
fi
TOOLS="$PWD/.cache/fonttools"
[ -d "$TOOLS/fontTools" ] || python3 -m pip install --quiet --disable-pip-version-check --target "$TOOLS" fonttools==4.55.0
export PYTHONPATH="$TOOLS"
python3 - "$SRC" <<'PY'
import sys, glob
from fontTools.ttLib import TTCollection
from fontTools import subset

chars = set(chr(c) for c in range(0x20, 0x7F))
chars |= set("，。、：；？！“”‘’（）《》【】—…·「」『』〈〉￥％＋－×÷≤≥≠∞√∑→←↑↓")
# GB 2312 level 1: rows 16-55 (bytes 0xB0-0xD7), cells 0xA1-0xFE; row 55 ends at 0xF9.
for hi in range(0xB0, 0xD8):
    for lo in range(0xA1, 0xFF):
        try:
            chars.add(bytes([hi, lo]).decode("gb2312"))
        except UnicodeDecodeError:
            pass
for path in sorted(glob.glob("lessons/*.toml")):
    chars |= set(open(path, encoding="utf-8").read())
chars = sorted(c for c in chars if c.isprintable())

font = TTCollection(sys.argv[1]).fonts[2]   # face 2 = Noto Sans CJK SC
assert "Noto Sans CJK SC" in font["name"].getDebugName(4)
opts = subset.Options()
opts.layout_features = ["*"]
opts.name_IDs = ["*"]
opts.notdef_outline = True
s = subset.Subsetter(opts)
s.populate(text="".join(chars))
s.subset(font)
for rec in font["name"].names:
    if rec.nameID in (1, 3, 4, 6, 16, 17):
        new = {1: "Kvscope Sans SC", 3: "kvscope-sans-sc-subset", 4: "Kvscope Sans SC Regular",
               6: "KvscopeSansSC-Regular", 16: "Kvscope Sans SC", 17: "Regular"}[rec.nameID]
        rec.string = new
font.save("assets/fonts/kvscope-sans-sc.otf")
cmap = font.getBestCmap()
covered = [c for c in chars if ord(c) in cmap]
open("assets/fonts/kvscope-sans-sc.chars.txt", "w", encoding="utf-8").write("".join(covered) + "\n")
print(f"{len(covered)} of {len(chars)} characters covered")
PY
ls -l assets/fonts/
