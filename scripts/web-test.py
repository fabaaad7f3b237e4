#!/usr/bin/env python3
"""The web bundle in a real browser: Debian's headless chromium, driven through chromedriver's WebDriver
HTTP API (standard library only; Pillow, when importable, judges screenshots).

    scripts/web-test.py --dist web/dist --mode webgl2|webgpu [--native-check FILE] [--shots DIR] [--model-file GGUF]

It serves the bundle on 127.0.0.1, opens it, and asserts:
  - the page loads with no panic and no console error, and the app reports its first frame;
  - a screenshot is not blank;
  - every lesson and step opened by URL (#lesson=ID&step=N) is reported back by the app with its result
    computed, no console error, and a canvas that is not blank;
  - with --model-file (SmolLM2's GGUF): dropped on the page, it is checked and loaded, and lesson 1's
    SmolLM2 step then computes in the page (the time to load it and to compute the step are printed);
  - mode webgpu: the WebGPU compute backend opened, and `check` run in the page lists the same cases as
    native `kvscope check --backend wgpu --json` (--native-check), every one passing against the f64
    reference.
It prints the load time to the first frame and lesson 1's frame time. Any failure exits non-zero.
"""

import argparse
import base64
import functools
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# Chromium with no network beyond 127.0.0.1: these keep it from trying.
QUIET = [
    "--headless=new", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-quic", "--metrics-recording-only",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection",
    "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication",
    "--window-size=1280,800", "--disable-dev-shm-usage",
]
# WebGL2 through SwiftShader (ANGLE), and WebGPU hidden: the lessons compute on the CPU backend.
WEBGL2 = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
          "--disable-features=WebGPU"]
# WebGPU through SwiftShader's Vulkan.
WEBGPU = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--enable-gpu",
          "--enable-features=Vulkan", "--use-vulkan=swiftshader", "--use-angle=swiftshader",
          "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"]


# The native kvscope (the browser test asks it for an exercise's solution).
KVSCOPE = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")),
                       "release", "kvscope")

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


