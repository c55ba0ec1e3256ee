"""FUSE creates LayerNormalization (opset 17) and Gelu (opset 20) in models that import an older
opset. A converted graph written under the model's opset would be invalid ONNX that neither alma's
build cache nor other tools load again; the writer raises the opset when every other node reads the
same there, writing attributes that became inputs as inputs (src/graph/opset.c, src/onnx/save.c). Checked with
`alma bench -c FOLD+FUSE+EAGER --save-converted --cache-dir` on LayerNorm and GELU subgraphs as
PyTorch exports them, plus:

- ln_gelu_op14: a Softmax-13 and a Shape-13 (Shape's later versions only add attributes with the
  old defaults);
- ln_gelu_reduce_op13: a ReduceMean-13 of its own (axes an attribute; an input from opset 18);
- ln_gelu_shape_op12: an Unsqueeze-11, a Split-11 with split, a ReduceSum-11 (their attributes
  became inputs at 13), a Squeeze-11 without axes and a Split-11 into equal parts (Split-18 wants
  num_outputs then);
- ln_gelu_reduce_op11: opset 11, a ReduceMean-11 and an equal Split-11;
- ln_gelu_old_op9: opset 9, a Slice-1 (starts, ends, axes attributes; inputs from 10), Pad-2s in
  constant mode with value 0.5 and in reflect mode, Clip-6s with min, max and both (inputs from 11),
  a TopK-1 (k an input from 10), an If whose branches hold Slice-1s (their inputs written inside the
  branches), and a value named as a new initializer would be (the writer picks another name);

each saved at opset 20 (the moved attributes as initializers), passing onnx.checker (where
the installed onnx knows opset 20), run by ONNX Runtime with the original model's outputs (1e-5 of
the largest), the second bench run loading the cached build (JSON cache status "hit"); and

- ln_gelu_softmax_last_op11: Softmax-11s over the last axis (axis -1 of a rank-3 value, the
  default axis 1 of a rank-2 one, known from shape inference): they read as 13, so the file is
  raised as above;
- ln_gelu_softmax_op11: a Softmax-11 over axis 1 of a rank-3 value (before 13 it normalizes over
  axes 1 and 2 together; 13 over axis 1 alone): the file keeps opset 11, the bench still succeeds,
  and the second run rebuilds, saying why the cached graph did not load.

usage: save_opset.py ALMA WORKDIR PYTHON   (PYTHON: with onnx, numpy and onnxruntime; exit 77 without)
"""
import json
import os
import shutil
import subprocess
import sys

MAKE = r"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
out, opset, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(4)
c = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
inits = [c("two", 2.0), c("eps", 1e-5), c("g", rng.standard_normal(16)), c("b", rng.standard_normal(16)),
         c("sq2", np.sqrt(2.0)), c("one", 1.0), c("half", 0.5)]
N = helper.make_node
V = lambda n, shape, t=TensorProto.FLOAT: helper.make_tensor_value_info(n, t, shape)
nodes = [N("ReduceMean", ["x"], ["m"], axes=[-1]), N("Sub", ["x", "m"], ["d"]), N("Pow", ["d", "two"], ["d2"]),
         N("ReduceMean", ["d2"], ["v"], axes=[-1]), N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["s"]),
         N("Div", ["d", "s"], ["n"]), N("Mul", ["n", "g"], ["ng"]), N("Add", ["ng", "b"], ["ln"]),
         N("Div", ["ln", "sq2"], ["t"]), N("Erf", ["t"], ["e"]), N("Add", ["e", "one"], ["e1"]),
         N("Mul", ["ln", "e1"], ["h"]), N("Mul", ["h", "half"], ["y0"])]
outs = [V("y", ["n", 6, 16])]
if extra == "shape":  # opset <= 12 forms: attributes that are inputs from 13, a Split into equal parts
    nodes += [N("Identity", ["y0"], ["y"]), N("Unsqueeze", ["y0"], ["u"], axes=[1]),
              N("Split", ["u"], ["p", "q"], axis=3, split=[6, 10]), N("ReduceSum", ["q"], ["rs"], axes=[-1]),
              N("Squeeze", ["rs"], ["sq"]), N("Split", ["p"], ["p1", "p2"], axis=3)]
    outs += [V("p1", ["n", 1, 6, 3]), V("p2", ["n", 1, 6, 3]), V("sq", ["n", 6])]
