"""scikit-learn classifiers as skl2onnx exports them by default, through alma against ONNX Runtime.

usage: check_ml_skl.py ALMA WORKDIR     (python with onnx, onnxruntime, numpy)

1. models_labels/str_*.onnx (make_sklearn_label_models.py): LogisticRegression, LinearSVC, SVC,
   DecisionTree, RandomForest and GradientBoosting classifiers trained on string class labels,
   binary and multiclass, exported with ZipMap off: `alma run` on every conversion this build has,
   random batches of 1 and 23 rows; the string label output equal to ONNX Runtime's element by
   element, the probabilities within 1e-5.
2. models_labels/zipmap_*.onnx: skl2onnx's default export, the probabilities through ZipMap as a
   sequence of maps (int64 or string keys): alma run writes it as NAME.json (a list of objects,
   docs/cli.md); each row's keys equal ONNX Runtime's (as text), values within 1e-5; labels exact.
3. `alma bench` on two ZipMap models (string and int64 keys) on every conversion: every row ok
   and its output check against EAGER performed and passed (the sequence of maps compared).
4. ZipMap one-node models (classlabels_int64s and classlabels_strings, [N, C] and [C] inputs, an
   empty batch, a constant input that static inference evaluates and FOLD must leave alone) against
   ONNX Runtime; a ZipMap model saved by --save-converted run by ONNX Runtime; refusals naming what stays unsupported: a map graph input, DictVectorizer,
   CastMap, a ZipMap with the wrong label count.
Exit 0 when every check passes, 1 otherwise; 77 (skip) without the python modules."""
import glob
import json
import os
import subprocess
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from alma_cli import alma_run, available, bench_rows  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
CONVS = available(ALMA, ("EAGER", "FOLD+EAGER", "FOLD+FUSE+EAGER", "DNNL", "FOLD+FUSE+DNNL", "BLAS", "XNNPACK"))
TOL = 1e-5
rng = np.random.RandomState(5)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def same_tensor(got, want, what):
    want = np.asarray(want)
    if want.dtype == object or want.dtype.kind == "U":
        g = [b.decode("utf-8") for b in got.reshape(-1)] if got.dtype.kind == "S" else None
        w = [str(s) for s in want.reshape(-1)]
        if got.shape != want.shape or g != w:
            fail(f"{what}: {got.dtype}{list(got.shape)} {got.reshape(-1)[:8]}, ONNX Runtime {list(want.shape)} {w[:8]}")
            return False
        return True
    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{what}: {got.dtype}{list(got.shape)}, ONNX Runtime {want.dtype}{list(want.shape)}")
        return False
    if want.dtype.kind in "iu":
        ok = np.array_equal(got, want)
    else:
        ok = np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=TOL, atol=TOL, equal_nan=True).all()
    if not ok:
        fail(f"{what}: {got.reshape(-1)[:8]} against ONNX Runtime {want.reshape(-1)[:8]}")
    return ok


def same_maps(got, want, what):
    """got: alma's JSON list of objects; want: ONNX Runtime's list of dicts."""
    if not isinstance(got, list) or len(got) != len(want):
        fail(f"{what}: alma wrote {type(got).__name__} of {len(got) if isinstance(got, list) else '?'} maps, "
             f"ONNX Runtime {len(want)}")
        return False
    for i, (g, w) in enumerate(zip(got, want)):
        wk = {str(k): v for k, v in w.items()}
        if sorted(g) != sorted(wk):
            fail(f"{what}: map {i} keys {sorted(g)}, ONNX Runtime {sorted(wk)}")
            return False
        for k, v in wk.items():
            if not np.isclose(g[k], v, rtol=TOL, atol=TOL):
                fail(f"{what}: map {i}[{k!r}] = {g[k]}, ONNX Runtime {v}")
                return False
    return True


