"""Model-local functions (ModelProto.functions, what jax2onnx's @onnx_function and PyTorch's dynamo
exporter write): alma inlines every call at load (src/onnx/functions.c). Each model here runs in
alma (EAGER) and in ONNX's reference implementation (onnx.reference) and, where it can, ONNX
Runtime; outputs must agree to float32 rounding. Malformed uses must fail to load with a message.

Cases: nested calls; one function called twice (private names must not collide); attributes given
by the caller, taken from the function's default (attribute_proto) or left out; a formal input the
caller omits (a missing optional input) and an output it does not take; an If inside a function
whose branches read the function's values and define names the main graph also uses; a call
inside a Loop body; overloads (IR 10); a function whose domain the model does not import.

usage: check_functions.py ALMA WORKDIR      (python with onnx >= 1.15, numpy; onnxruntime optional)
Exit 0 when every case passes, 1 otherwise."""
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto as TP, helper
    from onnx.inliner import inline_local_functions
    from onnx.reference import ReferenceEvaluator
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
try:
    import onnxruntime as ort
except ImportError:
    ort = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from alma_cli import alma_run  # noqa: E402

ALMA, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(3)
failures = []
OPS = [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)]
F = TP.FLOAT


def vi(name, shape=None, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def node(op, ins, outs, refs=(), **kw):
    """A node; refs: attributes taken from the enclosing function's of the same name (float)"""
    n = helper.make_node(op, ins, outs, **kw)
    n.attribute.extend(helper.make_attribute_ref(r, onnx.AttributeProto.FLOAT) for r in refs)
    return n


def fn(name, inputs, outputs, nodes, attributes=(), defaults=(), domain="local", opsets=None, overload=None):
    f = helper.make_function(domain, name, inputs, outputs, nodes, opsets or OPS,
                             list(attributes))
    f.attribute_proto.extend(defaults)
    if overload:
        f.overload = overload
    return f


def model(nodes, inputs, outputs, functions, opsets=OPS, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=opsets, functions=functions)
    m.ir_version = 10
    return m


def run(name, m, feeds):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    return alma_run(ALMA, path, "EAGER", feeds, d, check=False, timeout=60), d


def check(name, m, feeds, use_ort=True, expect=None):
    """expect: the outputs computed with numpy, for the cases onnx's inliner gets wrong (onnx 1.23
    drops a function's default attributes, attribute_proto)"""
    # onnx's own inliner, then its reference: ReferenceEvaluator alone cannot run a call that leaves
    # out an attribute with no default
    refs = [("numpy", expect)] if expect else [
        ("onnx.inliner+reference", ReferenceEvaluator(inline_local_functions(m)).run(None, feeds))]
    if ort is not None and use_ort:
        try:
            s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            refs.append(("onnxruntime", s.run(None, feeds)))
        except Exception as e:  # ONNX Runtime has its own gaps (an untaken function output)
            print(f"   {name}: onnxruntime cannot run it ({str(e).splitlines()[0][:100]}); onnx's reference only")
    r, d = run(name, m, feeds)
    if r.returncode:
        failures.append(f"{name}: alma failed: {r.stderr.strip()}")
        return
    for i, o in enumerate(m.graph.output):
        got = np.load(os.path.join(d, o.name + ".npy"))
        for who, ref in refs:
            if got.shape != ref[i].shape or not np.allclose(got, ref[i], rtol=1e-5, atol=1e-6):
                failures.append(f"{name}: output {o.name} differs from {who} "
                                f"(max |diff| {np.abs(got - ref[i]).max() if got.shape == ref[i].shape else got.shape})")
    print(f"ok {name}")


def refused(name, m, feeds, words):
    r, _ = run(name, m, feeds)
    msg = r.stderr.strip()
    if r.returncode == 0 or r.returncode < 0 or not all(w in msg for w in words):
        failures.append(f"{name}: expected a load error naming {words}, got rc={r.returncode}: {msg}")
    else:
        print(f"ok {name} (refused: {msg.splitlines()[-1][:120]})")


x = rng.standard_normal((3, 4)).astype(np.float32)
w = rng.standard_normal((4, 4)).astype(np.float32)

# Act(x) = LeakyRelu(x, alpha=@alpha) + x; alpha defaults to 0.2 through attribute_proto
act = fn("Act", ["x"], ["y"], [
    node("LeakyRelu", ["x"], ["t"], refs=["alpha"]),
    helper.make_node("Add", ["t", "x"], ["y"])],
    attributes=[], defaults=[helper.make_attribute("alpha", 0.2)])
# Layer(x, w) = Act(x @ w) with the caller's alpha passed on (when it has one)
layer = fn("Layer", ["x", "w"], ["y"], [
    helper.make_node("MatMul", ["x", "w"], ["t"]),
    node("Act", ["t"], ["y"], refs=["alpha"], domain="local")],
    attributes=["alpha"])
# two calls of Layer: the same private names ("t") in each, one with alpha, one with Act's default
m = model([helper.make_node("Layer", ["x", "w"], ["h"], domain="local", alpha=0.01),
           helper.make_node("Layer", ["h", "w"], ["y"], domain="local"),
           helper.make_node("Mul", ["h", "h"], ["t"])],  # a main-graph "t" beside the bodies' ones
          [vi("x", [3, 4]), vi("w", [4, 4])], [vi("y"), vi("t")], [act, layer])


def act_np(v, alpha=0.2):
    return np.where(v > 0, v, alpha * v) + v


h = act_np(x @ w, 0.01)
check("nested_twice_attr_default", m, {"x": x, "w": w}, expect=[act_np(h @ w), h * h])

# an omitted formal input is a missing optional input; an untaken output is private
clip = fn("Clip2", ["x", "lo", "hi"], ["y", "z"], [
    helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
    helper.make_node("Neg", ["y"], ["z"])])
hi = np.array(0.5, np.float32)
m = model([helper.make_node("Clip2", ["x", "", "hi"], ["y"], domain="local")],
          [vi("x", [3, 4]), vi("hi", [])], [vi("y")], [clip])
check("optional_input_unused_output", m, {"x": x, "hi": hi})
m = model([helper.make_node("Clip2", ["x"], ["y"], domain="local")], [vi("x", [3, 4])], [vi("y")], [clip])
check("fewer_inputs", m, {"x": x})

# an If in a function: its branches read the function's input and intermediate, and define "t"
# and "u", which the main graph also defines
then_g = helper.make_graph([helper.make_node("Add", ["a", "x"], ["t"]), helper.make_node("Relu", ["t"], ["u"])],
                           "then", [], [vi("u")])
else_g = helper.make_graph([helper.make_node("Sub", ["a", "x"], ["t"]), helper.make_node("Abs", ["t"], ["u"])],
                           "else", [], [vi("u")])
branch = fn("Branch", ["x", "c"], ["y"], [
    helper.make_node("Exp", ["x"], ["a"]),
    helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)])