class Driver:
    """A chromedriver session over HTTP."""

    def __init__(self, args, downloads):
        self.port = free_port()
        self.proc = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                self.req("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        self.profile = tempfile.mkdtemp(prefix="kvscope-chromium-")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium",
                                   "args": args + [f"--user-data-dir={self.profile}"],
                                   "prefs": {"download.default_directory": downloads,
                                             "download.prompt_for_download": False}},
            "timeouts": {"script": 600000, "pageLoad": 120000},
        }}}
        self.sid = self.req("POST", "/session", caps)["sessionId"]

    def req(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        r = urllib.request.Request(self.base + path, data=data, method=method,
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=900) as resp:
            out = json.loads(resp.read() or b"{}")
        return out.get("value")

    def s(self, method, path, body=None):
        return self.req(method, f"/session/{self.sid}{path}", body)

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self.s("POST", "/execute/async", {"script": script, "args": list(args)})

    def keys(self, *chords):
        """Press each chord (a list of WebDriver key values, held together, released in reverse)."""
        acts = []
        for c in chords:
            acts += [{"type": "keyDown", "value": k} for k in c] + [{"type": "keyUp", "value": k} for k in reversed(c)]
        self.s("POST", "/actions", {"actions": [{"type": "key", "id": "keyboard", "actions": acts}]})

    def screenshot(self):
        return base64.b64decode(self.s("GET", "/screenshot"))

    def quit(self):
        try:
            self.s("DELETE", "")
        finally:
            self.proc.terminate()


def colours(png):
    """How many colours the screenshot has (a blank canvas has one or two), or None without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        return None
    img = Image.open(io.BytesIO(png)).convert("RGB")
    return len(img.getcolors(maxcolors=1 << 20) or [None] * (1 << 20))


# What the wasm embeds (include_bytes!/include_str!), by path from the repository root.
EMBEDDED = ["assets/models/kvscope-tiny.safetensors", "assets/models/kvscope-draft.safetensors",
            "assets/models/kvscope-tiny.heldout.txt", "assets/fonts/kvscope-sans-sc.otf"]


def gz(b):
    import gzip
    return len(gzip.compress(b, 9))


def sizes(dist, max_mb):
    """Print the bundle's sizes, raw and gzip -9, and fail above max_mb compressed."""
    total_raw = total_gz = 0
    for name in sorted(os.listdir(dist)):
        b = open(os.path.join(dist, name), "rb").read()
        total_raw += len(b)
        total_gz += gz(b)
        print(f"  {name:24} {len(b) / 1e6:8.2f} MB raw {gz(b) / 1e6:8.2f} MB gzip", flush=True)
    print(f"  {'the page in all':24} {total_raw / 1e6:8.2f} MB raw {total_gz / 1e6:8.2f} MB gzip "
          f"(limit {max_mb} MB gzip)", flush=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    data = [open(os.path.join(root, p), "rb").read() for p in EMBEDDED]
    data += [open(os.path.join(root, "lessons", f), "rb").read() for f in sorted(os.listdir(os.path.join(root, "lessons")))]
    raw = sum(len(b) for b in data)
    print(f"  of which embedded data (models, held-out text, CJK font, lesson files): {raw / 1e6:.2f} MB raw, "
          f"{sum(gz(b) for b in data) / 1e6:.2f} MB gzip (each file alone)", flush=True)
    if total_gz > max_mb * 1e6:
        fail(f"the page is {total_gz / 1e6:.2f} MB gzip-compressed, over the {max_mb} MB limit")


def shot(d, tries=10):
    """A screenshot and its colour count. Chromium composites a WebGPU canvas only while frames are being
    presented, so a screenshot taken when the app is idle can come back blank: nudge the pointer (which
    repaints) and take it again, up to `tries` times."""
    for i in range(tries):
        png = d.screenshot()
        n = colours(png)
        if n is None or n >= 8:
            return png, n
        d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                              "actions": [{"type": "pointerMove", "duration": 50, "origin": "viewport",
                                                           "x": 640 + 7 * i, "y": 400 + 5 * i}]}]})
        time.sleep(0.2)
    return png, n


def state(d):
    return d.js("return window.__kvscope;") or {}


def errors(d):
    """The page's console errors, and what chromium itself reports about rendering (a WGSL shader it
    rejects, an invalid pipeline: these never reach the page's console.error)."""
    errs = d.js("return window.__kvscope_errors;") or []
    for e in d.s("POST", "/se/log", {"type": "browser"}) or []:
        if "No available adapters." in e.get("message", ""):
            continue  # the WebGL2 run hides WebGPU on purpose: requestAdapter finds none, and says so
        if e.get("source") == "rendering" or (e.get("level") == "SEVERE" and "favicon" not in e.get("message", "")):
            errs.append(f"chromium {e.get('level')} ({e.get('source')}): {e.get('message', '')[:600]}")
    return errs


