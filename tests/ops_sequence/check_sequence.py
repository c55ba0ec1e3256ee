"""Sequences and optionals through alma against ONNX Runtime (src/ops/sequence.c, core.h's containers).

usage: check_sequence.py ALMA WORKDIR   (python with onnx, numpy and onnxruntime)

1. seq_mix.onnx (make_models.py): Conv -> SplitToSequence -> Loop over SequenceAt/MatMul with a
   loop-carried sequence -> ConcatFromSequence, SequenceMap(Sigmoid) -> stacked ConcatFromSequence,
   and the loop's sequence as a graph output; `alma run` under every conversion this build has,
   each output (each element of the sequence output) against ONNX Runtime.
2. `alma bench` on it with several conversions: every row ok and its output check (sequence output
   included, element-wise against EAGER) passed.
3. `alma bench` on a model whose graph input is a sequence fails naming the input.
4. SequenceAt / SequenceErase / SequenceInsert with positions out of range fail naming the range;
   negative positions agree with ONNX Runtime.
Exit 0 when everything passes, 1 otherwise; 77 (skip) without the python modules."""
import os
import subprocess
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper as h
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


def close(got, want, what, tol=1e-4):
    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{what}: {got.dtype}{list(got.shape)}, ONNX Runtime {want.dtype}{list(want.shape)}")
        return
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
    if not err <= tol * (1 + float(np.max(np.abs(want))) if want.size else 1):
        fail(f"{what}: max abs error {err:g} against ONNX Runtime")


# 1. alma run against ORT, every conversion
mix = os.path.join(WORK, "seq_mix.onnx")
onnx.save(make_models.seq_mix(), mix)
x = np.random.default_rng(3).standard_normal((1, 4, 6, 6)).astype(np.float32)
ref = ort.InferenceSession(mix, providers=["CPUExecutionProvider"]).run(None, {"X": x})
for conv in CONVS:
    out = os.path.join(WORK, "run_" + conv.replace("+", "_"))
    r = alma_run(ALMA, mix, conv, {"X": x}, out, check=False)
    if r.returncode:
        fail(f"alma run {conv}: {r.stderr.strip()}")
        continue
    close(np.load(os.path.join(out, "Y.npy")), ref[0], f"{conv} Y")
    close(np.load(os.path.join(out, "Z.npy")), ref[1], f"{conv} Z")
    files = sorted(f for f in os.listdir(out) if f.startswith("S_"))
    if len(files) != len(ref[2]):
        fail(f"{conv}: sequence output S has {len(files)} elements, ONNX Runtime {len(ref[2])}")
    for i, want in enumerate(ref[2]):
        p = os.path.join(out, f"S_{i}.npy")
        if os.path.exists(p):
            close(np.load(p), want, f"{conv} S[{i}]")
    print(f"ok   run {conv}")

# 2. alma bench: rows ok and checked
js = os.path.join(WORK, "bench.json")
convs = ",".join(CONVS)
r = subprocess.run([ALMA, "bench", mix, "-c", convs, "--min-time", "0.05", "-n", "5", "--json", js],
                   capture_output=True, text=True, timeout=300)
if r.returncode:
    fail(f"alma bench: exit {r.returncode}: {r.stderr.strip()[-400:]}")
else:
    rows, problems = bench_rows(js)
    for p in problems:
        fail(f"bench {p}")
    print(f"ok   bench {convs} ({len(rows)} rows)")

# 3. a sequence graph input: a clear refusal naming it
inp = os.path.join(WORK, "seq_input.onnx")
onnx.save(make_models.seq_input(), inp)
r = subprocess.run([ALMA, "bench", inp, "-c", "EAGER"], capture_output=True, text=True, timeout=120)
if r.returncode == 0 or "input 'xs' is a sequence" not in r.stderr:
    fail(f"bench with a sequence input: exit {r.returncode}, stderr {r.stderr.strip()[-300:]}")
else:
    print("ok   bench refuses a sequence input")


# 4. positions: negative ones as ORT, out of range refused
def pos_model(op, pos):
    nodes = [h.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)]
    if op == "SequenceAt":
        nodes += [h.make_node("SequenceAt", ["s", "p"], ["y"])]
    elif op == "SequenceErase":
        nodes += [h.make_node("SequenceErase", ["s", "p"], ["e"]), h.make_node("ConcatFromSequence", ["e"], ["y"], axis=0, new_axis=1)]
    else:
        nodes += [h.make_node("SequenceInsert", ["s", "t", "p"], ["e"]), h.make_node("ConcatFromSequence", ["e"], ["y"], axis=0, new_axis=1)]
    inits = [onnx.numpy_helper.from_array(np.array(pos, np.int64), "p"), onnx.numpy_helper.from_array(np.full(3, 9, np.float32), "t")]
    g = h.make_graph(nodes, "pos", [h.make_tensor_value_info("x", TP.FLOAT, [4, 3])], [h.make_tensor_value_info("y", TP.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


xp = np.arange(12, dtype=np.float32).reshape(4, 3)
for op, good, bad in (("SequenceAt", -4, 4), ("SequenceErase", -1, -5), ("SequenceInsert", -4, 5)):
    for pos, ok in ((good, True), (bad, False)):
        path = os.path.join(WORK, f"{op}_{pos}.onnx")
        onnx.save(pos_model(op, pos), path)
        r = alma_run(ALMA, path, "EAGER", {"x": xp}, os.path.join(WORK, f"{op}_{pos}"), check=False)
        if ok:
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": xp})[0]
            if r.returncode:
                fail(f"{op} position {pos}: {r.stderr.strip()}")
            else:
                close(np.load(os.path.join(WORK, f"{op}_{pos}", "y.npy")), want, f"{op} position {pos}")
        elif r.returncode == 0 or "out of range" not in r.stderr or op not in r.stderr:
            fail(f"{op} position {pos}: expected an out-of-range error, got exit {r.returncode}: {r.stderr.strip()[-300:]}")
    print(f"ok   {op} positions")

print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