def run_case(name, path, feeds, convs=CONVS):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    outs = [o.name for o in onnx.load(path).graph.output]
    ok = True
    for conv in convs:
        d = os.path.join(WORK, name + "_" + conv.replace("+", "_"))
        try:
            alma_run(ALMA, path, conv, feeds, d)
        except RuntimeError as e:
            fail(f"{name} [{conv}]: {e}")
            ok = False
            continue
        for nm, w in zip(outs, want):
            what = f"{name} [{conv}] {nm}"
            if isinstance(w, list):  # a sequence of maps
                jf = os.path.join(d, nm + ".json")
                if not os.path.exists(jf):
                    fail(f"{what}: alma wrote no {nm}.json ({sorted(os.listdir(d))})")
                    ok = False
                    continue
                with open(jf) as f:
                    ok &= same_maps(json.load(f), w, what)
            else:
                ok &= same_tensor(np.load(os.path.join(d, nm + ".npy")), w, what)
    return ok


# 1 and 2: the committed exports on random batches
for path in sorted(glob.glob(os.path.join(HERE, "models_labels", "*.onnx"))):
    m = onnx.load(path)
    name = os.path.splitext(os.path.basename(path))[0]
    inp = m.graph.input[0]
    nfeat = inp.type.tensor_type.shape.dim[1].dim_value
    good = True
    for batch in (1, 23):
        x = (rng.randn(batch, nfeat) * 1.5).astype(np.float32)
        good &= run_case(f"{name}_b{batch}", path, {inp.name: x})
    if good:
        print(f"ok   {name}: batches of 1 and 23 on {len(CONVS)} conversions")