elif extra == "old":  # opset 9: attributes that became inputs at 10 (Slice, TopK) and 11 (Pad, Clip)
    # the Slice's output has the name its starts would get: the writer must pick another
    branch = lambda tag, lo, hi: helper.make_graph(
        [N("Slice", ["x"], [tag], name=tag + "_slice", starts=[lo], ends=[hi], axes=[2])], tag, [],
        [V(tag, ["n", 6, 3])])
    inits.append(c("zero", 0.0))
    nodes += [N("Identity", ["y0"], ["y"]),
              N("Slice", ["y0"], ["sl_starts"], name="sl", starts=[1, 2], ends=[1000, -2], axes=[1, 2]),
              N("Pad", ["sl_starts"], ["pc"], pads=[0, 0, 1, 0, 1, 2], value=0.5),
              N("Pad", ["sl_starts"], ["pr"], pads=[0, 1, 2, 0, 0, 1], mode="reflect"),
              N("Clip", ["pc"], ["c1"], min=-0.2), N("Clip", ["pr"], ["c2"], max=0.3),
              N("Clip", ["x"], ["c3"], min=-0.5, max=0.5), N("TopK", ["x"], ["tv", "ti"], k=3),
              N("ReduceMax", ["x"], ["xm"], keepdims=0), N("Greater", ["xm", "zero"], ["cond"]),
              N("If", ["cond"], ["br"], then_branch=branch("br_then", 0, 3), else_branch=branch("br_else", 3, 6))]
    outs += [V("c1", ["n", 6, 15]), V("c2", ["n", 6, 15]), V("c3", ["n", 6, 16]), V("tv", ["n", 6, 3]),
             V("ti", ["n", 6, 3], TensorProto.INT64), V("br", ["n", 6, 3])]
elif extra == "reduce11":  # opset 11: a ReduceMean-11 (axes moved at 20) and an equal Split-11 (num_outputs)
    nodes += [N("Identity", ["y0"], ["y"]), N("ReduceMean", ["x"], ["r"], axes=[1], keepdims=0),
              N("Split", ["r"], ["r1", "r2"], axis=1)]
    outs += [V("r1", ["n", 8]), V("r2", ["n", 8])]
else:  # over the last axis (any opset reads that alike); "softmax1": over axes 1.. (before 13 only)
    nodes += [N("Softmax", ["y0"], ["y"], axis=1 if extra == "softmax1" else -1), N("Shape", ["y"], ["shp"])]
    outs.append(V("shp", [3], TensorProto.INT64))
if extra == "softmax_last":  # a Softmax-11 with the default axis 1 of a rank-2 value: the last axis
    nodes += [N("ReduceMean", ["y"], ["rm"], axes=[1], keepdims=0), N("Softmax", ["rm"], ["sm"])]
    outs.append(V("sm", ["n", 16]))
if extra == "reduce":
    nodes.append(N("ReduceMean", ["x"], ["r"], axes=[1], keepdims=0))
    outs.append(V("r", ["n", 16]))
g = helper.make_graph(nodes, "ln_gelu", [V("x", ["n", 6, 16])], outs, inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="alma-tests")
m.ir_version = 6
onnx.checker.check_model(m)
onnx.save(m, out)
"""

CHECK = r"""
import json, sys
import numpy as np
import onnx
import onnxruntime as ort
orig, saved, x = sys.argv[1], sys.argv[2], np.load(sys.argv[3])
m = onnx.load(saved)
def nodes(g):  # with the subgraphs'
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from nodes(a.g)
info = {"opset": [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0], "ir": m.ir_version,
        "ops": sorted({n.op_type for n in m.graph.node}),
        "moved": sorted(n.op_type for n in m.graph.node if n.op_type in ("ReduceMean", "ReduceSum", "Unsqueeze", "Split")
                        and len(n.input) == 2 and not any(a.name in ("axes", "split") for a in n.attribute)),
        "forms": sorted(n.op_type + "/" + "".join("i" if i else "_" for i in n.input) + "/" + ",".join(sorted(
            a.name for a in n.attribute if a.type != onnx.AttributeProto.GRAPH))
            for n in nodes(m.graph) if n.op_type in ("Slice", "Pad", "Clip", "TopK", "If")),
        "num_outputs": sum(1 for n in m.graph.node if n.op_type == "Split" and any(a.name == "num_outputs"
                                                                                  for a in n.attribute))}
if onnx.defs.onnx_opset_version() >= info["opset"]:
    onnx.checker.check_model(m, full_check=True)
    info["checker"] = "ok"
else:
    info["checker"] = f"skipped: onnx {onnx.__version__} knows opsets up to {onnx.defs.onnx_opset_version()}"
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
ys = [ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, {"x": x}) for p in (orig, saved)]
info["max_err"] = max(float(np.max(np.abs(a.astype(np.float64) - b)) / max(1e-30, float(np.max(np.abs(a)))))
                      for a, b in zip(*ys))
