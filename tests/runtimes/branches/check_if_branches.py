#!/usr/bin/env python3
"""If branches compiled for the session's runtime (src/runtimes/session.c, alma__subplan): a model
whose work sits inside an If - as in Hugging Face Optimum's merged decoders, where use_cache_branch
picks the prefill or the KV-cache graph - must run its branches on the conversion's runtime, not on
EAGER's walk, and still compute what ONNX Runtime computes.

The model (onnx.helper, opset 17): inputs x [N, 3, 10, 10], cond and inner (bool scalars); a
top-level Mul gives y = 2 x (a non-constant outer value the branches read); the weights are
top-level initializers both branches read (outer constants). then: Conv+Relu of y, a nested If on
`inner` (Conv+Sigmoid / Conv+Tanh), GlobalAveragePool, Flatten, Gemm; else: Conv+Relu of x,
MaxPool, Flatten, MatMul, Add. Every combination of cond and inner runs through EAGER and every
available optimized conversion, against ONNX Runtime; `alma run -v` must show each branch's own
plan, with its Conv on the runtime (not EAGER). A Loop body stays on EAGER's walk, so a Loop
around the same work must still be correct.
Exit 0 when all pass, 1 on a failure, 77 (skip) without numpy/onnx/onnxruntime."""
import os
import re
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper, numpy_helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "common"))
from alma_cli import alma_run, available, read_outputs  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(0)
failures = []


