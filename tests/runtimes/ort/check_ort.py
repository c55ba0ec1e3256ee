#!/usr/bin/env python3
"""The ORT runtime through `alma bench`, against EAGER and against onnxruntime run directly.

Usage: check_ort.py ALMA WORKDIR   (the python running this needs onnx, numpy and onnxruntime)

Models (built here with onnx.helper):
  cnn     Conv+BatchNormalization+Relu+MaxPool+Flatten+Gemm, dynamic batch: ORT, ORT_BASIC,
          ORT_EXTENDED, FOLD+ORT, INT8_STATIC+ORT each ok and checked against EAGER (int8 by cosine),
          runtime_info (onnxruntime version = this python's, identity-call overhead measured), the
          text report's runtime line, --profile mapped onto the graph's node names, --threads 1.
  branch  an If whose condition is computed: ORT runs the whole graph, branches included.
  qdq     a user's QDQ model (QuantizeLinear/DequantizeLinear around a Conv): ORT's output equals
          onnxruntime's own on the same file and input.
  int16   Max on int16, which ONNX Runtime 1.32 does not implement: the ORT row is an error carrying
          ONNX Runtime's NotImplemented message, EAGER runs.
  FUSE+ORT is unavailable naming the step FUSE.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def save(model, name, opset=13):
    model.opset_import[0].version = opset
    model.ir_version = 7
    onnx.checker.check_model(model)
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    return path


def cnn():
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "gw", "gb"], ["y"], name="fc", transB=1),
    ]
    inits = [init("w", w), init("b", rng.standard_normal(8).astype(np.float32)),
             init("s", rng.uniform(0.5, 1.5, 8).astype(np.float32)), init("bb", rng.standard_normal(8).astype(np.float32)),
             init("m", rng.standard_normal(8).astype(np.float32) * 0.1), init("v", rng.uniform(0.5, 2, 8).astype(np.float32)),
             init("gw", rng.standard_normal((10, 8 * 4 * 4)).astype(np.float32) * 0.1),
             init("gb", rng.standard_normal(10).astype(np.float32))]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    return save(helper.make_model(g), "cnn")


def branch():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"], name="then_mul")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])],
                               [init("two", np.float32(2))])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "branch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [init("zero", np.float32(0))])
    return save(helper.make_model(g), "branch")


def qdq():
    w = rng.integers(-100, 100, (4, 2, 3, 3)).astype(np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="qx"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dqx"),
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="dqw", axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"], name="qy"),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"], name="dqy"),
    ]
    inits = [init("xs", np.float32(0.02)), init("xz", np.uint8(128)), init("wq", w),
             init("ws", rng.uniform(0.001, 0.01, 4).astype(np.float32)), init("ys", np.float32(0.05)),
             init("yz", np.uint8(100))]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    return save(helper.make_model(g), "qdq")


def int16():
    g = helper.make_graph([helper.make_node("Max", ["a", "b"], ["y"], name="max")], "int16",
                          [helper.make_tensor_value_info("a", TensorProto.INT16, [3]),
                           helper.make_tensor_value_info("b", TensorProto.INT16, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT16, [3])])
    return save(helper.make_model(g), "int16")


def bench(model, convs, *extra, text=False):
    out = os.path.join(WORK, os.path.basename(model) + ".json")
    cmd = [ALMA, "bench", model, "-c", ",".join(convs), "-n", "16", "--min-time", "0", "--keep-going", "--no-cache",
           "--json", out] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(out) as f:
        res = {r["conversion"]: r for r in json.load(f)["results"]}
    return (res, p.stdout) if text else res


# ---- cnn ---------------------------------------------------------------------------------------
m = cnn()
convs = ["EAGER", "ORT", "ORT_BASIC", "ORT_EXTENDED", "FOLD+ORT", "INT8_STATIC+ORT", "FOLD+FUSE+ORT"]
res, text = bench(m, convs, "-b", "3", text=True)
for c in convs[1:-1]:
    r = res.get(c, {})
    check(r.get("status") == "ok" and r["check"]["performed"] and r["check"]["passed"],
          f"cnn {c}: ok, output check against EAGER passed ({r.get('error') or r.get('check')})")
r = res["ORT"]
info = r.get("runtime_info") or {}
check(info.get("onnxruntime") == ort.__version__, f"runtime_info names onnxruntime {ort.__version__}: {info}")
check(info.get("optimization") == "all" and res["ORT_BASIC"]["runtime_info"]["optimization"] == "basic",
      "optimization level all for ORT, basic for ORT_BASIC")
check(isinstance(info.get("identity_call_us"), (int, float)) and 0 < info["identity_call_us"] < 1e5 and
      isinstance(info.get("identity_call_python_us"), (int, float)) and info["identity_call_python_us"] > 0,
      f"the binding's per-call cost is measured: {info.get('identity_call_us')} us vs Python's "
      f"{info.get('identity_call_python_us')} us")
check(info.get("intra_op_threads") == r["threads"] and info.get("inter_op_threads") == 1,
      f"intra-op threads = the row's threads ({r['threads']}), inter-op 1")
check("runtime    onnxruntime " + ort.__version__ in text and "identity_call_us" in text,
      "the text report has the runtime line")
u = res.get("FOLD+FUSE+ORT", {})
check(u.get("status") == "unavailable" and "step FUSE" in (u.get("error") or "") and "ORT" in u.get("error", ""),
      f"FOLD+FUSE+ORT unavailable naming FUSE: {u.get('error')}")

res = bench(m, ["ORT"], "-b", "2", "--threads", "1", "--profile")
r = res["ORT"]
check(r["status"] == "ok" and r["threads"] == 1 and r["runtime_info"]["intra_op_threads"] == 1, "--threads 1 honoured")
prof = r.get("profile") or {}
names = {n["name"]: n for n in prof.get("nodes", [])}
check(not prof.get("unavailable") and "conv" in names and names["conv"]["placement"] == "ORT" and
      names["conv"]["ms"] > 0 and "fc" in names and names["fc"]["ms"] > 0,
      f"--profile maps ONNX Runtime's profile onto the graph's nodes: {sorted(names)} "
      f"{prof.get('unavailable') or ''}")

# ---- branch ------------------------------------------------------------------------------------
res = bench(branch(), ["EAGER", "ORT", "FOLD+ORT"])
for c in ("ORT", "FOLD+ORT"):
    check(res[c]["status"] == "ok" and res[c]["check"]["passed"], f"branch {c}: If run by ONNX Runtime, agrees with EAGER")

# ---- qdq: against onnxruntime itself on the same file and input ---------------------------------
m = qdq()
x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
xin = os.path.join(WORK, "qdq_x.npy")
np.save(xin, x)
outdir = os.path.join(WORK, "qdq_out")
p = subprocess.run([ALMA, "run", m, "-c", "ORT", "--input", "x=" + xin, "-o", outdir], capture_output=True, text=True)
want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
got = np.load(os.path.join(outdir, "y.npy")) if p.returncode == 0 else None
check(got is not None and got.shape == want.shape and np.array_equal(got, want),
      f"qdq: alma run -c ORT equals onnxruntime's output ({p.stderr.strip()[:300]})")
res = bench(m, ["EAGER", "ORT"])
check(res["ORT"]["status"] == "ok", f"qdq: ORT row ok ({res['ORT'].get('error')})")

# ---- a model ONNX Runtime rejects --------------------------------------------------------------
res = bench(int16(), ["EAGER", "ORT"])
e = res["ORT"]
check(res["EAGER"]["status"] == "ok", "int16: EAGER runs")
check(e["status"] == "error" and "NotImplemented" in (e.get("error") or "") and "Max" in e["error"],
      f"int16: the ORT row carries ONNX Runtime's message: {e.get('error')}")

print("FAIL: %d checks" % len(failures) if failures else "PASS")
sys.exit(1 if failures else 0)