def wait_for(d, what, cond, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        st = state(d)
        errs = errors(d)
        if errs:
            fail(f"console errors while waiting for {what}: {errs}")
        if cond(st):
            return st
        time.sleep(0.05)
    fail(f"timed out after {timeout} s waiting for {what}; state: {state(d)}")


LOG = []


def fail(msg):
    for line in LOG:
        print(f"  console: {line}", flush=True)
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def wait_file(folder, suffix, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        done = [f for f in os.listdir(folder) if f.endswith(suffix)]
        if done:
            time.sleep(0.5)
            return os.path.join(folder, done[0])
        time.sleep(0.1)
    fail(f"no {suffix} download arrived in {timeout} s (files: {os.listdir(folder)})")


def exports_and_drops(d, downloads, mode):
    """Ctrl+E downloads the step's arrays as a zip, Ctrl+S the frame as a PNG; lesson files dropped on the
    page replace the lessons, and a broken one is reported with its file, line and column."""
    import zipfile
    ctrl = "\ue009"
    d.js("location.hash = arguments[0];", "lesson=paged-cache&step=5&block_size=4")
    wait_for(d, "paged-cache step 5", lambda s: s.get("lesson") == "paged-cache" and s.get("step") == 5
             and s.get("hasOutput") and not s.get("computing"))
    d.keys([ctrl, "e"])
    z = zipfile.ZipFile(wait_file(downloads, ".zip"))
    if z.testzip() is not None or "manifest.json" not in z.namelist():
        fail(f"the export zip is broken: {z.namelist()}")
    manifest = json.loads(z.read("manifest.json"))
    npys = [n for n in z.namelist() if n.endswith(".npy")]
    if not npys or any(not z.read(n).startswith(b"\x93NUMPY") for n in npys):
        fail(f"the export zip's arrays are not .npy files: {npys}")
    if manifest.get("params", {}).get("block_size") != 4:
        fail(f"the export's manifest does not hold the link's block_size=4: {manifest.get('params')}")
    print(f"[{mode}] Ctrl+E downloaded {os.path.basename(z.filename)}: {len(npys)} .npy arrays + manifest.json "
          f"(kind {manifest['kind']}, block_size {manifest['params']['block_size']})", flush=True)
    d.keys([ctrl, "s"])
    png = open(wait_file(downloads, ".png"), "rb").read()
    n = colours(png)
    if not png.startswith(b"\x89PNG") or (n is not None and n < 8):
        fail(f"the Ctrl+S download is not a drawn PNG ({len(png)} bytes, {n} colours)")
    print(f"[{mode}] Ctrl+S downloaded a PNG of the frame ({len(png)} bytes, {n} colours)", flush=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lessons")
    good = open(os.path.join(root, sorted(os.listdir(root))[0])).read()
    drop = ("const [name, text] = arguments; const dt = new DataTransfer();"
            "dt.items.add(new File([text], name, {type: 'application/toml'}));"
            "const c = document.getElementById('kvscope-canvas');"
            "for (const t of ['dragenter', 'dragover', 'drop']) c.dispatchEvent(new DragEvent(t, {dataTransfer: dt, bubbles: true, cancelable: true}));")
    d.js(drop, "mine.toml", good)
    wait_for(d, "the dropped lesson", lambda s: s.get("lessonCount") == 1 and not s.get("loadErrors"))
    print(f"[{mode}] a dropped lesson file replaced the lessons (1 lesson)", flush=True)
    d.js(drop, "broken.toml", good.replace("[[steps]]", "[[steps]\n", 1))
    st = wait_for(d, "the dropped broken file's error", lambda s: "broken.toml:" in (s.get("loadErrors") or ""))
    first = st["loadErrors"].splitlines()[0]
    print(f"[{mode}] a broken dropped file is reported in place of the lessons: {first}", flush=True)


def real_model(d, mode, path, shots):
    """SmolLM2's model file dropped on the page: the page checks and loads it, and the step that runs it
    (lesson 1's last, which says "is not in the web build" without it) then computes."""
    name = os.path.basename(path)
    d.js("location.hash = arguments[0];", "lesson=attention-matrix&step=8")
    st = wait_for(d, "lesson 1 step 8 without the real model", lambda s: s.get("lesson") == "attention-matrix"
                  and s.get("step") == 8 and not s.get("computing") and "is not in the web build" in (s.get("error") or ""))
    t0 = time.time()
    out = d.js_async("const [name, done] = arguments;"
                     "fetch('/__model.gguf').then(r => r.blob()).then(b => {"
                     "  const dt = new DataTransfer(); dt.items.add(new File([b], name));"
                     "  const c = document.getElementById('kvscope-canvas');"
                     "  for (const t of ['dragenter', 'dragover', 'drop'])"
                     "    c.dispatchEvent(new DragEvent(t, {dataTransfer: dt, bubbles: true, cancelable: true}));"
                     "  done('ok ' + b.size); }, e => done('ERR ' + e));", name)
    if not out.startswith("ok"):
        fail(f"could not drop the model file: {out}")
    st = wait_for(d, "the dropped model to load", lambda s: s.get("realModel") is not None, timeout=300)
    if not st["realModel"]:
        fail(f"the page refused the dropped model file: {st.get('realModelError')}")
    t_load = time.time() - t0
    st = wait_for(d, "lesson 1 step 8 on the dropped SmolLM2", lambda s: s.get("lesson") == "attention-matrix"
                  and s.get("step") == 8 and s.get("hasOutput") and not s.get("computing"), timeout=300)
    if st.get("error"):
        fail(f"lesson 1 step 8 failed on the dropped model: {st['error']}")
    print(f"[{mode}] SmolLM2's file ({int(out.split()[1]) / 1e6:.0f} MB) dropped on the page: checked and loaded in "
          f"{st['realModelLoadMs'] / 1e3:.1f} s ({t_load:.1f} s from the drop, reading included); lesson 1 step 8 "
          f"then computed on it in {st['computeMs'] / 1e3:.1f} s (the page's measure)", flush=True)
    if shots:
        png, _ = shot(d)
        open(os.path.join(shots, f"{mode}-real-model.png"), "wb").write(png)


def exercises_in_page(d):
    """Kernel exercises graded in the page (WebGPU): every solution passes, every blank and wrong edit
    fails for a wrong value with a map that marks where (the cases tests/exercises.rs grades natively on
    lavapipe, here on the first hidden seed); an edit that does not compile is reported at its line and
    column; reads far out of range run and fail."""
    t0 = time.time()
    out = d.js_async("const done = arguments[0]; window.kvscope_exercise_cases(1).then(done, e => done('ERR ' + e));")
    if out.startswith("ERR"):
        fail(f"grading the exercises in the page failed: {out}")
    cases = json.loads(out)
    bad = [c for c in cases if c.get("problems") or c.get("error")]
    if bad:
        fail(f"{len(bad)} of {len(cases)} exercise cases are wrong in the page: "
             + "; ".join(f"{c.get('exercise')} {c.get('case')}: {c.get('problems') or c.get('error')}" for c in bad[:6]))
    n = len({c["exercise"] for c in cases})
    wrong = sum(1 for c in cases if not c["should_pass"] and c["case"] != "blank")
    slowest = max(cases, key=lambda c: c["ms"])
    print(f"[webgpu] exercises graded in the page: {n} solutions pass, {n} blanks and {wrong} wrong edits fail "
          f"with maps that mark where ({len(cases)} grades, {time.time() - t0:.0f} s; slowest "
          f"{slowest['exercise']} {slowest['case']} {slowest['ms'] / 1000:.1f} s)", flush=True)

    def grade(xid, source, timeout_ms=60000):
        g = d.js_async("const done = arguments[2]; window.kvscope_exercise_grade(arguments[0], arguments[1], "
                       f"{timeout_ms}).then(done, e => done('ERR ' + e));", xid, source)
        if g.startswith("ERR"):
            fail(f"grading {xid} in the page threw: {g}")
        return json.loads(g)

    show = subprocess.run([KVSCOPE, "exercise", "show", "scaled-scores", "--solution"], capture_output=True, text=True)
    if show.returncode != 0:
        fail(f"kvscope exercise show failed: {show.stderr}")
    sol = show.stdout
    lines = sol.split("\n")
    at = next(i for i, l in enumerate(lines) if "for (var d = 0u; d < hd; d++) {" in l)
    broken = "\n".join(lines[:at] + [lines[at].replace("d < hd;", "d < hd")] + lines[at + 1:])
    g = grade("scaled-scores", broken)
    errs = g.get("compile_errors") or []
    if not errs or errs[0]["line"] != at + 1:
        fail(f"a missing ';' on line {at + 1} is reported at {[(e['line'], e['column']) for e in errs]}")
    g = grade("scaled-scores", sol.replace("k[kj + d]", "k[kj + d + 100000000u]"))
    if g.get("passed") or g.get("compile_errors") or not g.get("checks"):
        fail(f"a read far out of range: passed {g.get('passed')}, errors {g.get('compile_errors')}, error {g.get('error')}")
    print(f"[webgpu] a missing ';' is reported at line {errs[0]['line']}, column {errs[0]['column']} "
          f"({errs[0]['message'][:60]}); reads far out of range run and fail "
          f"({sum(1 for c in g['checks'] if c.get('mismatch_count'))} of {len(g['checks'])} checks wrong)", flush=True)
    return sol


def click(d, at):
    """Click at `at`, the "x,y" centre the page reports (CSS pixels)."""
    x, y = (float(v) for v in at.split(","))
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": [{"type": "pointerMove", "origin": "viewport", "x": int(x), "y": int(y)},
                                                      {"type": "pointerDown", "button": 0},
                                                      {"type": "pointerUp", "button": 0}]}]})