def init(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def conv_branch(name, src, act, extra_nodes, out, tail):
    nodes = [helper.make_node("Conv", [src, "W1", "B1"], [name + "_c"], pads=[1, 1, 1, 1], name=name + "_conv"),
             helper.make_node(act, [name + "_c"], [name + "_a"], name=name + "_act")]
    return nodes + extra_nodes + tail(name + "_a", out)


def gap_tail(src, out):
    return [helper.make_node("GlobalAveragePool", [src], [src + "_g"]),
            helper.make_node("Flatten", [src + "_g"], [src + "_f"]),
            helper.make_node("Gemm", [src + "_f", "W2", "B2"], [out], transB=1)]


def model():
    fl = lambda n, *s: helper.make_tensor_value_info(n, TP.FLOAT, list(s))  # noqa: E731
    inner_then = helper.make_graph([helper.make_node("Conv", ["t_a", "W3"], ["it_c"], pads=[1, 1, 1, 1]),
                                    helper.make_node("Sigmoid", ["it_c"], ["it_o"])], "inner_then", [],
                                   [fl("it_o", None, 8, 10, 10)])
    inner_else = helper.make_graph([helper.make_node("Conv", ["t_a", "W3"], ["ie_c"], pads=[1, 1, 1, 1]),
                                    helper.make_node("Tanh", ["ie_c"], ["ie_o"])], "inner_else", [],
                                   [fl("ie_o", None, 8, 10, 10)])
    nested = helper.make_node("If", ["inner"], ["t_n"], then_branch=inner_then, else_branch=inner_else,
                              name="inner_if")
    then_nodes = conv_branch("t", "y", "Relu", [nested], "t_out", lambda s, o: gap_tail("t_n", o))
    else_nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["e_c"], pads=[1, 1, 1, 1], name="e_conv"),
                  helper.make_node("Relu", ["e_c"], ["e_r"]),
                  helper.make_node("MaxPool", ["e_r"], ["e_p"], kernel_shape=[2, 2], strides=[2, 2]),
                  helper.make_node("Flatten", ["e_p"], ["e_f"]),
                  helper.make_node("MatMul", ["e_f", "W4"], ["e_m"]),
                  helper.make_node("Add", ["e_m", "B2"], ["e_out"])]
    then_g = helper.make_graph(then_nodes, "then_g", [], [fl("t_out", None, 5)])
    else_g = helper.make_graph(else_nodes, "else_g", [], [fl("e_out", None, 5)])
    nodes = [helper.make_node("Mul", ["x", "two"], ["y"]),
             helper.make_node("If", ["cond"], ["z"], then_branch=then_g, else_branch=else_g, name="outer_if")]
    inits = [init("W1", 8, 3, 3, 3), init("B1", 8), init("W3", 8, 8, 3, 3), init("W2", 5, 8), init("B2", 5),
             init("W4", 8 * 5 * 5, 5), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    g = helper.make_graph(nodes, "if_model",
                          [fl("x", "N", 3, 10, 10), helper.make_tensor_value_info("cond", TP.BOOL, []),
                           helper.make_tensor_value_info("inner", TP.BOOL, [])],
                          [fl("z", "N", 5)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def loop_model(body_src):
    """The same If model's graph as the body of a one-trip Loop (its nodes stay on EAGER's walk)."""
    m = onnx.ModelProto()
    m.CopyFrom(body_src)
    g = m.graph
    body = helper.make_graph(list(g.node) + [helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
                             [helper.make_tensor_value_info("i", TP.INT64, []),
                              helper.make_tensor_value_info("c_in", TP.BOOL, [])],
                             [helper.make_tensor_value_info("c_out", TP.BOOL, []), g.output[0]])
    trip = numpy_helper.from_array(np.array(1, np.int64), "trip")
    loop = helper.make_node("Loop", ["trip", ""], ["z_loop"], body=body, name="loop")
    out = helper.make_tensor_value_info("z_loop", TP.FLOAT, None)
    lg = helper.make_graph([loop], "loop_model", list(g.input), [out], list(g.initializer) + [trip])
    lm = helper.make_model(lg, opset_imports=[helper.make_opsetid("", 17)])
    lm.ir_version = 8
    return lm


def check(path, out_name, convs, verify_plan):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for n in (1, 3):
        x = rng.standard_normal((n, 3, 10, 10)).astype(np.float32)
        for cond in (True, False):
            for inner in (True, False):
                feeds = {"x": x, "cond": np.array(cond), "inner": np.array(inner)}
                ref = sess.run(None, feeds)[0]
                for conv in convs:
                    tag = f"{os.path.basename(path)} {conv} N={n} cond={cond} inner={inner}"
                    work = os.path.join(WORK, re.sub(r"\W", "_", tag))
                    try:
                        r = alma_run(ALMA, path, conv, feeds, work, "-v")
                        y = read_outputs(work, [out_name])[0]
                    except RuntimeError as e:
                        failures.append(f"{tag}: {e}")
                        continue
                    err = float(np.abs(y - ref).max()) if y.shape == ref.shape else float("inf")
                    ok = err <= 1e-4 * max(1.0, float(np.abs(ref).max()))
                    print(f"  {tag}: max abs err {err:.2e}{'' if ok else ' FAIL'}")
                    if not ok:
                        failures.append(f"{tag}: shape {y.shape} vs {ref.shape}, max abs err {err:.2e}")
                    if verify_plan and conv != "EAGER" and n == 1:
                        verify(tag, r.stderr, conv.split("+")[-1], cond, inner)


def verify(tag, log, runtime, cond, inner):
    """The branches taken printed their own plans (after their first run), Convs not on EAGER."""
    plans = re.split(r"(?m)^plan for ", log)
    taken = ["branch 'then_branch' of If 'outer_if'" if cond else "branch 'else_branch' of If 'outer_if'"]
    if cond:
        taken.append("branch 'then_branch' of If 'inner_if'" if inner else "branch 'else_branch' of If 'inner_if'")
    for label in taken:
        body = next((p for p in plans if p.startswith(label)), None)
        if body is None:
            failures.append(f"{tag}: no plan printed for {label}")
            continue
        if "after its first run" not in body.splitlines()[0]:
            failures.append(f"{tag}: {label}: {body.splitlines()[0]}")
        convs = [ln for ln in body.splitlines() if re.search(r"\s(Fused)?Conv\s", ln)]
        if not convs or any(re.search(r"\bEAGER\b", ln) for ln in convs):
            failures.append(f"{tag}: {label}: Conv not on {runtime}: {convs}")


m = model()
path = os.path.join(WORK, "if_model.onnx")
onnx.save(m, path)
convs = ["EAGER"] + available(ALMA, ("FOLD+FUSE+DNNL", "DNNL", "FOLD+BLAS", "FOLD+XNNPACK"))
check(path, "z", convs, True)
lpath = os.path.join(WORK, "loop_model.onnx")
onnx.save(loop_model(m), lpath)
check(lpath, "z_loop", convs, False)

print(f"{len(failures)} failure(s)")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
