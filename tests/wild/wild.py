#!/usr/bin/python3
"""Real models shipped inside PyPI wheels, through every alma conversion, against ONNX Runtime.

models.json (beside this file) names each model: the wheel (name==version), the .onnx file's path
inside it, its sha256, the task, the exporter and a recipe for realistic inputs (text rendered into
an image, a speech-like signal streamed through a VAD's state, the mel windows another model of the
set computes, a file's bytes, a tokenized sentence, table rows).

    wild.py fetch CACHE [--models a,b]
        downloads the wheels (`pip download --no-deps`, pinned), extracts the models into
        CACHE/<name>/, checks their sha256, writes the inputs (CACHE/<name>/in/<input>.npy) and
        ONNX Runtime's outputs on them (CACHE/<name>/ref.npz, ref.json for sequences of maps).
        Needs numpy, onnxruntime and Pillow; exits 77 when a wheel cannot be downloaded (offline).
        Wheels already in CACHE/wheels are not downloaded again.
    wild.py compare CACHE --alma ALMA [--models a,b] [--conversions LIST] [--bench] [--json FILE]
        runs `alma run` under each conversion (default: every one `alma list` says is available,
        without the int8 passes) and prints, per model and conversion, the worst cosine and largest
        difference (over the largest reference value) over the float outputs and the status; with
        --bench, `alma bench` p50 of each conversion that matched and ONNX Runtime's p50 on the same
        inputs (2 threads, batch as given; --bench-conversions to time fewer). --repeat K times each
        model K rounds, alma's bench run and ONNX Runtime alternating, and reports the median of
        each one's K p50s (the machine's drift then hits both alike). Exits 1 when some conversion is
        wrong or fails without saying it is unavailable (OpenVINO's own errors and differences
        are listed apart and not counted), 77 when none fails but some model is not fetched.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SR = 16000


def manifest():
    with open(os.path.join(HERE, "models.json"), encoding="utf-8") as f:
        return json.load(f)["models"]


# ---------------------------------------------------------------------------------------------
# wheels


def wheel_file(cache, spec):
    """The downloaded wheel of spec 'name==version' (pip normalises '-' in the name to '_')."""
    name, ver = spec.split("==")
    pat = os.path.join(cache, "wheels", re.sub(r"[-_.]+", "_", name) + "-" + ver + "-*.whl")
    hits = sorted(glob.glob(pat))
    return hits[0] if hits else None


def download(cache, spec):
    if wheel_file(cache, spec):
        return wheel_file(cache, spec)
    os.makedirs(os.path.join(cache, "wheels"), exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "--disable-pip-version-check", "--retries", "1", "--timeout", "30",
                        "-d", os.path.join(cache, "wheels"), spec], capture_output=True, text=True)
    if r.returncode or not wheel_file(cache, spec):
        print(f"cannot download {spec}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return wheel_file(cache, spec)


def read_member(whl, path):
    with zipfile.ZipFile(whl) as z:
        return z.read(path)


# ---------------------------------------------------------------------------------------------
# input recipes: each returns {input name: array}


def font(size):
    from PIL import ImageFont
    for f in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"):
        if os.path.exists(f):
            return ImageFont.truetype(f, size)
    return ImageFont.load_default()


def render(kind, h, w, rng, ctx):
    """An RGB uint8 picture of the kind a model of the set is fed: a page of text, one text line, a
    noisy captcha, characters scattered over a background, or the logo shipped in ddddocr's wheel."""
    import numpy as np
    from PIL import Image, ImageDraw
    words = "alma runs every conversion of an ONNX model and checks it against the reference 2026".split()
    if kind == "logo":
        logo = Image.open(__import__("io").BytesIO(ctx["logo"]())).convert("RGB")
        img = Image.new("RGB", (w, h), (200, 190, 170))
        logo.thumbnail((w * 3 // 4, h * 3 // 4))
        img.paste(logo, ((w - logo.width) // 2, (h - logo.height) // 2))
        return np.asarray(img)
    img = Image.new("RGB", (w, h), (250, 250, 245) if kind in ("page", "line") else (235, 225, 200))
    d = ImageDraw.Draw(img)
    if kind == "page":
        y, fs = h // 16, max(10, h // 18)
        f = font(fs)
        while y + fs < h - h // 16:
            n = int(rng.integers(3, 7))
            d.text((w // 12, y), " ".join(rng.choice(words, n)), fill=(20, 20, 30), font=f)
            y += int(fs * 1.6)
    elif kind == "line":
        d.text((4, h // 8), "ONNX Runtime 1.32 vs alma", fill=(10, 10, 10), font=font(int(h * 0.6)))
    elif kind == "captcha":
        for _ in range(6):
            d.line([tuple(rng.integers(0, [w, h])), tuple(rng.integers(0, [w, h]))],
                   fill=tuple(int(c) for c in rng.integers(60, 200, 3)), width=2)
        x = w // 10
        for ch in "x7Kp2":
            d.text((x, int(rng.integers(0, h // 5))), ch, fill=tuple(int(c) for c in rng.integers(0, 90, 3)),
                   font=font(int(h * 0.7)))
            x += int(w * 0.16)
    elif kind == "scatter":
        for _ in range(6):
            x, y = rng.integers(0, [w - h // 6, h - h // 6])
            d.text((int(x), int(y)), str(rng.choice(list("天地人和山水ABCDEF"))),
                   fill=tuple(int(c) for c in rng.integers(0, 120, 3)), font=font(h // 8))
    a = np.asarray(img).astype(np.float32)
    a += rng.normal(0, 4, a.shape)  # sensor noise, so no input is flat
    return np.clip(a, 0, 255).astype(np.uint8)


def r_image(spec, rng, ctx):
    import numpy as np
    h, w = spec["size"]
    pics = []
    for _ in range(spec.get("batch", 1)):
        a = render(spec["text"], h, w, rng, ctx).astype(np.float32)
        if spec.get("gray"):
            a = (a @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
        if spec.get("bgr"):
            a = a[..., ::-1]
        a = a * spec.get("scale", 1.0)
        c = a.shape[-1]
        a = (a - np.array(spec.get("mean", [0] * c), np.float32)) / np.array(spec.get("std", [1] * c), np.float32)
        pics.append(a.transpose(2, 0, 1))
    return {spec["names"][0]: np.stack(pics).astype(np.float32)}


def speech(seconds, rng):
    """Speech-like 16 kHz audio: voiced syllables (a 100-220 Hz pitch with its harmonics under two
    moving formants, a syllable envelope), with pauses of faint noise between words."""
    import numpy as np
    n = int(seconds * SR)
    t = np.arange(n) / SR
    out = rng.normal(0, 0.003, n)
    pos = int(0.15 * SR)
    while pos < n:
        dur = int(rng.uniform(0.12, 0.3) * SR)
        seg = np.arange(min(dur, n - pos))
        f0 = rng.uniform(100, 220) * (1 + 0.1 * np.sin(2 * np.pi * 3 * seg / SR))
        phase = 2 * np.pi * np.cumsum(f0) / SR
        f1, f2 = rng.uniform(300, 900), rng.uniform(1000, 2500)
        s = sum(np.sin(k * phase) * (np.exp(-((k * f0 - f1) / 200) ** 2) + 0.5 * np.exp(-((k * f0 - f2) / 300) ** 2))
                for k in range(1, 30))
        env = np.sin(np.pi * seg / len(seg)) ** 0.7
        out[pos:pos + len(seg)] += 0.3 * s * env
        pos += len(seg) + int(rng.uniform(0.02, 0.08 if rng.random() < 0.7 else 0.4) * SR)
    del t
    return np.clip(out, -1, 1).astype(np.float32)


def r_audio(spec, rng, ctx):
    return {spec["names"][0]: speech(spec["seconds"], rng)[None]}


def r_vad_stream(spec, rng, ctx):
    """One step of a streaming VAD as its users run it: the chunk after `steps` chunks of speech
    streamed through ONNX Runtime, with the state those left (and the sample-rate scalar)."""
    import numpy as np
    sess = ctx["session"]()
    names = [i.name for i in sess.get_inputs()]
    chunk, context, steps = spec["chunk"], spec["context"], spec["steps"]
    audio = speech((steps + 1) * chunk / SR + 0.01, rng)
    state = {k: np.zeros(spec["state_shape"], np.float32) for k in spec["state"]}
    prev = np.zeros(context, np.float32)
    feeds = None
    for i in range(steps + 1):
        x = audio[i * chunk:(i + 1) * chunk]
        feeds = {"input": np.concatenate([prev, x])[None].astype(np.float32), **state}
        if "sr" in names:
            feeds["sr"] = np.array(SR, np.int64)
        if i == steps:
            break
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        state = {k: outs[v] for k, v in spec["state"].items()}
        prev = x[len(x) - context:] if context else prev
    return feeds


def r_vad_frames(spec, rng, ctx):
    """A whole utterance as [frames, context + chunk] windows, each with the samples before it."""
    import numpy as np
    chunk, context, n = spec["chunk"], spec["context"], spec["frames"]
    audio = np.concatenate([np.zeros(context, np.float32), speech(n * chunk / SR + 0.01, rng)])
    x = np.stack([audio[i * chunk:i * chunk + context + chunk] for i in range(n)]).astype(np.float32)
    out = {spec["names"][0]: x}
    out.update({k: np.zeros(s, np.float32) for k, s in spec.get("zeros", {}).items()})
    return out


def oww_mel(rng, ctx, seconds):
    """openWakeWord's features: its melspectrogram model (run by ONNX Runtime) on speech, scaled
    as openwakeword.utils does (x / 10 + 2)."""
    import numpy as np
    sess = ctx["session_of"]("oww_melspectrogram")
    spec = sess.run(None, {"input": speech(seconds, rng)[None]})[0]
    return (np.squeeze(spec) / 10 + 2).astype(np.float32)


def r_oww_mel_windows(spec, rng, ctx):
    import numpy as np
    n = spec["windows"]
    mel = oww_mel(rng, ctx, (76 + 8 * n) * 160 / SR + 0.1)
    return {spec["names"][0]: np.stack([mel[8 * i:8 * i + 76] for i in range(n)])[..., None].astype(np.float32)}


def r_oww_embeddings(spec, rng, ctx):
    """[1, frames, 96]: openWakeWord's embedding model (ONNX Runtime) on consecutive mel windows."""
    import numpy as np
    n = spec["frames"]
    mel = oww_mel(rng, ctx, (76 + 8 * n) * 160 / SR + 0.1)
    win = np.stack([mel[8 * i:8 * i + 76] for i in range(n)])[..., None].astype(np.float32)
    emb = ctx["session_of"]("oww_embedding").run(None, {"input_1": win})[0]
    return {spec["names"][0]: emb.reshape(1, n, 96).astype(np.float32)}


def r_magika_bytes(spec, rng, ctx):
    """Magika's features of real files (those in its wheel): the first `beg` bytes of the first
    `block` after leading whitespace, the last `end` of the last `block` before trailing
    whitespace, padded with `pad` (magika.Magika._extract_features_from_seekable)."""
    import numpy as np
    rows = []
    for p in spec["files"]:
        data = ctx["member"](p)
        b = data[:spec["block"]].lstrip() if len(data) > spec["block"] else data.strip()
        e = data[-spec["block"]:].rstrip() if len(data) > spec["block"] else data.strip()
        beg = list(b[:spec["beg"]]) + [spec["pad"]] * max(0, spec["beg"] - len(b))
        end = [spec["pad"]] * max(0, spec["end"] - len(e)) + list(e[-spec["end"]:])
        rows.append(beg + end)
    return {spec["names"][0]: np.array(rows, np.int32)}


def r_chars(spec, rng, ctx):
    """A sentence as character ids: from a vocabulary file in the wheel or an alphabet listed in
    the manifest (ids offset + position); optionally a boolean mask input of ones."""
    import numpy as np
    if "vocab" in spec:
        vocab = json.loads(ctx["member"](spec["vocab"]))[spec["key"]]
    else:
        vocab = {c: spec["offset"] + i for i, c in enumerate(spec["alphabet"])}
    ids = np.array([[vocab.get(c, spec["unk"]) for c in spec["text"]]], np.int64)
    out = {spec["names"][0]: ids}
    if spec.get("mask"):
        out[spec["mask"]] = np.ones(ids.shape, bool)
    return out


def r_rows(spec, rng, ctx):
    import numpy as np
    return {spec["names"][0]: np.array(spec["rows"], np.float32)}


RECIPES = {"image": r_image, "audio": r_audio, "vad_stream": r_vad_stream, "vad_frames": r_vad_frames,
           "oww_mel_windows": r_oww_mel_windows, "oww_embeddings": r_oww_embeddings,
           "magika_bytes": r_magika_bytes, "chars": r_chars, "rows": r_rows}


# ---------------------------------------------------------------------------------------------


def ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def model_path(cache, m):
    return os.path.join(cache, m["name"], os.path.basename(m["path"]))


def fetch(cache, names):
    import numpy as np
    models = manifest()
    byname = {m["name"]: m for m in models}
    sessions = {}

    def session_of(n):
        if n not in sessions:
            sessions[n] = ort_session(model_path(cache, byname[n]))
        return sessions[n]

    missing = 0
    for m in models:
        if names and m["name"] not in names:
            continue
        whl = download(cache, m["wheel"])
        if not whl:
            missing += 1
            continue
        d = os.path.join(cache, m["name"])
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        for p in [m["path"]] + m.get("data", []):
            with open(os.path.join(d, os.path.basename(p)), "wb") as f:
                f.write(read_member(whl, p))
        with open(model_path(cache, m), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != m["sha256"]:
            print(f"{m['name']}: sha256 {digest} is not the manifest's {m['sha256']}", file=sys.stderr)
            return 1
        # inputs that chain through other models of the set need those fetched first
        for dep in {"oww_mel_windows": ["oww_melspectrogram"],
                    "oww_embeddings": ["oww_melspectrogram", "oww_embedding"]}.get(m["inputs"][0]["recipe"], []):
            if not os.path.exists(model_path(cache, byname[dep])):
                fetch(cache, [dep])
        rng = np.random.default_rng(int(hashlib.sha256(m["name"].encode()).hexdigest()[:8], 16))
        ctx = {"session": lambda: session_of(m["name"]), "session_of": session_of,
               "member": lambda p: read_member(whl, p),
               "logo": lambda: read_member(download(cache, "ddddocr==1.6.1"), "ddddocr/logo.png")}
        feeds = {}
        for spec in m["inputs"]:
            feeds.update(RECIPES[spec["recipe"]](spec, rng, ctx))
        sess = session_of(m["name"])
        want = [i.name for i in sess.get_inputs()]
        if sorted(want) != sorted(feeds):
            print(f"{m['name']}: the recipe gives {sorted(feeds)}, the model takes {want}", file=sys.stderr)
            return 1
        for k, v in feeds.items():
            np.save(os.path.join(d, "in", safe(k) + ".npy"), v)
        outs = sess.run(None, feeds)
        arrays, maps = {}, {}
        for o, v in zip(sess.get_outputs(), outs):
            if isinstance(v, list):  # ZipMap's sequence of maps
                maps[o.name] = [{str(k): float(x) for k, x in e.items()} for e in v]
            else:
                arrays[o.name] = v
        np.savez(os.path.join(d, "ref.npz"), **arrays)
        with open(os.path.join(d, "ref.json"), "w") as f:
            json.dump({"inputs": {k: safe(k) + ".npy" for k in want}, "outputs": [o.name for o in sess.get_outputs()],
                       "maps": maps}, f)
        print(f"fetched {m['name']:22s} {m['wheel']:28s} " +
              " ".join(f"{k}{list(v.shape)}" for k, v in feeds.items()), flush=True)
    return 77 if missing else 0


def safe(name):
    """alma run -o's file name of an output (and ours of an input): [A-Za-z0-9._-], others as _."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)


# ---------------------------------------------------------------------------------------------


def available(alma):
    """Conversions `alma list` marks available here, int8 passes left out (they are checked by
    their own tests against looser bounds)."""
    out = subprocess.run([alma, "list"], capture_output=True, text=True).stdout
    convs = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0].isdigit() and f[2].lower().startswith("yes"):
            if not any(q in f[1] for q in ("INT8", "BF16", "FP16", "NBITS", "QDQ")):
                convs.append(f[1])
    return convs


def compare_outputs(m, ref, od):
    """(worst cosine, largest difference / largest reference value, problem or None)."""
    import numpy as np
    cos_min, err_max = 1.0, 0.0
    for o in ref["outputs"]:
        if o in ref["maps"]:
            fn = os.path.join(od, safe(o) + ".json")
            if not os.path.exists(fn):
                return cos_min, err_max, f"{o}: no output"
            got = json.load(open(fn))
            want = ref["maps"][o]
            if len(got) != len(want) or any(set(g) != set(w) for g, w in zip(got, want)):
                return cos_min, err_max, f"{o}: maps differ"
            a = np.array([[g[k] for k in w] for g, w in zip(got, want)], np.float64)
            r = np.array([[w[k] for k in w] for w in want], np.float64)
        else:
            fn = os.path.join(od, safe(o) + ".npy")
            if not os.path.exists(fn):
                return cos_min, err_max, f"{o}: no output"
            a, r = np.load(fn), ref["arrays"][o]
            if a.shape != r.shape:
                return cos_min, err_max, f"{o}: shape {list(a.shape)} vs {list(r.shape)}"
            if r.dtype.kind not in "fc":
                if not np.array_equal(a, r):
                    return cos_min, err_max, f"{o}: {int((a != r).sum())} of {r.size} values differ"
                continue
            a, r = a.astype(np.float64), r.astype(np.float64)
        if r.size == 0:
            continue
        if not np.isfinite(a).all() and not np.array_equal(np.isfinite(a), np.isfinite(r)):
            return cos_min, err_max, f"{o}: non-finite values"
        fin = np.isfinite(r)
        a, r = a[fin], r[fin]
        err = float(np.abs(a - r).max() / (np.abs(r).max() + 1e-30)) if r.size else 0.0
        na, nr = np.linalg.norm(a), np.linalg.norm(r)
        if nr == 0:  # an all-zero reference (a saturated sigmoid): the difference itself is the error
            cos, err = (1.0, float(np.abs(a).max())) if r.size else (1.0, 0.0)
        else:
            cos = float((a * r).sum() / (na * nr + 1e-30))
        cos_min, err_max = min(cos_min, cos), max(err_max, err)
    if cos_min < m.get("cos", 0.9999) or err_max > m.get("err", 1e-3):
        return cos_min, err_max, "mismatch"
    return cos_min, err_max, None


def ort_p50(path, feeds, n=50, seconds=0.5):
    """ONNX Runtime's p50 (ms) at 2 intra-op threads, as alma bench times: at least n runs and
    `seconds` after one warm-up run."""
    import numpy as np
    sess = ort_session(path)
    sess.run(None, feeds)
    ts, t0 = [], time.perf_counter()
    while len(ts) < n or time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t)
        if len(ts) >= 2000:
            break
    return float(np.median(ts)) * 1e3


def alma_p50s(alma, path, d, ref, convs):
    """alma bench's p50 (ms) of each conversion on the model's own inputs, one ready-made batch, 2
    threads, at least 50 runs and 0.5 s, in one bench run; {conversion: p50} for those that ran."""
    import numpy as np
    bd = os.path.join(d, "bench")
    os.makedirs(bd, exist_ok=True)
    one = len(ref["inputs"]) == 1
    for k, fn in ref["inputs"].items():
        sub = bd if one else os.path.join(bd, "b0")
        os.makedirs(sub, exist_ok=True)
        np.save(os.path.join(sub, k + ".npy"), np.load(os.path.join(d, "in", fn)))
    js = os.path.join(d, "bench.json")
    if os.path.exists(js):
        os.remove(js)
    subprocess.run([alma, "bench", path, "-c", ",".join(convs), "--data", bd, "--threads", "2", "-q", "--keep-going",
                    "-n", "50", "--min-time", "0.5", "--json", js], capture_output=True, text=True)
    out = {}
    try:
        for row in json.load(open(js)).get("results", []):
            if row.get("status") == "ok" and isinstance(row.get("latency_ms"), dict):
                out[row["conversion"]] = float(row["latency_ms"]["p50"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return out


EXTERNAL = ("ORT", "OPENVINO")  # other projects' runtimes: listed, never alma's best
# OpenVINO's own limits (models its ONNX reader refuses, its numerics on a model) are listed apart
# and fail nothing: the same model in OpenVINO's Python API fails alike. ORT's count: ONNX Runtime
# computed the reference, so a difference through alma's ORT runtime is alma's binding.
PEER = ("OPENVINO",)


def compare(cache, alma, names, convs, bench, jsonout, bench_convs=None, repeat=1):
    import numpy as np
    models = [m for m in manifest() if not names or m["name"] in names]
    convs = convs or available(alma)
    rows, bad, missing, peer = [], [], [], []
    for m in models:
        d = os.path.join(cache, m["name"])
        if not os.path.exists(os.path.join(d, "ref.json")):
            print(f"SKIP {m['name']}: not fetched (wild.py fetch {cache})", flush=True)
            missing.append(m["name"])
            continue
        ref = json.load(open(os.path.join(d, "ref.json")))
        ref["arrays"] = dict(np.load(os.path.join(d, "ref.npz")))
        path = model_path(cache, m)
        iargs = []
        for k, fn in ref["inputs"].items():
            iargs += ["-i", f"{k}={os.path.join(d, 'in', fn)}"]
        for c in convs:
            od = os.path.join(d, "out_" + safe(c))
            t = time.time()
            r = subprocess.run([alma, "run", path, *iargs, "-o", od, "-c", c, "-t", "2"], capture_output=True,
                               text=True)
            dt = time.time() - t
            row = {"model": m["name"], "conversion": c, "seconds": round(dt, 2)}
            if r.returncode:
                msg = ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1][:160]
                row["status"] = ("unavailable: " if "unavailable" in msg else "error: ") + msg
                if not row["status"].startswith("unavailable"):
                    (peer if c.split("+")[-1] in PEER else bad).append((m["name"], c, msg))
            else:
                cos, err, prob = compare_outputs(m, ref, od)
                row.update(cos=cos, err=err, status=prob or "ok")
                if prob:
                    (peer if c.split("+")[-1] in PEER else bad).append((m["name"], c, f"{prob} (cos {cos:.6f}, err {err:.2e})"))
            print(f"{m['name']:22s} {c:24s} {row.get('cos', float('nan')):9.6f} {row.get('err', float('nan')):8.1e} "
                  f"{dt:5.1f}s {row['status']}", flush=True)
            rows.append(row)
        if bench:
            ok = [r["conversion"] for r in rows if r["model"] == m["name"] and r["status"] == "ok"
                  and (not bench_convs or r["conversion"] in bench_convs)]
            feeds = {k: np.load(os.path.join(d, "in", fn)) for k, fn in ref["inputs"].items()}
            runs, orts = {}, []
            for _ in range(max(1, repeat)):  # alternate, so drift between minutes hits both alike
                for c, p in (alma_p50s(alma, path, d, ref, ok) if ok else {}).items():
                    runs.setdefault(c, []).append(p)
                orts.append(ort_p50(path, feeds))
            p50 = {c: float(np.median(v)) for c, v in runs.items()}
            for r in rows:
                if r["model"] == m["name"] and r["conversion"] in p50:
                    r["p50_ms"] = p50[r["conversion"]]
                    r["p50s_ms"] = runs[r["conversion"]]
            own = {c: p for c, p in p50.items() if c.split("+")[-1] not in EXTERNAL}
            o = float(np.median(orts))
            rows.append({"model": m["name"], "conversion": "onnxruntime (python)", "status": "ok", "p50_ms": o,
                         "p50s_ms": orts})
            if own:
                best = min(own, key=own.get)
                print(f"{m['name']:22s} best {best} {own[best]:.3f} ms, ONNX Runtime {o:.3f} ms: {own[best] / o:.2f}x  "
                      + " ".join(f"{c}={p:.3f}" for c, p in p50.items()), flush=True)
    if jsonout:
        with open(jsonout, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{len(bad)} failure(s)" + (f", {len(missing)} model(s) not fetched" if missing else ""))
    for b in bad:
        print("  ", *b)
    if peer:
        print(f"{len(peer)} OpenVINO result(s) that are OpenVINO's own (its ONNX reader or its numerics; not counted):")
        for b in peer:
            print("  ", *b)
    return 1 if bad else 77 if missing else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("fetch", "compare", "list"))
    ap.add_argument("cache")
    ap.add_argument("--models", default="")
    ap.add_argument("--alma", default="build/alma")
    ap.add_argument("--conversions", default="")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--bench-conversions", default="", help="time only these (of those that matched)")
    ap.add_argument("--repeat", type=int, default=1, help="with --bench: rounds of alma and ONNX Runtime, alternating")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    if a.step == "list":
        for m in manifest():
            print(m["name"], m["wheel"], m["exporter"], m["task"], sep="\t")
        return 0
    os.makedirs(a.cache, exist_ok=True)
    if a.step == "fetch":
        return fetch(a.cache, names)
    return compare(a.cache, a.alma, names, [c for c in a.conversions.split(",") if c], a.bench, a.json,
                   [c for c in a.bench_conversions.split(",") if c], a.repeat)


if __name__ == "__main__":
    sys.exit(main())