print(json.dumps(info))
"""


def bench(alma, model, work, tag):
    r = os.path.join(work, tag + ".json")
    cmd = [alma, "bench", model, "-c", "FOLD+FUSE+EAGER", "-b", "2", "--save-converted", os.path.join(work, "saved"),
           "--cache-dir", os.path.join(work, "cache"), "--json", r, "-n", "2", "--min-time", "0", "--warmup", "1",
           "--warmup-time", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return json.load(open(r))["results"][0]


def case(alma, py, work, name, opset, extra, want_opset, want_moved=(), want_num_outputs=0, want_forms=()):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = os.path.join(d, name + ".onnx")
    subprocess.run([py, "-c", MAKE, model, str(opset), extra], check=True)
    first, second = bench(alma, model, d, "first"), bench(alma, model, d, "second")
    saved = first["saved_converted"]["path"]
    x = os.path.join(d, "x.npy")
    subprocess.run([py, "-c", "import numpy as np, sys; np.save(sys.argv[1], "
                    "np.random.default_rng(1).standard_normal((3, 6, 16)).astype(np.float32))", x], check=True)
    o = subprocess.run([py, "-c", CHECK, model, saved, x], capture_output=True, text=True)
    fails = []
    c1, c2 = first["cache"], second["cache"]
    print(f"{name}: saved {saved}; first run cache {c1['status']}, second {c2['status']} "
          f"({c2.get('reason', '')})")
    if want_opset > opset:
        if o.returncode != 0:
            return [f"{name}: the saved file does not check or run: {o.stderr.strip()[-600:]}"]
        info = json.loads(o.stdout.strip().splitlines()[-1])
        print(f"  saved opset {info['opset']} (IR {info['ir']}), ops {info['ops']}, attributes written as inputs: "
              f"{info['moved']}{', ' + str(info['forms']) if info['forms'] else ''}, checker {info['checker']}, "
              f"ONNX Runtime saved vs original: {info['max_err']:.2g} of "
              "the largest output")
        if info["moved"] != sorted(want_moved):
            fails.append(f"{name}: attributes written as inputs on {info['moved']}, expected {sorted(want_moved)}")
        if info["forms"] != sorted(want_forms):
            fails.append(f"{name}: Slice/Pad/Clip/TopK written as {info['forms']}, expected {sorted(want_forms)}")
        if info["num_outputs"] != want_num_outputs:
            fails.append(f"{name}: {info['num_outputs']} Splits written with num_outputs, expected {want_num_outputs}")
        if info["opset"] != want_opset:
            fails.append(f"{name}: saved opset {info['opset']}, expected {want_opset}")
        if not {"LayerNormalization", "Gelu"} <= set(info["ops"]):
            fails.append(f"{name}: FUSE did not make LayerNormalization and Gelu: {info['ops']}")
        if info["max_err"] > 1e-5:
            fails.append(f"{name}: ONNX Runtime's outputs of the saved file differ by {info['max_err']:.3g}")
        if c2["status"] != "hit":
            fails.append(f"{name}: the second run did not load the cached build: {c2}")
    else:
        import_opset = subprocess.run([py, "-c", "import onnx, sys; m = onnx.load(sys.argv[1]); print([o.version for o "
                                       "in m.opset_import if o.domain in ('', 'ai.onnx')][0])", saved],
                                      capture_output=True, text=True).stdout.strip()
        print(f"  saved opset {import_opset} (kept: this Softmax-11 reads differently at 13 and later)")
        if import_opset != str(opset):
            fails.append(f"{name}: saved opset {import_opset}, expected the model's {opset}")
        if c2["status"] != "built" or "does not load" not in c2.get("reason", ""):
            fails.append(f"{name}: the second run should rebuild saying the cached graph does not load: {c2}")
    return fails


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    alma, work, py = sys.argv[1:]
    if not py or subprocess.run([py, "-c", "import onnx, numpy, onnxruntime"], capture_output=True).returncode:
        print(f"SKIP: no python with onnx, numpy and onnxruntime ('{py}'); scripts/test.sh makes one (.venv-test)")
        return 77
    os.makedirs(work, exist_ok=True)
    fails = case(alma, py, work, "ln_gelu_op14", 14, "", 20)
    fails += case(alma, py, work, "ln_gelu_reduce_op13", 13, "reduce", 20, ["ReduceMean"])
    fails += case(alma, py, work, "ln_gelu_shape_op12", 12, "shape", 20, ["ReduceSum", "Split", "Unsqueeze"], 1)
    fails += case(alma, py, work, "ln_gelu_reduce_op11", 11, "reduce11", 20, ["ReduceMean"], 1)
    # (op/inputs, "_" for an empty one/attributes): Slice-1's starts, ends, axes (also in the If's
    # branches); Pad-2's pads and a constant_value (none in reflect mode); Clip-6's min, max (min ""
    # before a max alone); TopK-1's k
    fails += case(alma, py, work, "ln_gelu_old_op9", 9, "old", 20,
                  want_forms=["Slice/iiii/", "Pad/iii/", "Pad/ii/mode", "Clip/ii/", "Clip/i_i/", "Clip/iii/",
                              "TopK/ii/", "If/i/", "Slice/iiii/", "Slice/iiii/"])
    fails += case(alma, py, work, "ln_gelu_softmax_last_op11", 11, "softmax_last", 20, ["ReduceMean"])
    fails += case(alma, py, work, "ln_gelu_softmax_op11", 11, "softmax1", 11)
    for f in fails:
        print("FAIL:", f)
    print("PASS" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