def exercise_tab_in_page(d, shots):
    """The kernel panel's exercise tab, clicked as a student would: the blank graded fails, the solution
    shown and graded passes, and "Run the lesson on my kernel" recomputes lesson 1 on that kernel."""
    t0 = time.time()
    d.js("location.hash = arguments[0];", "lesson=attention-matrix&step=6&backend=wgpu&exercise=scaled-scores")
    st = wait_for(d, "lesson 1's exercise tab", lambda s: s.get("lesson") == "attention-matrix" and s.get("step") == 6
                  and s.get("exerciseRun") and s.get("hasOutput") and not s.get("computing"), 120)
    click(d, st["exerciseRun"])
    st = wait_for(d, "the blank graded in the tab", lambda s: s.get("exerciseGrade") == "fail", 120)
    if shots:
        open(os.path.join(shots, "webgpu-exercise-fail.png"), "wb").write(shot(d)[0])
    click(d, st["exerciseSolution"])
    time.sleep(0.3)
    click(d, state(d)["exerciseRun"])
    st = wait_for(d, "the solution graded in the tab", lambda s: s.get("exerciseGrade") == "pass" and s.get("exerciseMine"), 120)
    if shots:
        open(os.path.join(shots, "webgpu-exercise-pass.png"), "wb").write(shot(d)[0])
    click(d, st["exerciseMine"])
    st = wait_for(d, "lesson 1 on the student's kernel", lambda s: "your kernel" in (s.get("running") or "")
                  and s.get("hasOutput") and not s.get("computing"), 300)
    if st.get("error"):
        fail(f"lesson 1 on the student's kernel: {st['error']}")
    print(f"[webgpu] the exercise tab in the page: the blank graded FAIL, the shown solution PASS, and lesson 1 "
          f"recomputed on it ({st['running']}) ({time.time() - t0:.0f} s)", flush=True)


