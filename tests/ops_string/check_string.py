"""String tensors through alma against ONNX Runtime (src/core/str.c, src/ops/strings.c).

usage: check_string.py ALMA WORKDIR   (python with onnx, numpy and onnxruntime)

1. text_mix, tfidf_gemm and cast_roundtrip (make_models.py): string ops mixed with data movement
   (Gather, Reshape, Transpose, Slice, Expand, Where, Concat) and numeric ops (MatMul, Gemm), through
   `alma run` under every conversion this build has; every output against ONNX Runtime (string
   outputs, written as |S .npy, byte for byte). Two scikit-learn pipelines with string features
   (OrdinalEncoder and OneHotEncoder before LogisticRegression) fed numpy unicode and bytes .npy.
2. `alma bench` on cast_roundtrip with several conversions and --save-converted: every row ok, its
   output check (string outputs compared exactly against EAGER) passed, and the saved FOLD graph
   (string initializers folded by FOLD) runs in ONNX Runtime with the same outputs.
   `alma bench` fed string samples (a unicode or bytes .npy file, a directory of .npy batches) into a
   scikit-learn pipeline on every conversion, each row's output check against EAGER passed.
3. Refusals naming what is wrong: a string graph input in `alma bench` without --data or with
   numeric data, a string into an op that takes numbers (Add), a ScatterElements reduction over strings.
Exit 0 when everything passes, 1 otherwise; 77 (skip) without the python modules."""
import os
import subprocess
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, HERE)
from alma_cli import alma_run, available, bench_rows  # noqa: E402
import make_models  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = []
CONVS = available(ALMA, ("EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER", "DNNL", "FOLD+FUSE+DNNL", "BLAS", "XNNPACK"))


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def same(got, want, what, tol=1e-5):
    if want.dtype == object:  # ORT's strings against alma's |S bytes
        if got.dtype.kind != "S":
            fail(f"{what}: alma wrote {got.dtype}, expected strings")
            return
        g = [b.decode("utf-8") for b in got.reshape(-1)]
        w = [str(s) for s in want.reshape(-1)]
        if got.shape != want.shape or g != w:
            fail(f"{what}: {list(got.shape)} {g[:8]}, ONNX Runtime {list(want.shape)} {w[:8]}")
        return
    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{what}: {got.dtype}{list(got.shape)}, ONNX Runtime {want.dtype}{list(want.shape)}")
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    ok = np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True).all()
    if not ok:
        fail(f"{what}: {got.reshape(-1)[:8]} against ONNX Runtime {want.reshape(-1)[:8]}")


CASES = [
    ("text_mix", make_models.text_mix, {"idx": np.array([0, 2, 4, 3], np.int64), "F": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}),
    ("text_mix_none", make_models.text_mix, {"idx": np.array([0, 3, 3, 0], np.int64), "F": np.ones((2, 3), np.float32)}),
    ("tfidf_gemm", make_models.tfidf_gemm, {"X": np.array([[2, 3, 5, 4, 5, 6], [6, 3, 5, 6, 2, 0]], np.int64)}),
    ("cast_roundtrip", make_models.cast_roundtrip,
     {"X": np.array([0.1, 1, -2.5, 1e10, np.inf, np.nan, 1 / 3, -0.0], np.float32), "K": np.array([1, 2, 3, 4, -5], np.int64)}),
]