# 3. alma bench on ZipMap models: rows ok, output check (sequence of maps) performed and passed
for name in ("zipmap_logreg3_str", "zipmap_rf3_int"):
    path = os.path.join(HERE, "models_labels", name + ".onnx")
    js = os.path.join(WORK, f"bench_{name}.json")
    r = subprocess.run([ALMA, "bench", path, "-c", ",".join(CONVS), "-b", "7", "--min-time", "0.05", "-n", "5",
                        "--json", js], capture_output=True, text=True, timeout=300)
    if r.returncode:
        fail(f"bench {name}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
        continue
    rows, problems = bench_rows(js)
    for p in problems:
        fail(f"bench {name} {p}")
    if not problems:
        print(f"ok   bench {name} ({len(rows)} rows, output checks passed)")


# 4. one-node ZipMap models and refusals
def zipmap_model(labels, x_shape, elem_key):
    attrs = {"classlabels_strings": labels} if isinstance(labels[0], str) else {"classlabels_int64s": labels}
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", **attrs)
    g = helper.make_graph([node], "zm", [helper.make_tensor_value_info("X", TP.FLOAT, x_shape)],
                          [helper.make_value_info("Z", helper.make_sequence_type_proto(
                              helper.make_map_type_proto(elem_key, helper.make_tensor_type_proto(TP.FLOAT, []))))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 8
    return m


def must_fail(name, m, feeds, needles, cmd="run"):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    if cmd == "run":
        r = alma_run(ALMA, path, "EAGER", feeds, os.path.join(WORK, name), check=False)
    else:
        r = subprocess.run([ALMA, cmd, path], capture_output=True, text=True, timeout=120)
    msg = (r.stderr + r.stdout).strip()
    if r.returncode == 0:
        fail(f"{name}: alma accepted a model it must refuse")
    elif r.returncode < 0 or "Sanitizer" in msg or "runtime error" in msg:
        fail(f"{name}: crashed: {msg[-300:]}")
    elif not all(nd in msg for nd in needles):
        fail(f"{name}: message lacks {needles}: {msg[-300:]}")
    else:
        err = (r.stderr.strip() or msg).splitlines()[-1]
        print(f"ok   {name}: refused ({err[:160]})")


x4 = rng.rand(5, 4).astype(np.float32)
for name, labels, shape, key, x in (
        ("zipmap_int", [0, 1, 2, 7], [None, 4], TP.INT64, x4),
        ("zipmap_str", ["a", "b", "", "d e"], [None, 4], TP.STRING, x4),
        ("zipmap_1d", ["p", "q", "r", "s"], [4], TP.STRING, x4[0]),
        ("zipmap_empty_batch", [5, 6, 7, 8], [None, 4], TP.INT64, x4[:0])):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(zipmap_model(labels, shape, key), path)
    if run_case(name, path, {"X": x}):
        print(f"ok   {name} on {len(CONVS)} conversions")
# ZipMap of a constant (static inference evaluates it; FOLD must leave the sequence of maps a node)
# and a ZipMap model saved by --save-converted (map types written back) run by ONNX Runtime
cm = zipmap_model(["u", "v", "w", "x"], [None, 4], TP.STRING)
cm.graph.node.insert(0, helper.make_node("Constant", [], ["K"], value=onnx.numpy_helper.from_array(x4[:2])))
cm.graph.node.insert(1, helper.make_node("Add", ["X", "K"], ["S"]))
cm.graph.node[2].input[0] = "K"
cm.graph.output.append(helper.make_tensor_value_info("S", TP.FLOAT, None))
path = os.path.join(WORK, "zipmap_const.onnx")
onnx.save(cm, path)
if run_case("zipmap_const", path, {"X": x4[:2]}):
    print(f"ok   zipmap_const on {len(CONVS)} conversions")
src = os.path.join(HERE, "models_labels", "zipmap_rf2_str.onnx")
saved = os.path.join(WORK, "saved")
r = subprocess.run([ALMA, "bench", src, "-c", "FOLD+EAGER", "-n", "1", "--min-time", "0", "--save-converted", saved],
                   capture_output=True, text=True, timeout=120)
sv = os.path.join(saved, "FOLD+EAGER.onnx")
if not os.path.exists(sv):
    fail(f"--save-converted wrote no {sv}: {r.stderr.strip()[-300:]}")
else:
    xin = (rng.randn(4, 5)).astype(np.float32)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"X": xin})
    got = ort.InferenceSession(sv, providers=["CPUExecutionProvider"]).run(None, {"X": xin})
    if got[0].tolist() != want[0].tolist() or not same_maps([{str(k): v for k, v in d.items()} for d in got[1]],
                                                            want[1], "saved zipmap_rf2_str"):
        fail("saved FOLD+EAGER zipmap_rf2_str differs in ONNX Runtime")
    else:
        print("ok   saved FOLD graph of a ZipMap model runs in ONNX Runtime (seq(map) output type written)")
must_fail("zipmap_bad_count", zipmap_model([0, 1, 2], [None, 4], TP.INT64), {"X": x4}, ["ZipMap", "3 class labels"])

# a map as a graph input
mt = helper.make_map_type_proto(TP.INT64, helper.make_tensor_type_proto(TP.FLOAT, []))
node = helper.make_node("DictVectorizer", ["M"], ["Y"], domain="ai.onnx.ml", int64_vocabulary=[1, 2, 3])
g = helper.make_graph([node], "dv", [helper.make_value_info("M", mt)], [helper.make_tensor_value_info("Y", TP.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
must_fail("refuse_dictvectorizer", m, {}, ["DictVectorizer"], cmd="info")
node = helper.make_node("CastMap", ["M"], ["Y"], domain="ai.onnx.ml")
g = helper.make_graph([node], "cm", [helper.make_value_info("M", mt)], [helper.make_tensor_value_info("Y", TP.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
must_fail("refuse_castmap", m, {}, ["CastMap"], cmd="info")
node = helper.make_node("Identity", ["M"], ["Y"])
g = helper.make_graph([node], "mi", [helper.make_value_info("M", mt)], [helper.make_value_info("Y", mt)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
must_fail("refuse_map_input", m, {}, ["'M'", "map"], cmd="info")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all checks passed")