def endless_in_page(d, sol):
    """A loop that never ends, graded in the page: the grade stops waiting at its timer and says so, and
    the page goes on drawing frames. Run last: the browser's GPU process may still be spinning on it."""
    t0 = time.time()
    endless = sol.replace("for (var d = 0u; d < hd; d++) {", "for (var d = 0u; d < hd; d += 0u) {")
    d.js("window.__kvscope_endless = null; window.kvscope_exercise_grade('scaled-scores', arguments[0], 5000)"
         ".then(g => window.__kvscope_endless = g, e => window.__kvscope_endless = 'ERR ' + e);", endless)
    f0 = state(d).get("frames", 0)
    while time.time() - t0 < 90:
        g = d.js("return window.__kvscope_endless;")
        if g:
            break
        time.sleep(1)
    else:
        fail("the endless kernel's grade never came back (the page's timer did not stop it)")
    if g.startswith("ERR"):
        fail(f"grading the endless kernel threw: {g}")
    g = json.loads(g)
    if g.get("passed") or "did not finish" not in (g.get("error") or ""):
        fail(f"the endless kernel's grade: {g.get('passed')}, {g.get('error')}")
    # Pointer moves repaint the page: frames keep coming while the GPU process may still be busy.
    moves = [{"type": "pointerMove", "duration": 16, "origin": "viewport", "x": 200 + 31 * i, "y": 120 + 17 * i}
             for i in range(10)]
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": moves}]})
    st = wait_for(d, "frames after the endless kernel", lambda s: s.get("frames", 0) > f0 + 2, 60)
    print(f"[webgpu] a loop that never ends: the grade stopped waiting and says '{g['error'][:50]}…' "
          f"({time.time() - t0:.0f} s); the page drew {st.get('frames', 0) - f0} frames since", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", default="web/dist")
    ap.add_argument("--mode", choices=["webgl2", "webgpu"], required=True)
    ap.add_argument("--native-check", help="native `kvscope check --backend wgpu --json` output")
    ap.add_argument("--shots", help="write screenshots here")
    ap.add_argument("--max-gzip-mb", type=float, default=12.0)
    ap.add_argument("--skip-walk", action="store_true", help="skip opening every step (a quicker run)")
    ap.add_argument("--walk-lessons", type=int, default=99, help="open the steps of this many lessons")
    ap.add_argument("--step-times", action="store_true", help="print each step's compute and screenshot seconds")
    ap.add_argument("--model-file", help="SmolLM2's GGUF: drop it on the page and run lesson 1's SmolLM2 step")
    a = ap.parse_args()
    print(f"[{a.mode}] bundle {a.dist}:", flush=True)
    sizes(a.dist, a.max_gzip_mb)

    port = free_port()
    class Handler(Quiet):
        def translate_path(self, path):
            if a.model_file and path.split("?")[0] == "/__model.gguf":
                return os.path.abspath(a.model_file)
            return super().translate_path(path)

    handler = functools.partial(Handler, directory=a.dist)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{port}/index.html"
    if a.shots:
        os.makedirs(a.shots, exist_ok=True)

    downloads = tempfile.mkdtemp(prefix="kvscope-downloads-")
    d = Driver(QUIET + (WEBGPU if a.mode == "webgpu" else WEBGL2), downloads)
    try:
        t0 = time.time()
        d.s("POST", "/url", {"url": url + "#lesson=attention-matrix&step=1"})
        st = wait_for(d, "the first frame", lambda s: s.get("firstFrameMs") is not None, 600)
        LOG.extend(d.js("return window.__kvscope_log;") or [])
        print(f"[{a.mode}] first frame {st['firstFrameMs']:.0f} ms after start() "
              f"({time.time() - t0:.1f} s after navigation, wasm download and compile included); "
              f"renderer {st.get('renderer')}, WebGPU compute {st.get('webgpu')}", flush=True)
        if a.mode == "webgpu" and not st.get("webgpu"):
            fail("the WebGPU compute backend did not open (see the console line 'kvscope: no WebGPU')")
        if a.mode == "webgl2" and st.get("renderer") != "Gl":
            fail(f"expected the WebGL2 renderer, got {st.get('renderer')}")
        st = wait_for(d, "lesson 1's result", lambda s: s.get("hasOutput") and not s.get("computing"))
        png, n = shot(d)
        if n is not None and n < 8:
            fail(f"the first screenshot has {n} colours: blank")
        if a.shots:
            open(os.path.join(a.shots, f"{a.mode}-first.png"), "wb").write(png)
        # Frame time: move the pointer over the heatmap 40 times (each hover repaints), then read eframe's
        # CPU time per frame (the mean of the last 120 frames) and the frames drawn per second of moving.
        f0 = state(d).get("frames", 0)
        moves = [{"type": "pointerMove", "duration": 16, "origin": "viewport",
                  "x": 300 + (i * 37) % 500, "y": 80 + (i * 53) % 250} for i in range(40)]
        t_move = time.time()
        d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse",
                                              "parameters": {"pointerType": "mouse"}, "actions": moves}]})
        t_move = time.time() - t_move
        time.sleep(0.5)
        st = state(d)
        drawn = st.get("frames", 0) - f0
        print(f"[{a.mode}] lesson 1 at the default size (1280x800 window): {st.get('frameCpuMs', float('nan')):.1f} ms "
              f"of CPU per frame (eframe's measure, mean of the last {min(120, int(st.get('frames', 0)))} frames; "
              f"{drawn} frames drawn during {len(moves)} pointer moves, which chromedriver took {t_move:.1f} s to send)",
              flush=True)

        lessons = json.loads(st["lessons"])
        # WebGPU: lessons 1-7 run on the wgpu backend (its kernels in the page); lessons 8-12 stream the
        # trained model through thousands of dispatches, which the browser's replayed readbacks make
        # too slow (each readback reruns the computation's host side: see compute::wgpu::replay), so they
        # run on the CPU here, as under WebGL2.
        wgpu_lessons = 7 if a.mode == "webgpu" else 0
        visited = 0
        needs_real_model = []
        t1 = time.time()
        for n, (lid, steps) in enumerate([] if a.skip_walk else lessons[:a.walk_lessons]):
            backend = "&backend=wgpu" if n < wgpu_lessons else ""
            for step in range(1, steps + 1):
                t_step = time.time()
                d.js("location.hash = arguments[0];", f"lesson={lid}&step={step}{backend}")
                st = wait_for(d, f"{lid} step {step}",
                              lambda s, lid=lid, step=step, want="wgpu" if backend else "cpu": s.get("lesson") == lid
                              and s.get("step") == step and s.get("backend") == want
                              and s.get("hasOutput") and not s.get("computing"),
                              # on wgpu each readback is a GPU round trip, ~0.15 s on SwiftShader here
                              timeout=600 if backend else 300)
                took = time.time() - t_step
                if took > 10:
                    print(f"[{a.mode}]   {lid} step {step} took {took:.0f} s to compute"
                          f"{' on wgpu (' + st.get('lastReplay', '') + ')' if backend else ''}", flush=True)
                if st.get("linkProblems"):
                    fail(f"{lid} step {step}: the link was refused: {st['linkProblems']}")
                if backend and st.get("backend") != "wgpu":
                    fail(f"{lid} step {step}: computed on {st.get('backend')}, not on wgpu")
                if st.get("error") and "is not in the web build" in st["error"]:
                    # A step on SmolLM2-135M: the page carries the tiny model only, and says so.
                    needs_real_model.append(f"{lid} step {step}")
                elif st.get("error"):
                    fail(f"{lid} step {step}: the lesson's computation failed: {st['error']}")
                t_shot = time.time()
                png, n = shot(d)
                if n is not None and n < 8:
                    fail(f"{lid} step {step}: the screenshot has {n} colours: blank")
                if a.step_times:
                    print(f"[{a.mode}]   {lid} step {step}: {took:.2f} s to compute, {time.time() - t_shot:.2f} s to "
                          f"screenshot", flush=True)
                if a.shots and step in (1, steps):
                    open(os.path.join(a.shots, f"{a.mode}-{lid}-{step}.png"), "wb").write(png)
                visited += 1
        print(f"[{a.mode}] {visited} steps of {len(lessons)} lessons opened by URL, each reported back, "
              f"computed ({f'lessons 1-{wgpu_lessons} on wgpu, the rest' if wgpu_lessons else 'all'} on the CPU "
              f"backend), no console error, "
              f"not blank ({time.time() - t1:.0f} s); the most WebGPU readbacks one computation took: "
              f"{state(d).get('mostReadbacks')}", flush=True)
        # Class mode from a link: lesson 5's recompute step opens veiled; the lesson's own answer typed
        # into the question's box (clicked where the app reports it) grades right and reveals the step.
        t_q = time.time()
        d.js("location.hash = arguments[0];", "lesson=paged-cache&step=8&quiz=1")
        st = wait_for(d, "lesson 5 step 8 veiled by class mode",
                      lambda s: s.get("lesson") == "paged-cache" and s.get("step") == 8 and s.get("hasOutput")
                      and not s.get("computing") and s.get("veiled") and s.get("answerBox")
                      and s.get("questionAnswer"))
        x, y = (float(v) for v in st["answerBox"].split(","))
        d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                              "actions": [{"type": "pointerMove", "origin": "viewport",
                                                           "x": int(x), "y": int(y)},
                                                          {"type": "pointerDown", "button": 0},
                                                          {"type": "pointerUp", "button": 0}]}]})
        time.sleep(0.3)
        d.keys(*[[c] for c in st["questionAnswer"]], ["\ue007"])
        st = wait_for(d, "the typed answer graded right", lambda s: s.get("graded") == "right" and not s.get("veiled"), 60)
        print(f"[{a.mode}] class mode: lesson 5 step 8 opened veiled by &quiz=1; typing the lesson's answer "
              f"({st.get('questionAnswer')}) graded it right and revealed the step ({time.time() - t_q:.1f} s)", flush=True)
        if needs_real_model:
            print(f"[{a.mode}] {len(needs_real_model)} steps need SmolLM2-135M, which the page does not carry, and "
                  f"say so instead of computing: {', '.join(needs_real_model)}", flush=True)

        if a.mode == "webgpu":
            # A lesson that needs too many readbacks for the browser says so instead of stalling.
            t3 = time.time()
            d.js("location.hash = arguments[0];", "lesson=streaming&step=1&backend=wgpu")
            st = wait_for(d, "lesson 8 on wgpu to give up", lambda s: s.get("lesson") == "streaming"
                          and "WebGPU readbacks" in (s.get("error") or ""), timeout=600)
            print(f"[webgpu] lesson 8 on wgpu stops with its reason ({time.time() - t3:.0f} s): {st['error'][:90]}…",
                  flush=True)
            t2 = time.time()
            out = d.js_async("const done = arguments[0]; window.kvscope_check(0n).then(done, e => done('ERR ' + e));")
            if out.startswith("ERR"):
                fail(f"check in the page failed: {out}")
            web = json.loads(out)[0]
            if not web.get("available"):
                fail(f"the page's wgpu backend is unavailable: {web.get('reason')}")
            labels = [r["label"] for r in web["reports"]]
            bad = [r for r in web["reports"] if r.get("error") or r.get("mismatch_count") or r.get("nan_count")]
            print(f"[webgpu] check in the page on {web['device']}: {len(labels)} checks, {web['failed']} failed "
                  f"({time.time() - t2:.0f} s)", flush=True)
            if web["failed"]:
                fail(f"{web['failed']} checks failed in the page: {[r['label'] for r in bad][:10]}")
            if a.native_check:
                native = json.load(open(a.native_check))
                native = [b for b in native if b["backend"] == "wgpu"][0]
                nl = [r["label"] for r in native["reports"]]
                if nl != labels:
                    missing = sorted(set(nl) - set(labels))
                    extra = sorted(set(labels) - set(nl))
                    fail(f"the page's checks differ from native: missing {missing[:10]}, extra {extra[:10]}")
                print(f"[webgpu] the same {len(nl)} cases as native `kvscope check --backend wgpu --json` "
                      f"({native['device']})", flush=True)
            solution = exercises_in_page(d)
            exercise_tab_in_page(d, a.shots)
        if a.model_file:
            real_model(d, a.mode, a.model_file, a.shots)
        exports_and_drops(d, downloads, a.mode)
        errs = errors(d)
        if errs:
            fail(f"console errors: {errs}")
        if a.mode == "webgpu":
            endless_in_page(d, solution)
        print(f"[{a.mode}] PASS", flush=True)
    finally:
        d.quit()
        server.shutdown()


if __name__ == "__main__":
    main()