# 1. alma run against ORT, every conversion
for name, build, feeds in CASES:
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(build(), path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ref = sess.run(None, feeds)
    for conv in CONVS:
        out = os.path.join(WORK, f"{name}_{conv.replace('+', '_')}")
        r = alma_run(ALMA, path, conv, feeds, out, check=False)
        if r.returncode:
            fail(f"{name} alma run {conv}: {r.stderr.strip()[-400:]}")
            continue
        for nm, want in zip(names, ref):
            same(np.load(os.path.join(out, nm + ".npy")), want, f"{name} {conv} {nm}")
    print(f"ok   {name}: run on {len(CONVS)} conversions")

# 1b. scikit-learn pipelines with string features (models/, make_skl_models.py), fed string .npy
# files (numpy unicode, as scikit-learn users hold them, and bytes)
Xs = np.array([["red", "s"], ["über", "l"], ["blue", "m"], ["purple", "xl"], ["green", "l"]])
for name in ("skl_ordinal", "skl_onehot"):
    path = os.path.join(HERE, "models", name + ".onnx")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {"X": Xs[:4] if name == "skl_ordinal" else Xs}  # OrdinalEncoder has no unknown category
    ref = sess.run(None, feeds)
    for conv in CONVS:
        for kind, arr in (("U", feeds["X"]), ("S", np.char.encode(feeds["X"], "utf-8"))):
            out = os.path.join(WORK, f"{name}_{kind}_{conv.replace('+', '_')}")
            r = alma_run(ALMA, path, conv, {"X": arr}, out, check=False)
            if r.returncode:
                fail(f"{name} ({kind} input) alma run {conv}: {r.stderr.strip()[-400:]}")
                continue
            for o, want in zip(sess.get_outputs(), ref):
                same(np.load(os.path.join(out, o.name + ".npy")), want, f"{name} {kind} {conv} {o.name}")
    print(f"ok   {name}: run on {len(CONVS)} conversions")

# 2. alma bench with string outputs, and the saved FOLD graph in ORT
cast = os.path.join(WORK, "cast_roundtrip.onnx")
js, saved = os.path.join(WORK, "bench.json"), os.path.join(WORK, "saved")
r = subprocess.run([ALMA, "bench", cast, "-c", ",".join(CONVS), "--min-time", "0.05", "-n", "5", "--json", js,
                    "--save-converted", saved], capture_output=True, text=True, timeout=300)
if r.returncode:
    fail(f"alma bench: exit {r.returncode}: {r.stderr.strip()[-400:]}")
else:
    rows, problems = bench_rows(js)
    for p in problems:
        fail(f"bench {p}")
    print(f"ok   bench ({len(rows)} rows)")
# a model with string initializers through FOLD and back out through save.c
tm = os.path.join(WORK, "text_mix.onnx")
saved = os.path.join(WORK, "saved_text")
r = subprocess.run([ALMA, "bench", tm, "-c", "FOLD+EAGER", "-n", "1", "--min-time", "0", "--save-converted", saved],
                   capture_output=True, text=True, timeout=120)
sv = os.path.join(saved, "FOLD+EAGER.onnx")
if not os.path.exists(sv):
    fail(f"--save-converted wrote no {sv}: {r.stderr.strip()[-300:]}")
else:
    feeds = CASES[0][2]
    want = ort.InferenceSession(tm, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(sv, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        if w.dtype == object:
            if g.tolist() != w.tolist():
                fail(f"saved FOLD graph output {i}: {g.tolist()} != {w.tolist()}")
        elif not np.allclose(g, w, equal_nan=True):
            fail(f"saved FOLD graph output {i} differs")
    print("ok   saved FOLD graph runs in ONNX Runtime")


# 2b. alma bench fed string samples: a .npy file (unicode and bytes; batch 2 of 5 samples, so batches
# wrap around the file) and a directory of .npy batches, on every conversion, each checked against EAGER
onehot = os.path.join(HERE, "models", "skl_onehot.onnx")
bdir = os.path.join(WORK, "string_batches")
os.makedirs(bdir, exist_ok=True)
for k in range(2):
    np.save(os.path.join(bdir, f"b{k}.npy"), Xs[2 * k:2 * k + 3])
for what, data in (("unicode", Xs), ("bytes", np.char.encode(Xs, "utf-8")), ("dir", None)):
    if data is not None:
        dpath = os.path.join(WORK, f"strings_{what}.npy")
        np.save(dpath, data)
    else:
        dpath = bdir
    js = os.path.join(WORK, f"bench_{what}.json")
    r = subprocess.run([ALMA, "bench", onehot, "-c", ",".join(CONVS), "--data", dpath, "-b", "2", "--min-time", "0.05",
                        "-n", "6", "--json", js], capture_output=True, text=True, timeout=300)
    if r.returncode:
        fail(f"bench with {what} string data: exit {r.returncode}: {r.stderr.strip()[-400:]}")
        continue
    rows, problems = bench_rows(js)
    for p in problems:
        fail(f"bench {what} {p}")
    print(f"ok   bench with {what} string data ({len(rows)} rows)")

# 3. refusals
def model(nodes, ins, outs, inits=(), opset=21):
    m = h.make_model(h.make_graph(nodes, "g", ins, outs, list(inits)), opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 10
    return m


sin = os.path.join(WORK, "string_input.onnx")
onnx.save(model([h.make_node("StringConcat", ["s", "s"], ["y"])], [h.make_tensor_value_info("s", TP.STRING, [3])],
                [h.make_tensor_value_info("y", TP.STRING, [3])]), sin)
r = subprocess.run([ALMA, "bench", sin, "-c", "EAGER"], capture_output=True, text=True, timeout=120)
if r.returncode == 0 or "input 's' is a string tensor" not in r.stderr or "--data" not in r.stderr:
    fail(f"bench with a string input and random data: exit {r.returncode}, stderr {r.stderr.strip()[-300:]}")
else:
    print("ok   bench refuses random data for a string input, pointing to --data")
fnpy = os.path.join(WORK, "floats.npy")
np.save(fnpy, np.zeros(3, np.float32))
r = subprocess.run([ALMA, "bench", sin, "-c", "EAGER", "--data", fnpy], capture_output=True, text=True, timeout=120)
if r.returncode == 0 or "is float32, but input 's' is a string tensor" not in r.stderr:
    fail(f"bench with float data for a string input: exit {r.returncode}, stderr {r.stderr.strip()[-300:]}")
else:
    print("ok   bench refuses numeric data for a string input")

strs = nh.from_array(np.array(["a", "b"], dtype=object), "t")
bad = {
    "add": (model([h.make_node("Add", ["t", "t"], ["y"], name="adder")], [], [h.make_tensor_value_info("y", TP.STRING, None)], [strs]),
            "adder"),
    "scatter": (model([h.make_node("ScatterElements", ["t", "i", "t"], ["y"], name="sc", reduction="add")], [],
                      [h.make_tensor_value_info("y", TP.STRING, None)], [strs, nh.from_array(np.array([1, 0], np.int64), "i")]),
                "reduction over string"),
}
for what, (m, needle) in bad.items():
    p = os.path.join(WORK, f"bad_{what}.onnx")
    onnx.save(m, p)
    r = subprocess.run([ALMA, "run", p, "-c", "EAGER"], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or needle not in r.stderr:
        fail(f"{what} on strings: exit {r.returncode}, stderr {r.stderr.strip()[-300:]}")
    else:
        print(f"ok   {what} on strings refused: {r.stderr.strip().splitlines()[-1][:160]}")

print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