for c in (True, False):
    m = model([helper.make_node("Neg", ["x"], ["t"]), helper.make_node("Sigmoid", ["t"], ["u"]),
               helper.make_node("Branch", ["u", "c"], ["y"], domain="local")],
              [vi("x", [3, 4]), vi("c", [], TP.BOOL)], [vi("y"), vi("u")], [branch])
    check(f"if_in_function_{c}", m, {"x": x, "c": np.array(c)})

# a call inside a Loop body of the main graph (3 trips of Act, default alpha)
body = helper.make_graph([helper.make_node("Act", ["v"], ["v2"], domain="local"),
                          helper.make_node("Identity", ["cond"], ["cond2"])],
                         "body", [vi("i", [], TP.INT64), vi("cond", [], TP.BOOL), vi("v", [3, 4])],
                         [vi("cond2", [], TP.BOOL), vi("v2", [3, 4])])
m = model([helper.make_node("Loop", ["n", ""], ["y"], body=body)], [vi("n", [], TP.INT64)], [vi("y")], [act],
          inits=[])
m.graph.node[0].input[1] = "c0"
m.graph.initializer.extend([onnx.numpy_helper.from_array(np.array(True), "c0")])
m.graph.node[0].input.append("x0")
m.graph.initializer.extend([onnx.numpy_helper.from_array(x, "x0")])
check("call_in_loop", m, {"n": np.array(3, np.int64)}, expect=[act_np(act_np(act_np(x)))])

# overloads (IR 10): one name, two bodies
o1 = fn("Op", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], overload="relu")
o2 = fn("Op", ["x"], ["y"], [helper.make_node("Tanh", ["x"], ["y"])], overload="tanh")
n1 = helper.make_node("Op", ["x"], ["a"], domain="local")
n1.overload = "tanh"
n2 = helper.make_node("Op", ["a"], ["y"], domain="local")
n2.overload = "relu"
m = model([n1, n2], [vi("x", [3, 4])], [vi("y"), vi("a")], [o1, o2])
check("overload", m, {"x": x}, use_ort=False)  # ONNX Runtime 1.32 does not tell overloads apart

# a function in a domain the model does not import, using an opset the model does not import
extra = fn("Sq", ["x"], ["y"], [helper.make_node("Mul", ["x", "x"], ["y"])], domain="other")
m = model([helper.make_node("Sq", ["x"], ["y"], domain="other")], [vi("x", [3, 4])], [vi("y")], [extra],
          opsets=[helper.make_opsetid("", 18), helper.make_opsetid("other", 1)])
check("other_domain", m, {"x": x})

# refused: a function on another version of the standard opset than the model's
old = fn("Old", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], opsets=[helper.make_opsetid("", 13)])
m = model([helper.make_node("Old", ["x"], ["y"], domain="local")], [vi("x", [3, 4])], [vi("y")], [old])
refused("opset_mismatch", m, {"x": x}, ["Old", "opset 13", "18"])
# refused: a function that calls itself
rec = fn("Rec", ["x"], ["y"], [helper.make_node("Rec", ["x"], ["y"], domain="local")])
m = model([helper.make_node("Rec", ["x"], ["y"], domain="local")], [vi("x", [3, 4])], [vi("y")], [rec])
refused("recursive", m, {"x": x}, ["Rec", "nest"])
# refused: a call with more inputs than the function has
m = model([helper.make_node("Act", ["x", "x"], ["y"], domain="local")], [vi("x", [3, 4])], [vi("y")], [act])
refused("too_many_inputs", m, {"x": x}, ["Act", "inputs"])

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
